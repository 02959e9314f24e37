"""The handler contract: what each kind of plan action does to the environment, and how it is undone exactly.

Every kind has a handler with the same contract (after conda's PathAction):

- `verify(env, details)`: every reason it cannot run here, without changing anything (all steps are verified before
  the first one executes). `details` may come from a saved plan or a journal: untrusted, checked field by field.
- `describe(env, details)`: the exact commands and file changes, for `apply --dry-run`;
- `title(step)`: the step's one-line summary rebuilt from its details (plan/titles.py), for the terminal: a plan or
  journal keeps the English summary, apply, rollback and history show it translated (`step_title`);
- `execute(env, step, ctx)`: first `ctx.commit(record)` (the journal then holds everything needed to undo the step),
  then the change;
- `check_undo(env, step, ctx)`: before a rollback changes anything, every reason the step cannot be undone exactly
  (a stashed file missing or changed);
- `reverse(env, step, ctx)`: undo, judged from what is on disk now, so it is idempotent and also undoes a step that
  was cut off half-way (Ctrl-C, kill -9, power loss). Returns a note (`undo_notes.UndoNote`) for each path it could
  not put back exactly, with its cause.

Problems, descriptions and undo notes are `i18n.Msg`s where they are sentences: English in journals and `--json`,
translated on the terminal.

Every file operation goes through the environment's `EnvRoot` (system/confine.py): paths are relative to the prefix
and are walked without following any link, at the moment of use. Commands are built here from typed values;
nothing from a plan or journal is ever executed as an argument list.

`HANDLERS` maps a kind to its handler; a new kind is one more module and one more `register()` call (in the
package's `__init__`). Nothing here imports click or prints: output goes through the context's callbacks.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, cast

from ortfix.errors import OrtfixError
from ortfix.fields import BadField
from ortfix.i18n import N_, Msg, language
from ortfix.plan.kinds import ActionKind
from ortfix.system.confine import ConfinementError, EnvRoot
from ortfix.system.host import HOST
from ortfix.system.linux import hooks
from ortfix.system.windows import hooks as winhooks
from ortfix.transaction.journal import Step, StepState
from ortfix.transaction.store import TransactionStore
from ortfix.transaction.undo_notes import UndoNote

ORIGIN_PLAN = "plan"
ORIGIN_REPLACED = "replaced-by-pip"


@dataclass(frozen=True)
class TargetEnv:
    """The environment actions touch. Paths are canonical (links resolved once, when the environment is opened);
    the first six fields are journaled (rollback needs no probe), the rest belong to this run only."""

    python: str
    prefix: str
    purelib: str
    platlib: str
    scripts: str
    env_kind: str
    uv: str | None = None  # the uv found on PATH now (never one named in a file)
    break_system_packages: bool = False  # `apply --system` on an externally managed Python
    root: EnvRoot | None = field(default=None, compare=False, repr=False)

    @property
    def site_dirs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.purelib, self.platlib)))

    @property
    def fs(self) -> EnvRoot:
        if self.root is None:
            raise RuntimeError("the environment was not opened")  # i18n: english (a bug, never the user's)
        return self.root

    def journaled(self) -> dict[str, str]:
        return {"python": self.python, "prefix": self.prefix, "purelib": self.purelib, "platlib": self.platlib,
                "scripts": self.scripts, "env_kind": self.env_kind}

    def rel(self, path: str) -> str:
        """The path below the prefix that an absolute path names; ConfinementError when it lies outside."""
        return self.fs.rel(path)

    def abs(self, rel: str) -> str:
        return os.path.join(self.prefix, rel)

    def site_rels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.rel(d) for d in self.site_dirs))

    def hook_rels(self) -> dict[str, str]:
        """rel path → what it is, for every file a write-file step may write: the hooks ortfix renders itself."""
        activate, deactivate = hooks.conda_hook_paths(self.prefix)
        module, pth = hooks.preload_paths(self.purelib)
        return {self.rel(str(activate)): "conda activate.d hook", self.rel(str(deactivate)): "conda deactivate.d hook",
                self.rel(str(module)): "preload hook module", self.rel(str(pth)): "preload hook .pth",
                **self._windows_hook_rels()}

    def _windows_hook_rels(self) -> dict[str, str]:
        """The Windows hooks (system/windows/hooks.py): the PATH hook's module and .pth, conda's six scripts."""
        module, pth = winhooks.path_hook_paths(self.purelib)
        rels = {self.rel(str(module)): "PATH hook module", self.rel(str(pth)): "PATH hook .pth"}
        for path in winhooks.conda_windows_hook_paths(self.prefix):
            rels[self.rel(str(path))] = f"conda {path.parent.name} {path.suffix} script"
        return rels


def scripts_folder(prefix: str) -> str:
    """Where installers put an environment's scripts: `Scripts` on Windows (venv, conda and python.org alike), `bin`
    elsewhere. ortfix runs on the target's own machine, so the host's platform is the target's."""
    return os.path.join(prefix, HOST.scripts_folder)


