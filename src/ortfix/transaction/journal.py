"""The journal of a transaction: its record types (`Transaction`, `Step`, their states) and their encoding on disk,
`{"schema", "sha256", "body"}` with the sha256 of the canonical body. Decoding is strict (a checksum mismatch, a
missing or an unknown field: refuse rather than guess); where the journal lives and how it is written atomically is
store.py's."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from ortfix.errors import OrtfixError
from ortfix.fields import exact_fields
from ortfix.i18n import N_, Msg

if TYPE_CHECKING:
    from ortfix.fields import JsonValue

JOURNAL_SCHEMA = "ortfix.journal/2"
_T = TypeVar("_T")


class TxStatus(str, Enum):
    RUNNING = "running"  # apply under way; with nobody holding the lock: interrupted
    APPLIED = "applied"  # every step done and verified
    KEPT = "kept"  # verification failed; left in place for inspection (--keep-on-failure)
    ROLLING_BACK = "rolling-back"  # rollback under way; with nobody holding the lock: interrupted
    ROLLED_BACK = "rolled-back"


class StepState(str, Enum):
    PLANNED = "planned"
    STARTED = "started"  # the undo record is on disk; the change may be partly made
    DONE = "done"
    REVERSED = "reversed"


OPEN_STATUSES = (TxStatus.RUNNING, TxStatus.ROLLING_BACK)


@dataclass(frozen=True)
class Step:
    index: int  # 1-based, in execution order
    kind: str  # an action kind (actions.HANDLERS)
    summary: str
    origin: str  # "plan", or "replaced-by-pip": a distribution pip would replace, moved aside by ortfix first
    details: Mapping[str, object]  # what to do (the plan action's details)
    state: StepState
    record: Mapping[str, object]  # what is needed to undo it, written before the change is made
    started: str | None
    finished: str | None
    error: str | None


@dataclass(frozen=True)
class Transaction:
    id: str
    created: str
    updated: str
    ortfix_version: str
    prefix: str
    target: Mapping[str, str]  # the environment's paths (actions.TargetEnv): rollback needs no probe
    installer: str | None
    plan_fingerprint: str
    plan_sha256: str
    status: TxStatus
    steps: tuple[Step, ...]
    verification: Mapping[str, Any] | None  # verify's JSON: read by the history renderer
    rollback: Mapping[str, Any] | None  # started, finished, reason, warnings
    message: str | None  # why it failed, when it did
    pruned: bool  # the stash was deleted by `history prune`: no longer reversible


_STEP_FIELDS = ("index", "kind", "summary", "origin", "details", "state", "record", "started", "finished", "error")
_TX_FIELDS = ("id", "created", "updated", "ortfix_version", "prefix", "target", "installer",
              "plan_fingerprint", "plan_sha256", "status", "steps", "verification", "rollback", "message", "pruned")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_id(now: datetime | None = None) -> str:
    """Time-sortable: `20251122T193012345Z-a1b2` (UTC to the millisecond, then 16 random bits)."""
    t = now or datetime.now(timezone.utc)
    return t.strftime("%Y%m%dT%H%M%S") + f"{t.microsecond // 1000:03d}Z-" + secrets.token_hex(2)


def canonical(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------------------------------
# (de)serialisation
# ---------------------------------------------------------------------------------------------------------------------


def step_json(step: Step) -> dict[str, object]:
    return {"index": step.index, "kind": step.kind, "summary": step.summary, "origin": step.origin,
            "details": dict(step.details), "state": step.state.value, "record": dict(step.record),
            "started": step.started, "finished": step.finished, "error": step.error}


def transaction_json(tx: Transaction) -> dict[str, object]:
    return {"id": tx.id, "created": tx.created, "updated": tx.updated, "ortfix_version": tx.ortfix_version,
            "prefix": tx.prefix, "target": dict(tx.target), "installer": tx.installer,
            "plan_fingerprint": tx.plan_fingerprint, "plan_sha256": tx.plan_sha256, "status": tx.status.value,
            "steps": [step_json(s) for s in tx.steps],
            "verification": dict(tx.verification) if tx.verification is not None else None,
            "rollback": dict(tx.rollback) if tx.rollback is not None else None,
            "message": tx.message, "pruned": tx.pruned}


def _typed(value: object, types: type[_T], what: str) -> _T:
    if not isinstance(value, types) or (isinstance(value, bool) and types is not bool):
        raise ValueError(f"{what} has the wrong type")
    return value


def _opt_str(value: object, what: str) -> str | None:
    return None if value is None else str(_typed(value, str, what))


def _step_from(doc: object, n: int) -> Step:
    d = exact_fields(doc, _STEP_FIELDS, f"step {n}")
    try:
        state = StepState(d["state"])
    except ValueError as exc:
        raise ValueError(f"step {n} has an unknown state {d['state']!r}") from exc
    return Step(index=_typed(d["index"], int, f"step {n} index"), kind=_typed(d["kind"], str, f"step {n} kind"),
                summary=_typed(d["summary"], str, f"step {n} summary"),
                origin=_typed(d["origin"], str, f"step {n} origin"),
                details=_typed(d["details"], dict, f"step {n} details"), state=state,
                record=_typed(d["record"], dict, f"step {n} record"),
                started=_opt_str(d["started"], f"step {n} started"),
                finished=_opt_str(d["finished"], f"step {n} finished"),
                error=_opt_str(d["error"], f"step {n} error"))


_TARGET_FIELDS = ("python", "prefix", "purelib", "platlib", "scripts", "env_kind")


def _target(doc: object) -> dict[str, str]:
    d = exact_fields(doc, _TARGET_FIELDS, "target")
    return {k: str(_typed(d[k], str, f"target {k}")) for k in _TARGET_FIELDS}


def transaction_from(body: object) -> Transaction:
    """Strict: raises ValueError naming the first missing, unknown or mistyped field."""
    d = exact_fields(body, _TX_FIELDS, "journal body")
    try:
        status = TxStatus(d["status"])
    except ValueError as exc:
        raise ValueError(f"journal has an unknown status {d['status']!r}") from exc
    steps = tuple(_step_from(s, i) for i, s in enumerate(_typed(d["steps"], list, "steps"), 1))
    if [s.index for s in steps] != list(range(1, len(steps) + 1)):
        raise ValueError("step numbers are not 1..n in order")  # i18n: english (a detail quoted in the error)
    for key in ("verification", "rollback"):
        if d[key] is not None:
            _typed(d[key], dict, key)
    return Transaction(
        id=_typed(d["id"], str, "id"), created=_typed(d["created"], str, "created"),
        updated=_typed(d["updated"], str, "updated"), ortfix_version=_typed(d["ortfix_version"], str, "version"),
        prefix=_typed(d["prefix"], str, "prefix"), target=_target(d["target"]),
        installer=_opt_str(d["installer"], "installer"),
        plan_fingerprint=_typed(d["plan_fingerprint"], str, "plan_fingerprint"),
        plan_sha256=_typed(d["plan_sha256"], str, "plan_sha256"), status=status, steps=steps,
        verification=d["verification"], rollback=d["rollback"], message=_opt_str(d["message"], "message"),
        pruned=_typed(d["pruned"], bool, "pruned"))


def encode(tx: Transaction) -> bytes:
    body = transaction_json(tx)
    doc = {"schema": JOURNAL_SCHEMA, "sha256": sha256_bytes(canonical(body)), "body": body}
    # ASCII: a message or a RECORD row may hold C1 controls or U+2028, which JSON allows raw (safetext.py)
    return (json.dumps(doc, indent=1) + "\n").encode("utf-8")


def loads_json(data: bytes, where: str) -> JsonValue:
    """JSON read back from disk (a journal, a sidecar, a plan): untrusted. UTF-8 only, no NaN/Infinity; a document
    nested too deeply for the decoder is a ValueError (one line), never a RecursionError. The callers' typed parsers
    refuse any shape they do not expect."""

    def no_constant(name: str) -> JsonValue:
        raise ValueError(f"{where} holds {name}, which is not JSON")  # i18n: english (a detail quoted in the error)

    try:
        doc: JsonValue = json.loads(data.decode("utf-8"), parse_constant=no_constant)
        return doc
    except RecursionError as exc:
        raise ValueError(f"{where} is nested too deeply") from exc


_NO_GUESS = N_("ortfix will not guess how to undo it; restore the journal or undo by hand")


def decode(data: bytes, where: str) -> Transaction:
    """The journal in `data`, or OrtfixError (one line) when it is unreadable, edited by hand or incomplete."""
    try:
        doc = loads_json(data, "the journal")
        outer = exact_fields(doc, ("schema", "sha256", "body"), "journal")
        if outer["schema"] != JOURNAL_SCHEMA:
            raise ValueError(f"unknown schema {outer['schema']!r} (this ortfix reads {JOURNAL_SCHEMA})")
        if sha256_bytes(canonical(outer["body"])) != outer["sha256"]:
            raise OrtfixError(Msg(N_("journal {path} does not match its checksum: it was edited by hand or damaged"),
                                  path=where), hint=Msg(_NO_GUESS))
        return transaction_from(outer["body"])
    except OrtfixError:
        raise
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise OrtfixError(Msg(N_("journal {path} is not a valid ortfix journal: {error}"), path=where, error=str(exc)),
                          hint=Msg(_NO_GUESS)) from exc
