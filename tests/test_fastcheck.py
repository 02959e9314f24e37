"""`ortfix check` takes a path that does not import click (src/ortfix/cli/fastcheck.py). It must behave exactly as the
click command does: same output, same exit code, same one-line errors; anything it does not understand goes to
click."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clitools import REPO, run_ortfix
from ortfix.cli.invocation import parse_check
from ortfix.speed.replay import RACY_MARGIN_NS
from support.fixtures import make_venv, pip_install


@pytest.fixture(scope="module")
def gpu_venv(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    python = make_venv(tmp_path_factory.mktemp("fast") / "venv")
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    return python


def test_plain_forms_are_taken_and_the_rest_left_to_click() -> None:
    assert parse_check(["check"]) == {"python": None, "as_json": False, "driver_version": None,
                                      "compute_capability": None, "fresh": False, "verbose": False, "with_": ()}
    assert parse_check(["check", "--python", "/x y", "--json", "--driver=550.54.14",
                        "--compute-capability", "8.6", "--fresh", "--verbose", "--with", "tensorrt"]) == {
        "python": "/x y", "as_json": True, "driver_version": "550.54.14", "compute_capability": "8.6",
        "fresh": True, "verbose": True, "with_": ("tensorrt",)}
    assert (parse_check(["check", "-v"]) or {}).get("verbose") is True
    for argv in (["plan"], ["check", "--help"], ["check", "-h"], ["check", "--python"], ["check", "--jsn"],
                 ["check", "--json", "--json"], ["check", "--fresh", "--fresh"], ["check", "--python=", "x"],
                 ["check", "--python", "--json"], ["check", "-v", "--verbose"], ["check", "-vv"],
                 ["check", "--with", "tensorrt", "--with", "tensorrt"], ["check", "--with"],
                 ["check", "extra"], []):
        assert parse_check(argv) is None, argv


def _both(*args: str) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    fast = run_ortfix(*args)
    slow = run_ortfix(*args, env={"ORTFIX_NO_FASTPATH": "1"})
    return fast, slow


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--json"], ["--driver", "550.54.14", "--compute-capability=8.6", "--json"],
                                   ["--compute-capability", "eight"], ["--verbose"], ["-v", "--json"]])
def test_fast_and_click_paths_agree(gpu_venv: Path, extra: list[str]) -> None:
    fast, slow = _both("check", "--python", str(gpu_venv), *extra)
    assert (fast.returncode, fast.stderr) == (slow.returncode, slow.stderr)
    if "--json" in extra:
        assert json.loads(fast.stdout) == json.loads(slow.stdout)
    else:
        assert fast.stdout == slow.stdout
    assert fast.returncode in (1, 2) and "Traceback" not in fast.stderr


def test_errors_agree(tmp_path: Path) -> None:
    fast, slow = _both("check", "--python", str(tmp_path / "nope"))
    assert fast.returncode == slow.returncode == 2
    assert fast.stderr == slow.stderr and fast.stderr.startswith("ortfix: error: ")


@pytest.mark.slow
def test_fast_path_does_not_import_click(gpu_venv: Path) -> None:
    def imported(env: dict[str, str]) -> set[str]:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ortfix", "check", "--python", str(gpu_venv)],
                              capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False)
        assert proc.returncode == 1, proc.stderr[-2000:]
        return {ln.rsplit("|", 1)[-1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")}

    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "ORTFIX_NO_FASTPATH")}
    assert "click" not in imported(env)
    assert "click" in imported({**env, "ORTFIX_NO_FASTPATH": "1"})


# What a Linux check never needs: the Windows facts, loaders, hooks and PE reader, and the transaction layer (its
# journal pulls in `secrets`). check/windows.py is not among them yet: check/diagnose.py and check/libraries.py import
# its Windows rules at the top (whether the target is Windows is `facts.platform.is_windows` now).
WINDOWS_ONLY = {"ortfix.system.windows.facts", "ortfix.check.windows_remedies", "ortfix.system.windows.platform",
                "ortfix.target.winreport", "ortfix.system.windows.loader", "ortfix.system.windows.hooks",
                "ortfix.system.windows.pe",
                "ortfix.system.windows.userpath", "ortfix.verify.winloadcheck", "ortfix.explain.windows_dlls",
                "ortfix.system.windows.confine", "ortfix.system.windows.libraries", "ortfix.system.windows.host"}
# At exit (the fast path ends with os._exit, after the atexit handlers: fastcheck.end).
_MODULES_AFTER_CHECK = """
import atexit
import sys
from ortfix.__main__ import entry
sys.argv = ["ortfix", *sys.argv[1:]]
atexit.register(lambda: sys.stderr.write("\\nmodules: %s\\n" % " ".join(sorted(sys.modules))))
entry()
"""


@pytest.mark.slow
@pytest.mark.parametrize("extra", [["--fresh"], ["--fresh", "--json"], []])
def test_check_imports_nothing_windows_only_or_transactional(gpu_venv: Path, extra: list[str]) -> None:
    """A real `check` in a fresh interpreter: afterwards none of those modules is loaded (issue 22: they cost a
    fresh check 70 ms, a third of its imports)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "ORTFIX_NO_FASTPATH")}
    proc = subprocess.run([sys.executable, "-c", _MODULES_AFTER_CHECK, "check", "--python", str(gpu_venv), *extra],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False)
    assert proc.returncode == 1 and "\nmodules: " in proc.stderr, proc.stderr[-2000:]
    loaded = set(proc.stderr.rsplit("modules: ", 1)[1].split())
    assert "ortfix.check.facts" in loaded or not extra  # the fresh check really gathered the facts
    assert loaded & WINDOWS_ONLY == set()
    assert {m for m in loaded if m.startswith("ortfix.transaction")} == set()
    assert "secrets" not in loaded
    # nor what only some environments need: hashlib's OpenSSL binding (a hook, a project file), platform ($LIB)
    assert loaded & {"hashlib", "_hashlib", "platform"} == set()


