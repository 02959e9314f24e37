"""What only Windows gets wrong (WIN001-WIN004): the MSVC runtime that would load is older than ORT >= 1.22 needs (or
there is none), cuDNN 8.3-8.9 without `zlibwapi.dll`, a needed DLL found only in `torch\\lib` (ORT loads it only after
`import torch`), and a DLL that a process started after a new login would find elsewhere than this shell's (the
user or machine Path changed since this shell started, or this shell's PATH was changed by hand). Also the Windows
wording of the search evidence the library findings share."""

from __future__ import annotations

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding
from ortfix.compat.versions import InvalidVersion, Version
from ortfix.i18n import N_, Msg
from ortfix.system.inventory import ORIGIN_TORCH

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ortfix.check.findings import Text

MSVC_MIN = (14, 40)  # ORT >= 1.22 imports _Mtx_lock without _Mtx_init_in_situ (microsoft/STL 4730)
MSVC_FROM_ORT = Version("1.22")
CUDNN8_DLL = "cudnn64_8.dll"


def windows_findings(facts: Facts, gpu: OrtInstall | None) -> list[Finding]:
    if facts.windows is None:
        return []
    return [*_msvc_runtime(facts), *_zlibwapi(facts, gpu), *_torch_lib_only(facts, gpu), *_login_path(facts)]


def _msvc_runtime(facts: Facts) -> list[Finding]:
    from ortfix.check.windows_remedies import MSVC_REMEDY_MSG  # Windows-only text: not imported by a Linux check

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
    fix: Text = (N_("update the environment's runtime: conda install -c conda-forge \"vc14_runtime>=14.40\"") if conda
                 else MSVC_REMEDY_MSG)
    severity = Severity.ERROR
    package = ort.package or "onnxruntime"
    summary: Text
    if msvc.path is None:
        summary = Msg(N_("no {dll} would load: {package} {version} needs the MSVC runtime"), dll=msvc.name,
                      package=package, version=ort.version)
        evidence: tuple[Text, ...] = (_not_found(msvc.name, msvc.searched),)
    elif version is None:  # a runtime without a version resource (wine's own): it cannot be judged
        severity = Severity.WARNING
        summary = Msg(N_("the version of the MSVC runtime that would load cannot be read; {package} {version} needs "
                         "{needs} or newer"), package=package, version=ort.version, needs=needs)
        evidence = (Msg(N_("{dll}: {path} ({via}), no FileVersion in its version resource"), dll=msvc.name,
                        path=msvc.path, via=str(msvc.via)),)
    else:
        summary = Msg(N_("the MSVC runtime that would load is {found}, older than the {needs} that {package} {version} "
                         "needs"), found=version, needs=needs, package=package, version=ort.version)
        evidence = (f"{msvc.name}: {msvc.path} ({msvc.via}), FileVersion {version}",
                    N_("python.org's Python ships vcruntime140.dll but not msvcp140.dll: it comes from System32 "
                       "(the VC++ redistributable) or, in conda, from the environment"))
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
    told = f"cuDNN {version}" if version else Msg(N_("cuDNN 8 (8.3-8.9 need it)"))
    return [Finding(
        FindingCode.ZLIBWAPI_MISSING, Severity.ERROR if version else Severity.WARNING,
        Msg(N_("{cudnn} loads zlibwapi.dll, and no zlibwapi.dll would be found: \"Could not locate zlibwapi.dll\""),
            cudnn=told),
        (_not_found("zlibwapi.dll", win.zlibwapi.searched),
         *(Msg(N_("a copy the search does not reach: {path}"), path=p) for p in copies), ZLIBWAPI_WHY),
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
        Msg(N_("{n} needed DLL(s) exist only in {folder}: ONNX Runtime's CUDA provider loads only after `import "
               "torch` has loaded them: {names}"), n=len(only_torch), folder=torch_lib, names=", ".join(only_torch)),
        tuple(f"{name}: {', '.join(paths)}" for name, paths in only_torch.items()),
        N_("install the NVIDIA wheels for ONNX Runtime's CUDA major and make their folders findable (`ortfix plan`); "
           "mixing torch's cuDNN with ORT's can break (onnxruntime issue 24266)"),
        {"dlls": only_torch})]


def _login_path(facts: Facts) -> list[Finding]:
    win = facts.windows
    if win is None or not win.login_differs:
        return []
    return [Finding(
        FindingCode.LOGIN_PATH_DIFFERS, Severity.WARNING,
        Msg(N_("{n} DLL(s) would load from elsewhere in a process started after a new login than in one started "
               "from this shell: {names}"), n=len(win.login_differs),
            names=", ".join(d.name for d in win.login_differs)),
        (*(Msg(N_("{dll}: now {now}; after a new login {at_login}"), dll=d.name,
               now=d.now or Msg(N_("not found")), at_login=str(d.at_login)) for d in win.login_differs),
         Msg(N_("PATH at login (machine Path, then user Path): {path}"),
             path=";".join(win.login_path) or Msg(N_("(empty)")))),
        N_("start a new terminal (or sign out and in) if the user or machine Path was changed; otherwise remove the "
           "folder that holds the other copy from the Path"),
        {"dlls": {d.name: [d.now, d.at_login] for d in win.login_differs}})]


def _not_found(dll: str, searched: tuple[str, ...] | list[str]) -> Msg:
    """The evidence of a DLL no search finds: the folders searched."""
    return Msg(N_("{dll}: not found; searched {folders}"), dll=dll,
               folders=", ".join(searched) or Msg(N_("(nothing)")))
