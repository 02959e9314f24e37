"""One output contract for every command: `--json` prints one envelope (`schema`, `command`, `exit_code`, then the
data), the envelope's `exit_code` is the process's exit status, and a command that ends in an error under `--json`
prints an error envelope on standard output besides its one line on standard error."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clitools import REPO, assert_one_line_error, run_ortfix


def _envelope(proc: subprocess.CompletedProcess[str], command: str) -> dict[str, object]:
    doc = json.loads(proc.stdout)
    assert isinstance(doc, dict)
    assert list(doc)[:3] == ["schema", "command", "exit_code"], list(doc)[:3]
    assert doc["command"] == command
    assert doc["exit_code"] == proc.returncode, (doc["exit_code"], proc.returncode, proc.stderr)
    assert isinstance(doc["schema"], str) and doc["schema"].startswith("ortfix.")
    return doc


@pytest.mark.parametrize(("args", "command", "schema"), [
    (("matrix", "show", "--json"), "matrix show", "ortfix.matrix/2"),
    (("explain", "--no-check", "--json", "libcudnn.so.9: cannot open shared object file"), "explain",
     "ortfix.explain/2"),
    (("explain", "--no-check", "--json", "all is well"), "explain", "ortfix.explain/2"),
])
def test_commands_print_one_envelope(args: tuple[str, ...], command: str, schema: str) -> None:
    proc = run_ortfix(*args)
    assert _envelope(proc, command)["schema"] == schema


def test_explain_exit_code_is_carried_by_the_result() -> None:
    recognised = run_ortfix("explain", "--no-check", "--json", "libcudnn.so.9: cannot open shared object file")
    unknown = run_ortfix("explain", "--no-check", "--json", "all is well")
    assert (recognised.returncode, unknown.returncode) == (0, 1)
    assert json.loads(recognised.stdout)["recognised"] is True
    assert json.loads(unknown.stdout)["recognised"] is False


@pytest.mark.slow
def test_check_and_plan_envelopes(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    check = run_ortfix("check", "--json", "--python", str(venv / "bin" / "python"))
    doc = _envelope(check, "check")
    assert doc["schema"] == "ortfix.check/2" and doc["healthy"] is False and check.returncode == 1
    plan = run_ortfix("plan", "--json", "--python", str(venv / "bin" / "python"))
    assert _envelope(plan, "plan")["schema"] == "ortfix.plan/2"
    for args, command, schema in ((("history",), "history", "ortfix.history/2"),
                                  (("history", "prune", "--keep", "0"), "history prune", "ortfix.prune/2")):
        proc = run_ortfix(*args, "--json", "--python", str(venv / "bin" / "python"))
        assert proc.returncode == 0, proc.stderr
        assert _envelope(proc, command)["schema"] == schema


@pytest.mark.parametrize(("args", "command", "fragment"), [
    (("check", "--json", "--python", "/nonexistent/python"), "check", "no such file"),
    (("plan", "--json", "--python", "/nonexistent/python"), "plan", "no such file"),
    (("verify", "--json", "--shapes", "1x3"), "verify", "--shapes goes with --model"),
    (("history", "--json", "--python", "/nonexistent/python"), "history", "no such file"),
    (("history", "prune", "--json", "--keep", "1", "--python", "/nonexistent/python"), "history prune",
     "no such file"),
])
def test_error_under_json_prints_an_error_envelope(args: tuple[str, ...], command: str, fragment: str) -> None:
    proc = run_ortfix(*args)
    line = assert_one_line_error(proc, fragment)
    doc = _envelope(proc, command)
    assert doc["schema"] == "ortfix.error/1"
    error = doc["error"]
    assert isinstance(error, dict) and fragment in str(error["message"])
    assert line.startswith("ortfix: error: ")


def test_usage_error_under_json_prints_an_error_envelope() -> None:
    proc = run_ortfix("plan", "--json", "--no-such-option")
    assert proc.returncode == 2
    doc = _envelope(proc, "plan")
    assert doc["schema"] == "ortfix.error/1" and "--no-such-option" in str(doc["error"])
    assert "No such option" in proc.stderr


def test_error_without_json_prints_nothing_on_stdout() -> None:
    proc = run_ortfix("check", "--python", "/nonexistent/python")
    assert_one_line_error(proc, "no such file")
    assert proc.stdout == ""


def test_the_json_envelope_is_documented() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    from ortfix.cli.output import ERROR_SCHEMA, SCHEMAS

    for command, schema in SCHEMAS.items():
        assert f"`{schema}`" in readme, (command, schema)
    assert f"`{ERROR_SCHEMA}`" in readme