@pytest.mark.slow
def test_a_replayed_check_imports_neither_typing_nor_the_other_commands_requests(gpu_venv: Path,
                                                                                   tmp_path: Path) -> None:
    """A replayed `check` validates its options with commands/inputs.py, which no longer defines the other
    commands' NamedTuples (commands/requests.py): with `typing`, they were 32M instructions, a fifth of the replay's
    (issue 22). Nor `subprocess` (20M): the probe it waits for was started with os.posix_spawn (speed/early.py)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "ORTFIX_NO_FASTPATH")}
    env["ORTFIX_CACHE_DIR"] = str(tmp_path / "cache")
    argv = [sys.executable, "-c", _MODULES_AFTER_CHECK, "check", "--python", str(gpu_venv)]
    time.sleep(RACY_MARGIN_NS / 1e9 + 0.2)  # the venv was just copied: a result is kept once it has settled
    for _ in range(2):  # the first run records, the second replays
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False)
        assert proc.returncode == 1 and "\nmodules: " in proc.stderr, proc.stderr[-2000:]
    loaded = set(proc.stderr.rsplit("modules: ", 1)[1].split())
    assert "ortfix.check.facts" not in loaded and "ortfix.commands.inputs" in loaded  # replayed, options validated
    assert loaded & {"typing", "ortfix.commands.requests", "dataclasses", "subprocess"} == set()
    # Nor `pathlib` with what it imports (18M), nor `contextlib`: paths are str on a replay's way (system/pathform.py).
    assert loaded & {"pathlib", "fnmatch", "ntpath", "urllib.parse", "ipaddress", "contextlib"} == set()


def test_the_fast_end_keeps_the_output_the_exit_code_and_the_atexit_handlers(tmp_path: Path) -> None:
    """fastcheck.end skips the interpreter's teardown (os._exit): what was printed (more than a pipe holds) still
    arrives whole, the exit code is the one given, and the atexit handlers run, after the check's own output."""
    script = ("import atexit, sys\n"
              "from ortfix.cli import fastcheck\n"
              "atexit.register(lambda: sys.stderr.write('handler ran\\n'))\n"
              "sys.stdout.write('x' * 300000)\n"
              "sys.stderr.write('partial line without a newline')\n"
              "fastcheck.end(3)\n"
              "sys.stdout.write('never')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          check=False)
    assert proc.returncode == 3
    assert proc.stdout == "x" * 300000
    assert proc.stderr == "partial line without a newline" + "handler ran\n"


# Every regex an ortfix module compiles while it is imported, each wrapped so that its first use is seen; at exit,
# those never used (the fast path ends with os._exit, after the atexit handlers: fastcheck.end).
_UNUSED_PATTERNS = """
import atexit
import re
import sys

compile_ = re.compile
made, used = set(), set()


class Seen:
    def __init__(self, pattern, flags, where):
        self._compiled, self._where = compile_(pattern, flags), where

    def __getattr__(self, name):
        used.add(self._where)
        return getattr(self._compiled, name)


def wrapped(pattern, flags=0):
    caller = sys._getframe(1)
    if caller.f_code.co_name == "<module>" and caller.f_globals.get("__name__", "").startswith("ortfix"):
        where = "%s:%d" % (caller.f_globals["__name__"], caller.f_lineno)
        made.add(where)
        return Seen(pattern, flags, where)
    return compile_(pattern, flags)


re.compile = wrapped
from ortfix.__main__ import entry
sys.argv = ["ortfix", *sys.argv[1:]]
atexit.register(lambda: sys.stderr.write("\\ncompiled: %d unused: %s\\n" % (len(made), " ".join(sorted(made - used)))))
entry()
"""


@pytest.mark.slow
def test_a_linux_check_compiles_no_regex_it_does_not_use(gpu_venv: Path) -> None:
    """Compiling a regex costs ~0.15 ms; 19 of those compiled at import were never used by a Linux check of an
    environment without a project (a project's files, uv's settings, wheel file names, a driver's version text):
    they are compiled at their first use (issue 22)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "ORTFIX_NO_FASTPATH")}
    proc = subprocess.run([sys.executable, "-c", _UNUSED_PATTERNS, "check", "--python", str(gpu_venv), "--fresh"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False)
    assert proc.returncode == 1 and "\ncompiled: " in proc.stderr, proc.stderr[-2000:]
    compiled, unused = proc.stderr.rsplit("compiled: ", 1)[1].split(" unused:")
    assert int(compiled) > 0  # the wrapper saw the module-level patterns
    assert unused.split() == []


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--fresh"]])
def test_the_probe_starts_before_typing_is_imported(gpu_venv: Path, extra: list[str], tmp_path: Path) -> None:
    """Everything imported before the probe starts is on a replayed check's critical path (the rest overlaps the
    probe): `typing` (3-4 ms) is not among it; system/host.py's seam type is for mypy only (issue 22). Nor are
    `subprocess` and `pathlib` (~10 ms): speed/early.py starts the probe before them, with os.posix_spawn."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "ORTFIX_NO_FASTPATH")}
    env["ORTFIX_CACHE_DIR"] = str(tmp_path / "cache")
    for _ in range(2):  # the first writes the probe's copy into the cache folder (the early start needs it)
        proc = subprocess.run([sys.executable, "-c", _MODULES_AT_PROBE_START, "check", "--python", str(gpu_venv),
                               *extra], capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False)
    assert proc.returncode == 1 and "\nat probe start: " in proc.stderr, proc.stderr[-2000:]
    started, _, modules = proc.stderr.rsplit("at probe start: ", 1)[1].partition("|")
    # recorded when the probe started (`python -S -c BOOTSTRAP`), early, not at some other child's start
    assert started.split() == ["posix_spawn", "-S", "-c"], proc.stderr[-2000:]
    loaded = set(modules.split())
    assert not {"typing", "subprocess", "pathlib"} & loaded


# The modules loaded when the probe's process is started (the first os.posix_spawn or fork_exec), written at exit.
_MODULES_AT_PROBE_START = """
import _posixsubprocess
import atexit
import os
import sys

fork_exec, posix_spawn, seen = _posixsubprocess.fork_exec, os.posix_spawn, []


def recorded(*args):
    seen.append(["fork_exec", *args[0][1:3], "|", *sorted(sys.modules)]) if not seen else None
    return fork_exec(*args)


def spawned(*args, **kwargs):
    seen.append(["posix_spawn", *args[1][1:3], "|", *sorted(sys.modules)]) if not seen else None
    return posix_spawn(*args, **kwargs)


_posixsubprocess.fork_exec, os.posix_spawn = recorded, spawned
from ortfix.__main__ import entry
sys.argv = ["ortfix", *sys.argv[1:]]
atexit.register(lambda: sys.stderr.write("\\nat probe start: %s\\n" % " ".join(seen[0] if seen else ["none"])))
entry()
"""
