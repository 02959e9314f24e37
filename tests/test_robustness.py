"""Hostile or broken input never hangs ortfix, never shows a traceback, and never leaves a process behind.

- Every child runs in a process group of its own, with a time limit; at the limit the whole group is killed (a fake
  interpreter that leaves a background process holding the probe's pipes used to hang `check` forever).
- A probe report with missing fields or fields of the wrong type is a one-line error naming the field.
- --driver, --compute-capability, --ort-version and --python "" are usage errors, on the fast path and click's alike.
- An unexpected exception is one line (exit 2); --debug or ORTFIX_DEBUG=1 adds the traceback.
- The `Undo:` line an apply prints can be pasted into a shell: the path is quoted.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clitools import REPO, assert_one_line_error, run_ortfix
from ortfix import subproc
from ortfix.errors import OrtfixError
from ortfix.target.choose import resolve_target
from support.fixtures import make_venv, pip_install

# ---------------------------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------------------------


def _marker() -> str:
    """A `sleep` argument no other process on the machine has: 1000.<random digits>."""
    return f"1000.{secrets.randbelow(10**9):09d}"


def _alive_with(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `sleep <marker>` (a zombie's command line is empty)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"sleep" in cmdline[0] and marker.encode() in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture()
def marker() -> Iterator[str]:
    token = _marker()
    yield token
    for pid in _alive_with(token):  # whatever the outcome, no sleeper outlives the test
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def _both(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
          ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The same command line through the click-free fast path and through click."""
    fast = run_ortfix(*args, env=env, timeout=timeout)
    slow = run_ortfix(*args, env={**(env or {}), "ORTFIX_NO_FASTPATH": "1"}, timeout=timeout)
    return fast, slow


# ---------------------------------------------------------------------------------------------------------------------
# B4: a fake interpreter whose background child holds the probe's pipes
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "plan"])
def test_interpreter_script_with_a_background_child_cannot_hang_ortfix(tmp_path: Path, marker: str,
                                                                       command: str) -> None:
    fake = _script(tmp_path / "python", f"""\
        sleep {marker} &
        echo $! > "{tmp_path}/background.pid"
        exec sleep {marker}
    """)
    started = time.monotonic()
    proc = run_ortfix(command, "--python", str(fake), env={"ORTFIX_CHILD_TIMEOUT": "2"}, timeout=45)
    elapsed = time.monotonic() - started
    line = assert_one_line_error(proc, "did not finish within 2 s")
    assert "python" in line
    assert elapsed < 30, elapsed
    assert (tmp_path / "background.pid").exists()  # the background child really was started
    deadline = time.monotonic() + 5  # SIGKILL is delivered at once; give the kernel a moment to tear them down
    while _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with(marker) == []


@pytest.mark.parametrize("script", ["sleep {m} & exec sleep {m}", "sleep {m} & echo started"],
                         ids=["child-still-running", "daemon-holds-output"])
def test_run_kills_the_whole_group_at_its_time_limit(marker: str, script: str) -> None:
    """The child runs on, or exits at once while what it left in the background keeps stdout open: either way the
    whole group is killed at the limit."""
    started = time.monotonic()
    with pytest.raises(OrtfixError, match="did not finish within 1 s"):
        subproc.run(["sh", "-c", script.format(m=marker)], target_python=None, timeout=1)
    assert time.monotonic() - started < 10
    assert _alive_with(marker) == []


