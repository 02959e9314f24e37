"""`ortfix check`: gather the facts of the target, diagnose them; the result carries its exit code.

Also the target's description (the first line every command prints) and the rule that plan and apply leave
ortfix's own environment alone unless it is named."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ortfix.check.diagnose import diagnose
from ortfix.check.facts import Facts, gather
from ortfix.check.findings import Finding, problems
from ortfix.compat.load import load_matrix
from ortfix.compat.matrix import Matrix
from ortfix.errors import ExitCode, OrtfixError
from ortfix.speed import prefetch
from ortfix.target.choose import EXPLICIT, TargetDescription, choose_target, is_own_prefix

if TYPE_CHECKING:
    from ortfix.target.probe import ProbeFacts
    from ortfix.transaction.store import InterruptedTransaction


@dataclass(frozen=True)
class CheckResult:
    facts: Facts
    findings: list[Finding]
    matrix: Matrix
    target: TargetDescription

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.PROBLEMS if problems(self.findings) else ExitCode.OK


def describe(probe: ProbeFacts, chosen_by: str) -> TargetDescription:
    return TargetDescription(probe.executable, probe.python_version, probe.env_kind, probe.prefix, chosen_by,
                             is_own_prefix(probe.prefix))


def describe_target(python: str | None) -> TargetDescription:
    """The target's first line for a command that runs its own probe later (verify, tune): the probe runs now and
    is kept for the command's own look (prefetch.finished), so it runs once."""
    from ortfix.target.probe import finish_probe

    chosen = choose_target(python)
    return describe(finish_probe(prefetch.finished(chosen.python), chosen.python), chosen.chosen_by)


def run_check(python: str | None, *, driver_version: str | None = None,
              compute_capability: str | None = None, with_tensorrt: bool = False) -> CheckResult:
    matrix = load_matrix()
    chosen = choose_target(python)
    facts = gather(chosen.python, matrix, probe_run=prefetch.take(chosen.python), unfinished=unfinished_transactions,
                   driver_version=driver_version, compute_capability=compute_capability)
    return CheckResult(facts=facts, findings=diagnose(facts, matrix, with_tensorrt=with_tensorrt), matrix=matrix,
                       target=describe(facts.probe, chosen.chosen_by))


def unfinished_transactions(prefix: str) -> Sequence[InterruptedTransaction]:
    """The environment's unfinished transactions, for check's facts (TX001)."""
    if not os.path.isdir(os.path.join(prefix, ".ortfix", "transactions")):
        return ()  # the common case costs one stat, not an import of the journal machinery (keeps `check` fast)
    from ortfix.transaction.store import interrupted_transactions

    return interrupted_transactions(prefix)


def own_environment_note(target: TargetDescription) -> str | None:
    """What `check` says about ortfix's own environment found on PATH (plan and apply refuse it)."""
    if not target.own or target.chosen_by in EXPLICIT:
        return None
    return (f"{target.prefix} is the environment ortfix itself runs in, found as {target.chosen_by}: `ortfix plan` "
            f"and `ortfix apply` change it only when it is named with --python")


def refuse_own_environment(target: TargetDescription) -> None:
    """`plan` and `apply` never change ortfix's own environment (a pipx venv, several GB of CUDA wheels later) because
    it happened to be the python3 on PATH: only when the user named it (--python, or by activating it)."""
    if target.own and target.chosen_by not in EXPLICIT:
        import shlex

        raise OrtfixError(f"the target found as {target.chosen_by}, {target.python}, is the environment ortfix "
                          f"itself runs in ({target.prefix}); ortfix does not change it unless it is named",
                          hint=f"to change it anyway, pass --python {shlex.quote(target.python)}; for another "
                               "environment, pass --python ENV or activate it")
