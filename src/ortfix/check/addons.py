"""What runs beside the GPU build: the TensorRT provider's libraries (TRT001-TRT004) and onnxruntime-genai (GENAI001-
GENAI003). TensorRT is judged only where it matters (`tensorrt_wanted`): its libraries are present, or TensorRT was
asked for (`--with tensorrt`); a build whose TensorRT nobody installed or wants is no problem and shows no table."""

from __future__ import annotations

import os

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts, OrtInstall, ProviderLoad
from ortfix.check.findings import Finding
from ortfix.compat.addons import GENAI_CPU, GENAI_CUDA, GENAI_DIRECTML, GENAI_PACKAGES, TENSORRT_FAMILIES
from ortfix.compat.matrix import Matrix
from ortfix.compat.versions import InvalidVersion, Version
from ortfix.i18n import N_, Msg
from ortfix.record import frozen
from ortfix.target.probe import Distribution

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ortfix.check.findings import GenaiData

# The library of onnxruntime-genai-cuda whose NEEDED libcudart.so.N names its CUDA major.
GENAI_CUDA_LIBRARY = "onnxruntime_genai/libonnxruntime-genai-cuda.so"
# Its win_amd64 wheel's DLL, which imports cudart64_N.dll (0.11.4: cudart64_12.dll, read with pefile).
GENAI_CUDA_DLL = "onnxruntime_genai/onnxruntime-genai-cuda.dll"


def tensorrt_wanted(facts: Facts, asked: bool) -> bool:
    """TensorRT matters here: asked for, or some TensorRT library is installed or findable."""
    return asked or any(c.family in TENSORRT_FAMILIES for c in facts.libraries) or any(
        path for name, path in facts.findable.items() if is_nvinfer(facts, name))


def is_nvinfer(facts: Facts, name: str) -> bool:
    """`name` is TensorRT's core library as the target's platform spells it (libnvinfer.so.10; nvinfer_10.dll)."""
    parsed = facts.parse_library_name(name)
    return parsed is not None and parsed[0] == "nvinfer"


def tensorrt_provider(install: OrtInstall) -> ProviderLoad | None:
    return next((p for p in install.providers if p.provider == "tensorrt"), None)


def tensorrt_findings(facts: Facts, matrix: Matrix, gpu: OrtInstall, *, asked: bool) -> list[Finding]:
    provider = tensorrt_provider(gpu)
    if provider is None or provider.error or not tensorrt_wanted(facts, asked):
        return []
    needed = next((n for n in provider.needed if is_nvinfer(facts, n)), None)
    major = facts.platform.library_major(needed) if needed else None
    out = []
    present = sorted({c.path for c in facts.libraries if c.family == "nvinfer" and c.major != major})
    if major is not None and present and not any(
            c.family == "nvinfer" and c.major == major for c in facts.libraries):
        out.append(Finding(
            FindingCode.TENSORRT_WRONG_MAJOR, Severity.ERROR,
            Msg(N_("the TensorRT provider of {package} {version} needs TensorRT {major} ({library}); only another "
                   "TensorRT major is installed"), package=str(gpu.package), version=str(gpu.version), major=major,
                library=str(needed)),
            tuple(present), Msg(N_("install TensorRT {major} ({wheel} {major}.*): `ortfix plan --with tensorrt`"),
                                major=major, wheel=f"tensorrt-cu{gpu.cuda_major}-libs"),
            {"soname": needed or "", "present": present}))
    missing = [r.name for r in provider.missing]
    if missing:
        out.append(Finding(
            FindingCode.TENSORRT_NOT_LOADING, Severity.ERROR,
            Msg(N_("{n} library of the TensorRT provider would not load: ONNX Runtime falls back from "
                   "TensorrtExecutionProvider silently") if len(missing) == 1 else
                N_("{n} libraries of the TensorRT provider would not load: ONNX Runtime falls back from "
                   "TensorrtExecutionProvider silently"), n=len(missing)),
            tuple(Msg(N_("{library}: not found by the loader"), library=n) for n in missing),
            N_("`ortfix plan --with tensorrt` installs the TensorRT major the build needs and makes it findable; or "
               "drop TensorrtExecutionProvider from the providers list"), {"sonames": missing}))
    out += _tensorrt_version_findings(facts, matrix, gpu)
    out += _tensorrt_cuda_findings(facts, gpu)
    return out


