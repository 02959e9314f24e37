"""What ortfix prints where the output is not UTF-8, and the command lines it prints for a Windows user to paste.

Redirected output on an English Windows (`ortfix check > log.txt`, `| findstr`, a CI log) is cp1252; a strict C
locale's is ASCII. No test here sets PYTHONUTF8=1 (which hides the problem): the output must not fail on encoding
(a path's characters come out as escapes), and the report's symbols come out as ASCII (x, +, *). Under wine: a
Windows CPython whose path holds a Chinese user name, its standard output a pipe (cp1252); the `via:` and `Undo:` lines
a plan prints for it are run by `wine cmd /c` as printed. Also the MSVC runtime's one remedy (check = explain) and a
target path over Windows' MAX_PATH."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pip
import pytest

from ortfix.check.codes import FindingCode
from ortfix.check.windows import windows_findings
from ortfix.cli import streams
from ortfix.cli.cmdline import join, quote
from ortfix.system.windows.facts import DllAt
from support.fixtures import make_venv
from txtools import ortfix as run_ortfix
from wintools import WinPython, to_windows, win_python

CHINESE = "\u7528\u6237\u540d"  # 用户名, "user name": outside cp1252 and ASCII
ESCAPED = "\\u7528\\u6237\\u540d"  # as backslashreplace writes it
REDIST_URL = "https://aka.ms/vs/17/release/vc_redist.x64.exe"  # Microsoft's permalink of the latest x64 redist
WINGET_ID = "Microsoft.VCRedist.2015+.x64"


def _plain_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONIOENCODING", "PYTHONUTF8", "LC_ALL", "LANG")}
    env.update(ORTFIX_NO_CACHE="1", **extra)
    return env


# -- the symbol set and the escapes, on an in-memory stream --------------------------------------------------------
def test_symbols_follow_what_the_stream_can_carry() -> None:
    cp1252 = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    utf8 = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    assert streams.fit("\u2717 ORT001 \u2192 \u25cf \u2713 \u2026", cp1252) == "x ORT001 -> * + \u2026"  # in cp1252
    assert streams.fit("\u2717 ORT001 \u2026", io.TextIOWrapper(io.BytesIO(), encoding="ascii")) == "x ORT001 ..."
    assert streams.fit("\u2717 ORT001", utf8) == "\u2717 ORT001"
    streams.prepare(cp1252)
    cp1252.write(streams.fit(f"\u2717 C:\\Users\\{CHINESE}\\python.exe\n", cp1252))
    cp1252.flush()
    assert cp1252.buffer.getvalue() == f"x C:\\Users\\{ESCAPED}\\python.exe\n".encode("ascii")  # type: ignore[attr-defined]


# -- Linux: a strict locale's pipe, both the click-free `check` and the click path -----------------------------------
@pytest.mark.parametrize("env", [
    {"PYTHONIOENCODING": "ascii"},
    {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
    {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "ORTFIX_NO_FASTPATH": "1"},
], ids=["pythonioencoding-ascii", "c-locale", "c-locale-click"])
@pytest.mark.slow
def test_check_into_an_ascii_pipe(tmp_path: Path, env: dict[str, str]) -> None:
    python = make_venv(tmp_path / CHINESE / "venv")
    proc = run_ortfix("check", "--python", str(python), env=_plain_env(**env))
    assert proc.returncode == 1, proc.stderr  # README: 1, problems found (ORT001: nothing installed)
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("x ORT001 error:") for line in lines), proc.stdout
    assert proc.stdout.isascii(), proc.stdout
    # the path's characters as escapes (backslashreplace of the text, or of the bytes a C locale decoded argv from)
    assert ESCAPED in proc.stdout or "\\udce7\\udc94\\udca8" in proc.stdout, proc.stdout


# -- command lines for cmd ---------------------------------------------------------------------------------------
def test_windows_command_lines_are_quoted_for_cmd() -> None:
    exe = "C:\\Users\\A B\\env\\Scripts\\python.exe"
    assert join([exe, "-m", "pip", "install", "onnxruntime-gpu==1.23.2", "nvidia-cudnn-cu12<10,>=9"], True) == \
        '"C:\\Users\\A B\\env\\Scripts\\python.exe" -m pip install onnxruntime-gpu==1.23.2 "nvidia-cudnn-cu12<10,>=9"'
    assert quote('C:\\a"b\\', True) == '"C:\\a\\"b\\\\"'  # the C runtime's rules: \" and a doubled final backslash
    assert quote("C:\\env\\python.exe", True) == "C:\\env\\python.exe"
    assert quote("/home/a b/python", False) == "'/home/a b/python'"
    for windows in (True, False):  # a hostile path stays on one line, its control characters escaped
        quoted = quote("/tmp/x\nrm -rf ~\u2028y\x1b[2J", windows)
        assert "\n" not in quoted and "\u2028" not in quoted and "\x1b" not in quoted, quoted


# -- the MSVC runtime: one remedy ---------------------------------------------------------------------------------
def test_check_and_explain_give_the_same_msvc_remedy(tmp_path: Path) -> None:
    from test_windows_check import _facts, _windows

    old = DllAt("msvcp140.dll", "C:\\Windows\\System32\\msvcp140.dll", "System32", (14, 29, 30133, 0))
    facts = _facts(tmp_path, _windows(old))
    (finding,) = [f for f in windows_findings(facts, facts.ort[0]) if f.code is FindingCode.MSVC_RUNTIME_OLD]
    assert REDIST_URL in str(finding.fix) and WINGET_ID in str(finding.fix), finding.fix
    for message in ("msvcp140.dll was not found",
                    "ImportError: DLL load failed while importing onnxruntime_pybind11_state: The specified module "
                    "could not be found."):
        proc = run_ortfix("explain", "--json", message, env=_plain_env())
        fixes = [e["fix"] for e in json.loads(proc.stdout)["explanations"]]
        assert any(str(finding.fix) in fix for fix in fixes), (finding.fix, fixes)


# -- under wine ----------------------------------------------------------------------------------------------------
def _cmd(w: WinPython, line: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`cmd /c LINE`, the line parsed as cmd parses what a user pastes. The line travels in a variable that cmd
    expands before it parses (wine would quote an argument again; its cmd reads a batch file in the OEM code page,
    which has no Chinese)."""
    return subprocess.run(["wine", "cmd", "/c", "%ORTFIX_TEST_LINE%"], capture_output=True, text=True,
                          errors="replace", env=w.env({**env, "ORTFIX_TEST_LINE": line}), stdin=subprocess.DEVNULL,
                          timeout=300, check=False)


