"""Bad input gets one clear line and exit code 2, never a traceback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from clitools import assert_one_line_error, run_ortfix


def test_python_that_does_not_exist(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("check", "--python", str(tmp_path / "nope")), "no such file")


def test_python_that_is_a_text_file(tmp_path: Path) -> None:
    f = tmp_path / "python"
    f.write_text("hello\n")
    f.chmod(0o755)
    assert_one_line_error(run_ortfix("check", "--python", str(f)), str(f))


def test_python_that_is_not_executable(tmp_path: Path) -> None:
    f = tmp_path / "python"
    f.write_text("#!/bin/sh\n")
    f.chmod(stat.S_IRUSR)
    proc = run_ortfix("check", "--python", str(f))
    if os.geteuid() == 0:
        # root may execute it regardless of the mode; it is still not an interpreter
        assert_one_line_error(proc)
    else:
        assert_one_line_error(proc, "permission denied")


def test_python_that_is_another_program(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("check", "--python", "/bin/true"), "/bin/true")


def test_folder_without_interpreter(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("plan", "--python", str(tmp_path)), "no bin/python")


def _in_a_removed_folder(folder: Path, *args: str,
                         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`ortfix ARGS` started from `folder` after it was removed (a shell left in a deleted folder)."""
    folder.mkdir()
    full_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    full_env.update(env or {})
    return subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(folder),
                           sys.executable, "-m", "ortfix", *args], capture_output=True, text=True, env=full_env,
                          timeout=120, check=False)


@pytest.mark.parametrize("args", [("check", "--python", sys.executable),
                                  ("check", "--python", sys.executable, "--fresh"),
                                  ("plan", "--python", sys.executable), ("check",)])
def test_a_removed_working_folder_is_one_line_saying_what_to_do(tmp_path: Path, args: tuple[str, ...]) -> None:
    # Was "unexpected FileNotFoundError" (the replay key) or "is not a working Python interpreter" (the probe).
    proc = _in_a_removed_folder(tmp_path / "gone", *args, env={"VIRTUAL_ENV": str(Path(sys.executable).parents[1])})
    line = assert_one_line_error(proc, "the working folder no longer exists", "cd into an existing folder")
    assert "unexpected" not in line


def test_explain_needs_no_working_folder(tmp_path: Path) -> None:
    proc = _in_a_removed_folder(tmp_path / "gone", "explain", "libcudnn.so.9: cannot open shared object file")
    assert proc.returncode == 0, proc.stderr
    assert "[LIB002]" in proc.stdout


def test_unknown_ort_version_requested(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("plan", "--ort-version", "9.99.0"), "9.99.0")


def test_bad_compute_capability() -> None:
    assert_one_line_error(run_ortfix("plan", "--compute-capability", "eight"), "--compute-capability")


def test_a_number_of_thousands_of_digits_is_one_line_saying_what_is_expected(tmp_path: Path) -> None:
    """int() refuses more than 4,300 digits with a ValueError of its own: it must not reach the user as 'unexpected'."""
    huge = "9" * 5000
    assert_one_line_error(run_ortfix("history", "prune", "--python", str(tmp_path / "none"), "--keep", huge),
                          "--keep", "expected a whole number 0 or more")
    assert_one_line_error(run_ortfix("plan", "--cuda", huge), "--cuda", "not a CUDA major")


def test_unwritable_plan_output(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("plan", "-o", str(tmp_path / "missing-dir" / "plan.json")))


def test_command_line_mistakes_come_before_the_target_is_looked_at(tmp_path: Path) -> None:
    """A missing model or bad --shapes is the command line's own mistake: reported as such even where no target
    could be found (no python3 on PATH), and nothing about a target is printed first."""
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = str(tmp_path / "missing.onnx")
    for args in (["tune", missing], ["tune", missing, "--shapes", "1x3"], ["verify", "--model", missing]):
        proc = run_ortfix(*args, env={"PATH": str(empty)})
        assert_one_line_error(proc, "missing.onnx: no such file")
        assert proc.stdout == ""


@pytest.mark.slow
def test_error_envelope_names_a_subcommand_given_after_options(tmp_path: Path) -> None:
    import json
    import subprocess

    venv = tmp_path / "venv"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    proc = run_ortfix("history", "--python", str(venv), "show", "not-an-id", "--json")
    assert_one_line_error(proc, "is not a transaction id")
    assert json.loads(proc.stdout)["command"] == "history show"


