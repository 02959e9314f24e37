"""`ortfix plan`: check the target, then make the plan that would fix it (nothing is touched)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ortfix.commands.check import CheckResult, refuse_own_environment, run_check
from ortfix.errors import ExitCode
from ortfix.plan.make import make_plan
from ortfix.plan.model import Plan, PlanOptions


@dataclass(frozen=True)
class PlanResult:
    check: CheckResult
    plan: Plan

    @property
    def exit_code(self) -> ExitCode:
        """0 nothing to change, 1 changes are pending or problems remain."""
        return ExitCode.OK if self.plan.empty and not self.plan.unresolved else ExitCode.PROBLEMS


def run_plan(python: str | None, options: PlanOptions, *, driver_version: str | None = None,
             compute_capability: str | None = None) -> PlanResult:
    # The machine the plan is for is part of what was asked: a saved plan keeps it, and is re-planned with it.
    options = replace(options, driver_version=driver_version or options.driver_version,
                      compute_capability=compute_capability or options.compute_capability)
    result = run_check(python, driver_version=options.driver_version,
                       compute_capability=options.compute_capability, with_tensorrt=options.with_tensorrt)
    refuse_own_environment(result.target)
    return PlanResult(check=result, plan=make_plan(result.facts, result.findings, result.matrix, options))
