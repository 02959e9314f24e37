"""The transaction store (`TransactionStore`): one folder per apply under `<prefix>/.ortfix/transactions/<id>/`,
holding a write-ahead journal (journal.py: its record types and encoding), the plan it came from, and per step the
stash and the records needed to undo it. Also `interrupted_transactions`, the read-only view `ortfix check` takes.

Layout::

    <prefix>/.ortfix/lock                        one apply/rollback at a time (lock.py)
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
import errno
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system.confine import EnvRoot, open_for_reading, read_regular, require_trusted_owner, write_all
from ortfix.transaction.journal import (
    OPEN_STATUSES,
    StepState,
    Transaction,
    TxStatus,
    canonical,
    decode,
    encode,
    loads_json,
    now_iso,
    sha256_bytes,
)
from ortfix.transaction.lock import STATE_DIR, is_held, state_dir

JOURNAL_NAME = "journal.json"
PLAN_NAME = "plan.json"
TRANSACTIONS = "transactions"

_DUBIOUS = Msg(N_("ortfix does not trust a journal of dubious ownership; inspect it, and undo by hand if it is yours"))
_CANNOT_READ = N_("cannot read {path}: {error}")
_LISTS_THEM = Msg(N_("`ortfix history` lists them"))
_NO_GUESS = Msg(N_("ortfix will not guess how to undo it"))
_NO_GUESS_STEP = Msg(N_("ortfix will not guess how to undo this step"))
_INSPECT = N_("inspect it: `ortfix history show {id}`")
_ID = re.compile(r"^\d{8}T\d{9}Z-[0-9a-f]{4}$")
_NEW = ".new-"  # a transaction folder being prepared: renamed to its id once its journal is complete
RESERVE_NAME = "reserve"
RESERVE_BYTES = 4 << 20  # held on disk for the journal's rewrites and the folders a rollback re-creates
JOURNAL_LIMIT = 64 << 20
SIDECAR_LIMIT = 512 << 20


def valid_id(tx_id: str) -> bool:
    return bool(_ID.match(tx_id))


@dataclass(frozen=True)
class HistoryEntry:
    """One transaction as `history` lists it; `error` instead of `tx` when its journal cannot be trusted."""

    id: str
    folder: Path
    tx: Transaction | None
    error: str | Msg | None  # a Msg: English in --json (str), translated on the screen
    stash_bytes: int


class TransactionStore:
    """`<prefix>/.ortfix/transactions/`: every read and write goes through the environment's confined root (no
    symbolic link is followed), and a journal is trusted only when it is owned by the user running ortfix or by the
    environment's owner."""

    def __init__(self, prefix: str | Path, root: EnvRoot | None = None) -> None:
        self.prefix = Path(prefix)
        self.env = root if root is not None else EnvRoot(prefix)
        self._own_root = root is None
        self.root = state_dir(prefix) / TRANSACTIONS
        self.rel_root = f"{STATE_DIR}/{TRANSACTIONS}"
        self._sidecars: dict[tuple[str, int, str, str], object] = {}

    def close(self) -> None:
        if self._own_root:
            self.env.close()

    def __enter__(self) -> TransactionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # paths: absolute ones for people, relative ones for the confined operations
    def _check_id(self, tx_id: str) -> str:
        if not valid_id(tx_id):
            raise OrtfixError(Msg(N_("{id} is not a transaction id"), id=repr(tx_id)), hint=_LISTS_THEM)
        return tx_id

    def folder(self, tx_id: str) -> Path:
        return self.root / self._check_id(tx_id)

    def tx_rel(self, tx_id: str) -> str:
        return f"{self.rel_root}/{self._check_id(tx_id)}"

    def step_rel(self, tx_id: str, index: int) -> str:
        return f"{self.tx_rel(tx_id)}/steps/{int(index)}"

    def stash_rel(self, tx_id: str, index: int) -> str:
        return self.step_rel(tx_id, index) + "/stash"

    # creating a transaction: prepared under `.new-<id>`, renamed into place once plan and journal are written
    def begin(self, tx_id: str) -> Path:
        """Create the folder a transaction is prepared in (preflight's scratch space); returns its path."""
        self._check_id(tx_id)
        self.env.makedirs(self.rel_root)
        self.env.mkdir(f"{self.rel_root}/{_NEW}{tx_id}", 0o755)
        return self.root / f"{_NEW}{tx_id}"

    def abandon(self, tx_id: str) -> None:
        self.env.remove_tree(f"{self.rel_root}/{_NEW}{self._check_id(tx_id)}")

    def create(self, tx: Transaction, plan_bytes: bytes) -> None:
        """Write the plan, the journal and the disk reserve into the prepared folder, then rename it to the id: a
        transaction folder without a journal is never made by ortfix (it is damage, never cleaned up silently)."""
        new = f"{self.rel_root}/{_NEW}{self._check_id(tx.id)}"
        self.env.atomic_write(f"{new}/{PLAN_NAME}", plan_bytes)
        self.env.atomic_write(f"{new}/{JOURNAL_NAME}", encode(tx))
        self._make_reserve(f"{new}/{RESERVE_NAME}")
        self.env.rename(new, self.tx_rel(tx.id), replace=False)
        self.env.fsync_dir(self.rel_root)

    def _make_reserve(self, rel: str) -> None:
        def fill(fd: int) -> None:
            allocate = getattr(os, "posix_fallocate", None)  # not on Windows: written out there
            try:
                if allocate is None:
                    raise OSError(errno.EOPNOTSUPP, "no fallocate")
                allocate(fd, 0, RESERVE_BYTES)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise
                os.ftruncate(fd, 0)  # a filesystem without fallocate: write it out
                for _ in range(RESERVE_BYTES >> 20):
                    write_all(fd, b"\0" * (1 << 20))

        self.env.create_new(rel, fill, 0o600)

    def release_reserve(self, tx_id: str) -> bool:
        """Free the disk space held for this transaction's undo; True when there was some to free."""
        try:
            self.env.unlink(f"{self.tx_rel(tx_id)}/{RESERVE_NAME}")
            return True
        except OSError:
            return False

    def save(self, tx: Transaction) -> Transaction:
        tx = replace(tx, updated=now_iso())
        data = encode(tx)
        rel = f"{self.tx_rel(tx.id)}/{JOURNAL_NAME}"
        while True:
            try:
                self.env.atomic_write(rel, data)
                return tx
            except OSError as exc:
                # A full disk: the reserve exists for exactly this. Free it (once) and write again.
                full = exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))  # no EDQUOT: Windows
                if not full or not self.release_reserve(tx.id):
                    raise OrtfixError(Msg(N_("cannot write the journal {path}: {error}"), path=str(self.prefix / rel),
                                          error=str(exc.strerror or exc)),
                                      hint=Msg(N_("free some disk space, then run `ortfix rollback`"))) from exc

    def _read_trusted(self, rel: str, limit: int) -> bytes:
        data, st = self.env.read_bytes(rel, limit=limit)
        require_trusted_owner(st.st_uid, self.env.uid, str(self.prefix / rel), hint=_DUBIOUS)
        return data

    def load(self, tx_id: str) -> Transaction:
        rel = f"{self.tx_rel(tx_id)}/{JOURNAL_NAME}"
        path = self.prefix / rel
        if not self.env.is_dir(self.tx_rel(tx_id)):
            raise OrtfixError(Msg(N_("no transaction {id} in {prefix}"), id=tx_id, prefix=str(self.prefix)),
                              hint=_LISTS_THEM)
        try:
            data = self._read_trusted(rel, JOURNAL_LIMIT)
        except FileNotFoundError as exc:
            raise OrtfixError(Msg(N_("journal {path} is missing"), path=str(path)),
                              hint=Msg(N_("inspect it: `ortfix history show {id}`; ortfix will not guess what the "
                                          "transaction changed"), id=tx_id)) from exc
        except OSError as exc:
            raise OrtfixError(Msg(_CANNOT_READ, path=str(path), error=str(exc.strerror or exc)),
                              hint=Msg(_INSPECT, id=tx_id)) from exc
        tx = _checked(decode(data, str(path)), tx_id, str(path), self.env.real, str(self.prefix))
        plan = f"{self.tx_rel(tx_id)}/{PLAN_NAME}"
        with contextlib.suppress(FileNotFoundError):
            if sha256_bytes(self._read_trusted(plan, JOURNAL_LIMIT)) != tx.plan_sha256:
                raise OrtfixError(Msg(N_("{path} does not match the checksum in its journal"),
                                      path=str(self.prefix / plan)), hint=_NO_GUESS)
        return tx

    def plan_doc(self, tx_id: str) -> dict[str, Any] | None:
        try:
            doc = loads_json(self._read_trusted(f"{self.tx_rel(tx_id)}/{PLAN_NAME}", JOURNAL_LIMIT), "plan")
        except (OSError, ValueError, OrtfixError):
            return None
        return doc if isinstance(doc, dict) else None

    def ids(self) -> list[str]:
        """Every transaction folder, with or without a readable journal (a damaged one must be seen)."""
        try:
            names = self.env.listdir(self.rel_root)
        except (OSError, OrtfixError):
            return []
        return sorted(n for n in names if valid_id(n) and self.env.is_dir(f"{self.rel_root}/{n}"))

    def remove_abandoned(self) -> None:
        """`.new-<id>` folders: left by an apply that died before its journal was complete (nothing had been
        changed). Under the lock. A transaction folder is never removed here, journal or not."""
        try:
            names = self.env.listdir(self.rel_root)
        except (OSError, OrtfixError):
            return
        for n in names:
            if n.startswith(_NEW) and valid_id(n[len(_NEW):]):
                self.env.remove_tree(f"{self.rel_root}/{n}")

    def entries(self) -> list[HistoryEntry]:
        return [self.entry(tx_id) for tx_id in self.ids()]

    def entry(self, tx_id: str) -> HistoryEntry:
        """One transaction as `history` shows it: its journal, or why it cannot be trusted."""
        folder = self.folder(tx_id)
        try:
            return HistoryEntry(tx_id, folder, self.load(tx_id), None, stash_size(folder))
        except OrtfixError as exc:
            return HistoryEntry(tx_id, folder, None, exc.message_msg, stash_size(folder))

    # sidecars: records too large for the journal, protected by a hash stored in it
    def write_sidecar(self, tx_id: str, index: int, name: str, doc: object) -> str:
        rel = self.step_rel(tx_id, index)
        self.env.makedirs(rel)
        data = canonical(doc)
        self.env.atomic_write(f"{rel}/{name}.json", data)
        return sha256_bytes(data)

    def read_sidecar(self, tx_id: str, index: int, name: str, sha256: str) -> object:
        """The sidecar, checked against the hash its journal holds. What was checked once is kept: a rollback
        verifies every sidecar before it changes anything, then undoes from exactly those."""
        key = (tx_id, index, name, sha256)
        if key not in self._sidecars:
            self._sidecars[key] = self._read_sidecar(tx_id, index, name, sha256)
        return self._sidecars[key]

    def _read_sidecar(self, tx_id: str, index: int, name: str, sha256: str) -> object:
        rel = f"{self.step_rel(tx_id, index)}/{name}.json"
        path = self.prefix / rel
        try:
            data = self._read_trusted(rel, SIDECAR_LIMIT)
        except OSError as exc:
            raise OrtfixError(Msg(_CANNOT_READ, path=str(path), error=str(exc.strerror or exc)),
                              hint=_NO_GUESS_STEP) from exc
        if sha256_bytes(data) != sha256:
            raise OrtfixError(Msg(N_("{path} does not match the checksum in its journal: edited by hand or damaged"),
                                  path=str(path)), hint=_NO_GUESS_STEP)
        try:
            return loads_json(data, str(path))
        except (ValueError, UnicodeDecodeError) as exc:
            raise OrtfixError(Msg(N_("{path} is not valid: {error}"), path=str(path), error=str(exc)),
                              hint=_NO_GUESS_STEP) from exc

    def remove_stashes(self, tx_id: str) -> int:
        """Delete every step folder (stash and sidecars) of a transaction; the bytes freed on disk."""
        freed = stash_size(self.folder(tx_id))
        self.env.remove_tree(f"{self.tx_rel(tx_id)}/steps")
        self.release_reserve(tx_id)
        return freed


