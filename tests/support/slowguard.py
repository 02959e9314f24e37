"""The fast tier's guard: a test not marked `slow` must not build a venv, run pip or uv, or start wine.

`pytest -m "not slow"` is the loop to run while working (README), and it stays fast only while every test that waits
on those tools carries the mark. tests/conftest.py marks the tests that use a known slow fixture and arms this guard
while each unmarked test (and the fixtures it sets up) runs: the test then fails with one line that names what it
started, instead of quietly making the fast tier slow again. Helpers that build venvs or run pip call `refuse_slow`
first (the clearest message); the process hook catches everything else started with `subprocess`."""

from __future__ import annotations

import os
import subprocess
import venv
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import PurePath
from typing import Any

import pytest

Guard = AbstractContextManager[None]

FAST_ONLY = "ORTFIX_TEST_FAST_ONLY"
"""Set (to "1") while a test that is not marked slow runs: helpers refuse slow work under it."""

_SLOW_MODULES = {"venv": "a venv", "virtualenv": "a venv", "pip": "pip", "ensurepip": "pip", "uv": "uv"}
_SLOW_PROGRAMS = {"uv": "uv", "wine": "wine", "wine64": "wine", "wineboot": "wine", "wineserver": "wine"}


def slow_work(argv: Sequence[str]) -> str | None:
    """What slow work `argv` starts ("a venv", "pip", "uv", "wine"), or None."""
    if not argv:
        return None
    program = PurePath(argv[0]).name
    if program.startswith("pip") and program.rstrip("0123456789.") == "pip":
        return "pip"
    if program in _SLOW_PROGRAMS:
        return _SLOW_PROGRAMS[program]
    for flag, module in zip(argv[1:], argv[2:]):
        if flag == "-m":
            return _SLOW_MODULES.get(module)
    return None


def refuse_slow(what: str) -> None:
    """Fail the running test when it is not marked slow (FAST_ONLY is set) and is about to start `what`."""
    if os.environ.get(FAST_ONLY):
        pytest.fail(f"this test is not marked slow but starts {what}: mark it @pytest.mark.slow (or give it a "
                    f"fixture tests/conftest.py marks slow); `pytest -m \"not slow\"` must not wait on it",
                    pytrace=False)


def _argv(args: object) -> list[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        return [os.fsdecode(args)]
    return [os.fsdecode(a) for a in args]  # type: ignore[attr-defined]


@contextmanager
def armed() -> Iterator[None]:
    """Refuse slow work for the block: FAST_ONLY set, and every process start and in-process venv checked."""
    real_execute = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    real_create = venv.EnvBuilder.create

    def execute_child(self: subprocess.Popen[Any], args: object, *rest: Any, **kwargs: Any) -> None:
        what = slow_work(_argv(args))
        if what is not None:
            refuse_slow(f"{what} ({' '.join(_argv(args))[:200]})")
        real_execute(self, args, *rest, **kwargs)

    def create(self: venv.EnvBuilder, env_dir: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> None:
        refuse_slow(f"a venv (venv.EnvBuilder.create({os.fsdecode(env_dir)!r}))")
        real_create(self, env_dir)

    before = os.environ.get(FAST_ONLY)
    os.environ[FAST_ONLY] = "1"
    subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]
    venv.EnvBuilder.create = create  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen._execute_child = real_execute  # type: ignore[attr-defined]
        venv.EnvBuilder.create = real_create  # type: ignore[method-assign]
        if before is None:
            os.environ.pop(FAST_ONLY, None)
        else:
            os.environ[FAST_ONLY] = before


def disarmed() -> Guard:
    """No guard (a test marked slow)."""
    return nullcontext()


def _guarded(item: pytest.Item) -> Guard:
    """Armed for a test not marked slow: its fixtures' setup and its body (not teardown, where a session fixture a
    slow test made may end a wineserver)."""
    return armed() if item.get_closest_marker("slow") is None else disarmed()


# The hooks (tests/conftest.py imports them; `-p support.slowguard` loads them into another pytest run).
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        yield
