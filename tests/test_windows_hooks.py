"""The Windows fixes that make the NVIDIA DLLs findable, proven with real programs: the PATH hook in a real Windows
CPython under wine (a real DLL loaded as ORT loads its provider), conda's .bat run by wine's cmd and its .sh by bash,
the user PATH changed and restored in wine's registry by the real handler (checked independently with `reg query`).
PowerShell is not installed here: the .ps1 is checked as text (quoting, and the same folders as the other scripts).
Hostile folder names are unit tests on Linux: the render functions refuse or quote them."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from factsdata import load_facts
from ortfix.errors import OrtfixError
from ortfix.plan.hook_actions import hook_actions
from ortfix.plan.kinds import ActionKind
from ortfix.plan.model import HOOK_CHOICES
from ortfix.system import hooks
from ortfix.system.windows import hooks as winhooks
from ortfix.system.windows import userpath
from ortfix.system.windows.platform import WindowsPlatform
from ortfix.transaction.actions import handler_for
from ortfix.transaction.actions.base import TargetEnv, open_env
from ortfix.transaction.journal import Step, StepState
from ortfix.transaction.plan_file import parse_options
from support import winstubs
from wintools import WinPython, to_windows, win_python

HOSTILE = "a&b^c (x) $d 'e' `f` =g"  # every character cmd, PowerShell or bash could misread, all legal on Windows


# ---------------------------------------------------------------------------------------------------------------------
# Linux: hostile names, readers, the .sh round trip, the handler's and the plan's refusals
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["C:\\x;y", 'C:\\x"y', "C:\\x\ny", "C:\\x\ty", "relative\\bin", ""])
def test_path_hook_refuses_what_cannot_be_a_path_entry(bad: str) -> None:
    with pytest.raises(OrtfixError) as exc:
        winhooks.render_path_hook_module([bad], "C:\\env\\Lib\\site-packages")
    assert "\n" not in exc.value.one_line()


@pytest.mark.parametrize("bad", ["%USERPROFILE%", "bang!", "quote\u2019", "C:\\x;y"])
def test_conda_scripts_refuse_what_cmd_or_powershell_would_expand(bad: str) -> None:
    prefix = "C:\\envs\\e"
    with pytest.raises(OrtfixError) as exc:
        winhooks.render_conda_windows_activate([f"{prefix}\\{bad}\\bin"], prefix)
    assert "\n" not in exc.value.one_line()
    with pytest.raises(OrtfixError):  # outside the prefix and not ASCII: cmd would read it in another code page
        winhooks.render_conda_windows_activate(["D:\\José\\bin"], prefix)


def test_path_hook_stores_hostile_folders_exactly_and_is_recognised() -> None:
    site = "C:\\py\\Lib\\site-packages"
    folders = [f"C:\\{HOSTILE} 100%\\nvidia\\cublas\\bin", "C:\\py\\Lib\\site-packages\\nvidia\\cuda_runtime\\bin"]
    text = winhooks.render_path_hook_module([*folders, folders[0].upper() + "\\"], site)
    namespace: dict[str, object] = {}
    exec(compile(text, "hook", "exec"), namespace)  # the module ortfix writes: it must run as written
    assert namespace["FOLDERS"] == folders  # exactly, each once (the upper-case duplicate with a "\" is the same)


def test_readers_recognise_only_what_ortfix_writes(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    folder = "C:\\env\\Lib\\site-packages\\nvidia\\cublas\\bin"
    module, pth = winhooks.path_hook_paths(str(site))
    assert winhooks.read_path_hook(str(site)) is None
    module.write_text(winhooks.render_path_hook_module([folder], str(site)), encoding="utf-8")
    pth.write_text(winhooks.render_path_hook_pth(), encoding="utf-8")
    assert winhooks.read_path_hook(str(site)) == [folder]
    module.write_text(module.read_text(encoding="utf-8") + "import os\n", encoding="utf-8")
    assert winhooks.read_path_hook(str(site)) is None

    prefix = str(tmp_path / "env")
    inside = prefix + "\\Lib\\site-packages\\nvidia\\cudnn\\bin"
    paths = winhooks.conda_windows_hook_paths(prefix)
    assert [p.parent.name for p in paths] == ["activate.d"] * 3 + ["deactivate.d"] * 3
    assert [p.suffix for p in paths] == [".bat", ".ps1", ".sh"] * 2
    for path, text in zip(paths, winhooks.render_conda_windows_hooks([inside, "C:\\CUDA\\bin"], prefix)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert winhooks.read_conda_windows_hook(prefix) == [inside, "C:\\CUDA\\bin"]
    paths[4].write_text(paths[4].read_text(encoding="utf-8").replace("Remove-Item", "rm"), encoding="utf-8")
    assert winhooks.read_conda_windows_hook(prefix) is None


def test_powershell_scripts_quote_and_take_back() -> None:
    """No PowerShell here: the text, checked for what PowerShell does with it (single quotes are literal, '' is
    one quote). The activate script remembers the block it put first; the deactivate script takes that block out of
    PATH as it is then, and never sets PATH from a value saved at activation (conda exports its own new PATH before
    it runs deactivate.d scripts)."""
    prefix = f"C:\\envs\\{HOSTILE}"
    inside = prefix + "\\Lib\\site-packages\\nvidia\\cublas\\bin"
    outside = "C:\\CUDA's (x86)\\bin"
    _, ps1, _ = winhooks.render_conda_windows_activate([inside, outside], prefix)
    added = hooks.hook_var("ADDED", "PATH", prefix)
    assert f"$Env:{added} = (@(($Env:CONDA_PREFIX + '\\Lib\\site-packages\\nvidia\\cublas\\bin'), " \
           "'C:\\CUDA''s (x86)\\bin') -join ';')" in ps1
    assert HOSTILE not in ps1  # the prefix comes from CONDA_PREFIX, never spelled out
    _, ps1_off, _ = winhooks.render_conda_windows_deactivate([inside, outside], prefix)
    assert f"IndexOf(';' + $Env:{added} + ';'" in ps1_off and f"Remove-Item Env:{added}" in ps1_off
    assert not re.search(r"\$Env:PATH = \$Env:ORTFIX", ps1_off)


_SHOW_PATH = 'if [ -n "${PATH+x}" ]; then printf "set:%s\\n" "$PATH"; else echo unset; fi'


def _bash_with_hooks(tmp_path: Path, script: str, env: dict[str, str]) -> list[str]:
    """Run `script` in bash with the conda .sh scripts for a hostile prefix as "$1" (activate.d) and "$2"
    (deactivate.d); the lines it printed."""
    prefix = f"C:\\envs\\{HOSTILE}"
    folders = [prefix + "\\Lib\\site-packages\\nvidia\\cublas\\bin", "D:\\CUDA\\bin"]
    texts = winhooks.render_conda_windows_hooks(folders, prefix)
    (tmp_path / "on.sh").write_text(texts[2], encoding="utf-8")
    (tmp_path / "off.sh").write_text(texts[5], encoding="utf-8")
    bash = shutil.which("bash") or "/bin/bash"
    return subprocess.run([bash, "--norc", "-c", script, "bash", str(tmp_path / "on.sh"), str(tmp_path / "off.sh")],
                          capture_output=True, text=True, env=env, check=True).stdout.splitlines()


@pytest.mark.parametrize("before", [None, "/usr/bin:/bin"])
def test_bash_scripts_prepend_and_restore_exactly(tmp_path: Path, before: str | None) -> None:
    show = _SHOW_PATH
    script = f'{"unset PATH; " if before is None else ""}{show}; . "$1"; {show}; . "$2"; {show}'
    out = _bash_with_hooks(tmp_path, script, {"PATH": before} if before is not None else {})
    first = f"/c/envs/{HOSTILE}/Lib/site-packages/nvidia/cublas/bin:/d/CUDA/bin"
    assert out == [("unset" if before is None else f"set:{before}"),
                   f"set:{first}" + (f":{before}" if before else ""),
                   ("unset" if before is None else f"set:{before}")]


def _env(prefix: str) -> TargetEnv:
    return TargetEnv(python=prefix + "\\python.exe", prefix=prefix, purelib=prefix + "\\Lib\\site-packages",
                     platlib=prefix + "\\Lib\\site-packages", scripts=prefix + "\\Scripts", env_kind="venv")


def test_user_path_details_are_checked_strictly() -> None:
    handler = handler_for(ActionKind.USER_PATH)
    env = _env("C:\\envs\\e")
    good = "C:\\envs\\e\\Lib\\site-packages\\nvidia\\cublas\\bin"
    handler.check_details(env, {"entries": [good]})
    for entries in ([], ["C:\\elsewhere\\bin"], ["C:\\envs\\e\\%TEMP%\\bin"], [good, good.upper()], [good + ";C:\\x"],
                    "C:\\envs\\e\\bin", [1]):
        step = Step(1, ActionKind.USER_PATH, "", "plan", {"entries": entries}, StepState.PLANNED, {}, None, None,
                    None)
        assert handler.check_step(env, step) is not None, entries


@pytest.mark.skipif(sys.platform == "win32", reason="the refusal of other platforms")
def test_user_path_is_refused_off_windows_in_one_line() -> None:
    handler = handler_for(ActionKind.USER_PATH)
    env = _env("C:\\envs\\e")
    details = {"entries": ["C:\\envs\\e\\Lib\\site-packages\\nvidia\\cublas\\bin"]}
    problems = [str(p) for p in handler.verify(env, details)]
    assert len(problems) == 1 and "Windows" in problems[0] and "\n" not in problems[0]
    assert "user-path" in HOOK_CHOICES and parse_options(
        {"ort_version": None, "cuda_major": None, "hook": "user-path", "driver_version": None,
         "compute_capability": None}).hook == "user-path"


def test_user_path_values_keep_every_other_entry() -> None:
    value = "%USERPROFILE%\\bin;C:\\keep;;C:\\Nv\\B\\"
    new, added = userpath.added_value(value, ["C:\\nv\\a", "c:\\nv\\b", "C:\\nv\\a\\"])
    assert (new, added) == ("C:\\nv\\a;" + value, ["C:\\nv\\a"])
    assert userpath.added_value(new, ["C:\\nv\\a"]) == (new, [])
    assert userpath.removed_value(new + ";C:\\user", added) == (value + ";C:\\user", added)
    assert userpath.added_value(None, ["C:\\a", "C:\\b"]) == ("C:\\a;C:\\b", ["C:\\a", "C:\\b"])
    with pytest.raises(OrtfixError) as exc:
        userpath.check_length("x" * userpath.MAX_VALUE)
    assert "\n" not in exc.value.one_line()


# ---------------------------------------------------------------------------------------------------------------------
# wine: the PATH hook, the .bat, the user PATH
# ---------------------------------------------------------------------------------------------------------------------


def _mingw() -> None:
    missing = winstubs.mingw_missing()
    if missing:
        pytest.skip(missing)


_HOOK_SCRIPT = r"""
import ctypes, json, os, sys
provider = sys.argv[1]
out = {"start": os.environ.get("PATH"), "hook_imported": "_ortfix_dllpath" in sys.modules}
try:
    ctypes.WinDLL(provider, winmode=8)
    out["before"] = "loaded"
