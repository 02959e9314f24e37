"""The probe started before ortfix imports anything (src/ortfix/speed/early.py): it is started on exactly the path
target/choose.py picks, taken over by speed/prefetch.py and waited for without `subprocess` (proberun.EarlyProbe), and
a target that cannot start, fails, prints garbage, is killed, hangs or is interrupted ends exactly as when the normal
path starts it, in a full check, a `--fresh` one and a replay (issue 22)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clitools import REPO
from ortfix.speed import early
from ortfix.speed.replay import RACY_MARGIN_NS
from ortfix.system import pathform
from ortfix.target.choose import choose_target, probe_argv

SETTLE_S = RACY_MARGIN_NS / 1e9 + 0.2  # results that depend on files changed within the margin are not kept
pytestmark = pytest.mark.skipif(not hasattr(os, "posix_spawn"), reason="the early start needs posix_spawn")

# Runs ortfix's entry point, counting the probe's starts: os.posix_spawn (the early start) and fork_exec (Popen's).
_COUNTING = """
import _posixsubprocess
import atexit
import os
import sys

counts = {"early": 0, "popen": 0}
fork_exec, posix_spawn = _posixsubprocess.fork_exec, os.posix_spawn


def popen(*args):
    counts["popen"] += 1
    return fork_exec(*args)


def spawned(*args, **kwargs):
    counts["early"] += 1
    return posix_spawn(*args, **kwargs)


_posixsubprocess.fork_exec, os.posix_spawn = popen, spawned
from ortfix.__main__ import entry
sys.argv = ["ortfix", *sys.argv[1:]]
atexit.register(lambda: sys.stderr.write("\\nstarts: %d %d %d\\n" % (counts["early"], counts["popen"],
                                                                     "subprocess" in sys.modules)))