def test_start_runs_children_in_their_own_session_and_terminate_group_ends_them_all(marker: str) -> None:
    # SIGTERM is ignored by both sleepers (an ignored signal stays ignored across exec): SIGKILL must follow.
    proc = subproc.start(["sh", "-c", f"trap '' TERM; sleep {marker} & exec sleep {marker}"], target_python=None)
    try:
        assert os.getsid(proc.pid) == proc.pid and os.getpgid(proc.pid) == proc.pid
        assert os.getsid(proc.pid) != os.getsid(0)
        deadline = time.monotonic() + 10
        while len(_alive_with(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(_alive_with(marker)) == 2
        started = time.monotonic()
        assert subproc.terminate_group(proc, timeout=0.5) == -signal.SIGKILL
        assert time.monotonic() - started < 10
        assert proc.stdout is not None and proc.stdout.closed
        deadline = time.monotonic() + 5
        while _alive_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive_with(marker) == []
        assert subproc.terminate_group(proc) == -signal.SIGKILL  # again, on a process already gone: harmless
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_finish_of_a_started_child_is_limited_too(marker: str) -> None:
    proc = subproc.start(["sh", "-c", f"sleep {marker} & exec sleep {marker}"], target_python=None)
    with pytest.raises(OrtfixError, match="did not finish"):
        subproc.finish(proc, timeout=1)
    assert _alive_with(marker) == []


# ---------------------------------------------------------------------------------------------------------------------
# B5 (a): a probe report with missing fields or fields of the wrong type
# ---------------------------------------------------------------------------------------------------------------------


def _real_report() -> dict[str, Any]:
    from ortfix.target.choose import PROBE_SOURCE

    out = subprocess.run([sys.executable, "-c", Path(PROBE_SOURCE).read_text()], capture_output=True, text=True,
                         check=True).stdout
    doc: dict[str, Any] = json.loads(out)
    return doc


def _broken(path: str, value: Any) -> dict[str, Any]:
    """The real report of this interpreter with one field (a dotted path; list items by index) set, or removed
    where value is ...."""
    doc = _real_report()
    doc.setdefault("distributions", [])
    doc["distributions"].append({"name": "onnxruntime-gpu", "normalized": "onnxruntime-gpu", "version": "1.22.0",
                                 "location": "/x", "dist_info": "/x/onnxruntime_gpu-1.22.0.dist-info",
                                 "requires": [], "installer": "pip", "files": []})
    keys = path.split(".")
    obj: Any = doc
    for key in keys[:-1]:
        obj = obj[int(key)] if isinstance(obj, list) else obj[key]
    last: Any = int(keys[-1]) if isinstance(obj, list) else keys[-1]
    if value is ...:
        del obj[last]
    else:
        obj[last] = value
    return doc


@pytest.mark.parametrize(("report", "fragment"), [
    ({"probe_schema": 2}, "field python is missing"),
    (lambda: _broken("python.executable", ...), "field python.executable is missing"),
    (lambda: _broken("python.version", 3), "field python.version is not a str (got int)"),
    (lambda: _broken("python.version", "banana"), "field python.version is not a Python version"),
    (lambda: _broken("env", []), "field env is not an object (got list)"),
    (lambda: _broken("env.kind", "docker"), "field env.kind is not one of venv, conda, system"),
    (lambda: _broken("sys_path", "/usr/lib"), "field sys_path is not a list (got str)"),
    (lambda: _broken("sys_path", [1]), "field sys_path[0] is not a string"),
    (lambda: _broken("environ", {"LD_LIBRARY_PATH": None}), "field environ.LD_LIBRARY_PATH is not a string"),
    (lambda: _broken("distribution_count", "many"), "field distribution_count is not an int"),
    (lambda: _broken("distributions.-1.name", ...), "is missing"),
    (lambda: _broken("distributions.-1.files", [["a", "b"]]), "is not a RECORD row"),
    (lambda: _broken("distributions.-1.files", ["a", 7]), ".files[1] is not a RECORD row"),
    (lambda: _broken("torch", {"dir": "/t"}), "field torch.lib_dir is missing"),
], ids=["schema-only", "no-executable", "version-int", "version-text", "env-list", "env-kind", "sys-path-str",
        "sys-path-int", "environ-null", "count-str", "dist-no-name", "record-row", "record-row-int",
        "torch-no-lib-dir"])
def test_incomplete_probe_report_is_one_line(tmp_path: Path, report: Any, fragment: str) -> None:
    doc = report() if callable(report) else report
    (tmp_path / "report.json").write_text(json.dumps(doc))
    fake = _script(tmp_path / "python", f'cat "{tmp_path}/report.json"\n')
    for proc in _both("check", "--python", str(fake)):
        line = assert_one_line_error(proc, "returned an incomplete report", fragment)
        assert str(fake) in line


def test_probe_report_of_another_schema_is_one_line(tmp_path: Path) -> None:
    """A report of schema 1 (every RECORD row whole) or of a schema to come is refused as a whole, not read as
    today's: one line, exit 2."""
    for schema in (1, 3, "2", None):
        doc = _real_report()
        doc["probe_schema"] = schema
        (tmp_path / "report.json").write_text(json.dumps(doc))
        fake = _script(tmp_path / "python", f'cat "{tmp_path}/report.json"\n')
        assert_one_line_error(run_ortfix("check", "--python", str(fake)), "the probe answered in an unknown format")


def test_probe_json_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("[" * 100_000 + "]" * 100_000)
    fake = _script(tmp_path / "python", f'cat "{tmp_path}/report.json"\n')
    assert_one_line_error(run_ortfix("check", "--python", str(fake)), "no JSON from the probe")


# ---------------------------------------------------------------------------------------------------------------------
# B5 (b, c): --driver and --compute-capability; --ort-version; --timeout
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "fragment"), [
    (["--driver", "banana"], "--driver 'banana': not an NVIDIA driver version"),
    (["--driver=550"], "--driver '550'"),
    (["--driver", "550.54.14.1.2"], "--driver '550.54.14.1.2'"),
    (["--driver", "550..54"], "--driver '550..54'"),
    (["--driver", "\uff15\uff15\uff10.\uff15\uff14"], "not an NVIDIA driver version"),  # full-width: isdigit()
    (["--driver", "550.54.14", "--compute-capability", "eight"], "--compute-capability 'eight'"),
    (["--compute-capability", "8"], "--compute-capability '8'"),
    (["--compute-capability", "8.6.1"], "--compute-capability '8.6.1'"),
    (["--compute-capability=².6"], "--compute-capability '².6'"),
], ids=["banana", "one-number", "five-numbers", "empty-number", "fullwidth", "cc-word", "cc-major", "cc-three",
        "cc-superscript"])
