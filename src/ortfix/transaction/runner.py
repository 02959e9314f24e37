"""The step runner: holds one transaction's journal while steps run or are reversed, saving every change of state
before going on; SIGTERM/SIGHUP interrupt like Ctrl-C while steps run, and are held during a rollback.

Test-only fault injection: ORTFIX_TEST_CRASH_AFTER_STEP=N ends the process (os._exit(99)) right after step N is
journaled done; ORTFIX_TEST_CRASH_DURING_STEP=N right after step N is journaled started and partly executed;
ORTFIX_TEST_PAUSE_BEFORE_STEP=N with ORTFIX_TEST_PAUSE_FILE waits before step N while that file exists."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg, tr
from ortfix.transaction.actions import handler_for
from ortfix.transaction.actions.base import StepContext, TargetEnv, problem, step_title, test_crash
from ortfix.transaction.journal import Step, StepState, Transaction, TxStatus, now_iso
from ortfix.transaction.store import TransactionStore
from ortfix.transaction.undo_notes import UndoNote

CRASH_AFTER = "ORTFIX_TEST_CRASH_AFTER_STEP"
CRASH_DURING = "ORTFIX_TEST_CRASH_DURING_STEP"
PAUSE_BEFORE = "ORTFIX_TEST_PAUSE_BEFORE_STEP"  # with ORTFIX_TEST_PAUSE_FILE: wait while that file exists

if TYPE_CHECKING:
    from types import FrameType
    from typing import TypedDict, Union, Unpack

    # What signal.signal takes and gives back: a function, SIG_DFL/SIG_IGN, or None (set from outside Python).
    _Handler = Union[Callable[[int, Union[FrameType, None]], object], int, signal.Handlers, None]

    class _StepChanges(TypedDict, total=False):
        """The fields of a journaled step that change while it runs or is reversed."""

        state: StepState
        record: Mapping[str, object]
        started: str | None
        finished: str | None
        error: str | None


@dataclass(frozen=True)
class Ui:
    echo: Callable[[str], None] = lambda line: None  # progress lines for people
    output: Callable[[str, bool], None] = lambda line, is_err: None  # the installer's own output, streamed


def _crash_point(var: str) -> int | None:
    value = os.environ.get(var)
    return int(value) if value and value.isdigit() else None


def _test_pause() -> None:
    """Fault injection: create ORTFIX_TEST_PAUSE_FILE and wait (at most 120 s) until the test deletes it."""

    flag = os.environ.get("ORTFIX_TEST_PAUSE_FILE")
    if not flag:
        return
    Path(flag).touch()
    deadline = time.monotonic() + 120
    while os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.01)


def _replace_step(tx: Transaction, index: int, **changes: Unpack[_StepChanges]) -> Transaction:
    steps = tuple(replace(s, **changes) if s.index == index else s for s in tx.steps)
    return replace(tx, steps=steps)


# SIGHUP does not exist on Windows (nor does a terminal that hangs up): there only SIGTERM joins Ctrl-C.
_TERM_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
_STOP_SIGNALS = (signal.SIGINT, *_TERM_SIGNALS)


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, `docker stop`) or SIGHUP (the terminal closed): handled exactly like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def why_failed(exc: BaseException) -> str | Msg:
    """Why a step (or the apply) stopped: its English (`str()`) for the journal, `.text()` for the terminal."""
    if isinstance(exc, OrtfixError):
        return problem(exc)
    if isinstance(exc, Terminated):
        return Msg(N_("terminated ({signal})"), signal=str(exc))
    if isinstance(exc, KeyboardInterrupt):
        return Msg(N_("interrupted"))
    return f"{type(exc).__name__}: {exc}"


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def _signals(signums: tuple[int, ...], handler: _Handler) -> Iterator[None]:
    """`handler` for these signals while the block runs, the previous handlers after it (main thread only)."""
    previous: dict[int, _Handler] = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, handler)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def interrupting_signals() -> contextlib.AbstractContextManager[None]:
    """While steps run (and the apply verifies them), SIGTERM and SIGHUP interrupt like Ctrl-C does, so the
    automatic rollback runs."""
    return _signals(_TERM_SIGNALS, _raise_terminated)


def _no_interrupts() -> contextlib.AbstractContextManager[None]:
    """Ctrl-C, SIGTERM or SIGHUP during a rollback would leave it half done: hold them until it has finished."""
    return _signals(_STOP_SIGNALS, signal.SIG_IGN)


class Runner:
    """Holds the journal of one transaction while steps run; every change of state is saved before going on."""

    def __init__(self, store: TransactionStore, tx: Transaction, env: TargetEnv, ui: Ui) -> None:
        self.store = store
        self.tx = tx
        self.env = env
        self.ui = ui
        self.failure: Msg | None = None  # why a step failed (the journal's message, translatable)

    def save(self, tx: Transaction) -> None:
        self.tx = self.store.save(tx)

    def context(self, step: Step, *, crash_midway: bool = False) -> StepContext:
        def commit(record: Mapping[str, object]) -> None:
            current = next(s for s in self.tx.steps if s.index == step.index)
            state = StepState.STARTED if current.state is StepState.PLANNED else current.state
            self.save(_replace_step(self.tx, step.index, state=state, record=dict(record),
                                    started=current.started or now_iso()))

        return StepContext(self.store, self.tx.id, step.index, commit, self.ui.echo, self.ui.output, crash_midway)

    def run_steps(self) -> None:
        with interrupting_signals():
            self._run_steps()

    def _run_steps(self) -> None:
        after, during = _crash_point(CRASH_AFTER), _crash_point(CRASH_DURING)
        pause = _crash_point(PAUSE_BEFORE)
        for step in self.tx.steps:
            if pause == step.index:
                _test_pause()
            self.ui.echo(f"[{step.index}/{len(self.tx.steps)}] {step_title(step).text()}")
            handler = handler_for(step.kind)
            try:
                record = handler.execute(self.env, step, self.context(step, crash_midway=during == step.index))
            except BaseException as exc:
                why = why_failed(exc)
                self.failure = Msg(N_("step {n} ({summary}) failed: {why}"), n=step.index, summary=step_title(step),
                                   why=why)
                self.save(replace(_replace_step(self.tx, step.index, error=str(why)), message=str(self.failure)))
                raise
            self.save(_replace_step(self.tx, step.index, state=StepState.DONE, record=dict(record),
                                    finished=now_iso()))
            if after == step.index:
                test_crash()

    def reverse_all(self, reason: str) -> list[UndoNote]:
        """Undo every started or done step, newest first; the journal says how far it got at every moment (and
        keeps the full sentence of each note)."""
        warnings: list[UndoNote] = []
        with _no_interrupts():
            # The disk space held since the transaction began is what lets the undo proceed on a full disk.
            self.store.release_reserve(self.tx.id)
            self.save(replace(self.tx, status=TxStatus.ROLLING_BACK,
                              rollback={"started": now_iso(), "finished": None, "reason": reason, "warnings": []}))
            for step in reversed(self.tx.steps):
                if step.state not in (StepState.STARTED, StepState.DONE):
                    continue
                self.ui.echo(tr("undo [{n}/{total}] {summary}", n=step.index, total=len(self.tx.steps),
                                summary=step_title(step)))
                try:
                    got = handler_for(step.kind).reverse(self.env, step, self.context(step))
                except OSError as exc:
                    raise OrtfixError(Msg(N_("undoing step {n} ({summary}) failed: {path}: {error}"), n=step.index,
                                          summary=step_title(step), path=exc.filename or "",
                                          error=str(exc.strerror or exc)),
                                      hint=Msg(N_("fix that (free disk space?), then run `ortfix rollback` again; the "
                                                  "journal says how far it got"))) from exc
                warnings += got
                self.save(_replace_step(self.tx, step.index, state=StepState.REVERSED))
            said = [str(w.text) for w in warnings if w.said]
            rollback = {**(self.tx.rollback or {}), "finished": now_iso(), "warnings": said}
            self.save(replace(self.tx, status=TxStatus.ROLLED_BACK, rollback=rollback))
        return warnings