def open_env(python: str, prefix: str, purelib: str, platlib: str, scripts: str, env_kind: str, *,
             uv: str | None = None, break_system_packages: bool = False) -> TargetEnv:
    """Open the environment's root and canonicalise its paths; every folder actions touch must lie inside it."""
    root = EnvRoot(prefix)
    try:
        real = root.real
        paths = []
        for what, path in (("purelib", purelib), ("platlib", platlib), ("scripts", scripts)):
            if "\0" in path or not os.path.isabs(path):
                raise OrtfixError(Msg(N_("the environment's {what} {path} is not an absolute path"), what=what,
                                      path=repr(path)))
            canon = os.path.realpath(path)
            if not os.path.normcase(canon).startswith(os.path.normcase(real).rstrip("\\/") + os.sep):
                raise ConfinementError(str(Msg(N_("the environment's {what} {path} is outside its prefix {prefix}"),
                                               what=what, path=path, prefix=prefix)))
            paths.append(canon)
        return TargetEnv(python=python, prefix=real, purelib=paths[0], platlib=paths[1], scripts=paths[2],
                         env_kind=env_kind, uv=uv, break_system_packages=break_system_packages, root=root)
    except BaseException:
        root.close()
        raise


@dataclass(frozen=True)
class StepContext:
    """What a running step may use: the journal (write-ahead record and sidecars), its stash, output callbacks."""

    store: TransactionStore
    tx_id: str
    index: int
    commit: Callable[[Mapping[str, object]], None]  # journal the step's undo record now (before the change)
    echo: Callable[[str], None]  # a line for the terminal (translated already)
    output: Callable[[str, bool], None]  # a line of a child's output (pip), and whether it came from stderr
    crash_midway: bool = False  # test-only fault injection: die half-way through this step

    @property
    def step_rel(self) -> str:
        return self.store.step_rel(self.tx_id, self.index)

    @property
    def stash_rel(self) -> str:
        return self.store.stash_rel(self.tx_id, self.index)

    def write_sidecar(self, name: str, doc: object) -> str:
        return self.store.write_sidecar(self.tx_id, self.index, name, doc)

    def read_sidecar(self, name: str, sha256: str) -> Any:
        return self.store.read_sidecar(self.tx_id, self.index, name, sha256)


def test_crash() -> None:
    """Fault injection (ORTFIX_TEST_CRASH_*): die like kill -9 would, without cleaning up anything."""
    os._exit(99)


# ---------------------------------------------------------------------------------------------------------------------
# typed reading of untrusted details and records
# ---------------------------------------------------------------------------------------------------------------------


DetailsT = TypeVar("DetailsT", bound=Mapping[str, object])  # a kind's details TypedDict (plan/kinds.py)
RecordT = TypeVar("RecordT", bound=Mapping[str, object])  # the undo record TypedDict its execute writes


