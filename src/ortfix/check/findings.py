"""What a finding is: its code, severity, one-line summary, evidence and fix, and the payload the planner acts on —
one TypedDict per payload shape (their union is `FindingData`), with a typed accessor for each shape plan reads.
Every shape is `@final`, so a test for a key only its shape holds narrows the union (no cast).
Also the finding's JSON form and `problems` (the findings that are not informational)."""

from __future__ import annotations

from collections.abc import Sequence

from ortfix.check.codes import UNINSTALL_FIXES, FindingCode, Severity
from ortfix.record import field, frozen

TYPE_CHECKING = False
if TYPE_CHECKING:  # the payload shapes are mypy's: defining these TypedDicts (a compile per field) cost every
    # check 19M instructions at import (speed/__init__.py); at run time a payload is a plain dict
    from typing import Literal, TypedDict, Union, final

    from ortfix.i18n import Msg

    @final
    class NoData(TypedDict):
        """DRV001, DRV003, MTX001, MTX002, LIB006: nothing for the planner."""

    @final
    class InstallData(TypedDict):
        """ORT001: nothing is installed; the fix is an install."""

        action: Literal["install"]

    class _RemoveRequired(TypedDict):
        remove: list[str]

    @final
    class RemoveData(_RemoveRequired, total=False):
        """ORT002, ORT003, ORT004, ORT006: the ORT distributions to uninstall, the version to install in their place,
        and whether that is a reinstall of the same build."""

        version: str
        reinstall: bool

    @final
    class DependentsData(TypedDict):
        """ORT005: the installed packages that depend on the CPU package."""

        packages: list[str]

    class _DamagedRequired(TypedDict):
        distribution: str
        version: str | None
        record: bool
        remove: list[str]

    @final
    class DamagedData(_DamagedRequired, total=False):
        """ORT007, LIB007: a distribution whose files do not match its RECORD (or that has none). With a RECORD: what
        is missing or of another size, and (NVIDIA wheels with a plain name and a version) the pin to reinstall."""

        missing: int
        wrong_size: int
        paths: list[str]
        reinstall: bool
        requirement: str

    @final
    class OrphanedData(TypedDict):
        """ORT008: an `onnxruntime` folder no distribution owns, and the build it says it is."""

        package_dir: str
        location: str
        package: str | None
        version: str | None

    @final
    class DriverTooOldData(TypedDict):
        """DRV002: the CUDA major the build needs and the driver that is too old for it."""

        cuda_major: int
        driver: str

    @final
    class GpuArchData(TypedDict):
        """GPU001: the GPU's compute capability."""

        compute_capability: str

    @final
    class NotOnPathData(TypedDict):
        """LIB002: each soname the loader misses → the paths of its installed copies."""

        libraries: dict[str, list[str]]

    @final
    class MissingData(TypedDict):
        """LIB001: the sonames no copy of exists."""

        sonames: list[str]

    @final
    class WrongMajorData(TypedDict):
        """LIB003: the soname needed, and the copies of other majors of it."""

        soname: str
        present: list[str]

    @final
    class ShadowedData(TypedDict):
        """LIB004: the soname, the copy that loads, and the environment's own copies."""

        soname: str
        loaded: str
        own: list[str]

    @final
    class OtherCudaData(TypedDict):
        """LIB008: the sonames that resolve to another CUDA major's copies, and the build's CUDA major."""

        sonames: list[str]
        cuda_major: int

    @final
    class PartialCopyData(TypedDict):
        """LIB009: a cuDNN copy's folder, its libcudnn, its version, and the sub-libraries missing beside it."""

        directory: str
        soname: str
        version: str | None
        missing: list[str]
        inside_env: bool

    @final
    class SonameLinkData(TypedDict):
        """LIB005: the folder, the missing link (the SONAME), the file it would point at, and whether it is inside
        the environment."""

        directory: str
        link: str
        target: str
        inside_env: bool

    class _InterruptedRequired(TypedDict):
        transaction: str

    @final
    class InterruptedData(_InterruptedRequired, total=False):
        """TX001: the interrupted transaction, and whether its journal could not be read."""

        unreadable: bool

    @final
    class TorchData(TypedDict):
        """TORCH001: the CUDA and cuDNN majors torch uses."""

        torch_cuda: int
        torch_cudnn: int | None

    @final
    class MsvcRuntimeData(TypedDict):
        """WIN001: the msvcp140.dll that would load (None: none does), its FileVersion, and the minimum needed."""

        path: str | None
        version: str | None
        needs: str

    @final
    class DllsData(TypedDict):
        """WIN002, WIN003: the DLLs concerned → the paths of their copies (empty: none anywhere)."""

        dlls: dict[str, list[str]]

    @final
    class LoginPathData(TypedDict):
        """WIN004: each DLL → [where this process finds it (None: nowhere), where a new login's process finds it]."""

        dlls: dict[str, list[str | None]]

    @final
    class GenaiData(TypedDict):
        """GENAI001-GENAI003: the onnxruntime-genai distribution installed, its version, and the version of the
        genai package that fits the build (None: the matrix knows none); TRT004: the tensorrt-cuNN-libs installed, its
        version, and the distribution of the build's CUDA major."""

        installed: str
        version: str
        replacement: str | None

    FindingData = Union[NoData, InstallData, RemoveData, DependentsData, DamagedData, OrphanedData, DriverTooOldData,
                        GpuArchData, NotOnPathData, MissingData, WrongMajorData, ShadowedData, OtherCudaData,
                        PartialCopyData, SonameLinkData, InterruptedData, TorchData, MsvcRuntimeData, DllsData,
                        LoginPathData, GenaiData]

    # A finding's words: a marked English string or a Msg (ortfix/i18n.py). `str()` is the English of `--json` and saved
    # files; `i18n.text()` the user's language, on the terminal.
    Text = Union[str, Msg]

    class FindingJson(TypedDict):
        code: FindingCode
        severity: str
        summary: str
        evidence: list[str]
        fix: str
        data: FindingData


