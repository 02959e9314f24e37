"""`os.path.realpath`, answered once per path while one check gathers and judges its facts (commands/check.py's
`run_check`): a check resolves the same paths again and again (on the bench venv of speed/__init__.py, 159 calls
for 61 paths, each ~100k instructions: a symbolic-link lookup per folder on the way), and the file system it looks at
does not change while it runs. Outside a check it is os.path.realpath itself. Not for a check that guards a file
operation (target/owner.py, system/pathrules.py): those resolve at the moment of use."""

from __future__ import annotations

import os

_remembered: dict[str, str] | None = None  # path -> its real path, while a check runs


def realpath(path: str) -> str:
    """os.path.realpath(path), remembered while a check runs (`remember`)."""
    remembered = _remembered
    if remembered is None:
        return os.path.realpath(path)
    real = remembered.get(path)
    if real is None:
        real = remembered[path] = os.path.realpath(path)
    return real


def remember() -> dict[str, str] | None:
    """From now on until `forget(what this returned)`, each path is resolved once (a check that starts)."""
    global _remembered
    previous, _remembered = _remembered, {}
    return previous


def forget(previous: dict[str, str] | None) -> None:
    """The check that `remember` began has ended: what it resolved is forgotten (`previous`: an enclosing one's)."""
    global _remembered
    _remembered = previous
