"""Which environment a command works on when --python is not given, and how every command says so.

`--python`, else VIRTUAL_ENV, else CONDA_PREFIX, else the first `python3` (then `python`) on PATH as a shell finds
it, else one line saying to pass --python (exit 2). Never the interpreter ortfix happens to run in: for a pipx
install that is ortfix's own venv, and `plan`/`apply` there would install gigabytes into it. ortfix's own
environment found on PATH is refused by `plan` and `apply` unless named (`check` looks at it, and says so).

Everything here runs the real `ortfix` in a subprocess with a controlled environment (no VIRTUAL_ENV or
CONDA_PREFIX unless the test sets it, a PATH made by the test) against real venvs.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from clitools import REPO
from support.fixtures import make_venv, pip_install
from txtools import one_line_error

OWN_PREFIX = Path(sys.prefix)  # the environment `python -m ortfix` runs in, below: ortfix's own
BUILTIN_MODEL = REPO / "src" / "ortfix" / "verify" / "models" / "verify_conv.onnx"


# The working folder of every run: outside any project (the repository has a pyproject.toml and, in CI, a .venv,
# which a run from there would take as the project's environment before PATH).
NO_PROJECT = Path(tempfile.mkdtemp(prefix="ortfix-no-project-"))


def run(*args: str, path: str, extra: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ortfix, as a user with this PATH and no activated environment runs it, outside any project."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PATH")}
    env["PATH"] = path
    env.update(extra or {})
    return subprocess.run([sys.executable, "-m", "ortfix", *args], capture_output=True, text=True, env=env,
                          cwd=NO_PROJECT, stdin=subprocess.DEVNULL, timeout=300, check=False)


def first_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.stdout, (proc.returncode, proc.stderr[-2000:])
    return proc.stdout.splitlines()[0]


@pytest.fixture(scope="module")
def gpu_venv(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """onnxruntime-gpu with its NVIDIA wheels (libraries not findable yet: the plan writes a preload hook)."""
    python = make_venv(tmp_path_factory.mktemp("default") / "gpu venv")
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    return python.parent.parent


@pytest.fixture(scope="module")
def other_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("default") / "other venv").parent.parent


def system_path() -> str:
    """The folders a PATH needs besides the test's own (ldconfig and friends), without any venv of this session."""
    return os.pathsep.join(d for d in ("/usr/bin", "/bin") if os.path.isdir(d))


def line_for(venv: Path, chosen_by: str) -> str:
    version = ".".join(str(n) for n in sys.version_info[:3])
    return f"target {venv / 'bin' / 'python'} (Python {version}, venv at {venv}), from {chosen_by}"


# ---------------------------------------------------------------------------------------------------------------------
# how the target is chosen
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "click"])
def test_python3_on_path_is_the_default(gpu_venv: Path, fast: bool) -> None:
    extra = {} if fast else {"ORTFIX_NO_FASTPATH": "1"}
    path = f"{gpu_venv / 'bin'}{os.pathsep}{system_path()}"
    proc = run("check", path=path, extra=extra)
    assert proc.returncode == 1, proc.stderr  # the libraries are not findable yet
    # found as python3; named as bin/python, the name every way of choosing a venv leads to
    assert first_line(proc) == line_for(gpu_venv, "python3 on PATH")
    doc = json.loads(run("check", "--json", path=path, extra=extra).stdout)
    assert doc["interpreter"] == {"python": str(gpu_venv / "bin" / "python"),
                                  "python_version": ".".join(str(n) for n in sys.version_info[:3]),
                                  "environment": "venv", "prefix": str(gpu_venv), "chosen_by": "python3 on PATH",
                                  "ortfix_own_environment": False}


@pytest.mark.slow
def test_fast_and_click_paths_name_the_target_alike(gpu_venv: Path) -> None:
    path = f"{gpu_venv / 'bin'}{os.pathsep}{system_path()}"
    for args in (["check"], ["check", "--json"], ["check", "--python", str(gpu_venv)]):
        fast = run(*args, path=path)
        slow = run(*args, path=path, extra={"ORTFIX_NO_FASTPATH": "1"})
        diff = "\n".join(difflib.unified_diff(fast.stdout.splitlines(), slow.stdout.splitlines(), lineterm=""))
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr), (args, diff)