def _checked(tx: Transaction, tx_id: str, path: str, real_prefix: str, prefix: str) -> Transaction:
    if tx.id != tx_id:
        raise OrtfixError(Msg(N_("journal {path} names transaction {named}, not {id}"), path=path, named=tx.id,
                              id=tx_id), hint=_NO_GUESS)
    # Both prefixes a journal names: rollback opens the environment from `target` (env_from_journal).
    for named in (tx.prefix, tx.target["prefix"]):
        if os.path.normcase(os.path.realpath(named)) != os.path.normcase(real_prefix):
            raise OrtfixError(Msg(N_("journal {path} was written for {named}, not for {prefix}"), path=path,
                                  named=named, prefix=prefix),
                              hint=Msg(N_("ortfix undoes a transaction only in the environment it was made in")))
    return tx


def _read_plain(path: Path, env_uid: int) -> Transaction:
    """A journal read for `check` (read-only): by path, so the check cache records it, never through a final link,
    from a trusted owner."""
    try:
        fd = open_for_reading(path)
    except FileNotFoundError as exc:
        raise OrtfixError(Msg(N_("journal {path} is missing"), path=str(path))) from exc
    except OSError as exc:
        raise OrtfixError(Msg(_CANNOT_READ, path=str(path), error=str(exc.strerror or exc))) from exc
    data, st = read_regular(fd, f"journal {path}", JOURNAL_LIMIT)
    require_trusted_owner(st.st_uid, env_uid, str(path), hint=_DUBIOUS)
    return decode(data, str(path))


