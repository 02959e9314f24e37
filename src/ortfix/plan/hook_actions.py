"""The actions that make libraries findable, libraries in load order (a library's dependencies first). The hook
files are the target platform's (`Platform.hook_files`: Linux, the preload hook or conda's activate.d/deactivate.d
hooks on LD_LIBRARY_PATH, system/linux/libraries.py; Windows, where ORT finds its provider's DLLs through PATH, the
PATH hook or conda's scripts for cmd, PowerShell and bash, system/windows/libraries.py), written with their content,
digest and mode. A platform that offers `--hook user-path` (Windows: the user PATH in the registry, never chosen by
default: it changes every program the user starts) gets it as a step of its own (`ActionKind.USER_PATH`)."""

from __future__ import annotations

import hashlib
import ntpath
import re
from collections.abc import Mapping, Sequence

from ortfix.check.codes import HOOK_FIXES
from ortfix.check.codes import FindingCode as Code
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding, shadowing
from ortfix.check.winstore import refuse_store_hook
from ortfix.compat.addons import TENSORRT_FAMILIES
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.plan.kinds import ActionKind, UserPathDetails
from ortfix.plan.model import Action, PlanOptions
from ortfix.plan.titles import user_path_title, write_file_title
from ortfix.system.inventory import parse_lib_name

# Load order for the preload hook: a library's dependencies first (cuBLAS needs cuBLASLt, cuDNN needs cuBLAS...).
_LOAD_ORDER = ("cudart", "nvJitLink", "nvrtc", "nvrtc-builtins", "cublasLt", "cublas", "cufft", "curand",
               "cusparse", "cusolver", "cudnn", *TENSORRT_FAMILIES)
# cuDNN's sub-libraries by the word after "cudnn_", in load order (see _cudnn_sub_rank).
_CUDNN_SUB_ORDER = ("graph", "ops", "cnn", "adv", "engines", "ext", "heuristic")
# A Windows DLL name: family, then "64" (most of them), then "_" and the version (cublasLt64_12.dll, cudnn_ops64_9.dll,
# nvJitLink_120_0.dll, cudart64_110.dll).
_DLL_NAME = re.compile(r"^([A-Za-z_]+?)(?:64)?_[0-9][0-9_]*\.dll$", re.I)


def hook_kind(facts: Facts, options: PlanOptions) -> str:
    if options.hook != "auto":
        return options.hook
    return "conda" if facts.probe.env_kind == "conda" else "preload"


def _family(name: str) -> str:
    parsed = parse_lib_name(name)
    if parsed:
        return parsed[0]
    m = _DLL_NAME.match(name)
    return m.group(1) if m else ""


def _cudnn_sub_rank(family: str) -> int:
    """Where a cuDNN sub-library loads among its siblings: graph, ops, cnn, adv, the engines, the rest, heuristic
    (each NEEDs only the ones before it: cuDNN 9's ops, cnn, adv, engines and heuristic NEED libcudnn_graph, cnn and
    adv NEED libcudnn_ops; cuDNN 8's cnn and adv NEED its ops); 0 for libcudnn itself."""
    if family == "cudnn":
        return 0
    part = family.split("_")[1] if "_" in family else ""
    return 1 + (_CUDNN_SUB_ORDER.index(part) if part in _CUDNN_SUB_ORDER else _CUDNN_SUB_ORDER.index("ext"))


def load_order(hook_libs: Mapping[str, str]) -> list[str]:
    """The paths of the libraries (name → path) in the order they load: a library before those that need it."""
    def key(soname: str) -> tuple[int, int, str]:
        family = _family(soname)
        base = family.split("_")[0] if family.startswith("cudnn") else family
        rank = _LOAD_ORDER.index(base) if base in _LOAD_ORDER else len(_LOAD_ORDER)
        # libcudnn.so.N, then its sub-libraries in dependency order (a sub-library preloaded before one it NEEDs
        # would have the loader search for that one, LD_LIBRARY_PATH first, and map a shadowing copy); cuDNN 8's
        # *_infer before its *_train (name order).
        return (rank, _cudnn_sub_rank(family) if base == "cudnn" else 0, soname)

    return [hook_libs[s] for s in sorted(hook_libs, key=key)]


