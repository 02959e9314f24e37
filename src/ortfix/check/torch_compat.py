"""torch next to ONNX Runtime (TORCH001): the CUDA and cuDNN majors torch uses, against the build's."""

from __future__ import annotations

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding
from ortfix.compat.versions import InvalidVersion, Version
from ortfix.i18n import N_, Msg
from ortfix.system.inventory import soname_major

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ortfix.check.findings import Text


def torch_findings(facts: Facts, gpu: OrtInstall) -> list[Finding]:
    torch = facts.probe.torch
    if torch is None or not torch.cuda:
        return []
    torch_cuda = int(torch.cuda.split(".")[0])
    torch_cudnn = torch_cudnn_major(facts)
    problems: list[Text] = []
    if gpu.cuda_major is not None and torch_cuda != gpu.cuda_major:
        problems.append(Msg(N_("torch {torch} uses {library} {torch_major}, {package} {version} {library} {major}"),
                            torch=str(torch.version), library="CUDA", torch_major=torch.cuda,
                            package=str(gpu.package), version=str(gpu.version), major=gpu.cuda_major))
    if torch_cudnn is not None and gpu.cudnn_major is not None and torch_cudnn != gpu.cudnn_major:
        problems.append(Msg(N_("torch {torch} uses {library} {torch_major}, {package} {version} {library} {major}"),
                            torch=str(torch.version), library="cuDNN", torch_major=torch_cudnn,
                            package=str(gpu.package), version=str(gpu.version), major=gpu.cudnn_major))
    if not problems:
        return []
    return [Finding(
        FindingCode.TORCH_MISMATCH, Severity.WARNING,
        N_("torch and ONNX Runtime need different CUDA/cuDNN majors: each needs its own copy, and whichever is "
           "imported first decides what the process has loaded"),
        (*problems, Msg(N_("torch at {folder}"), folder=torch.dir)),
        Msg(N_("use the ONNX Runtime build for torch's CUDA {majors}, which shares its libraries: `ortfix plan` "
               "chooses it by default (two cuDNN wheels cannot both stay installed: they own the same "
               "nvidia/cudnn/lib)"), majors=f"{torch_cuda}" + (f"/cuDNN {torch_cudnn}" if torch_cudnn else "")),
        {"torch_cuda": torch_cuda, "torch_cudnn": torch_cudnn})]


def torch_cudnn_major(facts: Facts) -> int | None:
    """The cuDNN major torch uses: from its nvidia-cudnn requirement, else from the libcudnn it bundles."""
    torch = facts.probe.torch
    if torch is None:
        return None
    dist = facts.probe.dist("torch")
    if dist and dist.requires:
        # Deferred: packaging.requirements costs 15 ms of `ortfix check`, paid only when torch has requirements.
        from packaging.requirements import InvalidRequirement, Requirement
    for req in dist.requires if dist else ():
        try:
            parsed = Requirement(req)
        except InvalidRequirement:
            continue
        if parsed.name.startswith("nvidia-cudnn"):
            for spec in parsed.specifier:
                try:
                    return Version(spec.version.rstrip(".*")).major
                except InvalidVersion:
                    continue
    for lib in torch.libs:
        if lib.startswith("libcudnn.so."):
            return soname_major(lib)
        if lib.lower().startswith("cudnn64_"):  # Windows: torch\lib\cudnn64_9.dll
            from ortfix.system.windows.platform import parse_dll_name

            dll = parse_dll_name(lib)
            if dll and dll[0] == "cudnn":
                return dll[1][0]
    return None
