"""What a check asks of the file system again and again, answered once per path while one check gathers and judges
its facts (commands/check.py's `run_check`): `realpath` (on the bench venv of speed/__init__.py, 159 calls for 61
paths, each ~100k instructions: a symbolic-link lookup per folder on the way), the loader's folder listings
(system/loader.folder_listing: ~930 a check, each a `stat` of the folder, for a few dozen folders) and which file a
loaded library is (system/linux/loader.py: ~220 `stat` calls). The file system a check looks at does not change
while it runs. Outside a check each is asked afresh. Not for a check that guards a
file operation (target/owner.py, system/pathrules.py): those resolve at the moment of use."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the path of a check
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

# (what was asked, path) -> its answer, while a check runs
_remembered: dict[tuple[str, str], object] | None = None


def once(kind: str, path: str, ask: Callable[[str], T]) -> T:
    """`ask(path)`, asked once per `kind` and path while a check runs (`remember`), else every time."""
    remembered = _remembered
    if remembered is None:
        return ask(path)
    key = (kind, path)
    if key in remembered:
        return remembered[key]  # type: ignore[return-value]  # stored by this function for this kind
    answer = remembered[key] = ask(path)
    return answer


def realpath(path: str) -> str:
    """os.path.realpath(path), once per path while a check runs."""
    return once("realpath", path, os.path.realpath)


def remember() -> dict[tuple[str, str], object] | None:
    """From now on until `forget(what this returned)`, each path is asked about once (a check that starts)."""
    global _remembered
    previous, _remembered = _remembered, {}
    return previous


def forget(previous: dict[tuple[str, str], object] | None) -> None:
    """The check that `remember` began has ended: what it asked is forgotten (`previous`: an enclosing one's)."""
    global _remembered
    _remembered = previous
