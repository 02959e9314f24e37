"""One function per command: each returns a result object; the click layer only renders it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ortfix.diagnose import Finding, diagnose, problems
from ortfix.errors import ExitCode
from ortfix.facts import Facts, gather
from ortfix.matrix import Matrix, load_matrix
from ortfix.probe import resolve_target

if TYPE_CHECKING:
    from ortfix.explain import Explanation
    from ortfix.plan import Plan, PlanOptions


@dataclass(frozen=True)
class CheckResult:
    facts: Facts
    findings: list[Finding]
    matrix: Matrix

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.PROBLEMS if problems(self.findings) else ExitCode.OK


@dataclass(frozen=True)
class ExplainResult:
    explanations: list[Explanation]
    check: CheckResult | None  # this machine's check, when it could run
    check_error: str | None  # why it could not


@dataclass(frozen=True)
class PlanResult:
    check: CheckResult
    plan: Plan


def run_check(python: str | None, *, driver_version: str | None = None,
              compute_capability: str | None = None) -> CheckResult:
    matrix = load_matrix()
    target = resolve_target(python)
    facts = gather(target, matrix, driver_version=driver_version, compute_capability=compute_capability)
    return CheckResult(facts=facts, findings=diagnose(facts, matrix), matrix=matrix)


def run_plan(python: str | None, options: PlanOptions, *, driver_version: str | None = None,
             compute_capability: str | None = None) -> PlanResult:
    from dataclasses import replace

    from ortfix.plan import make_plan

    # The machine the plan is for is part of what was asked: a saved plan keeps it, and is re-planned with it.
    options = replace(options, driver_version=driver_version or options.driver_version,
                      compute_capability=compute_capability or options.compute_capability)
    result = run_check(python, driver_version=options.driver_version,
                       compute_capability=options.compute_capability)
    return PlanResult(check=result, plan=make_plan(result.facts, result.findings, result.matrix, options))


def run_explain(text: str, *, python: str | None = None, check: bool = True) -> ExplainResult:
    """Recognise known failure messages; when asked, also run `check` here to say why it happens on this machine."""
    from ortfix.errors import OrtfixError
    from ortfix.explain import explain_text, load_default_patterns

    explanations = explain_text(text, load_default_patterns())
    result: CheckResult | None = None
    error: str | None = None
    if check and explanations:
        try:
            result = run_check(python)
        except OrtfixError as exc:
            error = exc.one_line()
    return ExplainResult(explanations=explanations, check=result, check_error=error)
