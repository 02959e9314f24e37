"""WIN005: a Microsoft Store (packaged) Python whose CUDA DLLs are not found. No hook ortfix writes can change that:
a packaged process's DLL search has no PATH step (Microsoft's "Search order for packaged apps": the loaded modules,
KnownDLLs, the package, the exe's folder, System32; the DLL's own folder for an altered load), so neither the PATH
hook nor conda's scripts nor `--hook user-path` reach it; and the Store Python writes HKCU to a private copy of the
registry (Python's "Known issues" of the Store package), so a user Path that ortfix wrote from it would not reach
other programs either. What works: a python.org CPython (a venv made from it), or, with onnxruntime-gpu 1.21 or
newer, `onnxruntime.preload_dlls()` before the first session (it loads the NVIDIA wheels' DLLs by full path, and a
loaded module is found by name)."""

from __future__ import annotations

from collections.abc import Sequence

from ortfix.check.codes import HOOK_FIXES, FindingCode, Severity
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding
from ortfix.errors import ExitCode, OrtfixError
from ortfix.i18n import N_, Msg

STORE_REMEDY = N_("install Python from python.org (or `winget install Python.Python.3.12`), make a venv with it "
                  "(`py -3.12 -m venv C:\\path\\to\\venv`) and install there; or, with onnxruntime-gpu 1.21 or "
                  "newer, call onnxruntime.preload_dlls() before creating the first session")
STORE_REASON = N_("a Microsoft Store Python searches no PATH for DLLs (packaged-app search order) and keeps its "
                  "registry writes private")

_HOOK_NAMES = {"preload": N_("the PATH hook"), "conda": N_("conda's activate.d scripts"),
               "user-path": "--hook user-path"}


def is_store_python(facts: Facts) -> bool:
    """Whether the target is a Microsoft Store (packaged) Python."""
    win = facts.probe.windows
    return win is not None and win.packaged


def store_python_findings(facts: Facts, findings: Sequence[Finding]) -> list[Finding]:
    """WIN005 when the target is a Store Python and a needed library is not found where it must be: the findings a
    hook would fix, which no hook can fix here."""
    if not is_store_python(facts):
        return []
    unfound = sorted({f.code for f in findings if f.code in HOOK_FIXES})
    if not unfound:
        return []
    return [Finding(
        FindingCode.STORE_PYTHON, Severity.ERROR,
        N_("a Microsoft Store Python: no hook can make the CUDA DLLs findable here (PATH, ortfix's PATH hook, conda's "
           "scripts and --hook user-path do not reach its DLL search)"),
        (Msg(N_("{reason}; {python}"), reason=Msg(STORE_REASON), python=facts.probe.executable),
         Msg(N_("library findings no hook can fix in this Python: {codes}"), codes=", ".join(unfound))),
        STORE_REMEDY)]


def refuse_store_hook(facts: Facts, kind: str) -> None:
    """Raise the one-line refusal for a hook that cannot work in a Store Python (plan and apply, nothing changed)."""
    if is_store_python(facts):
        what = Msg(_HOOK_NAMES[kind]) if kind in _HOOK_NAMES else f"--hook {kind}"
        raise OrtfixError(Msg(N_("{python} is a Microsoft Store Python: {what} cannot make the CUDA DLLs findable "
                                 "there ({reason}); nothing was changed"), python=facts.probe.executable,
                              what=what, reason=Msg(STORE_REASON)),
                          hint=Msg(N_("{remedy}; or pass --hook none to install the packages only"),
                                   remedy=Msg(STORE_REMEDY)),
                          exit_code=ExitCode.USAGE)
