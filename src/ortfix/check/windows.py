"""What only Windows gets wrong (WIN001-WIN004): the MSVC runtime that would load is older than ORT >= 1.22 needs (or
there is none), cuDNN 8.3-8.9 without `zlibwapi.dll`, a needed DLL found only in `torch\\lib` (ORT loads it only after
`import torch`), and a DLL that a process started after a new login would find elsewhere than this shell's (the
user or machine Path changed since this shell started, or this shell's PATH was changed by hand). Also the Windows
wording of the search evidence the library findings share."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding
from ortfix.system.inventory import ORIGIN_TORCH

MSVC_MIN = (14, 40)  # ORT >= 1.22 imports _Mtx_lock without _Mtx_init_in_situ (microsoft/STL 4730)
MSVC_FROM_ORT = Version("1.22")
CUDNN8_DLL = "cudnn64_8.dll"


def windows_findings(facts: Facts, gpu: OrtInstall | None) -> list[Finding]:
    if facts.windows is None:
        return []
    return [*_msvc_runtime(facts), *_zlibwapi(facts, gpu), *_torch_lib_only(facts, gpu), *_login_path(facts)]


def _msvc_runtime(facts: Facts) -> list[Finding]:
    from ortfix.check.windows_remedies import MSVC_REMEDY  # Windows-only text: not imported by a Linux check

    ort = facts.active_ort
    win = facts.windows
    if ort is None or win is None or not ort.version:
        return []
    try:
        if Version(ort.version) < MSVC_FROM_ORT:
            return []
    except InvalidVersion:
        return []
    msvc = win.msvc_runtime
    needs = ".".join(map(str, MSVC_MIN))
    if msvc.path is not None and msvc.version is not None and msvc.version[:2] >= MSVC_MIN:
        return []
    version = ".".join(map(str, msvc.version)) if msvc.version else None
    conda = facts.probe.env_kind == "conda"
    fix = ("update the environment's runtime: conda install -c conda-forge \"vc14_runtime>=14.40\"" if conda
           else MSVC_REMEDY)
    severity = Severity.ERROR
    if msvc.path is None:
        summary = f"no {msvc.name} would load: {ort.package or 'onnxruntime'} {ort.version} needs the MSVC runtime"
        evidence: tuple[str, ...] = (f"{msvc.name}: not found; searched {', '.join(msvc.searched) or '(nothing)'}",)
    elif version is None:  # a runtime without a version resource (wine's own): it cannot be judged
        severity = Severity.WARNING
        summary = (f"the version of the MSVC runtime that would load cannot be read; {ort.package or 'onnxruntime'} "
                   f"{ort.version} needs {needs} or newer")
        evidence = (f"{msvc.name}: {msvc.path} ({msvc.via}), no FileVersion in its version resource",)
    else:
        summary = (f"the MSVC runtime that would load is {version}, older than the {needs} that "
                   f"{ort.package or 'onnxruntime'} {ort.version} needs")
        evidence = (f"{msvc.name}: {msvc.path} ({msvc.via}), FileVersion {version}",
                    "python.org's Python ships vcruntime140.dll but not msvcp140.dll: it comes from System32 "
                    "(the VC++ redistributable) or, in conda, from the environment")
    return [Finding(FindingCode.MSVC_RUNTIME_OLD, severity, summary, evidence, fix,
                    {"path": msvc.path, "version": version, "needs": needs})]


def _cudnn_version(facts: Facts, gpu: OrtInstall) -> Version | None:
    """cuDNN 8's version: the installed nvidia-cudnn wheel's, else the FileVersion of the cudnn64_8.dll the provider
    would load (8.9.5.29), else of the one copy (or the copies that agree) found elsewhere (torch\\lib, the toolkit)."""
    for dist in facts.probe.distributions:
        if dist.normalized.startswith("nvidia-cudnn-"):
            version = _version8(dist.version)
            if version is not None:
                return version
    key = facts.loader.key
    resolved = {key(r.path) for p in gpu.providers for r in p.resolutions
                if r.path and key(r.name) == key(CUDNN8_DLL)}
    copies = [c for c in facts.libraries if c.soname and key(c.soname) == key(CUDNN8_DLL) and c.version]
    used = [c for c in copies if key(c.path) in resolved]
    versions = {c.version for c in (used or copies)}
    return _version8(versions.pop()) if len(versions) == 1 else None


def _version8(text: str | None) -> Version | None:
    try:
        version = Version(text or "")
    except InvalidVersion:
        return None
    return version if version.major == 8 else None


def _zlibwapi(facts: Facts, gpu: OrtInstall | None) -> list[Finding]:
    from ortfix.check.windows_remedies import ZLIBWAPI_REMEDY, ZLIBWAPI_WHY

    win = facts.windows
    if gpu is None or gpu.cudnn_major != 8 or win is None or win.zlibwapi.path is not None:
        return []
    version = _cudnn_version(facts, gpu)
    if version is not None and not (Version("8.3") <= version < Version("8.10")):
        return []
    copies = [c.path for c in facts.libraries if c.family == "zlibwapi"]
    told = f"cuDNN {version}" if version else "cuDNN 8 (8.3-8.9 need it)"
    return [Finding(
        FindingCode.ZLIBWAPI_MISSING, Severity.ERROR if version else Severity.WARNING,
        f"{told} loads zlibwapi.dll, and no zlibwapi.dll would be found: \"Could not locate zlibwapi.dll\"",
        (f"zlibwapi.dll: not found; searched {', '.join(win.zlibwapi.searched) or '(nothing)'}",
         *(f"a copy the search does not reach: {p}" for p in copies), ZLIBWAPI_WHY),
        ZLIBWAPI_REMEDY,
        {"dlls": {"zlibwapi.dll": copies}})]


def _torch_lib_only(facts: Facts, gpu: OrtInstall | None) -> list[Finding]:
    if gpu is None:
        return []
    key = facts.loader.key
    only_torch: dict[str, list[str]] = {}
    for provider in gpu.providers:
        for res in provider.missing:
            copies = [c for c in facts.libraries if c.soname and key(c.soname) == key(res.name)]
            if copies and all(c.origin == ORIGIN_TORCH for c in copies):
                only_torch[res.name] = [c.path for c in copies]
    if not only_torch:
        return []
    torch_lib = facts.probe.torch.lib_dir if facts.probe.torch else "torch\\lib"
    return [Finding(
        FindingCode.TORCH_LIB_ONLY, Severity.WARNING,
        f"{len(only_torch)} needed DLL(s) exist only in {torch_lib}: ONNX Runtime's CUDA provider loads only after "
        f"`import torch` has loaded them: {', '.join(only_torch)}",
        tuple(f"{name}: {', '.join(paths)}" for name, paths in only_torch.items()),
        "install the NVIDIA wheels for ONNX Runtime's CUDA major and make their folders findable (`ortfix plan`); "
        "mixing torch's cuDNN with ORT's can break (onnxruntime issue 24266)",
        {"dlls": only_torch})]


def _login_path(facts: Facts) -> list[Finding]:
    win = facts.windows
    if win is None or not win.login_differs:
        return []
    return [Finding(
        FindingCode.LOGIN_PATH_DIFFERS, Severity.WARNING,
        f"{len(win.login_differs)} DLL(s) would load from elsewhere in a process started after a new login than "
        f"in one started from this shell: {', '.join(d.name for d in win.login_differs)}",
        (*(f"{d.name}: now {d.now or 'not found'}; after a new login {d.at_login}" for d in win.login_differs),
         f"PATH at login (machine Path, then user Path): {';'.join(win.login_path) or '(empty)'}"),
        "start a new terminal (or sign out and in) if the user or machine Path was changed; otherwise remove the "
        "folder that holds the other copy from the Path",
        {"dlls": {d.name: [d.now, d.at_login] for d in win.login_differs}})]