def tensorrt_cuda_major(dist: Distribution) -> int | None:
    """The N of an installed `tensorrt-cuNN-libs` (the CUDA major its libraries are built for); None for another
    distribution (tensorrt-libs of TensorRT 8/9 says none)."""
    name = dist.normalized
    digits = name[len("tensorrt-cu"):-len("-libs")] if name.startswith("tensorrt-cu") and name.endswith("-libs") else ""
    return int(digits) if digits.isdigit() else None


def tensorrt_other_cuda(facts: Facts, cuda_major: int | None) -> list[Distribution]:
    """The installed tensorrt-cuNN-libs built for another CUDA major than `cuda_major`: their libraries have the same
    names (libnvinfer.so.10, nvinfer_10.dll) as the right ones, so only the distribution's name tells them apart."""
    return [d for d in facts.probe.distributions
            if cuda_major is not None and (n := tensorrt_cuda_major(d)) is not None and n != cuda_major]


def _tensorrt_cuda_findings(facts: Facts, gpu: OrtInstall) -> list[Finding]:
    """TRT004: the installed tensorrt-cuNN-libs is built for another CUDA major than the build."""
    return [Finding(
        FindingCode.TENSORRT_OTHER_CUDA, Severity.ERROR,
        Msg(N_("{name} {version} is TensorRT built for CUDA {cuda}, {package} {ort_version} for CUDA {ort_cuda}: its "
               "libraries have the names the TensorRT provider asks for but need the other CUDA major's libraries"),
            name=d.name, version=d.version, cuda=str(tensorrt_cuda_major(d)), package=str(gpu.package),
            ort_version=str(gpu.version), ort_cuda=str(gpu.cuda_major)),
        (Msg(N_("{name} {version} at {location}"), name=d.name, version=d.version, location=d.location),),
        Msg(N_("install {wheel} in its place: `ortfix plan --with tensorrt`"),
            wheel=f"tensorrt-cu{gpu.cuda_major}-libs"),
        {"installed": d.name, "version": d.version, "replacement": f"tensorrt-cu{gpu.cuda_major}-libs"})
        for d in tensorrt_other_cuda(facts, gpu.cuda_major)]


def _tensorrt_version_findings(facts: Facts, matrix: Matrix, gpu: OrtInstall) -> list[Finding]:
    """TRT003: the installed tensorrt-cuNN-libs is older than what ORT documents for the build."""
    row = matrix.addons.tensorrt_for(gpu.version or "")
    if row is None or row.min_version is None:
        return []
    out = []
    for dist in facts.probe.distributions:
        if not dist.normalized.startswith("tensorrt-cu") or not dist.normalized.endswith("-libs"):
            continue
        try:
            old = Version(dist.version) < Version(row.min_version)
        except InvalidVersion:
            continue
        if old and Version(dist.version).major == row.major:
            out.append(Finding(
                FindingCode.TENSORRT_TOO_OLD, Severity.WARNING,
                Msg(N_("{name} {version} is older than TensorRT {minimum}, what ONNX Runtime {ort_version}'s "
                       "TensorRT provider is documented for"), name=dist.name, version=dist.version,
                    minimum=row.min_version, ort_version=str(gpu.version)),
                (Msg(N_("{name} {version} at {location}"), name=dist.name, version=dist.version,
                     location=dist.location), Msg(N_("matrix: {source}"), source=row.source)),
                Msg(N_("install {requirement}"), requirement=f"{dist.name}>={row.min_version},<{row.major + 1}")))
    return out


@frozen
class GenaiInstall:
    dist: Distribution
    cuda_major: int | None  # onnxruntime-genai-cuda: read from its library's NEEDED libcudart, else None

    @property
    def line(self) -> str:
        kind = {GENAI_CPU: "CPU", GENAI_DIRECTML: "DirectML"}.get(self.dist.normalized)
        built = kind or (f"CUDA {self.cuda_major}" if self.cuda_major else "CUDA ?")
        return f"{self.dist.name} {self.dist.version} ({built})"


def genai_installs(facts: Facts) -> list[GenaiInstall]:
    """Every onnxruntime-genai distribution installed, with the CUDA major its binary says."""
    out = []
    for dist in facts.probe.distributions:
        if dist.normalized in GENAI_PACKAGES:
            major = _genai_cuda_major(facts, dist) if dist.normalized == GENAI_CUDA else None
            out.append(GenaiInstall(dist, major))
    return out