entry()
"""


def _env(cache: Path, **env: str) -> dict[str, str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "ORTFIX_NO_PREFETCH")}
    full_env.update(ORTFIX_CACHE_DIR=str(cache), **env)
    return full_env


def _counted(code: int, out: str, err: str) -> tuple[int, str, str, tuple[int, int, int]]:
    """(exit code, stdout, stderr without the count, (early starts, Popen starts, whether `subprocess` was
    imported))."""
    stderr, _, counted = err.rpartition("\nstarts: ")
    early_starts, popen_starts, imported = (int(n) for n in counted.split())
    return code, out, stderr, (early_starts, popen_starts, imported)


def _check(args: list[str], cache: Path, **env: str) -> tuple[int, str, str, tuple[int, int, int]]:
    """`_counted` of `ortfix check ARGS`."""
    proc = subprocess.run([sys.executable, "-c", _COUNTING, "check", *args], capture_output=True, text=True,
                          cwd=REPO, env=_env(cache, **env), timeout=120, check=False)
    return _counted(proc.returncode, proc.stdout, proc.stderr)


def _target(tmp_path: Path, script: str) -> Path:
    """An environment folder whose bin/python is this shell script."""
    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n" + script)
    python.chmod(0o755)
    return python


@pytest.fixture(params=[[], ["--fresh"]], ids=["full", "fresh"])
def fresh(request: pytest.FixtureRequest) -> list[str]:
    """A check that is not replayed: the first of its kind (kept for a replay), or a `--fresh` one (kept for none)."""
    given: list[str] = request.param
    return given


def _same_as_the_normal_path(args: list[str], tmp_path: Path, **env: str) -> tuple[int, str, str]:
    """Run `check ARGS` with an empty cache folder (no probe copy there yet: the normal path starts the probe and
    writes the copy), then again (the early start): both end alike; the second did start the probe early."""
    cache = tmp_path / "cache"
    code, out, err, starts = _check(args, cache, **env)
    assert starts[0] == 0, err
    again = _check(args, cache, **env)
    assert again[:3] == (code, out, err)
    assert again[3][0] == 1, again[2]  # tried early: the copy was there, the path a plain one
    return code, out, err


def test_a_target_that_exits_non_zero(tmp_path: Path, fresh: list[str]) -> None:
    python = _target(tmp_path, "echo broken >&2\nexit 3\n")
    code, _out, err = _same_as_the_normal_path([*fresh, "--python", str(python)], tmp_path)
    assert code == 2 and "probe exited 3: broken" in err


def test_a_target_that_prints_garbage(tmp_path: Path, fresh: list[str]) -> None:
    python = _target(tmp_path, "echo 'not json'\n")
    code, _out, err = _same_as_the_normal_path([*fresh, "--python", str(python.parent.parent)], tmp_path)
    assert code == 2 and "no JSON from the probe" in err


def test_a_target_that_is_killed(tmp_path: Path, fresh: list[str]) -> None:
    python = _target(tmp_path, "kill -9 $$\n")
    code, _out, err = _same_as_the_normal_path([*fresh, "--python", str(python)], tmp_path)
    assert code == 2 and "probe exited -9" in err


def test_a_target_that_is_not_executable(tmp_path: Path, fresh: list[str]) -> None:
    python = _target(tmp_path, "exit 0\n")
    python.chmod(0o644)
    code, _out, err = _same_as_the_normal_path([*fresh, "--python", str(python)], tmp_path)
    assert code == 2 and "cannot be started" in err


def test_a_target_that_is_not_a_program(tmp_path: Path, fresh: list[str]) -> None:
    python = _target(tmp_path, "")
    python.write_bytes(b"\x7fELF not really\n")
    code, _out, err = _same_as_the_normal_path([*fresh, "--python", str(python)], tmp_path)
    assert code == 2 and "cannot be started" in err


def test_a_target_that_does_not_exist_or_is_a_broken_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a plain case: nothing starts early, and the normal path says what is wrong."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(cache))
    probe_argv(sys.executable)  # the probe's copy is in the cache folder from here on
    missing = tmp_path / "missing" / "python"
    link = tmp_path / "link" / "python"
    link.parent.mkdir()
    link.symlink_to(tmp_path / "nowhere")
    for python, said in ((missing, "no such file"), (link, "no such file")):
        code, _out, err, starts = _check(["--python", str(python)], cache)
        assert code == 2 and said in err and starts[:2] == (0, 0), err


def test_a_target_that_hangs_is_stopped_with_what_it_started(tmp_path: Path, fresh: list[str]) -> None:
    pids = tmp_path / "pids"
    python = _target(tmp_path, f"sleep 60 &\necho $! >> {pids}\nwait\n")
    _stopped_at_the_limit(_same_as_the_normal_path([*fresh, "--python", str(python)], tmp_path,
                                                   ORTFIX_CHILD_TIMEOUT="1"), pids)


def test_a_target_that_closes_its_output_and_hangs_is_stopped(tmp_path: Path, fresh: list[str]) -> None:
    """Its output at its end, the child still running: waiting for its end keeps to the time limit too."""
    pids = tmp_path / "pids"
    python = _target(tmp_path, f"echo $$ >> {pids}\nexec >&- 2>&-\nsleep 60\n")
    _stopped_at_the_limit(_same_as_the_normal_path([*fresh, "--python", str(python)], tmp_path,
                                                   ORTFIX_CHILD_TIMEOUT="1"), pids)


def _stopped_at_the_limit(ended: tuple[int, str, str], pids: Path) -> None:
    """The check said the probe ran past its limit, and no process the probe started (one per path, each run
    appending its pid to `pids`) is still running."""
    code, _out, err = ended
    assert code == 2 and "did not finish within 1 s" in err
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == 2
    time.sleep(0.2)
    assert not [pid for pid in started if _running(pid)]


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_an_early_probe_nobody_takes_over_is_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pids = tmp_path / "pids"
    python = _target(tmp_path, f"sleep 60 &\necho $! >> {pids}\nwait\n")
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(tmp_path / "cache"))
    probe_argv(python)  # writes the probe's copy into the cache folder
    early.spawn((str(python),))
    started = early.take()
    assert started is not None
    early._started = started  # as spawn left it, for drop to find
    deadline = time.monotonic() + 30
    while not (pids.exists() and pids.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.05)  # the file is made by `>>` before `echo` writes the pid into it
    early.drop()
    assert early.take() is None
    time.sleep(0.2)
    assert not _running(started.pid) and not _running(int(pids.read_text()))


@pytest.mark.parametrize("form", ["{env}", "{env}/", "{env}//bin/./python", "{env}/bin/python", "./env/bin/python",
                                  "env", "env/../env/bin/python", "{env}/bin/python3"])
def test_the_early_target_is_the_one_choose_picks(tmp_path: Path, form: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    python = _target(tmp_path, "exit 0\n")
    (python.parent / "python3").symlink_to("python")
    monkeypatch.chdir(tmp_path)
    given = form.format(env=python.parent.parent)
    guessed = early.plain_target(given)
    if form.endswith("python3"):  # choose.canonical's case: left to the normal path
        assert guessed is None
    else:
        assert guessed == str(choose_target(given).python)


def test_an_activated_environment_is_the_one_choose_picks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = _target(tmp_path, "exit 0\n")
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.setenv("VIRTUAL_ENV", str(python.parent.parent) + "//")
    assert early.plain_target(None) == str(choose_target(None).python)
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "gone"))
    assert early.plain_target(None) is None


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths; on Windows pathform asks pathlib itself")
@pytest.mark.parametrize("path", ["/a/b", "//a/./b/", "///a//b", "a/./b/../c", ".", "./", "", "/", "//", "x/", ".."])
def test_pathform_writes_paths_as_pathlib_does(path: str) -> None:
    """target/choose.py's str paths (system/pathform.py) read as its Path did: what every command prints first."""
    assert pathform.form(path) == str(Path(path))
    assert pathform.absolute(path) == str(Path(path).absolute())
    assert pathform.parent(pathform.form(path)) == str(Path(path).parent)
    assert pathform.name(path) == Path(path).name


