"""What a finding is: its code, severity, one-line summary, evidence and fix, and the payload the planner acts on —
one TypedDict per payload shape (their union is `FindingData`), with a typed accessor for each shape plan reads.
Also the finding's JSON form and `problems` (the findings that are not informational)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict, Union, cast

from ortfix.check.codes import UNINSTALL_FIXES, FindingCode, Severity


class NoData(TypedDict):
    """DRV001, DRV003, MTX001, MTX002, LIB006: nothing for the planner."""


class InstallData(TypedDict):
    """ORT001: nothing is installed; the fix is an install."""

    action: Literal["install"]


class _RemoveRequired(TypedDict):
    remove: list[str]


class RemoveData(_RemoveRequired, total=False):
    """ORT002, ORT003, ORT004, ORT006: the ORT distributions to uninstall, the version to install in their place,
    and whether that is a reinstall of the same build."""

    version: str
    reinstall: bool


class DependentsData(TypedDict):
    """ORT005: the installed packages that depend on the CPU package."""

    packages: list[str]


class _DamagedRequired(TypedDict):
    distribution: str
    version: str | None
    record: bool
    remove: list[str]


class DamagedData(_DamagedRequired, total=False):
    """ORT007, LIB007: a distribution whose files do not match its RECORD (or that has none). With a RECORD: what
    is missing or of another size, and (NVIDIA wheels with a plain name and a version) the pin to reinstall."""

    missing: int
    wrong_size: int
    paths: list[str]
    reinstall: bool
    requirement: str


class OrphanedData(TypedDict):
    """ORT008: an `onnxruntime` folder no distribution owns, and the build it says it is."""

    package_dir: str
    location: str
    package: str | None
    version: str | None


class DriverTooOldData(TypedDict):
    """DRV002: the CUDA major the build needs and the driver that is too old for it."""

    cuda_major: int
    driver: str


class GpuArchData(TypedDict):
    """GPU001: the GPU's compute capability."""

    compute_capability: str


class NotOnPathData(TypedDict):
    """LIB002: each soname the loader misses → the paths of its installed copies."""

    libraries: dict[str, list[str]]


class MissingData(TypedDict):
    """LIB001: the sonames no copy of exists."""

    sonames: list[str]


class WrongMajorData(TypedDict):
    """LIB003: the soname needed, and the copies of other majors of it."""

    soname: str
    present: list[str]


class ShadowedData(TypedDict):
    """LIB004: the soname, the copy that loads, and the environment's own copies."""

    soname: str
    loaded: str
    own: list[str]


class OtherCudaData(TypedDict):
    """LIB008: the sonames that resolve to another CUDA major's copies, and the build's CUDA major."""

    sonames: list[str]
    cuda_major: int


class PartialCopyData(TypedDict):
    """LIB009: a cuDNN copy's folder, its libcudnn, its version, and the sub-libraries missing beside it."""

    directory: str
    soname: str
    version: str | None
    missing: list[str]
    inside_env: bool


class SonameLinkData(TypedDict):
    """LIB005: the folder, the missing link (the SONAME), the file it would point at, and whether it is inside
    the environment."""

    directory: str
    link: str
    target: str
    inside_env: bool


class _InterruptedRequired(TypedDict):
    transaction: str


class InterruptedData(_InterruptedRequired, total=False):
    """TX001: the interrupted transaction, and whether its journal could not be read."""

    unreadable: bool


class TorchData(TypedDict):
    """TORCH001: the CUDA and cuDNN majors torch uses."""

    torch_cuda: int
    torch_cudnn: int | None


class MsvcRuntimeData(TypedDict):
    """WIN001: the msvcp140.dll that would load (None: none does), its FileVersion, and the minimum needed."""

    path: str | None
    version: str | None
    needs: str


class DllsData(TypedDict):
    """WIN002, WIN003: the DLLs concerned → the paths of their copies (empty: none anywhere)."""

    dlls: dict[str, list[str]]


class LoginPathData(TypedDict):
    """WIN004: each DLL → [where this process finds it (None: nowhere), where a new login's process finds it]."""

    dlls: dict[str, list[str | None]]


class GenaiData(TypedDict):
    """GENAI001, GENAI002: the onnxruntime-genai distribution installed, its version, and the onnxruntime-genai-cuda
    version that fits the build (None: the matrix knows none)."""

    installed: str
    version: str
    replacement: str | None


FindingData = Union[NoData, InstallData, RemoveData, DependentsData, DamagedData, OrphanedData, DriverTooOldData,
                    GpuArchData, NotOnPathData, MissingData, WrongMajorData, ShadowedData, OtherCudaData,
                    PartialCopyData, SonameLinkData, InterruptedData, TorchData, MsvcRuntimeData, DllsData,
                    LoginPathData, GenaiData]


def _no_data() -> NoData:
    return {}


@dataclass(frozen=True)
class Finding:
    code: FindingCode
    severity: Severity
    summary: str
    evidence: tuple[str, ...]
    fix: str
    data: FindingData = field(default_factory=_no_data)  # what the planner needs, JSON-able


class FindingJson(TypedDict):
    code: FindingCode
    severity: str
    summary: str
    evidence: list[str]
    fix: str
    data: FindingData


def finding_json(f: Finding) -> FindingJson:
    return {"code": f.code, "severity": f.severity.value, "summary": f.summary, "evidence": list(f.evidence),
            "fix": f.fix, "data": cast(FindingData, dict(f.data))}


def problems(findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is not Severity.INFO]


# The payload shape of the codes the planner reads, and an accessor for each: the code decides the shape.
REMOVE_CODES = UNINSTALL_FIXES  # their payload names what to uninstall (codes.py: what a plan fixes)
DAMAGED_CODES = (FindingCode.ORT_DAMAGED, FindingCode.LIB_DAMAGED)


def _expect(finding: Finding, codes: tuple[FindingCode, ...]) -> None:
    if finding.code not in codes:
        raise ValueError(f"a {finding.code} finding has no {', '.join(codes)} payload")


def removal(finding: Finding) -> RemoveData:
    _expect(finding, REMOVE_CODES)
    return cast(RemoveData, finding.data)


def damage(finding: Finding) -> DamagedData:
    _expect(finding, DAMAGED_CODES)
    return cast(DamagedData, finding.data)


def shadowing(finding: Finding) -> ShadowedData:
    _expect(finding, (FindingCode.LIB_SHADOWED,))
    return cast(ShadowedData, finding.data)


def soname_link(finding: Finding) -> SonameLinkData:
    _expect(finding, (FindingCode.SONAME_LINK_MISSING,))
    return cast(SonameLinkData, finding.data)


def genai_swap(finding: Finding) -> GenaiData:
    _expect(finding, (FindingCode.GENAI_CPU, FindingCode.GENAI_OTHER_CUDA))
    return cast(GenaiData, finding.data)


def other_cuda(finding: Finding) -> OtherCudaData:
    _expect(finding, (FindingCode.LIB_OTHER_CUDA,))
    return cast(OtherCudaData, finding.data)