def genai_other_flavour(g: GenaiInstall, flavour: tuple[str, str, str], ort: OrtInstall, swap: str | Msg,
                        data: GenaiData) -> Finding:
    """GENAI003: genai `g` of another flavour than the ONNX Runtime `ort` installed; `flavour` is (the build `g` is,
    the ONNX Runtime package it pairs with, what `ort` runs that `g` lacks)."""
    built, pairs, lacks = flavour
    return Finding(
        FindingCode.GENAI_OTHER_FLAVOUR, Severity.ERROR,
        Msg(N_("{name} {version} is the {built} build of onnxruntime-genai: it pairs with {pairs}, not with "
               "{package} (no {lacks} in it)"), name=g.dist.name, version=g.dist.version, built=built, pairs=pairs,
            package=str(ort.package), lacks=lacks), (genai_at(g),), swap, data)


def genai_at(g: GenaiInstall) -> Msg:
    """The evidence of a genai finding: the install and where it is."""
    return Msg(N_("{install} at {location}"), install=g.line, location=g.dist.location)


def genai_built_major(g: GenaiInstall, matrix: Matrix) -> int | None:
    """The CUDA major onnxruntime-genai-cuda is built for: its library's NEEDED libcudart, else the matrix's row for
    its version; None for the CPU and DirectML packages."""
    if g.cuda_major is not None or g.dist.normalized != GENAI_CUDA:
        return g.cuda_major
    row = matrix.addons.genai_release(GENAI_CUDA, g.dist.version)
    return row.cuda_major if row else None


def _genai_cuda_major(facts: Facts, dist: Distribution) -> int | None:
    """The N of the CUDA runtime genai-cuda's library needs, read with the target platform's reader: libcudart.so.N
    of the Linux library, cudart64_N.dll of the Windows DLL; None when neither can be read."""
    reader = facts.platform.new_reader()
    errors: tuple[type[Exception], ...] = (OSError, *facts.platform.read_errors)
    for rel in (GENAI_CUDA_LIBRARY, GENAI_CUDA_DLL):
        try:
            info = reader.read(os.path.join(dist.location, *rel.split("/")))
        except errors:
            continue
        runtimes = [p for p in map(facts.parse_library_name, info.needed) if p and p[0] == "cudart" and p[1]]
        return runtimes[0][1][0] if runtimes else None
    return None


def genai_findings(facts: Facts, matrix: Matrix, gpu: OrtInstall | None) -> list[Finding]:
    """GENAI001: the CPU onnxruntime-genai beside the GPU build; GENAI002: genai-cuda of another CUDA major;
    GENAI003: onnxruntime-genai-directml beside it (genai of another flavour than ORT's)."""
    if gpu is None or gpu.cuda_major is None:
        return []
    out = []
    replacement = matrix.addons.genai_cuda_for(gpu.version or "", gpu.cuda_major)
    swap = (Msg(N_("replace it with {requirement} (CUDA {cuda}): `ortfix plan`"),
                requirement=f"{GENAI_CUDA}=={replacement}", cuda=gpu.cuda_major) if replacement
            else Msg(N_("no {package} release the matrix knows is built for CUDA {cuda} and accepts {ort} {version}"),
                     package=GENAI_CUDA, cuda=gpu.cuda_major, ort=str(gpu.package), version=str(gpu.version)))
    for g in genai_installs(facts):
        data: GenaiData = {"installed": g.dist.name, "version": g.dist.version, "replacement": replacement}
        if g.dist.normalized == GENAI_CPU:
            out.append(Finding(
                FindingCode.GENAI_CPU, Severity.ERROR,
                Msg(N_("{name} {version} is the CPU build of onnxruntime-genai: beside {package} it says \"CUDA "
                       "execution provider is not enabled in this build\""), name=g.dist.name,
                    version=g.dist.version, package=str(gpu.package)), (genai_at(g),), swap, data))
            continue
        if g.dist.normalized == GENAI_DIRECTML:
            out.append(genai_other_flavour(g, ("DirectML", "onnxruntime-directml", "CUDA"), gpu, swap, data))
            continue
        major = genai_built_major(g, matrix)
        if major is not None and major != gpu.cuda_major:
            out.append(Finding(
                FindingCode.GENAI_OTHER_CUDA, Severity.ERROR,
                Msg(N_("{name} {version} is built for CUDA {cuda}, {package} {ort_version} for CUDA {ort_cuda}: the "
                       "process would need both majors' libraries"), name=g.dist.name, version=g.dist.version,
                    cuda=major, package=str(gpu.package), ort_version=str(gpu.version), ort_cuda=gpu.cuda_major),
                (genai_at(g),), swap, data))
    return out