def _no_data() -> NoData:
    return {}


@frozen
class Finding:
    code: FindingCode
    severity: Severity
    summary: Text
    evidence: tuple[Text, ...]
    fix: Text
    data: FindingData = field(default_factory=_no_data)  # what the planner needs, JSON-able


def finding_json(f: Finding) -> FindingJson:
    """The finding as `--json` and saved plans hold it: its words in English, whatever the language."""
    return {"code": f.code, "severity": f.severity.value, "summary": str(f.summary),
            "evidence": [str(e) for e in f.evidence], "fix": str(f.fix), "data": f.data.copy()}


def problems(findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is not Severity.INFO]


# The payload shape of the codes the planner reads, and an accessor for each: the code decides the shape.
REMOVE_CODES = UNINSTALL_FIXES  # their payload names what to uninstall (codes.py: what a plan fixes)
DAMAGED_CODES = (FindingCode.ORT_DAMAGED, FindingCode.LIB_DAMAGED)


def _expect(finding: Finding, codes: tuple[FindingCode, ...]) -> None:
    if finding.code not in codes:
        raise ValueError(f"a {finding.code} finding has no {', '.join(codes)} payload")  # i18n: english (a bug)


def _shape(finding: Finding) -> ValueError:
    return ValueError(f"the {finding.code} finding's payload is not of its code's shape")  # i18n: english (a bug)


def removal(finding: Finding) -> RemoveData:
    _expect(finding, REMOVE_CODES)
    data = finding.data
    if "remove" in data and "record" not in data:
        return data
    raise _shape(finding)


def damage(finding: Finding) -> DamagedData:
    _expect(finding, DAMAGED_CODES)
    data = finding.data
    if "record" in data:
        return data
    raise _shape(finding)


def shadowing(finding: Finding) -> ShadowedData:
    _expect(finding, (FindingCode.LIB_SHADOWED,))
    data = finding.data
    if "loaded" in data:
        return data
    raise _shape(finding)


def soname_link(finding: Finding) -> SonameLinkData:
    _expect(finding, (FindingCode.SONAME_LINK_MISSING,))
    data = finding.data
    if "link" in data:
        return data
    raise _shape(finding)


def genai_swap(finding: Finding) -> GenaiData:
    _expect(finding, (FindingCode.GENAI_CPU, FindingCode.GENAI_OTHER_CUDA, FindingCode.GENAI_OTHER_FLAVOUR))
    data = finding.data
    if "replacement" in data:
        return data
    raise _shape(finding)


def other_cuda(finding: Finding) -> OtherCudaData:
    _expect(finding, (FindingCode.LIB_OTHER_CUDA,))
    data = finding.data
    if "sonames" in data and "cuda_major" in data:
        return data
    raise _shape(finding)
