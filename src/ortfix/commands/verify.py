"""`ortfix verify`: the three levels (verify/levels.py) run on the target, and onnxruntime-genai's state
(verify/genaicheck.py); the result carries its exit code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ortfix.commands.check import run_check
from ortfix.errors import ExitCode
from ortfix.system.linux import hooks
from ortfix.target.ortrun import model_file
from ortfix.verify.genaicheck import GenaiReport, genai_reports
from ortfix.verify.levels import (
    BUILTIN_MODEL,
    BUILTIN_SHAPES,
    Level,
    Status,
    driver_summary,
    level_loader,
    no_gpu_reason,
    session_levels,
)

if TYPE_CHECKING:
    from ortfix.check.facts import ProbeRun
    from ortfix.i18n import Msg


@dataclass(frozen=True)
class VerifyResult:
    python: str
    onnxruntime: str | None  # "onnxruntime-gpu 1.22.0"
    driver: str | Msg  # English in --json (str), translated on the screen
    model: str
    builtin_model: bool
    levels: tuple[Level, ...]
    genai: tuple[GenaiReport, ...] = ()  # each onnxruntime-genai package installed (verify/genaicheck.py)

    @property
    def exit_code(self) -> ExitCode:
        if any(level.status is Status.FAIL for level in self.levels) or not all(g.ok for g in self.genai):
            return ExitCode.PROBLEMS
        if any(level.status is Status.NOT_RUN for level in self.levels):
            return ExitCode.INCOMPLETE
        return ExitCode.OK


def run_verify(python: str | None, *, model: Path | None = None, shapes: Mapping[str, Sequence[int]] | None = None,
               timeout: float = 300.0, probe_run: ProbeRun | None = None) -> VerifyResult:
    """`probe_run`: the probe already run for this target (commands/check.describe_target), if any."""
    if model is not None:
        model = model_file(model, f"--model {model}")
    result = run_check(python, probe_run=probe_run)
    facts = result.facts
    interpreter = facts.probe.executable or facts.target
    conda_hook = hooks.active_conda_hook(facts.probe.prefix, facts.probe.env_kind)
    loader = level_loader(facts, facts.target, conda_hook=conda_hook)
    provider, numbers = session_levels(
        facts, facts.target, model or BUILTIN_MODEL, shapes if model is not None else (shapes or BUILTIN_SHAPES),
        loader, user_model=model is not None, conda_hook=conda_hook, timeout=timeout)
    install = facts.active_ort
    return VerifyResult(
        python=interpreter,
        onnxruntime=f"{install.package or 'onnxruntime'} {install.version}" if install else None,
        driver=driver_summary(facts.driver),
        model=str(model or BUILTIN_MODEL),
        builtin_model=model is None,
        levels=(loader, provider, numbers),
        genai=genai_reports(facts, result.matrix, interpreter, conda_hook=conda_hook,
                            no_driver=no_gpu_reason(facts.driver) is not None),
    )