@pytest.mark.parametrize("command", ["check", "plan"])
def test_machine_options_are_validated(command: str, options: list[str], fragment: str) -> None:
    if command != "check":  # only `check` has a click-free path to compare with
        assert_one_line_error(run_ortfix(command, *options, "--python", sys.executable), fragment)
        return
    fast, slow = _both(command, *options, "--python", sys.executable)
    assert_one_line_error(fast, fragment)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)


def test_valid_machine_options_still_work() -> None:
    for proc in _both("check", "--python", sys.executable, "--driver", "550.54.14", "--compute-capability=8.6"):
        assert proc.returncode in (0, 1), proc.stderr
        assert proc.stderr == ""


def test_plan_ort_version_must_be_a_version() -> None:
    assert_one_line_error(run_ortfix("plan", "--ort-version", "banana"), "--ort-version 'banana'")


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_timeouts_must_be_finite(tmp_path: Path, value: str) -> None:
    assert_one_line_error(run_ortfix("verify", "--timeout", value), f"--timeout {value}")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    assert_one_line_error(run_ortfix("tune", str(model), "--timeout", value), f"--timeout {value}")


# ---------------------------------------------------------------------------------------------------------------------
# B7: --python "" (and other --python values that raised)
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["check", "--python", ""], ["check", "--python="], ["plan", "--python", ""], ["verify", "--python", ""],
    ["tune", "model.onnx", "--python", ""], ["apply", "--dry-run", "--python", ""], ["rollback", "--yes", "--python="],
    ["history", "--python", ""], ["history", "show", "X", "--python", ""],
    ["history", "prune", "--keep", "1", "--python", ""], ["explain", "libcudnn.so.9: cannot open", "--python", ""],
], ids=lambda a: " ".join(a))
def test_empty_python_is_a_usage_error(args: list[str]) -> None:
    assert_one_line_error(run_ortfix(*args), "--python '': an empty path")