@pytest.mark.slow
def test_a_replayed_check_says_how_its_target_was_chosen(gpu_venv: Path, tmp_path: Path) -> None:
    """`check` replays an identical earlier check; the same interpreter chosen another way is another check (its
    first line differs), never the replay of the first."""
    path = f"{gpu_venv / 'bin'}{os.pathsep}{system_path()}"
    cache = {"ORTFIX_CACHE_DIR": str(tmp_path / "cache")}
    time.sleep(2.1)  # what a check depends on must be settled before its result is kept (speed.replay.RACY_MARGIN_NS)
    for _ in range(2):  # the second of each is a replay
        for args, chosen_by in ((["check"], "python3 on PATH"), (["check", "--python", str(gpu_venv)], "--python"),
                                (["check"], "python3 on PATH")):
            assert first_line(run(*args, path=path, extra=cache)) == line_for(gpu_venv, chosen_by), args
    assert list((tmp_path / "cache" / "checks").glob("*.json"))  # results were kept, and replayed


@pytest.mark.slow
def test_python_is_taken_where_there_is_no_python3(tmp_path: Path) -> None:
    venv = make_venv(tmp_path / "only python").parent.parent
    real = (venv / "bin" / "python").resolve()
    for name in os.listdir(venv / "bin"):
        if name.startswith("python"):
            (venv / "bin" / name).unlink()
    (venv / "bin" / "python").symlink_to(real)
    proc = run("check", path=f"{venv / 'bin'}{os.pathsep}{tmp_path / 'nothing here'}")
    assert proc.returncode in (0, 1), proc.stderr
    assert first_line(proc) == line_for(venv, "python on PATH")


@pytest.mark.slow
def test_what_a_shell_would_not_run_is_skipped(tmp_path: Path, other_venv: Path) -> None:
    """A python3 that is not executable, a folder named python3 and a broken link come earlier on PATH: a shell
    passes over them, and so does ortfix."""
    not_executable = tmp_path / "a"
    not_executable.mkdir()
    (not_executable / "python3").write_text("#!/bin/sh\necho not a python\n")
    os.chmod(not_executable / "python3", 0o644)
    folder = tmp_path / "b"
    (folder / "python3").mkdir(parents=True)
    broken = tmp_path / "c"
    broken.mkdir()
    (broken / "python3").symlink_to(tmp_path / "gone")
    path = os.pathsep.join([str(not_executable), str(folder), str(broken), str(other_venv / "bin"), system_path()])
    assert first_line(run("check", path=path)) == line_for(other_venv, "python3 on PATH")


@pytest.mark.slow
def test_an_activated_environment_wins_over_path(gpu_venv: Path, other_venv: Path) -> None:
    path = f"{other_venv / 'bin'}{os.pathsep}{system_path()}"
    assert first_line(run("check", path=path, extra={"VIRTUAL_ENV": str(gpu_venv)})) == line_for(gpu_venv,
                                                                                                 "VIRTUAL_ENV")
    assert first_line(run("check", path=path, extra={"CONDA_PREFIX": str(gpu_venv)})) == line_for(gpu_venv,
                                                                                                  "CONDA_PREFIX")
    given = run("check", "--python", str(gpu_venv / "bin" / "python3"), path=path,
                extra={"VIRTUAL_ENV": str(other_venv)})
    assert first_line(given) == line_for(gpu_venv, "--python")


