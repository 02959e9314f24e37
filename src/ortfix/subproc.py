"""Every subprocess ortfix starts goes through here: argv lists only, UTF-8, an environment chosen on purpose."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ortfix.errors import OrtfixError

# Variables that change what a child Python or pip does behind our back.
_PYTHON_NOISE = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONSAFEPATH")


def child_env(base: Mapping[str, str] | None = None, **overrides: str | None) -> dict[str, str]:
    """A copy of the environment (the current one by default) without variables that would skew a child Python.

    `LD_LIBRARY_PATH` is kept: it decides what the loader sees, exactly as it would for the user.
    An override of None removes the variable.
    """
    env = dict(os.environ if base is None else base)
    for name in _PYTHON_NOISE:
        env.pop(name, None)
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run(
    argv: Sequence[str | Path],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    input_text: str | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv to completion and capture its output; a missing program is an OrtfixError, not a traceback."""
    args = [str(a) for a in argv]
    try:
        return subprocess.run(
            args,
            env=dict(env) if env is not None else child_env(),
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            input=input_text,
            cwd=cwd,
            check=False,
        )
    except FileNotFoundError as exc:
        raise OrtfixError(f"cannot run {args[0]}: not found") from exc
    except PermissionError as exc:
        raise OrtfixError(f"cannot run {args[0]}: permission denied") from exc
    except subprocess.TimeoutExpired as exc:
        raise OrtfixError(f"{Path(args[0]).name} did not finish within {timeout:.0f} s") from exc


def start(argv: Sequence[str | Path], *, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """Start argv in the background (so ortfix can do other work meanwhile); read it with `finish`."""
    args = [str(a) for a in argv]
    try:
        return subprocess.Popen(
            args,
            env=dict(env) if env is not None else child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
    except FileNotFoundError as exc:
        raise OrtfixError(f"cannot run {args[0]}: not found") from exc
    except PermissionError as exc:
        raise OrtfixError(f"cannot run {args[0]}: permission denied") from exc
    except OSError as exc:  # e.g. ENOEXEC: a file that is not a program
        raise OrtfixError(f"cannot run {args[0]}: {exc.strerror or exc}") from exc


def finish(proc: subprocess.Popen[str], *, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        name = proc.args[0] if isinstance(proc.args, list) else proc.args
        raise OrtfixError(f"{Path(str(name)).name} did not finish within {timeout:.0f} s") from exc
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