except OSError as exc:
    out["before"] = str(exc)
import onnxruntime
out["after"] = os.environ.get("PATH")
ctypes.WinDLL(provider, winmode=8)
out["loaded"] = True
print(json.dumps(out))
"""


@pytest.mark.slow
def test_path_hook_prepends_once_when_onnxruntime_is_imported(tmp_path: Path) -> None:
    w = win_python()
    _mingw()
    home = w.new_home(tmp_path)
    site = home / "Lib" / "site-packages"
    cublas = site / "nvidia" / "cublas" / "bin"
    cudart = site / "nvidia" / f"cuda_runtime {HOSTILE}" / "bin"
    winstubs.build_stub_dll(cublas / "cublasLt64_12.dll", exports=["ortfix_import_0"])
    winstubs.build_stub_dll(cublas / "cublas64_12.dll", exports=["ortfix_import_0"], needed=["cublasLt64_12.dll"])
    winstubs.build_stub_dll(cudart / "cudart64_12.dll", exports=["ortfix_import_1"])
    provider = winstubs.build_stub_dll(site / "onnxruntime" / "capi" / "onnxruntime_providers_cuda.dll",
                                       needed=["cublas64_12.dll", "cudart64_12.dll"])
    (site / "onnxruntime" / "__init__.py").write_text("")
    folders = [to_windows(cublas), to_windows(cudart)]
    module, pth = winhooks.path_hook_paths(str(site))
    module.write_text(winhooks.render_path_hook_module(folders, to_windows(site)), encoding="utf-8")
    pth.write_text(winhooks.render_path_hook_pth(), encoding="utf-8")
    # The cuda_runtime folder is already on PATH, in another case and with a trailing backslash: moved, not doubled.
    already = folders[1].upper() + "\\"
    proc = w.run("-c", _HOOK_SCRIPT, to_windows(provider), exe=home / "python.exe",
                 env={"WINEPATH": f"C:\\other;{already}"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["hook_imported"] is True
    start = out["start"].split(";")
    assert already in start and folders[0] not in start  # nothing changed at start-up
    assert out["before"] != "loaded"  # without the hook, the provider's imports are not found
    assert out["after"] == ";".join([*folders, *(e for e in start if e != already)])
    assert out["loaded"] is True


_BAT_DRIVER = """@echo off
set "CONDA_PREFIX={prefix}"
set PATH
call "{on}"
set PATH
call "{off}"
set PATH
"""


@pytest.mark.slow
def test_bat_scripts_prepend_and_restore_exactly_in_cmd(tmp_path: Path) -> None:
    w = win_python()
    prefix = tmp_path / f"env {HOSTILE}"
    folders = [to_windows(prefix / "Lib" / "site-packages" / "nvidia" / "cublas" / "bin"), "C:\\CUDA (x86) & co\\bin"]
    paths = winhooks.conda_windows_hook_paths(str(prefix))
    for path, text in zip(paths, winhooks.render_conda_windows_hooks(folders, to_windows(prefix))):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    driver = tmp_path / "driver.bat"
    driver.write_text(_BAT_DRIVER.format(prefix=to_windows(prefix), on=to_windows(paths[0]), off=to_windows(paths[3])))
    proc = subprocess.run(["wine", "cmd", "/c", to_windows(driver)], capture_output=True, text=True,
                          env=w.env({"WINEPATH": "C:\\other & more;C:\\x^y"}), stdin=subprocess.DEVNULL, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    values = [line[len("PATH="):].rstrip("\r") for line in proc.stdout.splitlines() if line.startswith("PATH=")]
    assert len(values) == 3, proc.stdout
    before, active, after = values
    assert "C:\\other & more" in before.split(";")
    assert active == ";".join([*folders, before])
    assert after == before


_CONDA_ORDER_DRIVER = """@echo off
set "PATH={p0}"
set "CONDA_PREFIX={a}"
set "PATH={a_lib};%PATH%"
call "{a_on}"
set PATH
set "PATH={after_conda_deactivate}"
call "{a_off}"
set PATH
set "PATH={a_lib};%PATH%"
call "{a_on}"
set "PATH={after_conda_switch}"
call "{a_off}"
set "CONDA_PREFIX={b}"
call "{b_on}"
set PATH
"""


@pytest.mark.slow
def test_bat_scripts_under_condas_own_order_in_cmd(tmp_path: Path) -> None:
    """conda's order (conda/activate.py, `_Activator._yield_commands`): it exports its new PATH first (its own
    folders of the environment taken out, or replaced by the next environment's), then runs deactivate.d, then the
    next environment's activate.d. A deactivate script that put back the PATH saved at activation brought A's own
    folder back after `conda deactivate`, and replaced B's with A's on a switch."""
    w = win_python()
    scripts = {}
    for name in ("A", f"B {HOSTILE}"):
        prefix = tmp_path / name
        folders = [to_windows(prefix / "Lib" / "site-packages" / "nvidia" / "cublas" / "bin"), "C:\\CUDA & co\\bin"]
        paths = winhooks.conda_windows_hook_paths(str(prefix))
        for path, text in zip(paths, winhooks.render_conda_windows_hooks(folders, to_windows(prefix))):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        scripts[name[0]] = (to_windows(prefix), folders, to_windows(paths[0]), to_windows(paths[3]))
    (a, a_dirs, a_on, a_off), (b, b_dirs, b_on, _) = scripts["A"], scripts["B"]
    p0 = "C:\\other & more;C:\\windows\\system32"
    a_lib, b_lib = a + "\\Library\\bin", b + "\\Library\\bin"
    block = ";".join(a_dirs)
    driver = tmp_path / "driver.bat"
    driver.write_text(_CONDA_ORDER_DRIVER.format(
        p0=p0, a=a, b=b, a_lib=a_lib, a_on=a_on, a_off=a_off, b_on=b_on,
        after_conda_deactivate=f"{block};{p0}", after_conda_switch=f"{block};{b_lib};{p0}"))
    proc = subprocess.run(["wine", "cmd", "/c", to_windows(driver)], capture_output=True, text=True, env=w.env({}),
                          stdin=subprocess.DEVNULL, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    values = [line[len("PATH="):].rstrip("\r") for line in proc.stdout.splitlines() if line.startswith("PATH=")]
    assert values == [f"{block};{a_lib};{p0}", p0, ";".join([*b_dirs, b_lib, p0])], proc.stdout


@pytest.mark.parametrize("before", ["/usr/bin:/bin", "/opt/a b:/usr/bin"])
def test_bash_scripts_under_condas_own_order(tmp_path: Path, before: str | None) -> None:
    """The same order for conda's bash on Windows: after `conda deactivate` PATH is what it was before `conda
    activate`."""
    own = "/c/envs/own/Library/bin"  # the folder conda itself puts first and takes out again
    script = (f'export PATH="{own}${{PATH:+:$PATH}}"; . "$1"; '
              f'_p=":$PATH:"; _p="${{_p%%:{own}:*}}:${{_p#*:{own}:}}"; _p="${{_p#:}}"; export PATH="${{_p%:}}"; '
              f'. "$2"; {_SHOW_PATH}')
    assert _bash_with_hooks(tmp_path, script, {"PATH": before}) == [f"set:{before}"]


# The handler runs in the Windows process, imported as ortfix imports it there.
_USER_PATH_SCRIPT = r"""
import json, os, subprocess, sys, winreg
from ortfix.errors import OrtfixError
from ortfix.transaction.actions import handler_for
from ortfix.transaction.actions.base import StepContext, TargetEnv
from ortfix.transaction.journal import Step, StepState


with open(sys.argv[1], encoding="utf-8") as handle:  # a file: a long Path does not fit on a command line
    args = json.load(handle)
prefix = args["prefix"]
env = TargetEnv(python=prefix + "\\python.exe", prefix=prefix, purelib=prefix + "\\Lib\\site-packages",
                platlib=prefix + "\\Lib\\site-packages", scripts=prefix + "\\Scripts", env_kind="venv")
handler = handler_for("user-path")
records = []
ctx = StepContext(store=None, tx_id="t", index=1, commit=records.append, echo=print, output=lambda line, err: None)
out = {}


def step(entries, record=None):
    state = StepState.PLANNED if record is None else StepState.DONE
    return Step(1, "user-path", "", "plan", {"entries": entries}, state, record or {}, None, None, None)


def read():
    try:
        with winreg.OpenKey(winreg.HKEY_CURRENT_USER, "Environment") as key:
            value, kind = winreg.QueryValueEx(key, "Path")
    except FileNotFoundError:
        return None
    return [value, {winreg.REG_SZ: "REG_SZ", winreg.REG_EXPAND_SZ: "REG_EXPAND_SZ"}[kind]]


def write(value, kind):
    with winreg.CreateKeyEx(winreg.HKEY_CURRENT_USER, "Environment", 0, winreg.KEY_ALL_ACCESS) as key:
        if value is None:
            try:
                winreg.DeleteValue(key, "Path")
            except FileNotFoundError:
                pass
        else:
            winreg.SetValueEx(key, "Path", 0, getattr(winreg, kind), value)


def apply(entries):
    details = {"entries": entries}
    problems = [str(p) for p in handler.verify(env, details)]
    if problems:
        return {"problems": problems}
    s = step(entries)
    assert handler.check_step(env, s) is None
    return {"record": handler.execute(env, s, ctx)}


def undo(entries, record):
    s = step(entries, record)
    assert handler.check_step(env, s) is None, handler.check_step(env, s)
    return [n.text for n in handler.reverse(env, s, ctx)]


for action in args["do"]:
    what = action[0]
    try:
        if what == "write":
            write(action[1], action[2])
            result = None
        elif what == "apply":
            result = apply(action[1])
        elif what == "undo":  # the record given, or the one the first or last apply journaled
            result = undo(action[1], {"first": records[0], "last": records[-1]}.get(action[2], action[2]))
        elif what == "reg-query":  # another program's reading of the registry: wine's reg.exe
            result = subprocess.run(["reg", "query", "HKCU\\Environment", "/v", "Path"], capture_output=True,
                                    text=True, stdin=subprocess.DEVNULL).stdout
        elif what == "login-path":
            from ortfix.system.windows.userpath import new_login_path
            result = new_login_path()
        elif what == "execute-anyway":
            result = {"record": handler.execute(env, step(action[1]), ctx)}
    except OrtfixError as exc:
        result = {"error": exc.one_line()}
    out.setdefault("results", []).append(result)
    out.setdefault("values", []).append(read())
print(json.dumps(out))
"""


def _reg_value(reg_output: str) -> tuple[str, str] | None:
    """(type, data) of the Path value in `reg query`'s output, None when it has none."""
    for line in reg_output.splitlines():
        parts = line.strip().split("    ")
        if len(parts) == 3 and parts[0].lower() == "path":
            return parts[1], parts[2]
    return None


def _run_user_path(w: WinPython, prefix: Path, env_prefix: str, do: list[object]) -> dict[str, list[object]]:
    args = prefix.parent / "user-path-args.json"
    args.write_text(json.dumps({"prefix": env_prefix, "do": do}), encoding="utf-8")
    proc = w.run("-c", _USER_PATH_SCRIPT, to_windows(args), env={"WINEPREFIX": str(prefix)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, list[object]] = json.loads(proc.stdout.splitlines()[-1])
    return result


@pytest.mark.slow
def test_user_path_added_and_removed_in_the_registry(tmp_path: Path) -> None:
    """Every scenario in one Windows process (each wine start costs seconds), in a wine prefix of its own;
    `reg query` (wine's reg.exe, not winreg) reads the registry back at the points that matter."""
    w = win_python()
    prefix = w.private_prefix(tmp_path)
    env_prefix = "C:\\envs\\gpu env"
    a = env_prefix + "\\Lib\\site-packages\\nvidia\\cublas\\bin"
    b = env_prefix + "\\Lib\\site-packages\\nvidia\\cudnn\\bin"
    original = f"%USERPROFILE%\\bin;C:\\keep one;;{b.upper()}\\;C:\\Keep2\\"
    user = "C:\\added by the user"
    long_value = "C:\\" + "x" * (userpath.MAX_VALUE - 40)
    try:
        out = _run_user_path(w, prefix, env_prefix, [
            ["write", original, "REG_EXPAND_SZ"],  # 0
            ["apply", [a, b]],  # 1: b is there already (other case, trailing backslash): only a is added
            ["apply", [a, b]],  # 2: nothing left to add: a no-op
            ["reg-query"],  # 3
            ["login-path"],  # 4
            ["write", f"{a};{original};{user}", "REG_EXPAND_SZ"],  # 5: the user adds an entry meanwhile
            ["undo", [a, b], "first"],  # 6
            ["undo", [a, b], "last"],  # 7
            ["reg-query"],  # 8
            ["write", long_value, "REG_SZ"],  # 9
            ["apply", [a]],  # 10: over the limit: verify says why, in one line
            ["execute-anyway", [a]],  # 11: and execute refuses before it changes anything
            ["write", "C:\\plain", "REG_SZ"],  # 12
            ["apply", [a]],  # 13
            ["undo", [a], "last"],  # 14
            ["write", None, "REG_EXPAND_SZ"],  # 15
            ["apply", [a, b]],  # 16
            ["reg-query"],  # 17
            ["undo", [a, b], "last"],  # 18
            ["reg-query"],  # 19
        ])
    finally:
        subprocess.run(["wineserver", "-k"], env=w.env({"WINEPREFIX": str(prefix)}), capture_output=True,
                       timeout=60, check=False)
    results, values = out["results"], out["values"]
    assert results[1] == {"record": {"existed": True, "value_type": "REG_EXPAND_SZ", "added": [a]}}
    assert results[2] == {"record": {"existed": True, "value_type": "REG_EXPAND_SZ", "added": []}}
    assert values[2] == [f"{a};{original}", "REG_EXPAND_SZ"]
    assert _reg_value(str(results[3])) == ("REG_EXPAND_SZ", f"{a};{original}")  # %USERPROFILE% unexpanded
    login = str(results[4]).split(";")  # as a new login sees it: machine Path first, then the user's, expanded
    assert login[0].lower() == "c:\\windows\\system32" and login[-6] == a
    assert login[-5].lower().startswith("c:\\users\\") and login[-5].endswith("\\bin")  # %USERPROFILE%\bin
    assert results[6] == results[7] == []
    assert _reg_value(str(results[8])) == ("REG_EXPAND_SZ", f"{original};{user}")  # the user's entry survives
    problems = results[10]["problems"]  # type: ignore[index]
    assert len(problems) == 1 and "32766" in problems[0] and "\n" not in problems[0]
    assert "32766" in results[11]["error"]  # type: ignore[index]
    assert values[11] == [long_value, "REG_SZ"]
    assert values[13] == [f"{a};C:\\plain", "REG_SZ"] and values[14] == ["C:\\plain", "REG_SZ"]
    assert _reg_value(str(results[17])) == ("REG_EXPAND_SZ", f"{a};{b}")  # created with the type Windows gives it
    assert values[18] is None and _reg_value(str(results[19])) is None  # created by ortfix, deleted again


def test_plan_chooses_the_windows_fixes_and_apply_accepts_them(tmp_path: Path) -> None:
    """What `plan` makes on Windows for each --hook, in load order, and that the handlers take those steps."""
    prefix = tmp_path / "env"
    site = prefix / "Lib" / "site-packages"
    site.mkdir(parents=True)
    (prefix / "Scripts").mkdir()
    facts = load_facts("cpu")
    linux = dataclasses.replace(facts, probe=dataclasses.replace(facts.probe, prefix=str(prefix), purelib=str(site)))
    facts = dataclasses.replace(linux, platform=WindowsPlatform())
    bins = {name: str(site / "nvidia" / name / "bin") for name in ("cudnn", "cublas", "cuda_runtime")}
    libs = {"cudnn_ops64_9.dll": bins["cudnn"] + "/cudnn_ops64_9.dll",
            "cudnn64_9.dll": bins["cudnn"] + "/cudnn64_9.dll",
            "cublas64_12.dll": bins["cublas"] + "/cublas64_12.dll",
            "cublasLt64_12.dll": bins["cublas"] + "/cublasLt64_12.dll",
            "cudart64_12.dll": bins["cuda_runtime"] + "/cudart64_12.dll"}
    in_order = [bins["cuda_runtime"], bins["cublas"], bins["cudnn"]]  # a DLL's dependencies first
    user = hook_actions(facts, "user-path", libs, set())
    assert [(a.kind, dict(a.details)) for a in user] == [(ActionKind.USER_PATH, {"entries": in_order})]
    conda = hook_actions(facts, "conda", libs, set())
    assert [a.details["path"] for a in conda] == [str(p) for p in winhooks.conda_windows_hook_paths(str(prefix))]
    preload = hook_actions(facts, "preload", libs, set())
    assert [a.details["path"] for a in preload] == [str(p) for p in winhooks.path_hook_paths(str(site))]
    assert f"FOLDERS = {in_order!r}" in preload[0].details["content"]
    with pytest.raises(OrtfixError) as exc:
        hook_actions(linux, "user-path", libs, set())
    assert "Windows" in exc.value.one_line()
    env = open_env(sys.executable, str(prefix), str(site), str(site), str(prefix / "Scripts"), "venv")
    try:
        for action in [*conda, *preload]:
            handler_for(action.kind).check_details(env, action.details)  # ortfix's own hook files: allowed
    finally:
        env.fs.close()
