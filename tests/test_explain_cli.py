"""`ortfix explain` end to end: the message is recognised and tied to what check sees on this machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from clitools import assert_one_line_error, run_ortfix
from support.fixtures import make_venv, pip_install

SEED_000 = ("Failed to load library libonnxruntime_providers_cuda.so with error: \n"
            "libcudnn.so.9: cannot open shared object file: No such file or directory\n")


def test_explains_seed_message_and_ties_it_to_this_machine(tmp_path: Path, wheelhouse: Path) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    proc = run_ortfix("explain", SEED_000, "--python", str(python), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["recognised"]
    by_finding = {e["finding"] for e in doc["explanations"]}
    assert by_finding & {"LIB001", "LIB002"}
    here = [f["code"] for e in doc["explanations"] for f in e["on_this_machine"]]
    assert "LIB002" in here  # installed, not findable: what this venv really has


def test_log_on_stdin_and_unrelated_text() -> None:
    env_cmd = [sys.executable, "-m", "ortfix", "explain", "--no-check"]
    proc = subprocess.run(env_cmd, input="Traceback...\nGET was unable to find an engine to execute this computation\n",
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "line 2" in proc.stdout
    proc = subprocess.run(env_cmd, input="ValueError: operands could not be broadcast together\n",
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "Not recognised" in proc.stdout


def test_unreadable_log_file(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("explain", "--file", str(tmp_path / "missing.log")), "missing.log")
