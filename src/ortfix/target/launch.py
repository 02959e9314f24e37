"""Starting the target interpreter as its user starts it: plain, or in a conda environment with ortfix's activate.d
hook, after sourcing that hook as `conda activate` does. Every fresh process ortfix runs in the target (the library
load check, the session checks, tune's timings) starts this way."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ortfix import subproc


def launch(python: str, code: str, args: Sequence[str] = (), *, prefix: str,
           conda_hook: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """argv and environment that start `python -c code args...` as a user starts it: plain, or, in a conda
    environment with ortfix's activate.d hook, after sourcing that hook as `conda activate` does."""
    if conda_hook is not None:
        # What `conda activate` does: CONDA_PREFIX set, then the activate.d scripts sourced by the shell.
        line = '. "$1"; exec "$2" -c "$3"' + "".join(f' "${{{i}}}"' for i in range(4, 4 + len(args)))
        return (["sh", "-c", line, "sh", str(conda_hook), python, code, *args],
                subproc.child_env(CONDA_PREFIX=prefix))
    return [python, "-c", code, *args], subproc.child_env()
