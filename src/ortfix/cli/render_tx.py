"""Render the transaction commands' results for people (text) and for programs (the data of their JSON
envelope, cli/output.py)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ortfix.cli.cmdline import quote, windows_target
from ortfix.i18n import N_, Joined, Msg, _, pad, text, tr
from ortfix.safetext import join_lines
from ortfix.transaction.actions import handler_for
from ortfix.transaction.actions.base import step_title
from ortfix.transaction.journal import Step, StepState, Transaction, TxStatus, transaction_json
from ortfix.transaction.store import HistoryEntry
from ortfix.transaction.undo_notes import FAILING, any_failed, as_before, said, summary, summary_msgs, verdict
from ortfix.verify.winloadcheck import PROVIDER_DLL

if TYPE_CHECKING:
    from ortfix.commands.apply import ApplyResult
    from ortfix.commands.history import HistoryResult, PruneResult, ShowResult
    from ortfix.commands.rollback import RollbackResult
    from ortfix.transaction.actions.resolve import Resolved
    from ortfix.transaction.preflight import DiskCheck
    from ortfix.verify.applied import Verification
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
        return _("(nothing changed)")
    shown = [c if not c.startswith(("+ /", "~ /")) else f"{c[0]} {os.path.basename(c[2:])}" for c in changes]
    shown.sort(key=lambda c: 0 if " onnxruntime" in c else 1)  # stable: the ORT change first, then the rest
    return Joined(N_(", "), shown[:limit]).text() + (tr(", … {n} more", n=len(shown) - limit)
                                                      if len(shown) > limit else "")


# ---------------------------------------------------------------------------------------------------------------------
# apply
# ---------------------------------------------------------------------------------------------------------------------


def render_dry_run(result: ApplyResult) -> str:
    assert result.outcome is not None
    pf = result.outcome.preflight
    lines = [_("Dry run: nothing was changed. An apply would do this, as one transaction:"), ""]
    for argv in pf.commands:
        lines.append(tr("preflight ran: {command}", command=shlex.join(argv)))
    if pf.resolution is not None:
        lines += [_would_install(r) for r in pf.resolution.install]
    if pf.disk is not None:
        lines.append(_disk(pf.disk))
    lines.append("")
    for step, described in pf.describe():
        origin = _(" [pip would replace it]") if step.origin != "plan" else ""
        lines.append(f"{step.index}. {step.kind}: {step_title(step).text()}{origin}")
        lines += [f"     {_said(d)}" for d in described]
    lines.append("")
    lines.append(_("then: verify in a fresh process of the target interpreter (import onnxruntime, load every library "
                   "the CUDA provider needs) and re-run `ortfix check`; roll back if either fails"))
    if pf.problems:
        lines.append("")
        lines.append(_("Preflight would refuse:"))
        lines += [f"  {p.text()}" for p in pf.problems]
    return join_lines(lines)


def _said(line: str | Msg) -> str:
    """A handler's line (transaction/actions): a Msg translated, a path or command as it is."""
    return line.text() if isinstance(line, Msg) else line


def _would_install(r: Resolved) -> str:
    extra = (tr(" (replaces {name} {version}: moved aside first)", name=r.replaces.name, version=r.replaces.version)
             if r.replaces else "")
    return (tr("  the installer would install {name} {version}{extra}", name=r.name, version=r.version, extra=extra)
            + (tr(" from {url}", url=r.url) if r.url else ""))


def _disk(disk: DiskCheck) -> str:
    return (tr("disk: {free} free in {where}, about {needed} needed", free=size(disk.free_bytes), where=disk.where,
               needed=size(disk.needed_bytes))
            + (tr(" (estimated from measured wheels for {n} of them)", n=len(disk.estimated)) if disk.estimated
               else "")
            + (tr(" (sizes unknown for {names})", names=Joined(N_(", "), disk.unknown_sizes))
               if disk.unknown_sizes else ""))


def render_apply(result: ApplyResult) -> str:
    plan = result.prepared.plan
    if result.outcome is None:
        return _("Nothing to change.") + ("" if not plan.unresolved else tr(
            " Not fixable by ortfix here: {findings}",
            findings=", ".join(f"{f.code} {text(f.summary)}" for f in plan.unresolved)))
    if result.dry_run:
        return render_dry_run(result)
    out = result.outcome
    tx = out.tx
    assert tx is not None
    lines: list[str] = []
    ver = out.verification
    if tx.status is TxStatus.APPLIED:
        lines.append(tr("Applied transaction {id} ({n} steps):", id=tx.id, n=len(tx.steps)))
    elif tx.status is TxStatus.KEPT:
        lines.append(tr("Transaction {id} applied but NOT verified; kept for inspection (--keep-on-failure):",
                        id=tx.id))
    else:
        lines.append(tr("Transaction {id} failed verification and was rolled back:", id=tx.id))
    lines += [f"  {c}" for c in tx_changes(tx)]
    if ver is not None:
        lines += _verification(ver)
    installer = "uv pip" if plan.installer == "uv" else "pip"
    lines += [tr("  ✗ the apply broke a requirement ({installer} check): {requirement}", installer=installer,
                 requirement=b) for b in out.broken]
    if out.warnings:
        lines += [tr("warning: {warning}", warning=w) for w in out.warnings]
    if plan.unresolved:
        lines.append(tr("Still needs you: {findings}",
                        findings="; ".join(f"{f.code} {text(f.summary)}" for f in plan.unresolved)))
    if tx.status in (TxStatus.APPLIED, TxStatus.KEPT):
        # a line to paste: the path is quoted for the target's shell (a prefix may hold spaces, quotes, `$(...)`,
        # backticks; cmd and PowerShell read double quotes only)
        lines.append(tr("Undo: {command}",
                        command=f"ortfix rollback --python {quote(plan.python, windows_target(plan.python))}"))
    return join_lines(lines)


