"""`ortfix check`: gather the facts of the target, diagnose them; the result carries its exit code. What `check`
prints is replayed from an identical earlier check while nothing it depended on has changed (`check_output`,
speed/replay.py).

Also the target's description (the first line every command prints) and the rule that plan and apply leave
ortfix's own environment alone unless it is named.

Its imports are light (the facts, the diagnosis and the matrix are imported where they are used): a replayed
`check` imports this module, and its probe is still running while it does."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from ortfix.errors import ExitCode, OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.speed import prefetch
from ortfix.target.choose import EXPLICIT, TargetDescription, choose_target, is_own_prefix

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ortfix.check.facts import Facts, ProbeRun
    from ortfix.check.findings import Finding
    from ortfix.compat.matrix import Matrix
    from ortfix.target.probe import ProbeFacts
    from ortfix.transaction.store import InterruptedTransaction


class CheckResult:
    """A plain class, not a frozen dataclass or a NamedTuple: importing dataclasses (inspect, ast, dis) cost a
    replayed check 10 ms, and typing 2 ms."""

    __slots__ = ("facts", "findings", "matrix", "target")

    def __init__(self, facts: Facts, findings: list[Finding], matrix: Matrix, target: TargetDescription) -> None:
        self.facts = facts
        self.findings = findings
        self.matrix = matrix
        self.target = target

    @property
    def exit_code(self) -> ExitCode:
        from ortfix.check.findings import problems

        return ExitCode.PROBLEMS if problems(self.findings) else ExitCode.OK


def check_output(python: str | None, options: Sequence[str | bool | None], *, fresh: bool,
                 full: Callable[[], tuple[str, int, str]]) -> tuple[str, int]:
    """What `check` prints and its exit code: an identical earlier check's, replayed while nothing it depended on
    has changed (speed/replay.py), else `full()`'s (what it prints, its exit code, the probe's report it was made
    from), kept for the next time when it can be validated by looking again. `options`: everything on the command
    line that changes what check prints; `fresh`: never replay, keep nothing."""
    from ortfix.speed.replay import saved_check

    saved = None if fresh else saved_check(python, options)
    if saved is None:
        output, code, _report = full()
        return output, code
    replayed = saved.replay()
    if replayed is not None:
        return replayed
    return saved.record(full)


def describe(probe: ProbeFacts, chosen_by: str) -> TargetDescription:
    return TargetDescription(probe.executable, probe.python_version, probe.env_kind, probe.prefix, chosen_by,
                             is_own_prefix(probe.prefix))


def describe_target(python: str | None) -> tuple[TargetDescription, ProbeRun]:
    """The target's first line for a command that looks at the target after it (verify, tune), and the probe's run
    it was described from, for the command to pass on (`probe_run` of run_check, run_verify, run_tune): the probe
    runs once."""
    from ortfix.target.probe import finish_probe

    chosen = choose_target(python)
    run = prefetch.wait(chosen.interpreter)
    return describe(finish_probe(run, chosen.interpreter), chosen.chosen_by), run


def run_check(python: str | None, *, driver_version: str | None = None, compute_capability: str | None = None,
              probe_run: ProbeRun | None = None, with_tensorrt: bool = False) -> CheckResult:
    """`probe_run`: the probe already run for this target (describe_target), else the one started early, if any."""
    from ortfix.check.diagnose import diagnose
    from ortfix.check.facts import gather
    from ortfix.compat.load import load_matrix
    from ortfix.system import resolved

    matrix = load_matrix()
    chosen = choose_target(python)
    outer = resolved.remember()  # the file system does not change while the check looks at it: each path resolved once
    try:
        facts = gather(chosen.interpreter, matrix, probe_run=probe_run or prefetch.take(chosen.interpreter),
                       unfinished=unfinished_transactions, driver_version=driver_version,
                       compute_capability=compute_capability)
        findings = diagnose(facts, matrix, with_tensorrt=with_tensorrt)
    finally:
        resolved.forget(outer)
    return CheckResult(facts=facts, findings=findings, matrix=matrix, target=describe(facts.probe, chosen.chosen_by))


def unfinished_transactions(prefix: str) -> Sequence[InterruptedTransaction]:
    """The environment's unfinished transactions, for check's facts (TX001)."""
    if not os.path.isdir(os.path.join(prefix, ".ortfix", "transactions")):
        return ()  # the common case costs one stat, not an import of the journal machinery (keeps `check` fast)
    from ortfix.transaction.store import interrupted_transactions

    return interrupted_transactions(prefix)


def own_environment_note(target: TargetDescription) -> Msg | None:
    """What `check` says about ortfix's own environment found on PATH (plan and apply refuse it)."""
    if not target.own or target.chosen_by in EXPLICIT:
        return None
    return Msg(N_("{prefix} is the environment ortfix itself runs in, found as {chosen_by}: `ortfix plan` and "
                  "`ortfix apply` change it only when it is named with --python"), prefix=target.prefix,
               chosen_by=target.chosen_by)


def refuse_own_environment(target: TargetDescription) -> None:
    """`plan` and `apply` never change ortfix's own environment (a pipx venv, several GB of CUDA wheels later) because
    it happened to be the python3 on PATH: only when the user named it (--python, or by activating it)."""
    if target.own and target.chosen_by not in EXPLICIT:
        import shlex

        raise OrtfixError(Msg(N_("the target found as {chosen_by}, {python}, is the environment ortfix itself runs "
                                 "in ({prefix}); ortfix does not change it unless it is named"),
                              chosen_by=target.chosen_by, python=target.python, prefix=target.prefix),
                          hint=Msg(N_("to change it anyway, pass {option}; for another environment, pass --python ENV "
                                      "or activate it"), option=f"--python {shlex.quote(target.python)}"))