# Two (or three) bad inputs: the first in commands/inputs.py's order wins, whatever their order on the command line
# (environment, machine, what to plan, a saved plan's conflicts, what is read, where the result goes).
def _two_bad(tmp_path: Path) -> list[tuple[list[str], str]]:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    return [
        (["plan", "--hook", "bogus", "--driver", "x"], "--driver 'x'"),
        (["plan", "--driver", "x", "--hook", "bogus"], "--driver 'x'"),
        (["plan", "--cuda", "9", "--python", ""], "--python ''"),
        (["plan", "-o", str(tmp_path), "--ort-version", "zz"], "--ort-version 'zz'"),
        (["apply", str(a_file), "--cuda", "abc", "--yes"], "--cuda 'abc'"),
        (["export", "sh", "--prefix-in-image", "/x", "--hook", "bogus"], "--hook 'bogus'"),
        (["verify", "--timeout", "0", "--shapes", "1x3"], "--shapes goes with --model"),
        (["wheelhouse", "-d", str(a_file), "--platform", "no!"], "--platform 'no!'"),
        (["tune", str(a_file), "--runs", "0", "--shapes", "1xz"], "--shapes '1xz'"),
        (["history", "prune", "--keep", "-1", "--python", ""], "--python ''"),
    ]


def test_of_two_bad_inputs_the_first_in_the_documented_order_wins(tmp_path: Path) -> None:
    for args, fragment in _two_bad(tmp_path):
        proc = run_ortfix(*args)
        assert_one_line_error(proc, fragment)
        assert proc.stdout == ""


def test_of_two_bad_check_inputs_both_paths_name_the_same(tmp_path: Path) -> None:
    """The click-free `check` (cli/fastcheck.py) takes this command line, and says what click's `check` says."""
    from ortfix.cli.invocation import parse_check

    args = ["check", "--with", "bogus", "--compute-capability", "eight", "--driver", "x", "--python",
            str(tmp_path / "nope")]
    assert parse_check(args) is not None
    fast = run_ortfix(*args)
    slow = run_ortfix(*args, env={"ORTFIX_NO_FASTPATH": "1"})
    assert assert_one_line_error(fast, "--driver 'x'") == assert_one_line_error(slow, "--driver 'x'")


def test_the_choices_help_shows_are_the_ones_accepted() -> None:
    """--help lists the choices (cli/options.py); commands/inputs.py is what accepts them: the same lists."""
    from ortfix.cli import options
    from ortfix.commands import inputs
    from ortfix.errors import OrtfixError

    for listed, accept, flag in ((options.HOOKS, inputs.hook, "--hook"), (options.INSTALLERS, inputs.installer,
                                                                          "--installer")):
        assert [accept(value) for value in listed] == list(listed)
        for wrong in ("", listed[0].upper(), "bogus"):
            with pytest.raises(OrtfixError, match=f"^{flag} '{wrong}': not one of {', '.join(listed)}$"):
                accept(wrong)
    assert inputs.with_tensorrt(list(options.WITH)) is True and inputs.with_tensorrt([]) is False
    with pytest.raises(OrtfixError, match=r"^--with 'TensorRT': not one of tensorrt$"):
        inputs.with_tensorrt(["TensorRT"])
    assert [inputs.cuda_major(v) for v in ("10", "12", "20", None)] == [10, 12, 20, None]
    for wrong in ("9", "21", "1e1", "١٢", "-12", ""):
        with pytest.raises(OrtfixError, match=r"^--cuda .*: not a CUDA major$"):
            inputs.cuda_major(wrong)
    assert inputs.seconds("1") == 1.0
    for wrong in ("nan", "inf", "0.5", "x", ""):
        with pytest.raises(OrtfixError, match="expected a number of seconds, at least 1"):
            inputs.seconds(wrong)


def test_click_validates_no_option_value() -> None:
    """Every value is validated once, by commands/inputs.py: click only splits the command line (strings, flags, and
    paths it does not look at), so no click type or callback decides first which bad value is reported. export's
    FORMAT argument is the one click choice: it names what the command does, as a subcommand would."""
    import click

    from ortfix.cli.app import main

    def walk(command: click.Command, path: str) -> list[tuple[str, click.Parameter]]:
        found = [(f"{path} {p.name}", p) for p in command.params]
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                found += walk(sub, f"{path} {name}")
        return found

    checked = 0
    for where, param in walk(main, "ortfix"):
        if (isinstance(param, click.Option) and param.is_flag) or where == "ortfix export fmt":
            continue
        checked += 1
        assert param.callback is None, where
        assert isinstance(param.type, (click.types.StringParamType, click.Path)), (where, param.type)
        if isinstance(param.type, click.Path):
            assert param.type.file_okay and param.type.dir_okay and not param.type.exists, where
    assert checked > 40