def _verification(ver: Verification) -> list[str]:
    lines: list[str] = []
    if ver.loader is not None:
        loaded = [x.soname for x in ver.loader.libraries if x.error is None]
        lines.append(tr("verify: {command} <script>: import onnxruntime {result}; {loaded}/{total} libraries "
                        "load{counted}", command=shlex.join(ver.loader.argv[:-1]),
                        result=_("ok") if ver.loader.imported else _("FAILED"), loaded=len(loaded),
                        total=len(ver.loader.libraries), counted=counted(ver.loader)))
    lines += [f"  {text(note)}" for note in ver.notes]
    lines += [f"  ✗ {text(p)}" for p in ver.problems]
    if ver.ok:
        lines.append(_("ortfix check: no blocking findings left"))
    if ver.gpu_not_verified:
        lines.append(ver.gpu_not_verified.text())
    return lines


def counted(check: LoadCheck) -> str:
    """What a Windows load check counted, for the count to be read right: the CUDA provider (its imports load with
    it, uncounted) and the DLLs loaded later by bare name (the build's on-demand loads, cuDNN's sub-libraries), which
    the build and its cuDNN major name: the same count whichever hook made them findable."""
    if check.platform != "windows":
        return ""
    later = sum(1 for lib in check.libraries if not lib.soname.lower().endswith(PROVIDER_DLL))
    if later == 1:
        return tr(" (counted: the CUDA provider, whose imported DLLs load with it, and {n} DLL loaded later by bare "
                  "name)", n=later)
    return tr(" (counted: the CUDA provider, whose imported DLLs load with it, and {n} DLLs loaded later by bare "
              "name)", n=later)


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
        "problems": [str(p) for p in pf.problems],
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
                         "would": [str(d) for d in described]} for s, described in pf.describe()]
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
    lines = [tr("Roll back transaction {id} in {prefix} ({status}, made {created}):", id=tx.id, prefix=prefix,
                status=tx.status.value, created=tx.created)]
    for s in undo:
        lines.append(tr("  undo {index}. {summary}", index=s.index, summary=step_title(s))
                     + (_("  (cut off half-way)") if s.state is StepState.STARTED else ""))
    if not undo:
        lines.append(_("  no step had started; only the journal changes"))
    return join_lines(lines)


def render_rollback(result: RollbackResult, *, verbose: bool = False) -> str:
    """One line per cause of what was not put back exactly (every path with `verbose`), then the verdict."""
    o = result.outcome
    lines = [tr("Rolled back transaction {id}: {n} step(s) undone in {prefix}.", id=o.tx.id, n=len(o.undone),
                prefix=result.target.prefix)]
    if o.freeing:
        lines.append(_("The files the install had added are being deleted in the background."))
    lines += [tr("warning: {warning}", warning=line) if cause in FAILING else tr("note: {note}", note=line)
              for cause, line in summary_msgs(o.notes)]
    if verbose:
        lines += [f"  {n.cause.value}: {_said(n.text)}" for n in said(o.notes)]
    elif said(o.notes):
        lines.append(tr("Every path: `ortfix history show {id}` (or `rollback --verbose`, `--json`).", id=o.tx.id))
    lines.append(_(verdict(o.notes)))
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
            "warnings": [str(n.text) for n in said(o.notes)]}


# ---------------------------------------------------------------------------------------------------------------------
# history
# ---------------------------------------------------------------------------------------------------------------------


def _unreadable_reason(error: str | Msg | None) -> str:
    """Why a journal cannot be read, in the user's language."""
    return "" if not error else text(error)


def _entry_json(e: HistoryEntry) -> dict[str, Any]:
    if e.tx is None:
        return {"id": e.id, "status": "unreadable", "error": None if e.error is None else str(e.error),
                "folder": str(e.folder), "stash_bytes": e.stash_bytes}
    tx = e.tx
    return {"id": tx.id, "created": tx.created, "updated": tx.updated, "status": tx.status.value,
            "pruned": tx.pruned, "changes": tx_changes(tx), "steps": len(tx.steps),
            "steps_done": sum(1 for s in tx.steps if s.state is StepState.DONE), "message": tx.message,
            "folder": str(e.folder), "stash_bytes": e.stash_bytes}


