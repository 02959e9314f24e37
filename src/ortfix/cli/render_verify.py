"""`ortfix verify`'s result for people (text) and for programs (the JSON envelope's data)."""

from __future__ import annotations

from typing import Any

from ortfix.commands.verify import VerifyResult
from ortfix.errors import ExitCode
from ortfix.safetext import join_lines
from ortfix.verify.levels import BUILTIN_MODEL, Status


def verify_json(result: VerifyResult) -> dict[str, Any]:
    return {
        "ok": result.exit_code is ExitCode.OK,
        "python": result.python,
        "onnxruntime": result.onnxruntime,
        "driver": result.driver,
        "model": {"path": result.model, "builtin": result.builtin_model},
        "levels": [{"level": lv.number, "name": lv.name, "status": lv.status.value, "verdict": lv.verdict,
                    "evidence": list(lv.evidence), "fix": lv.fix, "data": dict(lv.data)} for lv in result.levels],
        "not_run": [{"level": lv.number, "name": lv.name, "why": lv.verdict}
                    for lv in result.levels if lv.status is Status.NOT_RUN],
        "genai": [g.to_json() for g in result.genai],
    }


_MARKS = {Status.PASS: "✓ pass", Status.FAIL: "✗ FAIL", Status.NOT_RUN: "- not run"}
_TITLES = {"loader": "libraries load", "provider": "provider starts", "numbers": "numbers match"}


def render_verify(result: VerifyResult) -> str:
    lines = [f"ortfix verify: {result.python}",
             f"  onnxruntime {result.onnxruntime or 'not installed'}; NVIDIA driver: {result.driver}",
             f"  model: {'built-in ' + BUILTIN_MODEL.name if result.builtin_model else result.model}", ""]
    for lv in result.levels:
        lines.append(f"{lv.number}. {_TITLES[lv.name]:<16} {_MARKS[lv.status]:<10} {lv.verdict}")
        for e in lv.evidence[:12]:
            lines.append(f"{'':<31}{e}")
        if len(lv.evidence) > 12:
            lines.append(f"{'':<31}... and {len(lv.evidence) - 12} more (--json has all)")
        if lv.fix and lv.status is Status.FAIL:
            lines.append(f"{'':<31}fix: {lv.fix}")
    for g in result.genai:
        lines.append(f"{'genai':<19} {_MARKS[Status.PASS if g.ok else Status.FAIL]:<10} {g.line()}")
        if not g.ok:
            lines.append(f"{'':<31}fix: `ortfix plan` shows the onnxruntime-genai package that fits")
    lines.append("")
    failed = [lv for lv in result.levels if lv.status is Status.FAIL]
    not_run = [lv for lv in result.levels if lv.status is Status.NOT_RUN]
    bad_genai = [g.package for g in result.genai if not g.ok]
    if failed or bad_genai:
        lines.append("Failed: " + ", ".join([*(f"level {lv.number} ({_TITLES[lv.name]})" for lv in failed),
                                             *bad_genai]) + ".")
    if not_run:
        lines.append("Could not run here: " + ", ".join(f"level {lv.number} ({_TITLES[lv.name]})" for lv in not_run)
                     + ".")
    if not failed and not not_run and not bad_genai:
        lines.append("The GPU path works: the CUDA provider starts and computes what the CPU computes.")
    return join_lines(lines)
