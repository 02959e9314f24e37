"""Render the transaction commands' results for people (text) and for programs (the data of their JSON
envelope, cli/output.py)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ortfix.cli.cmdline import quote, windows_target
from ortfix.safetext import join_lines
from ortfix.transaction.actions import handler_for
from ortfix.transaction.journal import Step, StepState, Transaction, TxStatus, transaction_json
from ortfix.transaction.store import HistoryEntry
from ortfix.transaction.undo_notes import FAILING, any_failed, as_before, said, summary, verdict
from ortfix.verify.winloadcheck import PROVIDER_DLL

if TYPE_CHECKING:
    from ortfix.commands.apply import ApplyResult
    from ortfix.commands.history import HistoryResult, PruneResult, ShowResult
    from ortfix.commands.rollback import RollbackResult
    from ortfix.verify.loadcheck import LoadCheck



def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def step_changes(step: Step) -> list[str]:
    try:
        return handler_for(step.kind).changes(step)
    except Exception:  # an unknown kind in an old journal: show the summary
        return [step.summary]


def tx_changes(tx: Transaction) -> list[str]:
    out: list[str] = []
    for s in tx.steps:
        if s.state is not StepState.PLANNED:
            out += step_changes(s)
    return out


def _short(changes: Sequence[str], limit: int = 4) -> str:
    if not changes:
        return "(nothing changed)"
    shown = [c if not c.startswith(("+ /", "~ /")) else f"{c[0]} {os.path.basename(c[2:])}" for c in changes]
    shown.sort(key=lambda c: 0 if " onnxruntime" in c else 1)  # stable: the ORT change first, then the rest
    return ", ".join(shown[:limit]) + (f", … {len(shown) - limit} more" if len(shown) > limit else "")


# ---------------------------------------------------------------------------------------------------------------------
# apply
# ---------------------------------------------------------------------------------------------------------------------


def render_dry_run(result: ApplyResult) -> str:
    assert result.outcome is not None
    pf = result.outcome.preflight
    lines = ["Dry run: nothing was changed. An apply would do this, as one transaction:", ""]
    for argv in pf.commands:
        lines.append(f"preflight ran: {shlex.join(argv)}")
    if pf.resolution is not None:
        for r in pf.resolution.install:
            extra = f" (replaces {r.replaces.name} {r.replaces.version}: moved aside first)" if r.replaces else ""
            lines.append(f"  the installer would install {r.name} {r.version}{extra}"
                         + (f" from {r.url}" if r.url else ""))
    if pf.disk is not None:
        lines.append(f"disk: {size(pf.disk.free_bytes)} free in {pf.disk.where}, about {size(pf.disk.needed_bytes)} "
                     "needed" + (f" (estimated from measured wheels for {len(pf.disk.estimated)} of them)"
                                 if pf.disk.estimated else "")
                     + (f" (sizes unknown for {', '.join(pf.disk.unknown_sizes)})" if pf.disk.unknown_sizes else ""))
    lines.append("")
    for step, described in pf.describe():
        origin = " [pip would replace it]" if step.origin != "plan" else ""
        lines.append(f"{step.index}. {step.kind}: {step.summary}{origin}")
        lines += [f"     {d}" for d in described]
    lines.append("")
    lines.append("then: verify in a fresh process of the target interpreter (import onnxruntime, load every library "
                 "the CUDA provider needs) and re-run `ortfix check`; roll back if either fails")
    if pf.problems:
        lines.append("")
        lines.append("Preflight would refuse:")
        lines += [f"  {p}" for p in pf.problems]
    return join_lines(lines)


def render_apply(result: ApplyResult) -> str:
    plan = result.prepared.plan
    if result.outcome is None:
        return "Nothing to change." + ("" if not plan.unresolved else
                                       " Not fixable by ortfix here: "
                                       + ", ".join(f"{f.code} {f.summary}" for f in plan.unresolved))
    if result.dry_run:
        return render_dry_run(result)
    out = result.outcome
    tx = out.tx
    assert tx is not None
    lines: list[str] = []
    ver = out.verification
    if tx.status is TxStatus.APPLIED:
        lines.append(f"Applied transaction {tx.id} ({len(tx.steps)} steps):")
    elif tx.status is TxStatus.KEPT:
        lines.append(f"Transaction {tx.id} applied but NOT verified; kept for inspection (--keep-on-failure):")
    else:
        lines.append(f"Transaction {tx.id} failed verification and was rolled back:")
    lines += [f"  {c}" for c in tx_changes(tx)]
    if ver is not None:
        if ver.loader is not None:
            loaded = [x.soname for x in ver.loader.libraries if x.error is None]
            lines.append(f"verify: {shlex.join(ver.loader.argv[:-1])} <script>: import onnxruntime "
                         f"{'ok' if ver.loader.imported else 'FAILED'}; {len(loaded)}/{len(ver.loader.libraries)} "
                         f"libraries load{counted(ver.loader)}")
        lines += [f"  {note}" for note in ver.notes]
        lines += [f"  ✗ {p}" for p in ver.problems]
        if ver.ok:
            lines.append("ortfix check: no blocking findings left")
        if ver.gpu_not_verified:
            lines.append(ver.gpu_not_verified)
    lines += [f"  ✗ the apply broke a requirement ({'uv pip' if plan.installer == 'uv' else 'pip'} check): {b}"
              for b in out.broken]
    if out.warnings:
        lines += [f"warning: {w}" for w in out.warnings]
    if plan.unresolved:
        lines.append("Still needs you: " + "; ".join(f"{f.code} {f.summary}" for f in plan.unresolved))
    if tx.status in (TxStatus.APPLIED, TxStatus.KEPT):
        # a line to paste: the path is quoted for the target's shell (a prefix may hold spaces, quotes, `$(...)`,
        # backticks; cmd and PowerShell read double quotes only)
        lines.append(f"Undo: ortfix rollback --python {quote(plan.python, windows_target(plan.python))}")
    return join_lines(lines)


def counted(check: LoadCheck) -> str:
    """What a Windows load check counted, for the count to be read right: the CUDA provider (its imports load with
    it, uncounted) and the DLLs loaded later by bare name (the build's on-demand loads, cuDNN's sub-libraries), which
    the build and its cuDNN major name: the same count whichever hook made them findable."""
    if check.platform != "windows":
        return ""
    later = sum(1 for lib in check.libraries if not lib.soname.lower().endswith(PROVIDER_DLL))
    return (f" (counted: the CUDA provider, whose imported DLLs load with it, and {later} "
            f"DLL{'' if later == 1 else 's'} loaded later by bare name)")


def apply_json(result: ApplyResult) -> dict[str, Any]:
    out = result.outcome
    doc: dict[str, Any] = {"dry_run": result.dry_run,
                           "status": "nothing-to-do" if out is None else out.status,
                           "plan_source": result.prepared.source, "plan": result.prepared.plan.to_json(),
                           "interpreter": result.prepared.check.target.to_json()}
    if out is None:
        return doc
    pf = out.preflight
    doc["preflight"] = {
        "problems": list(pf.problems),
        "commands": [list(c) for c in pf.commands],
        "disk": None if pf.disk is None else {"where": pf.disk.where, "free_bytes": pf.disk.free_bytes,
                                              "needed_bytes": pf.disk.needed_bytes,
                                              "download_bytes": pf.disk.download_bytes,
                                              "unknown_sizes": list(pf.disk.unknown_sizes),
                                              "estimated": list(pf.disk.estimated)},
        "resolution": None if pf.resolution is None else [
            {"name": r.name, "version": r.version, "url": r.url, "download_bytes": r.download_bytes,
             "unpacked_bytes": r.unpacked_bytes,
             "replaces": None if r.replaces is None else {"name": r.replaces.name, "version": r.replaces.version}}
            for r in pf.resolution.install],
    }
    if result.dry_run:
        doc["steps"] = [{"index": s.index, "kind": s.kind, "summary": s.summary, "origin": s.origin,
                         "would": described} for s, described in pf.describe()]
    doc["transaction"] = None if out.tx is None else transaction_json(out.tx)
    doc["verification"] = None if out.verification is None else out.verification.to_json()
    doc["warnings"] = list(out.warnings)
    doc["broken_requirements"] = list(out.broken)  # new broken requirements found by the installer's check
    return doc


# ---------------------------------------------------------------------------------------------------------------------
# rollback
# ---------------------------------------------------------------------------------------------------------------------


def render_rollback_preview(prefix: str, tx: Transaction) -> str:
    undo = [s for s in reversed(tx.steps) if s.state in (StepState.STARTED, StepState.DONE)]
    lines = [f"Roll back transaction {tx.id} in {prefix} ({tx.status.value}, made {tx.created}):"]
    for s in undo:
        lines.append(f"  undo {s.index}. {s.summary}" + ("  (cut off half-way)" if s.state is StepState.STARTED
                                                         else ""))
    if not undo:
        lines.append("  no step had started; only the journal changes")
    return join_lines(lines)


def render_rollback(result: RollbackResult, *, verbose: bool = False) -> str:
    """One line per cause of what was not put back exactly (every path with `verbose`), then the verdict."""
    o = result.outcome
    lines = [f"Rolled back transaction {o.tx.id}: {len(o.undone)} step(s) undone in {result.target.prefix}."]
    if o.freeing:
        lines.append("The files the install had added are being deleted in the background.")
    lines += [("warning: " if cause in FAILING else "note: ") + line for cause, line in summary(o.notes)]
    if verbose:
        lines += [f"  {n.cause.value}: {n.text}" for n in said(o.notes)]
    elif said(o.notes):
        lines.append(f"Every path: `ortfix history show {o.tx.id}` (or `rollback --verbose`, `--json`).")
    lines.append(verdict(o.notes))
    return join_lines(lines)


def rollback_json(result: RollbackResult) -> dict[str, Any]:
    o = result.outcome
    return {"prefix": result.target.prefix,
            "interpreter": result.target.to_json(),
            "transaction": transaction_json(o.tx), "undone": [s.index for s in o.undone],
            "freeing_in_background": list(o.freeing),
            "as_before": as_before(o.notes), "everything_undone": not any_failed(o.notes),
            "verdict": verdict(o.notes),
            "summary": [line for _cause, line in summary(o.notes)],
            "notes": [n.to_json() for n in said(o.notes)],
            "warnings": [n.text for n in said(o.notes)]}


# ---------------------------------------------------------------------------------------------------------------------
# history
# ---------------------------------------------------------------------------------------------------------------------


def _entry_json(e: HistoryEntry) -> dict[str, Any]:
    if e.tx is None:
        return {"id": e.id, "status": "unreadable", "error": e.error, "folder": str(e.folder),
                "stash_bytes": e.stash_bytes}
    tx = e.tx
    return {"id": tx.id, "created": tx.created, "updated": tx.updated, "status": tx.status.value,
            "pruned": tx.pruned, "changes": tx_changes(tx), "steps": len(tx.steps),
            "steps_done": sum(1 for s in tx.steps if s.state is StepState.DONE), "message": tx.message,
            "folder": str(e.folder), "stash_bytes": e.stash_bytes}


def render_history(result: HistoryResult) -> str:
    if not result.entries:
        return f"No ortfix transactions in {result.target.prefix}."
    lines = [f"Transactions in {result.target.prefix} (oldest first):", ""]
    lines.append(f"{'ID':<26} {'CREATED (UTC)':<19} {'STATUS':<13} {'STASH':>9}  CHANGES")
    for e in result.entries:
        if e.tx is None:
            lines.append(f"{e.id:<26} {'?':<19} {'unreadable':<13} {size(e.stash_bytes):>9}  {e.error}")
            continue
        tx = e.tx
        status = tx.status.value + (" (pruned)" if tx.pruned else "")
        lines.append(f"{tx.id:<26} {tx.created[:19].replace('T', ' '):<19} {status:<13} "
                     f"{size(e.stash_bytes):>9}  {_short(tx_changes(tx))}")
    undoable = any(e.tx is not None and e.tx.status is not TxStatus.ROLLED_BACK for e in result.entries)
    lines += ["", "Details: ortfix history show ID. "
              + ("Undo the newest: ortfix rollback." if undoable else "Nothing to undo: every one is rolled back.")]
    return join_lines(lines)


def history_json(result: HistoryResult) -> dict[str, Any]:
    return {"prefix": result.target.prefix, "interpreter": result.target.to_json(),
            "transactions": [_entry_json(e) for e in result.entries]}


def render_show(result: ShowResult) -> str:
    e = result.entry
    if e.tx is None:
        return join_lines([f"transaction {e.id}: unreadable journal: {e.error}", f"folder: {e.folder}"])
    tx = e.tx
    lines = [f"transaction {tx.id}: {tx.status.value}" + (" (stash pruned)" if tx.pruned else ""),
             f"environment  {tx.prefix} ({tx.target.get('env_kind')}, {tx.target.get('python')})",
             f"created      {tx.created}", f"updated      {tx.updated}",
             f"plan         fingerprint {tx.plan_fingerprint}, installer {tx.installer or '-'}",
             f"folder       {e.folder} (stash {size(e.stash_bytes)})"]
    if tx.message:
        lines.append(f"message      {tx.message}")
    lines.append("")
    for s in tx.steps:
        lines.append(f"{s.index}. [{s.state.value}] {s.summary}" + (" (replaced by pip)" if s.origin != "plan" else ""))
        for c in step_changes(s):
            lines.append(f"     {c}")
        if s.error:
            lines.append(f"     error: {s.error}")
    v = tx.verification
    if v is not None:
        lines.append("")
        lines.append(f"verification: {'ok' if v.get('ok') else 'FAILED'}")
        lines += [f"  ✗ {p}" for p in v.get("problems", [])]
    r = tx.rollback
    if r is not None:
        lines.append(f"rollback: {r.get('reason')} (started {r.get('started')}, finished {r.get('finished') or '-'})")
        lines += [f"  warning: {w}" for w in r.get("warnings", [])]
    return join_lines(lines)


def show_json(result: ShowResult) -> dict[str, Any]:
    e = result.entry
    return {"prefix": result.target.prefix, "interpreter": result.target.to_json(),
            "summary": _entry_json(e),
            "journal": None if e.tx is None else transaction_json(e.tx), "plan": result.plan}


def render_prune(result: PruneResult) -> str:
    o = result.outcome
    lines = [f"Pruned {len(o.pruned)} transaction stash(es) in {result.target.prefix}: {size(o.freed_bytes)} freed; "
             f"kept the newest {len(o.kept)}."]
    if o.skipped:
        lines.append(f"Not pruned (interrupted or unreadable): {', '.join(o.skipped)}")
    if o.pruned:
        lines.append("Their journals stay for `ortfix history`; they can no longer be rolled back.")
    return join_lines(lines)


def prune_json(result: PruneResult) -> dict[str, Any]:
    o = result.outcome
    return {"prefix": result.target.prefix, "interpreter": result.target.to_json(),
            "pruned": list(o.pruned), "kept": list(o.kept),
            "skipped": list(o.skipped), "freed_bytes": o.freed_bytes}