def machine_path_shadows(facts: Facts, findings: Sequence[Finding]) -> dict[str, str]:
    """The LIB004 copies (DLL name → the copy that loads) that lie in a folder of the machine Path: every process
    gets the machine Path before the user Path, so `--hook user-path` cannot put the environment's folders before
    them; ortfix's PATH hook (prepended in the process) can."""
    win = facts.probe.windows
    if win is None or win.machine_path is None:
        return {}
    machine = {ntpath.normcase(ntpath.normpath(e.strip().strip('"'))) for e in win.machine_path.expanded.split(";")
               if e.strip().strip('"')}
    out: dict[str, str] = {}
    for f in findings:
        if f.code == Code.LIB_SHADOWED:
            data = shadowing(f)
            if ntpath.normcase(ntpath.dirname(data["loaded"])) in machine:
                out[data["soname"]] = data["loaded"]
    return out


def user_path_note(beaten: Mapping[str, str]) -> Msg:
    """What the plan says when `--hook user-path` leaves LIB004 as it is (machine_path_shadows)."""
    copies = ", ".join(f"{name} ({path})" for name, path in sorted(beaten.items()))
    return Msg(N_("--hook user-path does not fix LIB004: {copies} lie on the machine Path, which every new process "
                  "searches before the user Path; ortfix's PATH hook (--hook auto or preload) puts the environment's "
                  "folders first in the process itself"), copies=copies)


def hook_actions(facts: Facts, kind: str, hook_libs: Mapping[str, str], codes: set[Code]) -> list[Action]:
    """The actions of hook `kind` for the libraries (name → absolute path): the platform's hook files, or the user
    PATH step."""
    fixes = tuple(sorted(c for c in codes if c in HOOK_FIXES))
    plat = facts.platform
    if kind == "user-path" and kind not in plat.hook_kinds:
        raise OrtfixError(Msg(N_("--hook user-path changes the Windows user PATH; this target is not Windows")),
                          hint=Msg(N_("use --hook auto, conda or preload")))
    refuse_store_hook(facts, kind)  # a packaged process searches no PATH: every Windows hook would fail its verify
    paths = load_order(hook_libs)
    if kind == "user-path":
        return [_user_path_action(plat.hook_folders(paths), fixes)]
    return [_write(f.path, f.content, f.summary, fixes, facts.hook_files_present)
            for f in plat.hook_files(kind, paths, facts.probe.prefix, facts.probe.purelib)]


def _user_path_action(dirs: list[str], fixes: tuple[str, ...]) -> Action:
    details: UserPathDetails = {"entries": dirs}
    return Action(
        ActionKind.USER_PATH,
        user_path_title(len(dirs)), tuple(Msg(N_("+ user PATH {folder}"), folder=d) for d in dirs),
        Msg(N_("exactly the entries added are removed again; every other entry (and any the user adds meanwhile) "
               "stays")),
        fixes, dict(details))


def _write(path: str, content: str, summary: str | Msg, fixes: tuple[str, ...], present: tuple[str, ...]) -> Action:
    existed = path in present
    digest = hashlib.sha256(content.encode()).hexdigest()
    return Action(
        ActionKind.WRITE_FILE, write_file_title(path, existed, summary),
        (Msg(N_("{mark} {path} ({size} bytes)"), mark="~" if existed else "+", path=path,
             size=len(content.encode())),),
        Msg(N_("the previous file is restored") if existed else N_("the file is deleted")),
        fixes,
        {"path": path, "content": content, "sha256": digest, "mode": 0o644, "replaces_existing": existed})
