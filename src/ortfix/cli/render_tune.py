"""`ortfix tune`'s result for people (a table and the recommended options) and for programs (the envelope's data)."""

from __future__ import annotations

from ortfix.commands.tune import TuneResult
from ortfix.i18n import _, display_width, pad, text, tr
from ortfix.safetext import join_lines
from ortfix.target.ortrun import CUDA_EP, shapes_text
from ortfix.tune import Phase


def _phase_json(p: Phase | None) -> dict[str, float | None] | None:
    if p is None:
        return None
    doc: dict[str, float | None] = {"first_ms": p.first_ms, "steady_ms": p.steady_ms, "min_ms": p.min_ms,
                                    "runs": p.runs}
    if p.total_ms is not None:
        doc.update(first_max_ms=p.first_max_ms, total_ms=p.total_ms)
    return doc


def tune_json(result: TuneResult) -> dict[str, object]:
    rec = result.recommendation
    return {
        "python": result.python,
        "model": result.model,
        "onnxruntime": result.onnxruntime,
        "runs": result.runs,
        "shapes": {"fixed": dict(result.shape_sets[0]) if result.shape_sets else None,
                   "changing": [dict(s) for s in result.shape_sets] if len(result.shape_sets) > 1 else None},
        "results": [{"name": r.config.name, "provider": r.config.provider, "options": dict(r.config.options),
                     "load_ms": r.load_ms, "fixed": _phase_json(r.fixed), "changing": _phase_json(r.changing)}
                    for r in result.results],
        "cuda": {"complete": result.cuda_complete, "ran": any(r.config.provider == "cuda" for r in result.results),
                 "note": result.cuda_note, "startup_ms": result.cuda_startup_ms},
        "recommendation": {"options": dict(rec.options), "measured": rec.measured, "basis": str(rec.basis),
                           "python": rec.python, "yaml": rec.yaml},
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else (f"{value:.3f}" if value < 10 else f"{value:.1f}")


def render_tune(result: TuneResult) -> str:
    lines = [f"ortfix tune {result.model}",
             tr("  with {python} (onnxruntime {version}); {runs} timed runs per phase", python=result.python,
                version=result.onnxruntime or "?", runs=result.runs)]
    if result.shape_sets:
        lines.append("  " + pad(_("fixed shape:"), 17) + shapes_text(result.shape_sets[0], ","))
    if len(result.shape_sets) > 1:
        lines.append("  " + pad(_("changing shapes:"), 17) + "  ".join(shapes_text(s, ",") for s in result.shape_sets))
    else:
        lines.append("  " + pad(_("changing shapes:"), 17)
                     + _("not timed (one set of shapes; give --shapes twice or more)"))
    lines.append("")
    columns = ((_("load"), 8), (_("fixed 1st"), 10), (_("fixed"), 9), (_("chg 1st"), 9), (_("chg max"), 9),
               (_("chg"), 9))
    header = " ".join([pad(_("provider / options"), 52), *(pad(name, width, right=True) for name, width in columns)])
    lines += [header, "-" * display_width(header)]
    for r in result.results:
        ch = r.changing
        lines.append(f"{r.config.name:<52} {_ms(r.load_ms):>8} {_ms(r.fixed.first_ms if r.fixed else None):>10} "
                     f"{_ms(r.fixed.steady_ms if r.fixed else None):>9} {_ms(ch.first_ms if ch else None):>9} "
                     f"{_ms(ch.first_max_ms if ch else None):>9} {_ms(ch.steady_ms if ch else None):>9}")
    lines.append(tr("milliseconds; 1st: the first run (chg: mean over the shapes' first runs, max: the slowest); "
                    "fixed, chg: median of the {runs} runs after", runs=result.runs))
    if result.cuda_startup_ms is not None:
        lines.append(tr("CUDA start-up ({ms} ms: context, cuBLAS/cuDNN loading) was timed apart, before the first "
                        "CUDA row: no row is charged for it", ms=_ms(result.cuda_startup_ms)))
    if result.cuda_note:
        lines.append("")
        ran = any(r.config.provider == "cuda" for r in result.results)
        lines.append(tr("CUDA part incomplete: {note}", note=result.cuda_note) if ran
                     else tr("CUDA part not run: {note}", note=result.cuda_note))
    rec = result.recommendation
    lines += ["", tr("Recommended CUDA provider options: {basis}.", basis=text(rec.basis)), "", "  Python:"]
    lines += [f"    cuda_options = {rec.python.splitlines()[0]}",
              *(f"    {line}" for line in rec.python.splitlines()[1:]),
              "    session = onnxruntime.InferenceSession(",
              f"        MODEL, providers=[(\"{CUDA_EP}\", cuda_options), \"CPUExecutionProvider\"])",
              "", "  YAML:", *(f"    {line}" for line in rec.yaml.rstrip().splitlines())]
    return join_lines(lines)