class Handler(ABC, Generic[DetailsT, RecordT]):
    """One kind of step. `details` and `record` arrive as plain mappings (from a plan file or a journal: untrusted)
    and are checked field by field (`check_step`, `check_details`, `check_record`); `typed_details`/`typed_record`
    then read them as the kind's TypedDicts. The types say what was checked; they check nothing themselves."""

    kind: ClassVar[ActionKind]
    details_keys: ClassVar[frozenset[str]]  # exactly what `details` holds
    record_keys: ClassVar[frozenset[str]]  # every key a record may hold
    started_keys: ClassVar[frozenset[str]]  # what the first commit writes: a started step without them is corrupt

    def check_step(self, env: TargetEnv, step: Step) -> str | None:
        """Why a journaled step cannot be trusted for undo (a missing, unknown or mistyped field, a path outside the
        environment), or None."""
        missing = sorted(self.details_keys - set(step.details))
        if missing:
            return f"lacks detail {missing[0]!r}"
        unknown = sorted(set(step.details) - self.details_keys)
        if unknown:
            return f"has an unknown detail {unknown[0]!r}"
        unknown = sorted(set(step.record) - self.record_keys)
        if unknown:
            return f"has an unknown record field {unknown[0]!r}"
        if step.state is not StepState.PLANNED:
            missing = sorted(self.started_keys - set(step.record))
            if missing:
                return f"lacks record field {missing[0]!r}"
        try:
            self.check_details(env, step.details)
            if step.state is not StepState.PLANNED:
                self.check_record(env, step)
        except (BadField, OrtfixError) as exc:
            return exc.one_line() if isinstance(exc, OrtfixError) else str(exc)
        return None

    @abstractmethod
    def title(self, step: Step) -> Msg:
        """The step's summary rebuilt from its details (plan/titles.py); BadField when they do not allow it."""

    def typed_details(self, details: Mapping[str, object]) -> DetailsT:
        """`details` as this kind's TypedDict: only for details `check_details` accepted."""
        return cast(DetailsT, details)

    def typed_record(self, step: Step) -> RecordT:
        """The step's record as this kind's TypedDict: only for a record `check_step` accepted, or one this run
        wrote (a started step's record may lack what only the end of `execute` adds: those keys are optional)."""
        return cast(RecordT, step.record)

    @abstractmethod
    def check_details(self, env: TargetEnv, details: Mapping[str, object]) -> None:
        """Raise BadField/ConfinementError unless every field is of the expected type and every path inside."""

    def check_record(self, env: TargetEnv, step: Step) -> None:
        """Raise BadField/ConfinementError unless the record's fields are well-formed."""

    @abstractmethod
    def verify(self, env: TargetEnv, details: DetailsT) -> list[str | Msg]: ...

    @abstractmethod
    def describe(self, env: TargetEnv, details: DetailsT) -> list[str | Msg]: ...

    @abstractmethod
    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> RecordT:
        """Do it; returns the final record (the journal gets it with the step marked done)."""

    def check_undo(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str | Msg]:
        """Every reason the step cannot be undone exactly (its stash is incomplete); checked before any change."""
        return []

    @abstractmethod
    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[UndoNote]: ...

    def changes(self, step: Step) -> list[str]:
        """What the step changed, one '+ x' / '- x' / '~ x' line each, for `history`."""
        return [step.summary]


AnyHandler = Handler[Mapping[str, object], Mapping[str, object]]  # a handler of any kind, its types erased
HANDLERS: dict[str, AnyHandler] = {}  # keyed by ActionKind (a str); looked up by what a plan or journal says


def register(handler: Handler[DetailsT, RecordT]) -> AnyHandler:
    """Erase the handler's types: a caller holding it by kind passes details `check_details` accepted (or a plan's
    own), exactly what `typed_details` assumes."""
    erased = cast(AnyHandler, handler)
    HANDLERS[handler.kind] = erased
    return erased


def handler_for(kind: str) -> AnyHandler:
    try:
        return HANDLERS[kind]
    except KeyError as exc:
        raise OrtfixError(Msg(N_("unknown action kind {kind}"), kind=repr(kind)),
                          hint=Msg(N_("this ortfix knows {kinds}"), kinds=", ".join(sorted(HANDLERS)))) from exc


def verified(env: TargetEnv, kind: str, details: Mapping[str, object]) -> list[str | Msg]:
    """The handler's problems, with malformed details reported as one problem instead of an exception."""
    handler = handler_for(kind)
    try:
        handler.check_details(env, details)
    except (BadField, OrtfixError) as exc:
        return [problem(exc)]
    return handler.verify(env, details)


def problem(exc: BadField | OrtfixError) -> str | Msg:
    """The one line an exception says, a Msg where it carries one (translated where it is printed)."""
    if isinstance(exc, OrtfixError):
        if not exc.hint or exc.hint_msg is None:  # OrtfixError.text()'s rule
            return exc.message_msg
        return Msg(N_("{message} ({hint})"), message=exc.message_msg, hint=exc.hint_msg)
    return exc.args[0] if exc.args and isinstance(exc.args[0], Msg) else str(exc)


class _Retold(Msg):
    """A step's title whose English is the summary its plan or journal holds, translated as the title rebuilt from
    its details (which may say less: why a distribution is uninstalled, what a hook does, stays in English only)."""

    __slots__ = ("rebuilt", "summary")

    def __init__(self, summary: str, rebuilt: Msg) -> None:
        super().__init__("{summary}", summary=summary)
        self.summary, self.rebuilt = summary, rebuilt

    def text(self) -> str:
        return self.summary if language() == "en" else self.rebuilt.text()


def step_title(step: Step) -> Msg:
    """What the terminal shows for a step (apply, rollback, history, its plan or journal read back): its English
    summary as it is written there, translated by rebuilding the kind's title from the step's details (checked field
    by field); the summary as it is when they do not allow that or the kind is unknown."""
    try:
        rebuilt = handler_for(step.kind).title(step)
    except (BadField, OrtfixError):
        return Msg("{summary}", summary=step.summary)
    return rebuilt if str(rebuilt) == step.summary else _Retold(step.summary, rebuilt)
