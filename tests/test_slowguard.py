"""The fast tier's guard (tests/support/slowguard.py): a test not marked slow that starts a venv build, pip, uv or wine
fails with one line saying to mark it; marked slow, the same test runs. Proved on a real inner pytest run of a small
test file with the guard loaded as a plugin (`-p support.slowguard`), as tests/conftest.py loads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.slowguard import FAST_ONLY, slow_work

TESTS = Path(__file__).resolve().parent

# Cheap stand-ins for the slow work: each starts the program the guard looks for, but only to print its help.
_INNER = '''
import subprocess, sys, venv
import pytest

def test_venv_unmarked():
    subprocess.run([sys.executable, "-m", "venv", "--help"], capture_output=True, check=True)

def test_pip_unmarked():
    subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, check=True)

def test_in_process_venv_unmarked(tmp_path):
    venv.EnvBuilder(with_pip=False).create(tmp_path / "v")

@pytest.fixture()
def made_by_a_fixture():
    subprocess.run([sys.executable, "-m", "venv", "--help"], capture_output=True, check=True)

def test_fixture_unmarked(made_by_a_fixture):
    pass

@pytest.mark.slow
def test_venv_marked():
    subprocess.run([sys.executable, "-m", "venv", "--help"], capture_output=True, check=True)

def test_plain_python_unmarked():
    subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, check=True)
'''


@pytest.mark.parametrize(("argv", "what"), [
    (["/usr/bin/python3", "-m", "venv", "/tmp/v"], "a venv"),
    (["python", "-I", "-m", "pip", "install", "x"], "pip"),
    (["/x/bin/pip3.11", "install", "x"], "pip"),
    (["/x/bin/uv", "pip", "install"], "uv"),
    (["wine", "python.exe"], "wine"),
    (["wineserver", "-k"], "wine"),
    (["python", "-m", "ortfix", "check"], None),
    (["python", "-c", "import pip"], None),
    (["/usr/bin/pipewire"], None),
    ([], None),
])
def test_slow_work_is_named_by_argv(argv: list[str], what: str | None) -> None:
    assert slow_work(argv) == what


def test_an_unmarked_test_that_starts_slow_work_fails_and_a_marked_one_runs(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(_INNER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in (FAST_ONLY, "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env.update(PYTHONPATH=str(TESTS), COLUMNS="400")  # the summary lines whole
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "support.slowguard", "-p", "no:cacheprovider",
                           "-o", "markers=slow: slow", "-q", "-rA", "--basetemp", str(tmp_path / "bt"),
                           str(tmp_path / "test_inner.py")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    for name in ("test_venv_unmarked", "test_pip_unmarked", "test_in_process_venv_unmarked"):
        assert f"FAILED test_inner.py::{name} - Failed: this test is not marked slow but starts" in out, out[-3000:]
    assert "ERROR test_inner.py::test_fixture_unmarked - Failed: this test is not marked slow but starts a venv" in out
    assert "PASSED test_inner.py::test_venv_marked" in out, out[-3000:]
    assert "PASSED test_inner.py::test_plain_python_unmarked" in out, out[-3000:]
    assert "mark it @pytest.mark.slow" in out and "Traceback" not in out, out[-3000:]


def test_an_unmarked_test_runs_armed() -> None:
    """This test is not marked slow: tests/conftest.py armed the guard for it (the helpers read FAST_ONLY)."""
    assert os.environ.get(FAST_ONLY) == "1"