def render_history(result: HistoryResult) -> str:
    if not result.entries:
        return tr("No ortfix transactions in {prefix}.", prefix=result.target.prefix)
    lines = [tr("Transactions in {prefix} (oldest first):", prefix=result.target.prefix), ""]
    lines.append(_row("ID", _("CREATED (UTC)"), _("STATUS"), _("STASH"), _("CHANGES")))
    for e in result.entries:
        if e.tx is None:
            lines.append(_row(e.id, "?", "unreadable", size(e.stash_bytes), _unreadable_reason(e.error)))
            continue
        tx = e.tx
        status = tx.status.value + (_(" (pruned)") if tx.pruned else "")
        lines.append(_row(tx.id, tx.created[:19].replace("T", " "), status, size(e.stash_bytes),
                          _short(tx_changes(tx))))
    undoable = any(e.tx is not None and e.tx.status is not TxStatus.ROLLED_BACK for e in result.entries)
    lines += ["", _("Details: ortfix history show ID. Undo the newest: ortfix rollback.") if undoable
              else _("Details: ortfix history show ID. Nothing to undo: every one is rolled back.")]
    return join_lines(lines)


def _row(tx_id: str, created: str, status: str, stash: str, changes: str) -> str:
    """A row of the history table, its columns padded by terminal columns (a Chinese character takes two)."""
    return (f"{pad(tx_id, 26)} {pad(created, 19)} {pad(status, 13)} {pad(stash, 9, right=True)}  {changes}")


def history_json(result: HistoryResult) -> dict[str, Any]:
    return {"prefix": result.target.prefix, "interpreter": result.target.to_json(),
            "transactions": [_entry_json(e) for e in result.entries]}


def render_show(result: ShowResult) -> str:
    e = result.entry
    if e.tx is None:
        return join_lines([tr("transaction {id}: unreadable journal: {error}", id=e.id,
                              error=_unreadable_reason(e.error)),
                           tr("folder: {folder}", folder=str(e.folder))])
    tx = e.tx
    lines = [tr("transaction {id}: {status}", id=tx.id, status=tx.status.value)
             + (_(" (stash pruned)") if tx.pruned else ""),
             _field(_("environment"), f"{tx.prefix} ({tx.target.get('env_kind')}, {tx.target.get('python')})"),
             _field(_("created"), tx.created), _field(_("updated"), tx.updated),
             _field(_("plan"), tr("fingerprint {fingerprint}, installer {installer}",
                                  fingerprint=tx.plan_fingerprint, installer=tx.installer or "-")),
             _field(_("folder"), tr("{folder} (stash {size})", folder=str(e.folder), size=size(e.stash_bytes)))]
    if tx.message:
        lines.append(_field(_("message"), tx.message))
    lines.append("")
    for s in tx.steps:
        lines.append(f"{s.index}. [{s.state.value}] {step_title(s).text()}"
                     + (_(" (replaced by pip)") if s.origin != "plan" else ""))
        for c in step_changes(s):
            lines.append(f"     {c}")
        if s.error:
            lines.append(tr("     error: {error}", error=s.error))
    lines += _show_outcome(tx)
    return join_lines(lines)


def _field(label: str, value: str) -> str:
    return f"{pad(label, 12)} {value}"


def _show_outcome(tx: Transaction) -> list[str]:
    """The verification and the rollback a journal records."""
    lines: list[str] = []
    v = tx.verification
    if v is not None:
        lines.append("")
        lines.append(tr("verification: {result}", result=_("ok") if v.get("ok") else _("FAILED")))
        lines += [f"  ✗ {p}" for p in v.get("problems", [])]
    r = tx.rollback
    if r is not None:
        lines.append(tr("rollback: {reason} (started {started}, finished {finished})", reason=str(r.get("reason")),
                        started=str(r.get("started")), finished=str(r.get("finished") or "-")))
        lines += [tr("  warning: {warning}", warning=str(w)) for w in r.get("warnings", [])]
    return lines


def show_json(result: ShowResult) -> dict[str, Any]:
    e = result.entry
    return {"prefix": result.target.prefix, "interpreter": result.target.to_json(),
            "summary": _entry_json(e),
            "journal": None if e.tx is None else transaction_json(e.tx), "plan": result.plan}


def render_prune(result: PruneResult) -> str:
    o = result.outcome
    lines = [tr("Pruned {n} transaction stash(es) in {prefix}: {freed} freed; kept the newest {kept}.",
                n=len(o.pruned), prefix=result.target.prefix, freed=size(o.freed_bytes), kept=len(o.kept))]
    if o.skipped:
        lines.append(tr("Not pruned (interrupted or unreadable): {ids}", ids=Joined(N_(", "), o.skipped)))
    if o.pruned:
        lines.append(_("Their journals stay for `ortfix history`; they can no longer be rolled back."))
    return join_lines(lines)


def prune_json(result: PruneResult) -> dict[str, Any]:
    o = result.outcome
    return {"prefix": result.target.prefix, "interpreter": result.target.to_json(),
            "pruned": list(o.pruned), "kept": list(o.kept),
            "skipped": list(o.skipped), "freed_bytes": o.freed_bytes}