@pytest.mark.slow
def test_redirected_output_under_wine_and_the_printed_commands_in_cmd(tmp_path: Path) -> None:
    w = win_python()
    home = w.new_home(tmp_path / f"{CHINESE} home")  # a space too: the path is quoted
    exe = to_windows(home / "python.exe")
    # pip, pure Python, from this interpreter: the Windows install under test has none
    shutil.copytree(Path(pip.__file__).parent, home / "Lib" / "site-packages" / "pip")
    cp1252 = {"PYTHONUTF8": "0"}  # what a Windows user has: no UTF-8 mode, standard output a pipe

    check = w.ortfix("check", "--fresh", "--python", exe, env=cp1252)
    assert check.returncode == 1, check.stderr[-2000:]  # ORT001, DRV001: problems found
    assert "Traceback" not in check.stderr and "UnicodeEncodeError" not in check.stderr, check.stderr[-2000:]
    lines = check.stdout.splitlines()
    assert any(line.startswith("x ORT001 error") for line in lines), check.stdout
    assert ESCAPED in check.stdout, check.stdout

    plan = w.ortfix("plan", "--driver", "552.44", "--python", exe, env=cp1252)
    assert plan.returncode in (0, 1) and "Traceback" not in plan.stderr, plan.stderr[-2000:]
    via = next(line for line in plan.stdout.splitlines() if line.strip().startswith("via: "))
    command = via.strip()[len("via: "):].split("   (installer", 1)[0]
    assert command.startswith(f'"{exe.replace(CHINESE, ESCAPED)}" -m pip install '), command
    # the escapes are what the pipe could carry; the user pastes the real path
    ran = _cmd(w, command.replace(ESCAPED, CHINESE), {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "",
                                                       "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    out = ran.stdout + ran.stderr
    # cmd started the Python and pip read every requirement: only the offline index stops it
    assert "No matching distribution found for onnxruntime-gpu" in out, out[-3000:]
    assert "Invalid requirement" not in out and "is not recognized" not in out, out[-3000:]

    # Undo: `ortfix rollback --python PATH`, ortfix as a cmd script of this Python (as pip's ortfix.exe runs it)
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "ortfix.cmd").write_text(f'@"{to_windows(w.exe)}" -m ortfix %*\r\n', encoding="ascii")
    undo = f"ortfix rollback --python {quote(exe, True)}"
    ran = _cmd(w, undo, {"WINEPATH": to_windows(shim), "PYTHONUTF8": "0"})
    # README: 2, nothing to roll back; the path with its space arrived as one argument, the characters escaped
    home_escaped = to_windows(home).replace(CHINESE, ESCAPED)
    assert ran.returncode == 2, (ran.returncode, ran.stderr[-2000:])
    assert f"no ortfix transaction in {home_escaped} (nothing to roll back)" in ran.stderr, ran.stderr[-2000:]
    assert "Traceback" not in ran.stderr


@pytest.mark.slow
def test_a_target_path_over_max_path_under_wine(tmp_path: Path) -> None:
    w = win_python()
    deep = tmp_path.joinpath(*["d" * 60] * 4)
    deep.mkdir(parents=True)
    (deep / "python").symlink_to(w.home)
    exe = to_windows(deep / "python" / "python.exe")
    assert len(exe) > 260
    proc = w.ortfix("check", "--python", exe)
    assert proc.returncode == 2, proc.stderr[-2000:]  # README: 2, the command could not run
    assert "MAX_PATH" in proc.stderr and "LongPathsEnabled" in proc.stderr, proc.stderr[-2000:]
    assert "is it a Python interpreter" not in proc.stderr, proc.stderr[-2000:]
    assert re.search(r"its path is \d+ characters", proc.stderr), proc.stderr[-2000:]


def test_apply_s_verify_count_says_what_it_counted() -> None:
    from ortfix.cli.render_tx import counted
    from ortfix.verify.loadcheck import LibLoad, LoadCheck

    provider = "C:\\env\\Lib\\site-packages\\onnxruntime\\capi\\onnxruntime_providers_cuda.dll"
    libs = (LibLoad(provider, None), LibLoad("cudnn_graph64_9.dll", None), LibLoad("cudnn_ops64_9.dll", None))
    text = counted(LoadCheck(("python.exe", "-"), True, None, libs, None, platform="windows"))
    assert "the CUDA provider" in text and "2 DLLs loaded later by bare name" in text, text
    alone = counted(LoadCheck(("python.exe", "-"), True, None, libs[:1], None, platform="windows"))
    assert "0 DLLs loaded later by bare name" in alone, alone
    assert counted(LoadCheck(("python3", "-"), True, None, (LibLoad("libcudart.so.12", None),), None)) == ""