def _outcome(ask: Callable[[Any], bool], path: str | Path) -> object:
    try:
        return ask(path)
    except OSError as exc:
        return type(exc), exc.errno


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths; on Windows pathform asks pathlib itself")
def test_pathform_answers_and_raises_as_pathlib_does(tmp_path: Path) -> None:
    """exists/is_dir/is_file: False where Path says a path is not there (missing, a broken link, a file taken for a
    folder, a NUL byte), the same OSError where Path raises one (a name too long): `--python` says so, not "no such
    file"."""
    (tmp_path / "file").write_text("")
    (tmp_path / "broken").symlink_to(tmp_path / "gone")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    paths = [tmp_path, tmp_path / "file", tmp_path / "gone", tmp_path / "broken", tmp_path / "file" / "x",
             tmp_path / "loop", tmp_path / ("x" * 300), tmp_path / "a\0b"]
    for path in paths:
        for mine, theirs in ((pathform.exists, Path.exists), (pathform.is_dir, Path.is_dir),
                             (pathform.is_file, Path.is_file)):
            assert _outcome(mine, str(path)) == _outcome(theirs, path), (path, mine)
    assert _outcome(pathform.exists, str(tmp_path / ("x" * 300))) == (OSError, errno.ENAMETOOLONG)


def test_a_replay_waits_for_the_early_probe_as_for_any_other(tmp_path: Path) -> None:
    """A replay reads the early probe's answer without `subprocess` (childtime.collect): a target that turns out to fail
    there (its exit status, garbage, a signal, a hang past the time limit) ends as when the probe is started the
    normal way (ORTFIX_NO_PREFETCH=1, no early start), the hung one with its whole process group stopped."""
    mode, pids = tmp_path / "mode", tmp_path / "pids"
    python = _target(tmp_path, f"""case "$(cat {mode} 2>/dev/null)" in
  exit) echo broken >&2; exit 3;;
  garbage) echo 'not json';;
  killed) kill -9 $$;;
  hang) sleep 60 & echo $! >> {pids}; wait;;
  *) exec {sys.executable} "$@";;
esac
""")
    time.sleep(SETTLE_S)  # a check is kept only once what it looked at has settled
    cache, args, limit = tmp_path / "cache", ["--python", str(python)], {"ORTFIX_CHILD_TIMEOUT": "3"}
    first = _check(args, cache, **limit)
    assert first[0] in (0, 1) and list((cache / "checks").glob("*.json")), first[2]
    assert _check(args, cache, **limit)[:3] == first[:3]  # replayed
    for failure, said in (("exit", "probe exited 3: broken"), ("garbage", "no JSON from the probe"),
                          ("killed", "probe exited -9"), ("hang", "did not finish within 3 s")):
        mode.write_text(failure)
        code, out, err, starts = _check(args, cache, **limit)
        assert starts[0] == 1 and code == 2 and said in err, err
        assert _check(args, cache, ORTFIX_NO_PREFETCH="1", **limit)[:3] == (code, out, err)
    time.sleep(0.2)
    assert not [pid for pid in (int(line) for line in pids.read_text().split()) if _running(pid)]


