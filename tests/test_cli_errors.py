"""Bad input gets one clear line and exit code 2, never a traceback."""

from __future__ import annotations

import os
import stat
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


def test_unknown_ort_version_requested(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("plan", "--ort-version", "9.99.0"), "9.99.0")


def test_bad_compute_capability() -> None:
    assert_one_line_error(run_ortfix("plan", "--compute-capability", "eight"), "--compute-capability")


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
