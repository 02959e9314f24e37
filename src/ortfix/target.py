"""Which interpreter to inspect, and starting the probe inside it. Kept light (no dataclasses, no JSON): the entry
point imports it before anything else so the probe can start at once (see prefetch.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from ortfix import subproc
from ortfix.errors import OrtfixError

PROBE_SOURCE = Path(__file__).with_name("_probe.py")


def resolve_target(python: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """--python PATH (an interpreter or an environment folder), else the activated environment (VIRTUAL_ENV, then
    CONDA_PREFIX), else the interpreter ortfix itself runs in."""
    env = os.environ if environ is None else environ
    if python:
        path = Path(python).expanduser()
        if path.is_dir():
            for candidate in (path / "bin" / "python", path / "bin" / "python3", path / "Scripts" / "python.exe",
                              path / "python.exe"):
                if candidate.exists():
                    return candidate.absolute()
            raise OrtfixError(f"--python {python}: a folder with no bin/python in it",
                              hint="give the interpreter's path or an environment folder")
        if not path.exists():
            raise OrtfixError(f"--python {python}: no such file")
        return path.absolute()
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = env.get(var)
        if prefix:
            candidate = Path(prefix) / "bin" / "python"
            if candidate.exists():
                return candidate
    return Path(sys.executable)


def start_probe(python: Path) -> subprocess.Popen[str]:
    source = PROBE_SOURCE.read_text(encoding="utf-8")
    # The user's environment as it is (LD_LIBRARY_PATH, PYTHONPATH...): the probe must see what their Python sees.
    env = dict(os.environ)
    env["PYTHONIOENCODING"] = "utf-8"
    try:
        return subproc.start([str(python), "-c", source], env=env)
    except OrtfixError as exc:
        raise OrtfixError(f"--python {python}: cannot be started ({exc.message.split(': ', 1)[-1]})",
                          hint="is it a Python interpreter?") from exc


