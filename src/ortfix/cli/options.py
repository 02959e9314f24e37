"""The options several commands share, each declared once: its name, parameter, type, metavar and default. What
each command says about it in its help differs (planning now, applying, assuming a machine), so the help text is
the caller's. The values are validated once, by the command functions (commands/inputs.py), not here: every option
is a plain string to click, and the metavar shows what it takes (click's own types would validate in click, and
before everything else)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
# What --help shows; commands/inputs.py accepts exactly these (tests/test_cli_errors.py compares them).
HOOKS = ("auto", "conda", "preload", "user-path", "none")
INSTALLERS = ("auto", "pip", "uv")
WITH = ("tensorrt",)


def _choices(values: tuple[str, ...]) -> str:
    return f"[{'|'.join(values)}]"


def ort_version(help: str) -> Callable[[F], F]:
    return click.option("--ort-version", metavar="V", help=help)


def cuda(help: str) -> Callable[[F], F]:
    return click.option("--cuda", "cuda", metavar="MAJOR", help=f"{help}  [10<=x<=20]")


def driver(help: str) -> Callable[[F], F]:
    return click.option("--driver", "driver_version", metavar="VERSION", help=help)


def compute_capability(help: str) -> Callable[[F], F]:
    return click.option("--compute-capability", metavar="X.Y", help=help)


def hook(help: str) -> Callable[[F], F]:
    return click.option("--hook", metavar=_choices(HOOKS), default="auto", show_default=True, help=help)


def installer(help: str) -> Callable[[F], F]:
    return click.option("--installer", metavar=_choices(INSTALLERS), default="auto", show_default=True, help=help)


def with_(help: str) -> Callable[[F], F]:
    """`--with PART`, repeatable."""
    return click.option("--with", "with_", metavar=_choices(WITH), multiple=True, help=help)