@pytest.mark.parametrize("args", [
    ["check"], ["check", "--json"], ["plan"], ["plan", "-o", "{out}"], ["apply", "--dry-run"],
    ["apply", "--yes"], ["rollback", "--yes"], ["history"], ["history", "show", "20251122T193012345Z-a1b2"],
    ["history", "prune", "--keep", "1"], ["verify"], ["tune", str(BUILTIN_MODEL)],
], ids=lambda a: " ".join(a[:2]))
def test_no_python_on_path_is_one_line(tmp_path: Path, args: list[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for extra in ({}, {"ORTFIX_NO_FASTPATH": "1"}):
        proc = run(*(a.format(out=tmp_path / "plan.json") for a in args), path=str(empty), extra=extra)
        one_line_error(proc, "no python3 or python on PATH", "pass --python")
        if "--json" in args:  # the error envelope on stdout, the same on both paths
            doc = json.loads(proc.stdout)
            assert (doc["schema"], doc["command"], doc["exit_code"]) == ("ortfix.error/1", args[0], 2)
            assert "no python3 or python on PATH" in doc["error"]["message"]
        else:
            assert proc.stdout == ""
    assert not (tmp_path / "plan.json").exists()


def test_explain_without_a_target_still_explains(tmp_path: Path) -> None:
    proc = run("explain", "libcudnn.so.9: cannot open shared object file", path=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert not proc.stdout.startswith("target ")
    assert "could not check this machine: no python3 or python on PATH" in proc.stdout


# ---------------------------------------------------------------------------------------------------------------------
# every command that works on an environment names it first
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_command_names_its_target_first(gpu_venv: Path, tmp_path: Path) -> None:
    path = f"{gpu_venv / 'bin'}{os.pathsep}{system_path()}"
    expected = line_for(gpu_venv, "python3 on PATH")
    plan_file = tmp_path / "plan.json"
    for args in (["check"], ["plan"], ["plan", "-o", str(plan_file)], ["apply", "--dry-run"],
                 ["apply", str(plan_file), "--dry-run"], ["history"], ["verify", "--timeout", "60"],
                 ["tune", str(BUILTIN_MODEL), "--runs", "1", "--timeout", "60", "--no-progress"],
                 ["explain", "libcudnn.so.9: cannot open shared object file"]):
        proc = run(*args, path=path)
        assert "Traceback" not in proc.stderr, (args, proc.stderr[-3000:])
        assert first_line(proc) == expected, (args, proc.stdout[:500], proc.stderr[-1000:])
        assert proc.stdout.count(expected) == 1, args
    # rollback names the target before it finds there is nothing to undo
    proc = run("rollback", "--yes", path=path)
    assert first_line(proc) == expected
    one_line_error(proc, "no ortfix transaction")


@pytest.mark.slow
def test_json_documents_carry_the_target(gpu_venv: Path, tmp_path: Path) -> None:
    path = f"{gpu_venv / 'bin'}{os.pathsep}{system_path()}"
    plan_file = tmp_path / "plan.json"
    docs = {
        "check": json.loads(run("check", "--json", path=path).stdout),
        "plan": json.loads(run("plan", "--json", "-o", str(plan_file), path=path).stdout),
        "saved plan": json.loads(plan_file.read_text()),
        "apply": json.loads(run("apply", str(plan_file), "--dry-run", "--json", path=path).stdout),
        "history": json.loads(run("history", "--json", path=path).stdout),
        "prune": json.loads(run("history", "prune", "--keep", "1", "--json", path=path).stdout),
        "verify": json.loads(run("verify", "--json", "--timeout", "60", path=path).stdout),
        "explain": json.loads(run("explain", "--json", "libcudnn.so.9: cannot open shared object file",
                                  path=path).stdout),
    }
    for name, doc in docs.items():
        assert doc["interpreter"]["prefix"] == str(gpu_venv), name
        assert doc["interpreter"]["chosen_by"] == "python3 on PATH", name
        assert doc["interpreter"]["python"] == str(gpu_venv / "bin" / "python"), name


@pytest.mark.slow
def test_a_plan_saved_with_its_target_is_applied(gpu_venv: Path, tmp_path: Path) -> None:
    """`plan --json > plan.json` and `plan -o plan.json` write the same document, target included; apply takes both
    (and never takes the target from it: --python names it)."""
    path = f"{gpu_venv / 'bin'}{os.pathsep}{system_path()}"
    piped = tmp_path / "piped.json"
    piped.write_text(run("plan", "--json", path=path).stdout)
    proc = run("apply", str(piped), "--python", str(gpu_venv), "--dry-run", path=path)
    assert proc.returncode == 1 and "Dry run: nothing was changed" in proc.stdout, proc.stderr
    doc = json.loads(piped.read_text())
    doc["interpreter"]["ortfix_own_environment"] = "yes"
    piped.write_text(json.dumps(doc))
    one_line_error(run("apply", str(piped), "--python", str(gpu_venv), "--dry-run", path=path),
                   "not a valid ortfix plan", "ortfix_own_environment")


# ---------------------------------------------------------------------------------------------------------------------
# ortfix's own environment
# ---------------------------------------------------------------------------------------------------------------------


def own_path() -> str:
    """A PATH whose python3 is the one ortfix runs in (a venv with ortfix installed, its bin/ on PATH)."""
    return f"{Path(sys.executable).parent}{os.pathsep}{system_path()}"


def test_own_environment_found_on_path_is_checked_and_said(tmp_path: Path) -> None:
    assert (Path(sys.executable).parent / "python3").exists()
    proc = run("check", "--fresh", path=own_path())
    assert proc.returncode in (0, 1), proc.stderr
    assert first_line(proc).endswith("from python3 on PATH; ortfix's own environment"), first_line(proc)
    assert f"note: {OWN_PREFIX} is the environment ortfix itself runs in, found as python3 on PATH" in proc.stdout


@pytest.mark.parametrize("args", [["plan"], ["plan", "-o", "{out}"], ["apply", "--dry-run"],
                                  ["apply", "--yes"]], ids=lambda a: " ".join(a))
def test_own_environment_found_on_path_is_not_planned_for(args: list[str], tmp_path: Path) -> None:
    before = sorted(os.listdir(OWN_PREFIX))
    # were the refusal ever gone, pip would find nothing to install: the environment running the tests stays as is
    (tmp_path / "no wheels").mkdir()
    out = tmp_path / "own-plan.json"
    proc = run(*(a.format(out=out) for a in args), path=own_path(),
               extra={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "no wheels")})
    line = one_line_error(proc, "the environment ortfix itself runs in", "--python")
    assert str(OWN_PREFIX) in line
    assert proc.stdout == ""
    assert sorted(os.listdir(OWN_PREFIX)) == before
    assert not out.exists()


def test_own_environment_is_planned_for_when_named(tmp_path: Path) -> None:
    """Named with --python, or activated: the user chose it. `plan` changes nothing, so it shows this safely."""
    for args, extra, chosen_by in (
            (["--python", str(OWN_PREFIX)], {}, "--python"),
            ([], {"VIRTUAL_ENV": str(OWN_PREFIX)}, "VIRTUAL_ENV")):
        proc = run("plan", *args, path=own_path(), extra=extra)
        assert proc.returncode in (0, 1), proc.stderr
        assert first_line(proc).endswith(f"from {chosen_by}; ortfix's own environment"), first_line(proc)


@pytest.mark.slow
def test_another_environment_on_path_is_planned_for(other_venv: Path) -> None:
    proc = run("plan", path=f"{other_venv / 'bin'}{os.pathsep}{system_path()}")
    assert proc.returncode == 1, proc.stderr  # no onnxruntime: the plan installs it
    assert first_line(proc) == line_for(other_venv, "python3 on PATH")
    assert "install onnxruntime-gpu" in proc.stdout


# ---------------------------------------------------------------------------------------------------------------------
# the lookup itself, against real files
# ---------------------------------------------------------------------------------------------------------------------


def test_find_on_path_follows_the_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ortfix.target.choose import find_on_path

    here = tmp_path / "cwd"
    here.mkdir()
    exe = here / "python3"
    shutil.copy(sys.executable, exe)
    monkeypatch.chdir(here)
    # an empty entry is the working directory, as in a shell
    assert find_on_path(f"{tmp_path / 'none'}{os.pathsep}") == (exe, "python3")
    assert find_on_path(str(tmp_path / "none")) is None
    # python3 anywhere before python anywhere
    other = tmp_path / "other"
    other.mkdir()
    (other / "python").symlink_to(sys.executable)
    assert find_on_path(f"{other}{os.pathsep}{here}") == (exe, "python3")
    exe.unlink()
    assert find_on_path(f"{other}{os.pathsep}{here}") == (other / "python", "python")
