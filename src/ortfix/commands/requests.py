"""Each command's request value: its options as commands/inputs.py validated them, in one NamedTuple per command
(check's is the plain `inputs.CheckRequest`, for the replayed check's sake). Apart from inputs.py so that importing
it, which a replayed `check` does, needs neither `typing` nor these classes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ortfix.export.model import ExportFormat
    from ortfix.export.wheelhouse import WheelhouseTarget
    from ortfix.plan.model import PlanOptions
    from ortfix.tune import ShapeSpec


class PlanInputs(NamedTuple):
    """The options a plan is made with, as the command line gave them (plan, apply, export, wheelhouse)."""

    ort_version: str | None = None
    cuda: str | None = None
    hook: str = "auto"
    installer: str = "auto"
    driver_version: str | None = None
    compute_capability: str | None = None
    project: bool = False
    with_: Sequence[str] = ()


class PlanRequest(NamedTuple):
    python: str | None
    options: PlanOptions
    output: Path | None


class ApplyRequest(NamedTuple):
    python: str | None
    plan_file: Path | None
    options: PlanOptions


class ExportRequest(NamedTuple):
    python: str | None
    format: ExportFormat
    plan_file: Path | None
    options: PlanOptions
    image_prefix: str | None  # dockerfile only; None: the exporting environment's paths
    output: Path | None


class WheelhouseRequest(NamedTuple):
    python: str | None
    plan_file: Path | None
    options: PlanOptions
    target: WheelhouseTarget
    folder: Path


class VerifyRequest(NamedTuple):
    python: str | None
    model: Path | None  # resolved; None: the built-in model
    shapes: ShapeSpec | None
    timeout: float


class TuneRequest(NamedTuple):
    python: str | None
    model: Path  # resolved
    shapes: list[ShapeSpec]
    runs: int
    timeout: float


class ExplainRequest(NamedTuple):
    python: str | None
    text: str
    check: bool  # also look at this machine (not --no-check)


__all__ = ["ApplyRequest", "ExplainRequest", "ExportRequest", "PlanInputs", "PlanRequest", "TuneRequest",
           "VerifyRequest", "WheelhouseRequest"]