def stash_size(folder: Path) -> int:
    """Bytes that deleting the folder's steps/ would free (files with other hard links free nothing)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder / "steps"):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, name))
                if st.st_nlink <= 1:
                    blocks = getattr(st, "st_blocks", None)  # none on Windows: the size instead
                    total += st.st_size if blocks is None else blocks * 512
    return total


@dataclass(frozen=True)
class InterruptedTransaction:
    id: str
    status: TxStatus | None  # running (an apply that died), rolling-back (a rollback that died); None: unreadable
    created: str
    steps_started: int  # steps that are started or done: what `ortfix rollback` will undo
    steps_total: int
    folder: str
    error: str | None = None  # why its journal cannot be read or trusted


def interrupted_transactions(prefix: str | Path) -> list[InterruptedTransaction]:
    """Transactions an apply or rollback left half-done (the process died), and transactions whose journal cannot be
    read or trusted, oldest first; empty while an apply/rollback is running right now. For `ortfix check` (TX001)
    and for `apply`, which refuses to start while one exists. Only reads, by path (so that a replayed `check` sees
    a change here); what apply and rollback act on is read again through the confined store."""
    root = state_dir(prefix) / TRANSACTIONS
    try:
        names = sorted(os.listdir(root))
        env_uid = os.stat(prefix).st_uid
    except OSError:
        return []
    ids = [n for n in names if valid_id(n) and os.path.isdir(root / n) and not os.path.islink(root / n)]
    if not ids or is_held(prefix):
        return []
    real = os.path.realpath(prefix)
    out = []
    for tx_id in ids:
        try:
            tx = _checked(_read_plain(root / tx_id / JOURNAL_NAME, env_uid), tx_id, str(root / tx_id / JOURNAL_NAME),
                          real, str(prefix))
        except OrtfixError as exc:
            out.append(InterruptedTransaction(tx_id, None, "", 0, 0, str(root / tx_id), exc.one_line()))
            continue
        if tx.status in OPEN_STATUSES:
            started = sum(1 for s in tx.steps if s.state in (StepState.STARTED, StepState.DONE))
            out.append(InterruptedTransaction(tx.id, tx.status, tx.created, started, len(tx.steps), str(root / tx.id)))
    return out
