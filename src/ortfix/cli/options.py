"""The options several commands share, each declared once: its name, parameter, type, metavar and default. What
each command says about it in its help differs (planning now, applying, assuming a machine), so the help text is
the caller's. The values are validated once, by the command functions (commands/), not here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
HOOKS = ("auto", "conda", "preload", "user-path", "none")
INSTALLERS = ("auto", "pip", "uv")


def ort_version(help: str) -> Callable[[F], F]:
    return click.option("--ort-version", metavar="V", help=help)


def cuda(help: str) -> Callable[[F], F]:
    return click.option("--cuda", "cuda_major", type=click.IntRange(10, 20), metavar="MAJOR", help=help)


def driver(help: str) -> Callable[[F], F]:
    return click.option("--driver", "driver_version", metavar="VERSION", help=help)


def compute_capability(help: str) -> Callable[[F], F]:
    return click.option("--compute-capability", metavar="X.Y", help=help)


def hook(help: str) -> Callable[[F], F]:
    return click.option("--hook", type=click.Choice(list(HOOKS)), default="auto", show_default=True, help=help)


def installer(help: str) -> Callable[[F], F]:
    return click.option("--installer", type=click.Choice(list(INSTALLERS)), default="auto", show_default=True,
                        help=help)


def with_parts(help: str) -> Callable[[F], F]:
    return click.option("--with", "with_", type=click.Choice(["tensorrt"]), multiple=True, help=help)
