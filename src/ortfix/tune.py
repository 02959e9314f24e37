"""`ortfix tune MODEL`: time a model with the CPU provider and with the CUDA provider under the options that matter for
dynamic shapes, with a fixed shape and with changing shapes, first run and steady state apart; recommend options.

Each part (CPU, CUDA) runs in a fresh process of the target interpreter (`_ortrun.py`): a CUDA provider that crashes
or falls back to the CPU makes the CUDA part "could not run, because ...", never a crash of ortfix.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ortfix.errors import ExitCode, OrtfixError
from ortfix.system import hooks
from ortfix.target.ortrun import CUDA_EP, RunOutcome, model_file, one_line, run_in_target, shapes_text

SCHEMA = "ortfix.tune/1"
ALGO_SEARCH = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")
MAX_WORKSPACE = ("1", "0")
ARENA = ("kNextPowerOfTwo", "kSameAsRequested")
# Without --shapes, dynamic dimensions take these values: the first set is the fixed shape, all of them in turn are
# the changing shapes.
DEFAULT_DIMS = (8, 16, 12, 24)
# What to use for changing shapes when nothing could be measured: EXHAUSTIVE searches again for every new shape;
# kSameAsRequested does not round every new buffer up to a power of two.
UNMEASURED = {"cudnn_conv_algo_search": "HEURISTIC", "cudnn_conv_use_max_workspace": "1",
              "arena_extend_strategy": "kSameAsRequested"}

ShapeSpec = dict[str, list[int]]  # input name ("" for the only input) -> dims


@dataclass(frozen=True)
class Config:
    name: str
    provider: str  # cpu | cuda
    options: Mapping[str, str] = field(default_factory=dict)


def configs() -> list[Config]:
    out = []
    for algo, workspace, arena in itertools.product(ALGO_SEARCH, MAX_WORKSPACE, ARENA):
        options = {"cudnn_conv_algo_search": algo, "cudnn_conv_use_max_workspace": workspace,
                   "arena_extend_strategy": arena}
        out.append(Config(f"CUDA {algo} workspace={'max' if workspace == '1' else 'min'} {arena}", "cuda", options))
    return out


@dataclass(frozen=True)
class Phase:
    first_ms: float  # the first run (changing shapes: the mean of each shape's first run)
    steady_ms: float  # median of the runs after it
    min_ms: float
    runs: int
    first_max_ms: float | None = None  # changing shapes: the slowest first run of a shape
    total_ms: float | None = None  # changing shapes: every run, first runs included


@dataclass(frozen=True)
class ConfigResult:
    config: Config
    load_ms: float | None
    fixed: Phase | None
    changing: Phase | None
    error: str | None = None


@dataclass(frozen=True)
class Recommendation:
    options: Mapping[str, str]
    measured: bool
    basis: str

    @property
    def python(self) -> str:
        body = "".join(f"    {json.dumps(k)}: {json.dumps(v)},\n" for k, v in self.options.items())
        return "{\n" + body + "}"

    @property
    def yaml(self) -> str:
        return yaml.safe_dump({CUDA_EP: dict(self.options)}, sort_keys=False, default_flow_style=False)


@dataclass(frozen=True)
class TuneResult:
    python: str
    model: str
    onnxruntime: str | None
    shape_sets: tuple[Mapping[str, Sequence[int]], ...]
    runs: int
    results: tuple[ConfigResult, ...]
    cuda_complete: bool
    cuda_note: str | None  # why (part of) the CUDA part could not run
    recommendation: Recommendation

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.cuda_complete else ExitCode.INCOMPLETE


def parse_shapes(values: Sequence[str]) -> list[ShapeSpec]:
    """`--shapes` values: each is one or more sets separated by ';'; a set is DIMS (a model with one input) or
    NAME=DIMS,NAME=DIMS; DIMS is 1x3x224x224."""
    sets: list[ShapeSpec] = []
    for value in values:
        for text in value.split(";"):
            text = text.strip()
            if not text:
                continue
            spec: ShapeSpec = {}
            items = [i.strip() for i in text.split(",") if i.strip()]
            for item in items:
                name, eq, dims = item.rpartition("=")
                if not eq and len(items) > 1:
                    raise OrtfixError(f"--shapes {value!r}: with several inputs, name each one: NAME=DIMS")
                name = name.strip()
                if eq and not name:
                    raise OrtfixError(f"--shapes {value!r}: an input name is missing before '='")
                parts = dims.strip().lower().split("x")
                bad = next((p for p in parts if not p.strip().isdigit()), None)
                if bad is not None:
                    raise OrtfixError(f"--shapes {value!r}: {bad.strip()!r} is not a number "
                                      "(dimensions look like 1x3x224x224)")
                parsed = [int(p) for p in parts]
                if any(d <= 0 for d in parsed):
                    raise OrtfixError(f"--shapes {value!r}: dimensions must be positive")
                if name in spec:
                    raise OrtfixError(f"--shapes {value!r}: {name or 'the input'} is given twice")
                spec[name] = parsed
            sets.append(spec)
    return sets


def _phase(doc: Mapping[str, Any] | None) -> Phase | None:
    if not doc:
        return None
    return Phase(first_ms=float(doc["first_ms"]), steady_ms=float(doc["steady_ms"]), min_ms=float(doc["min_ms"]),
                 runs=int(doc["runs"]), first_max_ms=doc.get("first_max_ms"), total_ms=doc.get("total_ms"))


def _results(outcome: RunOutcome, wanted: Sequence[Config]) -> list[ConfigResult]:
    by_name = {str(d.get("name")): d for d in outcome.all("result")}
    out = []
    for config in wanted:
        doc = by_name.get(config.name)
        if doc is None:
            continue
        out.append(ConfigResult(config, doc.get("load_ms"), _phase(doc.get("fixed")), _phase(doc.get("changing")),
                                doc.get("error")))
    return out


def recommend(results: Sequence[ConfigResult], changing: bool) -> Recommendation:
    ok = [r for r in results if r.config.provider == "cuda" and r.error is None and r.fixed is not None]
    if not ok:
        return Recommendation(dict(UNMEASURED), False,
                              "not measured here (the CUDA part could not run); the usual choice for changing "
                              "shapes. Run `ortfix tune` on the GPU machine to measure")
    if changing and all(r.changing is not None and r.changing.total_ms is not None for r in ok):
        best = min(ok, key=lambda r: float(r.changing.total_ms or 0.0) if r.changing else 0.0)
        basis = (f"fastest over the changing-shape runs, first runs included ({best.config.name}: "
                 f"{best.changing.total_ms if best.changing else 0:.1f} ms in all)")
    else:
        best = min(ok, key=lambda r: r.fixed.steady_ms if r.fixed else 0.0)
        basis = (f"fastest steady state with the fixed shape ({best.config.name}: "
                 f"{best.fixed.steady_ms if best.fixed else 0:.2f} ms)")
    return Recommendation(dict(best.config.options), True, basis)


def run_tune(python: str | None, model: Path, shape_specs: Sequence[ShapeSpec], *, runs: int = 5,
             timeout: float = 600.0, progress: Callable[[str], None] | None = None) -> TuneResult:
    from ortfix.speed import prefetch
    from ortfix.system.driver import detect_driver
    from ortfix.system.ldcache import load_ld_cache
    from ortfix.target.probe import finish_probe, resolve_target, start_probe
    from ortfix.verify.levels import no_gpu_reason

    model = model_file(model, str(model))
    target = resolve_target(python)
    probe = finish_probe(prefetch.take(target) or start_probe(target), target)  # the probe the first line started
    conda_hook = hooks.active_conda_hook(probe.prefix, probe.env_kind)
    if shape_specs:
        sets: list[dict[str, Any]] = [{"spec": dict(s), "default_dim": 1} for s in shape_specs]
    else:
        sets = [{"spec": {}, "default_dim": d} for d in DEFAULT_DIMS]
    say = progress or (lambda _line: None)

    def run(part: str, wanted: Sequence[Config]) -> RunOutcome:
        args = {"mode": "tune", "model": str(model), "runs": runs, "shape_sets": sets,
                "configs": [{"name": c.name, "provider": c.provider, "options": dict(c.options)} for c in wanted]}

        def on_stage(doc: Mapping[str, Any]) -> None:
            if doc.get("stage") == "progress":
                say(f"{part} {doc.get('text')}")

        return run_in_target(str(target), args, prefix=probe.prefix, conda_hook=conda_hook, timeout=timeout,
                             on_stage=on_stage)

    cpu_config = Config("CPU", "cpu")
    cpu = run("CPU", [cpu_config])
    imported = cpu.stage("import")
    if imported is None:
        raise OrtfixError(f"the CPU run in {target} {cpu.death()} before importing onnxruntime")
    if imported.get("error"):
        raise OrtfixError(f"cannot import onnxruntime in {target}: {imported['error']}",
                          hint="`ortfix check` says what is installed")
    inputs = cpu.stage("inputs")
    if inputs is None:
        raise OrtfixError(f"the CPU run {cpu.death()} while loading {model}")
    if inputs.get("error"):
        raise OrtfixError(f"{model}: {one_line(str(inputs['error']))}")
    resolved: list[Mapping[str, Sequence[int]]] = list(inputs.get("shape_sets") or [])
    cpu_results = _results(cpu, [cpu_config])
    if not cpu_results:
        raise OrtfixError(f"the CPU run {cpu.death()} while timing {model}")
    if cpu_results[0].error:
        raise OrtfixError(f"{model} does not run on the CPU: {one_line(cpu_results[0].error)}")

    available = list(inputs.get("available") or [])
    version = imported.get("version")
    cuda_results: list[ConfigResult] = []
    note: str | None = None
    complete = False
    grid = configs()
    if CUDA_EP not in available:
        note = f"this onnxruntime build has no {CUDA_EP} (available: {', '.join(available)})"
    else:
        cuda = run("CUDA", grid)
        cuda_results = _results(cuda, grid)
        failed = [r for r in cuda_results if r.error]
        ran = [r for r in cuda_results if not r.error]
        if not ran:
            reason = no_gpu_reason(detect_driver(load_ld_cache()))
            what = (failed[0].error if failed else None) or f"the process {cuda.death()}"
            logs = cuda.evidence
            detail = what + (f"; onnxruntime said: {logs[0]}" if logs else "")
            note = (f"{reason}, so the CUDA provider cannot start here ({detail})" if reason
                    else f"the CUDA provider did not run: {detail}")
        elif failed or len(cuda_results) < len(grid):
            parts = [f"{len(ran)} of {len(grid)} CUDA configurations ran"]
            if failed:
                parts.append(f"{len(failed)} failed (first: {failed[0].config.name}: {failed[0].error})")
            if len(cuda_results) < len(grid):
                parts.append(f"{len(grid) - len(cuda_results)} did not run: the process {cuda.death()}")
            note = "; ".join(parts)
        else:
            complete = True
        cuda_results = ran
    changing = len(resolved) > 1
    return TuneResult(
        python=str(target),
        model=str(model),
        onnxruntime=str(version) if version else None,
        shape_sets=tuple(resolved),
        runs=runs,
        results=(*cpu_results, *cuda_results),
        cuda_complete=complete,
        cuda_note=note,
        recommendation=recommend(cuda_results, changing),
    )


def _phase_json(p: Phase | None) -> dict[str, Any] | None:
    if p is None:
        return None
    doc: dict[str, Any] = {"first_ms": p.first_ms, "steady_ms": p.steady_ms, "min_ms": p.min_ms, "runs": p.runs}
    if p.total_ms is not None:
        doc.update(first_max_ms=p.first_max_ms, total_ms=p.total_ms)
    return doc


def tune_json(result: TuneResult) -> dict[str, Any]:
    rec = result.recommendation
    return {
        "schema": SCHEMA,
        "exit_code": int(result.exit_code),
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
                 "note": result.cuda_note},
        "recommendation": {"options": dict(rec.options), "measured": rec.measured, "basis": rec.basis,
                           "python": rec.python, "yaml": rec.yaml},
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else (f"{value:.3f}" if value < 10 else f"{value:.1f}")


def render_tune(result: TuneResult) -> str:
    lines = [f"ortfix tune {result.model}",
             f"  with {result.python} (onnxruntime {result.onnxruntime or '?'}); {result.runs} timed runs per phase"]
    if result.shape_sets:
        lines.append(f"  fixed shape:     {shapes_text(result.shape_sets[0], ',')}")
    if len(result.shape_sets) > 1:
        lines.append(f"  changing shapes: {'  '.join(shapes_text(s, ',') for s in result.shape_sets)}")
    else:
        lines.append("  changing shapes: not timed (one set of shapes; give --shapes twice or more)")
    lines.append("")
    header = (f"{'provider / options':<52} {'load':>8} {'fixed 1st':>10} {'fixed':>9} {'chg 1st':>9} "
              f"{'chg max':>9} {'chg':>9}")
    lines += [header, "-" * len(header)]
    for r in result.results:
        ch = r.changing
        lines.append(f"{r.config.name:<52} {_ms(r.load_ms):>8} {_ms(r.fixed.first_ms if r.fixed else None):>10} "
                     f"{_ms(r.fixed.steady_ms if r.fixed else None):>9} {_ms(ch.first_ms if ch else None):>9} "
                     f"{_ms(ch.first_max_ms if ch else None):>9} {_ms(ch.steady_ms if ch else None):>9}")
    lines.append("milliseconds; 1st: the first run (chg: mean over the shapes' first runs, max: the slowest); "
                 f"fixed, chg: median of the {result.runs} runs after")
    if result.cuda_note:
        lines.append("")
        ran = any(r.config.provider == "cuda" for r in result.results)
        lines.append(f"CUDA part {'incomplete' if ran else 'not run'}: {result.cuda_note}")
    rec = result.recommendation
    lines += ["", f"Recommended CUDA provider options: {rec.basis}.", "", "  Python:"]
    lines += [f"    cuda_options = {rec.python.splitlines()[0]}",
              *(f"    {line}" for line in rec.python.splitlines()[1:]),
              "    session = onnxruntime.InferenceSession(",
              f"        MODEL, providers=[(\"{CUDA_EP}\", cuda_options), \"CPUExecutionProvider\"])",
              "", "  YAML:", *(f"    {line}" for line in rec.yaml.rstrip().splitlines())]
    return "\n".join(lines)
