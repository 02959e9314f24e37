"""`ortfix tune MODEL`: the CPU part and the CUDA part, each in a fresh process of the target interpreter; the
options grid, shape parsing and the recommendation are tune.py's. The result carries its exit code."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ortfix.errors import ExitCode, OrtfixError
from ortfix.i18n import N_, Joined, Msg
from ortfix.system.linux import hooks
from ortfix.target.ortrun import CUDA_EP, RunOutcome, model_file, one_line, run_in_target
from ortfix.tune import DEFAULT_DIMS, Config, ConfigResult, Recommendation, ShapeSpec, configs, recommend, results_of

if TYPE_CHECKING:
    from ortfix.check.facts import ProbeRun


@dataclass(frozen=True)
class TuneResult:
    python: str
    model: str
    onnxruntime: str | None
    shape_sets: tuple[Mapping[str, Sequence[int]], ...]
    runs: int
    results: tuple[ConfigResult, ...]
    cuda_complete: bool
    cuda_note: Msg | None  # why (part of) the CUDA part could not run (English in --json)
    cuda_startup_ms: float | None  # the process's CUDA start, timed apart from every configuration
    recommendation: Recommendation

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.cuda_complete else ExitCode.INCOMPLETE


def run_tune(python: str | None, model: Path, shape_specs: Sequence[ShapeSpec], *, runs: int = 5,
             timeout: float = 600.0, progress: Callable[[str], None] | None = None,
             probe_run: ProbeRun | None = None) -> TuneResult:
    """`probe_run`: the probe already run for this target (commands/check.describe_target), if any."""
    from ortfix.target.probe import finish_probe, resolve_target, start_probe

    model = model_file(model, str(model))
    target = resolve_target(python)
    probe = finish_probe(probe_run or start_probe(target), target)
    conda_hook = hooks.active_conda_hook(probe.prefix, probe.env_kind)
    if shape_specs:
        sets: list[dict[str, object]] = [{"spec": dict(s), "default_dim": 1} for s in shape_specs]
    else:
        sets = [{"spec": {}, "default_dim": d} for d in DEFAULT_DIMS]
    say = progress or (lambda _line: None)

    def run(part: str, wanted: Sequence[Config]) -> RunOutcome:
        args = {"mode": "tune", "model": str(model), "runs": runs, "shape_sets": sets,
                "configs": [{"name": c.name, "provider": c.provider, "options": dict(c.options)} for c in wanted]}

        def on_stage(doc: Mapping[str, object]) -> None:
            if doc.get("stage") == "progress":
                say(f"{part} {doc.get('text')}")

        return run_in_target(str(target), args, prefix=probe.prefix, conda_hook=conda_hook, timeout=timeout,
                             on_stage=on_stage)

    cpu_config = Config("CPU", "cpu")
    version, available, resolved, cpu_results = _cpu_baseline(run("CPU", [cpu_config]), cpu_config, target, model)
    cuda_results: list[ConfigResult] = []
    note: Msg | None = None
    complete = False
    grid = configs()
    startup: float | None = None
    if CUDA_EP not in available:
        note = Msg(N_("this onnxruntime build has no {provider} (available: {available})"), provider=CUDA_EP,
                   available=Joined(N_(", "), available))
    else:
        cuda = run("CUDA", grid)
        cuda_results = results_of(cuda, grid)
        warmup = cuda.stage("warmup")
        startup = _number(warmup.get("ms")) if warmup else None
        note = _cuda_note(cuda, grid, cuda_results)
        complete = note is None
        cuda_results = [r for r in cuda_results if not r.error]
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
        cuda_startup_ms=startup,
        recommendation=recommend(cuda_results, changing),
    )


def _cpu_baseline(cpu: RunOutcome, cpu_config: Config, target: Path, model: Path
                  ) -> tuple[object, list[str], list[Mapping[str, Sequence[int]]], list[ConfigResult]]:
    """From the CPU run: onnxruntime's version, its available providers, the resolved shape sets and the CPU
    results; or the error that says why the CPU run cannot be the baseline."""
    imported = cpu.stage("import")
    if imported is None:
        raise OrtfixError(Msg(N_("the CPU run in {target} {death} before importing onnxruntime"), target=str(target),
                              death=cpu.death()))
    if imported.get("error"):
        raise OrtfixError(Msg(N_("cannot import onnxruntime in {target}: {error}"), target=str(target),
                              error=str(imported["error"])),
                          hint=Msg(N_("`ortfix check` says what is installed")))
    inputs = cpu.stage("inputs")
    if inputs is None:
        raise OrtfixError(Msg(N_("the CPU run {death} while loading {model}"), death=cpu.death(), model=str(model)))
    if inputs.get("error"):
        raise OrtfixError(Msg(N_("{model}: {error}"), model=str(model), error=one_line(str(inputs["error"]))))
    resolved: list[Mapping[str, Sequence[int]]] = list(inputs.get("shape_sets") or [])
    cpu_results = results_of(cpu, [cpu_config])
    if not cpu_results:
        raise OrtfixError(Msg(N_("the CPU run {death} while timing {model}"), death=cpu.death(), model=str(model)))
    if cpu_results[0].error:
        raise OrtfixError(Msg(N_("{model} does not run on the CPU: {error}"), model=str(model),
                              error=one_line(cpu_results[0].error)))
    available: list[str] = list(inputs.get("available") or [])
    return imported.get("version"), available, resolved, cpu_results


def _cuda_note(cuda: RunOutcome, grid: Sequence[Config], cuda_results: Sequence[ConfigResult]) -> Msg | None:
    """Why the CUDA run is not complete (no configuration ran, some failed, or some did not run); None when every
    configuration of `grid` ran."""
    from ortfix.system.linux.driver import detect_driver
    from ortfix.system.linux.ldcache import load_ld_cache
    from ortfix.verify.levels import no_gpu_reason

    failed = [r for r in cuda_results if r.error]
    ran = [r for r in cuda_results if not r.error]
    if not ran:
        reason = no_gpu_reason(detect_driver(load_ld_cache()))
        what: str | Msg = (failed[0].error if failed else None) or Msg(N_("the process {death}"),
                                                                        death=cuda.death())
        logs = cuda.evidence
        detail = Msg(N_("{what}; onnxruntime said: {said}"), what=what, said=logs[0]) if logs else what
        return (Msg(N_("{reason}, so the CUDA provider cannot start here ({detail})"), reason=reason, detail=detail)
                if reason else Msg(N_("the CUDA provider did not run: {detail}"), detail=detail))
    if failed or len(cuda_results) < len(grid):
        parts: list[str | Msg] = [Msg(N_("{ran} of {total} CUDA configurations ran"), ran=len(ran), total=len(grid))]
        if failed:
            parts.append(Msg(N_("{count} failed (first: {config}: {error})"), count=len(failed),
                             config=failed[0].config.name, error=failed[0].error or ""))
        if len(cuda_results) < len(grid):
            parts.append(Msg(N_("{count} did not run: the process {death}"), count=len(grid) - len(cuda_results),
                             death=cuda.death()))
        return Joined(N_("; "), parts)
    return None


def _number(value: object) -> float | None:
    """A duration from the child's JSON: a finite non-negative number, else None (the child's output is data)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf"):
        return float(value)
    return None
