"""The transaction store: one folder per apply under `<prefix>/.ortfix/transactions/<id>/`, holding a write-ahead
journal, the plan it came from, and per step the stash and the records needed to undo it.

Layout::

    <prefix>/.ortfix/lock                        flock: one apply/rollback at a time (lock.py)
    <prefix>/.ortfix/transactions/<id>/
        journal.json                             {"schema", "sha256", "body"}: sha256 of the canonical body
        plan.json                                the plan, as `ortfix plan --json` prints it
        steps/<n>/<name>.json                    sidecar records too large for the journal (hash in the journal)
        steps/<n>/stash/<path under prefix>      files moved aside, byte for byte (same filesystem: os.rename)

Every change of the journal is written atomically (temp file in the same folder, fsync, os.replace, fsync of the
folder), so after a crash the journal is the old or the new version, never a mix. Reading is strict for rollback
(a checksum mismatch, a missing or an unknown field: refuse rather than guess) and tolerant for history (a corrupt
journal is a listed state, never a traceback).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

from ortfix.errors import OrtfixError
from ortfix.lock import is_held, state_dir

JOURNAL_SCHEMA = "ortfix.journal/1"
JOURNAL_NAME = "journal.json"
PLAN_NAME = "plan.json"
TRANSACTIONS = "transactions"


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
    details: Mapping[str, Any]  # what to do (the plan action's details)
    state: StepState
    record: Mapping[str, Any]  # what is needed to undo it, written before the change is made
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
    verification: Mapping[str, Any] | None
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


def canonical(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_fsynced(path: str | Path, data: bytes, mode: int, *, exclusive: bool = False) -> None:
    """Write the whole file with exactly `mode` (not the umask's) and fsync it before returning."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write via a temp file in the same folder + fsync + os.replace + fsync of the folder."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write_fsynced(tmp, data, mode)
    os.replace(tmp, path)
    fsync_dir(path.parent)


# ---------------------------------------------------------------------------------------------------------------------
# (de)serialisation
# ---------------------------------------------------------------------------------------------------------------------


def step_json(step: Step) -> dict[str, Any]:
    return {"index": step.index, "kind": step.kind, "summary": step.summary, "origin": step.origin,
            "details": dict(step.details), "state": step.state.value, "record": dict(step.record),
            "started": step.started, "finished": step.finished, "error": step.error}


def transaction_json(tx: Transaction) -> dict[str, Any]:
    return {"id": tx.id, "created": tx.created, "updated": tx.updated, "ortfix_version": tx.ortfix_version,
            "prefix": tx.prefix, "target": dict(tx.target), "installer": tx.installer,
            "plan_fingerprint": tx.plan_fingerprint, "plan_sha256": tx.plan_sha256, "status": tx.status.value,
            "steps": [step_json(s) for s in tx.steps],
            "verification": dict(tx.verification) if tx.verification is not None else None,
            "rollback": dict(tx.rollback) if tx.rollback is not None else None,
            "message": tx.message, "pruned": tx.pruned}


def _fields(doc: Any, expected: Sequence[str], where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ValueError(f"{where} is not an object")
    missing = [k for k in expected if k not in doc]
    unknown = sorted(k for k in doc if k not in expected)
    if missing:
        raise ValueError(f"{where} lacks field {missing[0]!r}")
    if unknown:
        raise ValueError(f"{where} has an unknown field {unknown[0]!r}")
    return doc


def _typed(value: Any, types: type | tuple[type, ...], what: str) -> Any:
    if not isinstance(value, types) or (isinstance(value, bool) and types is not bool):
        raise ValueError(f"{what} has the wrong type")
    return value


def _opt_str(value: Any, what: str) -> str | None:
    return None if value is None else str(_typed(value, str, what))


def _step_from(doc: Any, n: int) -> Step:
    d = _fields(doc, _STEP_FIELDS, f"step {n}")
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


def _target(doc: Any) -> dict[str, str]:
    d = _fields(doc, _TARGET_FIELDS, "target")
    return {k: str(_typed(d[k], str, f"target {k}")) for k in _TARGET_FIELDS}


def transaction_from(body: Any) -> Transaction:
    """Strict: raises ValueError naming the first missing, unknown or mistyped field."""
    d = _fields(body, _TX_FIELDS, "journal body")
    try:
        status = TxStatus(d["status"])
    except ValueError as exc:
        raise ValueError(f"journal has an unknown status {d['status']!r}") from exc
    steps = tuple(_step_from(s, i) for i, s in enumerate(_typed(d["steps"], list, "steps"), 1))
    if [s.index for s in steps] != list(range(1, len(steps) + 1)):
        raise ValueError("step numbers are not 1..n in order")
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
    return (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def decode(data: bytes, where: str) -> Transaction:
    """The journal in `data`, or OrtfixError (one line) when it is unreadable, edited by hand or incomplete."""
    try:
        doc = json.loads(data.decode("utf-8"))
        outer = _fields(doc, ("schema", "sha256", "body"), "journal")
        if outer["schema"] != JOURNAL_SCHEMA:
            raise ValueError(f"unknown schema {outer['schema']!r}")
        if sha256_bytes(canonical(outer["body"])) != outer["sha256"]:
            raise OrtfixError(f"journal {where} does not match its checksum: it was edited by hand or damaged",
                              hint="ortfix will not guess how to undo it; restore the journal or undo by hand")
        return transaction_from(outer["body"])
    except OrtfixError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise OrtfixError(f"journal {where} is not a valid ortfix journal: {exc}",
                          hint="ortfix will not guess how to undo it; restore the journal or undo by hand") from exc


# ---------------------------------------------------------------------------------------------------------------------
# the store
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryEntry:
    """One transaction as `history` lists it; `error` instead of `tx` when its journal cannot be trusted."""

    id: str
    folder: Path
    tx: Transaction | None
    error: str | None
    stash_bytes: int


class TransactionStore:
    def __init__(self, prefix: str | Path) -> None:
        self.prefix = Path(prefix)
        self.root = state_dir(prefix) / TRANSACTIONS

    def folder(self, tx_id: str) -> Path:
        if not tx_id or "/" in tx_id or tx_id.startswith("."):
            raise OrtfixError(f"{tx_id!r} is not a transaction id", hint="`ortfix history` lists them")
        return self.root / tx_id

    def step_dir(self, tx_id: str, index: int) -> Path:
        return self.folder(tx_id) / "steps" / str(index)

    def stash(self, tx_id: str, index: int) -> Path:
        return self.step_dir(tx_id, index) / "stash"

    def create(self, tx: Transaction, plan_bytes: bytes) -> None:
        folder = self.folder(tx.id)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / PLAN_NAME, plan_bytes)
        atomic_write(folder / JOURNAL_NAME, encode(tx))
        fsync_dir(self.root)

    def save(self, tx: Transaction) -> Transaction:
        tx = replace(tx, updated=now_iso())
        atomic_write(self.folder(tx.id) / JOURNAL_NAME, encode(tx))
        return tx

    def load(self, tx_id: str) -> Transaction:
        path = self.folder(tx_id) / JOURNAL_NAME
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise OrtfixError(f"no transaction {tx_id} in {self.prefix}", hint="`ortfix history` lists them") from exc
        except OSError as exc:
            raise OrtfixError(f"cannot read {path}: {exc.strerror or exc}") from exc
        tx = decode(data, str(path))
        if tx.id != tx_id:
            raise OrtfixError(f"journal {path} names transaction {tx.id}, not {tx_id}",
                              hint="ortfix will not guess how to undo it")
        plan = self.folder(tx_id) / PLAN_NAME
        with contextlib.suppress(OSError):
            if sha256_bytes(plan.read_bytes()) != tx.plan_sha256:
                raise OrtfixError(f"{plan} does not match the checksum in its journal",
                                  hint="ortfix will not guess how to undo it")
        return tx

    def plan_doc(self, tx_id: str) -> dict[str, Any] | None:
        try:
            doc = json.loads((self.folder(tx_id) / PLAN_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    def ids(self) -> list[str]:
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        return sorted(n for n in names if not n.startswith(".") and (self.root / n / JOURNAL_NAME).is_file())

    def remove_unjournaled(self) -> None:
        """Folders without a journal: left by a preflight that died (nothing had been changed). Under the lock."""
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        for n in names:
            if not n.startswith(".") and (self.root / n).is_dir() and not (self.root / n / JOURNAL_NAME).exists():
                shutil.rmtree(self.root / n, ignore_errors=True)

    def entries(self) -> list[HistoryEntry]:
        out = []
        for tx_id in self.ids():
            folder = self.root / tx_id
            tx: Transaction | None = None
            error: str | None = None
            try:
                tx = self.load(tx_id)
            except OrtfixError as exc:
                error = exc.message
            out.append(HistoryEntry(tx_id, folder, tx, error, stash_size(folder)))
        return out

    # sidecars: records too large for the journal, protected by a hash stored in it
    def write_sidecar(self, tx_id: str, index: int, name: str, doc: Any) -> str:
        folder = self.step_dir(tx_id, index)
        folder.mkdir(parents=True, exist_ok=True)
        data = canonical(doc)
        atomic_write(folder / f"{name}.json", data)
        return sha256_bytes(data)

    def read_sidecar(self, tx_id: str, index: int, name: str, sha256: str) -> Any:
        path = self.step_dir(tx_id, index) / f"{name}.json"
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise OrtfixError(f"cannot read {path}: {exc.strerror or exc}",
                              hint="ortfix will not guess how to undo this step") from exc
        if sha256_bytes(data) != sha256:
            raise OrtfixError(f"{path} does not match the checksum in its journal: edited by hand or damaged",
                              hint="ortfix will not guess how to undo this step")
        return json.loads(data.decode("utf-8"))

    def remove_stashes(self, tx_id: str) -> int:
        """Delete every step folder (stash and sidecars) of a transaction; the bytes freed on disk."""
        steps = self.folder(tx_id) / "steps"
        freed = stash_size(self.folder(tx_id))
        shutil.rmtree(steps, ignore_errors=True)
        return freed


def stash_size(folder: Path) -> int:
    """Bytes that deleting the folder's steps/ would free (files with other hard links free nothing)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder / "steps"):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, name))
                if st.st_nlink <= 1:
                    total += st.st_blocks * 512
    return total


@dataclass(frozen=True)
class InterruptedTransaction:
    id: str
    status: TxStatus  # running (an apply that died) or rolling-back (a rollback that died)
    created: str
    steps_started: int  # steps that are started or done: what `ortfix rollback` will undo
    steps_total: int
    folder: str


def interrupted_transactions(prefix: str | Path) -> list[InterruptedTransaction]:
    """Transactions an apply or rollback left half-done (the process died), oldest first; empty while an
    apply/rollback is running right now. For `ortfix check` (finding TX001: run `ortfix rollback`)."""
    store = TransactionStore(prefix)
    ids = store.ids()
    if not ids or is_held(prefix):
        return []
    out = []
    for tx_id in ids:
        try:
            tx = store.load(tx_id)
        except OrtfixError:
            continue
        if tx.status in OPEN_STATUSES:
            started = sum(1 for s in tx.steps if s.state in (StepState.STARTED, StepState.DONE))
            out.append(InterruptedTransaction(tx.id, tx.status, tx.created, started, len(tx.steps),
                                              str(store.folder(tx.id))))
    return out