def test_resolve_target_refuses_empty_but_none_means_not_given() -> None:
    with pytest.raises(OrtfixError, match="empty path"):
        resolve_target("")
    # not given: the python3 on PATH (here the venv the tests run in, named as its bin/python)
    assert resolve_target(None, environ={"PATH": str(Path(sys.executable).parent)}) == Path(sys.executable)


@pytest.mark.parametrize(("value", "fragment"), [
    ("~no-such-user-ortfix/bin/python", "home directory"),
    ("/tmp/" + "a" * 5000, "File name too long"),
])
def test_python_paths_that_raised(value: str, fragment: str) -> None:
    for proc in _both("check", "--python", value):
        assert_one_line_error(proc, fragment)


# ---------------------------------------------------------------------------------------------------------------------
# B5 (d): an unexpected exception is one line; --debug / ORTFIX_DEBUG=1 show the traceback
# ---------------------------------------------------------------------------------------------------------------------


def test_plan_file_nested_too_deep(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("[" * 100_000 + "]" * 100_000)
    args = ("apply", str(plan), "--dry-run", "--python", sys.executable)
    assert_one_line_error(run_ortfix(*args), "nested too deep")


def test_matrix_file_nested_too_deep_on_both_paths(tmp_path: Path) -> None:
    compat = tmp_path / "compat"
    compat.mkdir()
    for f in (REPO / "compat").glob("*.yaml"):
        (compat / f.name).write_bytes(f.read_bytes())
    (compat / "deep.yaml").write_text("[" * 50_000 + "]" * 50_000)
    env = {"ORTFIX_COMPAT_DIR": str(compat), "ORTFIX_NO_CACHE": "1"}
    args = ("check", "--python", sys.executable)
    fast, slow = _both(*args, env=env)
    assert (fast.returncode, fast.stderr) == (slow.returncode, slow.stderr)
    assert_one_line_error(fast, "deep.yaml", "nested too deep")


RAISE = """
import sys
from ortfix.errors import report_unexpected

def deeper(n):
    return deeper(n + 1)

try:
    deeper(0)
except RecursionError as exc:
    caught = exc
try:
    {{}}["missing"]
except KeyError as exc:
    other = exc
which = caught if sys.argv[1] == "recursion" else other
sys.exit(report_unexpected(which, debug=sys.argv[2] == "debug"))
"""


@pytest.mark.parametrize("kind", ["recursion", "keyerror"])
def test_report_unexpected_renders_a_real_exception(kind: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ORTFIX_DEBUG"}

    def run(*args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", RAISE.replace("{{}}", "{}"), *args], capture_output=True,
                              text=True, env={**env, **(extra or {})}, check=False)

    name = "RecursionError" if kind == "recursion" else "KeyError"
    line = assert_one_line_error(run(kind, "plain"), f"ortfix: error: unexpected {name}: ")
    assert line.endswith("(run again with --debug, or ORTFIX_DEBUG=1, for the traceback)")
    for debug in (run(kind, "debug"), run(kind, "plain", extra={"ORTFIX_DEBUG": "1"})):
        assert debug.returncode == 2
        assert "Traceback (most recent call last)" in debug.stderr and f"{name}" in debug.stderr
        assert debug.stderr.strip().splitlines()[-1].startswith(f"ortfix: error: unexpected {name}")
    assert "Traceback" not in run(kind, "plain", extra={"ORTFIX_DEBUG": "0"}).stderr


def test_debug_is_a_group_option() -> None:
    proc = run_ortfix("--help")
    assert proc.returncode == 0 and "--debug" in proc.stdout


# ---------------------------------------------------------------------------------------------------------------------
# B8: the Undo line can be pasted into a shell
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_undo_line_quotes_the_path(tmp_path: Path, wheelhouse: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    prefix = home / "v `touch TICK` $(touch PWNED) 'q' \"d\" \\b"
    python = make_venv(prefix)
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)  # needs only a preload hook
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    proc = subprocess.run([sys.executable, "-m", "ortfix", "apply", "--python", str(python), "--yes"],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, cwd=home, check=False)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    [undo] = [ln for ln in proc.stdout.splitlines() if ln.startswith("Undo: ")]
    pasted = undo[len("Undo: "):]
    assert shlex.split(pasted) == ["ortfix", "rollback", "--python", str(python)]

    # Paste it into a real shell, with `ortfix` a recorder of its arguments.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "args"
    _script(bin_dir / "ortfix", f'for a in "$@"; do printf "%s\\0" "$a"; done > "{record}"\n')
    subprocess.run(["sh", "-c", pasted], cwd=home, env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, check=True)
    assert record.read_bytes().split(b"\0")[:-1] == [b"rollback", b"--python", os.fsencode(python)]
    assert sorted(os.listdir(home)) == [prefix.name]  # neither TICK nor PWNED


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "click"])
def test_output_closed_by_its_reader_is_not_an_error(fast: bool) -> None:
    """`ortfix check | head -1`: the reader is gone before ortfix writes. Quiet, exit 1, as click does."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "ORTFIX_NO_FASTPATH")}
    if not fast:
        env["ORTFIX_NO_FASTPATH"] = "1"
    try:
        proc = subprocess.run([sys.executable, "-m", "ortfix", "check", "--python", sys.executable], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, env=env, check=False, timeout=120)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (1, "")


# ---------------------------------------------------------------------------------------------------------------------
# ending children from another thread; probes started early and never taken
# ---------------------------------------------------------------------------------------------------------------------


def test_a_child_timed_out_while_its_output_is_being_read_is_a_timeout(marker: str) -> None:
    """ortrun's time limit ends the child while a thread still reads its output: the pipes must not be closed under
    that reader, which reads on to end-of-file (closed under it, it lost what was still unread and, before `_drain`
    took the error, raised "I/O operation on closed file" in most runs).

    Deterministically: the reader is held inside `on_stage` (it runs on the reader thread) from the first line until
    the time limit has ended the child, so the line after it is still unread when the child is ended."""
    from ortfix.target import ortrun

    mark = ortrun.MARK + '{"stage": "import"}'

    def held(_doc: object) -> None:
        deadline = time.monotonic() + 15
        while not _alive_with(marker) and time.monotonic() < deadline:  # `exec sleep` has started...
            time.sleep(0.01)
        while _alive_with(marker) and time.monotonic() < deadline:  # ...and the time limit ended it
            time.sleep(0.01)
        time.sleep(0.2)  # what would close the pipes runs within microseconds of that

    script = f"echo '{mark}'; echo after-the-stage; exec sleep {marker}"
    outcome = ortrun.stream(["sh", "-c", script], subproc.child_env(), target_python=None, timeout=1.0,
                            on_stage=held)  # a limit the two lines are written within, however loaded the machine
    assert outcome.timed_out and outcome.returncode is None
    assert [dict(s) for s in outcome.stages] == [{"stage": "import"}]
    assert "after-the-stage" in outcome.log
    # And while the reader is busy in its reads: a child that floods its output (a race: it broke in 1 to 8 runs of
    # 10 before; 3 runs keep that check's cost low now that the deterministic case above exists).
    flood = f"yes {'line' * 200} | head -c 200000000; sleep {marker}"
    for _ in range(3):
        outcome = ortrun.stream(["sh", "-c", flood], subproc.child_env(), target_python=None, timeout=0.2)
        assert outcome.timed_out and outcome.returncode is None
    assert _alive_with(marker) == []


def test_a_child_that_ended_is_not_waited_for_while_what_it_left_holds_its_output(
        marker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child exits; a process it started keeps its stdout and stderr open (under wine: the desktop process the
    first user32 call of a prefix starts, which left `ortfix apply` waiting for ever in its load check). The run ends
    a grace period after the child, with the child's own stage line and exit status; what it left is ended."""
    from ortfix.target import ortrun

    monkeypatch.setenv("ORTFIX_CHILD_TIMEOUT", "1")  # the grace period, at most this
    mark = ortrun.MARK + '{"stage": "import"}'
    script = f"echo '{mark}'; (sleep {marker}) & exit 3"
    started = time.monotonic()
    outcome = ortrun.stream(["sh", "-c", script], subproc.child_env(), target_python=None, timeout=20)
    assert time.monotonic() - started < 15
    assert not outcome.timed_out and outcome.returncode == 3
    assert [dict(s) for s in outcome.stages] == [{"stage": "import"}]
    assert _alive_with(marker) == []