def test_a_fresh_check_waits_for_the_early_probe_without_subprocess(tmp_path: Path) -> None:
    """A check that starts no child but the probe started early waits for it without importing `subprocess` (~20M
    instructions with `selectors`, `threading`, `signal` and `locale`), and says what the normal path says."""
    python = _target(tmp_path, f'exec {sys.executable} "$@"\n')
    cache, args = tmp_path / "cache", ["--fresh", "--python", str(python)]
    normal = _check(args, cache, ORTFIX_NO_PREFETCH="1")
    assert normal[0] in (0, 1), normal[2]
    code, out, err, (early_starts, popen_starts, imported) = _check(args, cache)
    assert (code, out, err) == normal[:3] and early_starts == 1
    if popen_starts == 0:  # no other child (a machine with an NVIDIA driver asks it in one)
        assert not imported


def test_an_interrupted_wait_for_the_early_probe_stops_it(tmp_path: Path, fresh: list[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while ortfix waits for the probe it started early: ortfix says so and exits 130, as when the normal
    path started it, and the probe's whole process group is ended."""
    pids = tmp_path / "pids"
    python = _target(tmp_path, f"sleep 60 &\necho $! >> {pids}\nwait\n")
    cache = tmp_path / "cache"
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(cache))
    probe_argv(python)  # the probe's copy is in the cache folder: the next check starts it early
    said = [_interrupted([*fresh, "--python", str(python)], cache, pids, **given)
            for given in ({}, {"ORTFIX_NO_PREFETCH": "1"})]
    assert said[0][:3] == said[1][:3] and said[0][0] == 130 and "interrupted" in said[0][2], said
    assert said[0][3][0] == 1 and said[1][3][0] == 0
    time.sleep(0.2)
    assert not [pid for pid in (int(line) for line in pids.read_text().split()) if _running(pid)]


def _interrupted(args: list[str], cache: Path, pids: Path, **env: str) -> tuple[int, str, str, tuple[int, int, int]]:
    """`_counted` of `ortfix check ARGS` sent SIGINT (as Ctrl-C sends it) once its probe has run for a second."""
    seen = len(pids.read_text().split()) if pids.exists() else 0
    proc = subprocess.Popen([sys.executable, "-c", _COUNTING, "check", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=_env(cache, **env),
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while (not pids.exists() or len(pids.read_text().split()) == seen) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.0)  # ortfix is waiting for it by now
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return _counted(proc.returncode, out, err)
