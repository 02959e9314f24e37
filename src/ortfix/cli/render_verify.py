"""`ortfix verify`'s result for people (text) and for programs (the JSON envelope's data)."""

from __future__ import annotations

from typing import Any

from ortfix.commands.verify import VerifyResult
from ortfix.errors import ExitCode
from ortfix.i18n import N_, Joined, _, pad, text, tr
from ortfix.safetext import join_lines
from ortfix.verify.levels import BUILTIN_MODEL, Status


def verify_json(result: VerifyResult) -> dict[str, Any]:
    return {
        "ok": result.exit_code is ExitCode.OK,
        "python": result.python,
        "onnxruntime": result.onnxruntime,
        "driver": str(result.driver),
        "model": {"path": result.model, "builtin": result.builtin_model},
        "levels": [{"level": lv.number, "name": lv.name, "status": lv.status.value, "verdict": str(lv.verdict),
                    "evidence": [str(e) for e in lv.evidence], "fix": None if lv.fix is None else str(lv.fix),
                    "data": dict(lv.data)} for lv in result.levels],
        "not_run": [{"level": lv.number, "name": lv.name, "why": str(lv.verdict)}
                    for lv in result.levels if lv.status is Status.NOT_RUN],
        "genai": [g.to_json() for g in result.genai],
    }


_MARKS = {Status.PASS: N_("✓ pass"), Status.FAIL: N_("✗ FAIL"), Status.NOT_RUN: N_("- not run")}
_TITLES = {"loader": N_("libraries load"), "provider": N_("provider starts"), "numbers": N_("numbers match")}
_INDENT = " " * 31  # where a level's evidence starts: under its verdict


def _level(number: int, name: str) -> str:
    return tr("level {number} ({title})", number=number, title=_(_TITLES[name]))


def render_verify(result: VerifyResult) -> str:
    """The levels as a table (titles and marks padded by terminal columns: i18n.pad), then one verdict line."""
    model = tr("built-in {name}", name=BUILTIN_MODEL.name) if result.builtin_model else str(result.model)
    lines = [f"ortfix verify: {result.python}",
             tr("  onnxruntime {version}; NVIDIA driver: {driver}", version=result.onnxruntime or _("not installed"),
                driver=text(result.driver)),
             tr("  model: {model}", model=model), ""]
    for lv in result.levels:
        lines.append(f"{lv.number}. {pad(_(_TITLES[lv.name]), 16)} {pad(_(_MARKS[lv.status]), 10)} {text(lv.verdict)}")
        for e in lv.evidence[:12]:
            lines.append(f"{_INDENT}{text(e)}")
        if len(lv.evidence) > 12:
            lines.append(_INDENT + tr("... and {n} more (--json has all)", n=len(lv.evidence) - 12))
        if lv.fix and lv.status is Status.FAIL:
            lines.append(_INDENT + tr("fix: {fix}", fix=text(lv.fix)))
    for g in result.genai:
        lines.append(f"{'genai':<19} {pad(_(_MARKS[Status.PASS if g.ok else Status.FAIL]), 10)} {g.line()}")
        if not g.ok:
            lines.append(_INDENT + _("fix: `ortfix plan` shows the onnxruntime-genai package that fits"))
    lines.append("")
    failed = [lv for lv in result.levels if lv.status is Status.FAIL]
    not_run = [lv for lv in result.levels if lv.status is Status.NOT_RUN]
    bad_genai = [g.package for g in result.genai if not g.ok]
    if failed or bad_genai:
        lines.append(tr("Failed: {what}.", what=Joined(N_(", "), [*(_level(lv.number, lv.name) for lv in failed),
                                                                  *bad_genai])))
    if not_run:
        lines.append(tr("Could not run here: {what}.",
                        what=Joined(N_(", "), [_level(lv.number, lv.name) for lv in not_run])))
    if not failed and not not_run and not bad_genai:
        lines.append(_("The GPU path works: the CUDA provider starts and computes what the CPU computes."))
    return join_lines(lines)
