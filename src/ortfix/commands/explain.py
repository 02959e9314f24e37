"""`ortfix explain`: recognise known failure messages; when asked, check this machine to say why they happen here."""

from __future__ import annotations

from dataclasses import dataclass

from ortfix.commands.check import CheckResult, run_check
from ortfix.errors import ExitCode, OrtfixError
from ortfix.explain import Explanation, describe, load_default_patterns, match_patterns


@dataclass(frozen=True)
class ExplainResult:
    explanations: list[Explanation]
    check: CheckResult | None  # this machine's check, when it could run
    check_error: str | None  # why it could not

    @property
    def exit_code(self) -> ExitCode:
        """0 recognised, 1 not recognised."""
        return ExitCode.OK if self.explanations else ExitCode.PROBLEMS


def run_explain(text: str, *, python: str | None = None, check: bool = True) -> ExplainResult:
    """Recognise known failure messages; when asked, also run `check` here to say why it happens on this machine."""
    hits = match_patterns(text, load_default_patterns())
    result: CheckResult | None = None
    error: str | None = None
    if check and hits:
        try:
            result = run_check(python)
        except OrtfixError as exc:
            error = exc.one_line()
    # With check's facts (and its matrix), the analyses say what applies on this machine.
    explanations = describe(text, hits, matrix=result.matrix if result else None,
                            facts=result.facts if result else None)
    return ExplainResult(explanations=explanations, check=result, check_error=error)