def test_what_on_stage_raises_reaches_the_caller_and_the_child_is_still_drained(marker: str) -> None:
    """`on_stage` runs on the thread reading the child's stdout: what it raises must not stop that thread (the
    child would block on a full pipe and the run end as a timeout) and must reach the caller when the run ends."""
    from ortfix.target import ortrun

    mark = ortrun.MARK + '{"stage": "import"}'
    script = f"echo '{mark}'; yes line | head -c 2000000; exit 0"

    def broken(_doc: object) -> None:
        raise BrokenPipeError("stderr went away")

    started = time.monotonic()
    with pytest.raises(BrokenPipeError, match="stderr went away"):
        ortrun.stream(["sh", "-c", script], subproc.child_env(), target_python=None, timeout=20, on_stage=broken)
    assert time.monotonic() - started < 15


def test_ending_a_group_does_not_wait_for_the_zombies_it_left(marker: str) -> None:
    """The child's leader dies first: the others of its group become orphans, reparented to the system's reaper.
    Under a container's PID 1 that reaps once a second or two (or never), their zombies kept `terminate_group`
    waiting its whole grace period (2 s of each of 10 timeouts in one test here), though a zombie holds nothing.
    A child process of the test is that reaper: it reaps nobody until the group has been ended."""
    code = textwrap.dedent(f"""
        import ctypes, os, sys, time
        from ortfix import subproc
        if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
            sys.exit("prctl: " + os.strerror(ctypes.get_errno()))
        proc = subproc.start(["sh", "-c", "sleep {marker} | sleep {marker}"], target_python=None)
        def members():
            stats = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    stats.append(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split())
                except OSError:
                    pass
            return [s for s in stats if s[2] == str(proc.pid)]
        while len(members()) < 3:  # sh and its two sleeps
            time.sleep(0.01)
        started = time.monotonic()
        subproc.terminate_group(proc, timeout=5)
        print(f"{{time.monotonic() - started:.2f}}")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 2.5
    assert _alive_with(marker) == []


def test_terminate_group_can_leave_the_pipes_to_their_reader(marker: str) -> None:
    """What makes the timeout above safe, deterministically: ended with close_pipes=False, the child's pipes stay
    open for the thread reading them, which then reads to end-of-file."""
    proc = subproc.start(["sh", "-c", f"echo before; sleep {marker}"], target_python=None)
    assert proc.stdout is not None and proc.stdout.readline() == "before\n"
    subproc.terminate_group(proc, timeout=0, close_pipes=False)
    assert not proc.stdout.closed and proc.stdout.read() == ""
    subproc.close_child_pipes(proc)
    assert proc.stdout.closed and _alive_with(marker) == []


def test_an_early_probe_is_ended_when_the_command_fails_before_using_it(tmp_path: Path, marker: str) -> None:
    """`check` starts the probe before it reads its options; a bad option ends the command first. The probe (here a
    fake interpreter that sleeps) must not be left running."""
    fake = _script(tmp_path / "python", f"exec sleep {marker}\n")
    proc = run_ortfix("check", "--python", str(fake), "--driver", "banana", timeout=45)
    assert_one_line_error(proc, "--driver")
    deadline = time.monotonic() + 5
    while _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with(marker) == []
