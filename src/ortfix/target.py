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
# How long the probe may take (it needs about 20 ms; a slow network file system, far more): then it is killed,
# with everything it started (subproc.finish). ORTFIX_CHILD_TIMEOUT lowers it for tests.
PROBE_TIMEOUT = 60.0


def refuse_empty_python(python: str | None) -> str | None:
    """--python '' was given (and would read as "not given" wherever a fallback says `python or ...`): refused."""
    if python is not None and not python:
        raise OrtfixError("--python '': an empty path",
                          hint="give an interpreter or an environment folder, or leave --python out")
    return python


def resolve_target(python: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """--python PATH (an interpreter or an environment folder), else the activated environment (VIRTUAL_ENV, then
    CONDA_PREFIX), else the interpreter ortfix itself runs in.

    None means --python was not given; an empty string was given, and is refused rather than read as "not given"."""
    env = os.environ if environ is None else environ
    if python is not None:
        refuse_empty_python(python)
        try:
            path = Path(python).expanduser()
        except RuntimeError as exc:  # ~user/... for a user that does not exist
            raise OrtfixError(f"--python {python}: {exc}",
                              hint="give the path without ~, or an existing user's") from exc
        try:
            if path.is_dir():
                for candidate in (path / "bin" / "python", path / "bin" / "python3", path / "Scripts" / "python.exe",
                                  path / "python.exe"):
                    if candidate.exists():
                        return candidate.absolute()
                raise OrtfixError(f"--python {python}: a folder with no bin/python in it",
                                  hint="give the interpreter's path or an environment folder")
            if not path.exists():
                raise OrtfixError(f"--python {python}: no such file")
        except OSError as exc:  # a name too long, a folder on the way that cannot be searched
            raise OrtfixError(f"--python {python}: {exc.strerror or exc}") from exc
        return path.absolute()
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = env.get(var)
        if prefix:
            candidate = Path(prefix) / "bin" / "python"
            if candidate.exists():
                return candidate
    return Path(sys.executable)


def start_probe(python: Path) -> subprocess.Popen[str]:
    """The probe, running in `python` in a session of its own; finish it with `subproc.finish(proc,
    timeout=PROBE_TIMEOUT)`, which kills its whole process group when that time is up."""
    source = PROBE_SOURCE.read_text(encoding="utf-8")
    # The user's environment as it is (LD_LIBRARY_PATH, PYTHONPATH...): the probe must see what their Python sees.
    env = dict(os.environ)
    env["PYTHONIOENCODING"] = "utf-8"
    try:
        return subproc.start([str(python), "-c", source], env=env)
    except OrtfixError as exc:
        raise OrtfixError(f"--python {python}: cannot be started ({exc.message.split(': ', 1)[-1]})",
                          hint="is it a Python interpreter?") from exc


