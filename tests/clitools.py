"""Running the real `ortfix` command in a subprocess, as a user does (one line on stderr, an exit code)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Where ortfix runs from in the tests: never the checkout, whose `.venv` beside pyproject.toml (CI makes one) is the
# default target there (a project's .venv, as uv finds it) and ortfix's own environment.
NEUTRAL = Path(tempfile.gettempdir())


def run_ortfix(*args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.pop("VIRTUAL_ENV", None)
    full_env.pop("CONDA_PREFIX", None)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "ortfix", *args], capture_output=True, text=True, env=full_env,
                          cwd=cwd or NEUTRAL, timeout=timeout, check=False)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("ortfix: error: ")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]
