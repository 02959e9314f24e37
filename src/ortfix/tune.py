"""`ortfix tune MODEL`: time a model with the CPU provider and with the CUDA provider under the options that matter for
dynamic shapes, with a fixed shape and with changing shapes, first run and steady state apart; recommend options.

Each part (CPU, CUDA) runs in a fresh process of the target interpreter (`_ortrun.py`): a CUDA provider that crashes
or falls back to the CPU makes the CUDA part "could not run, because ...", never a crash of ortfix.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.target.ortrun import CUDA_EP, RunOutcome

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
    basis: str | Msg  # English in --json (str), translated on the screen (i18n.text)

    @property
    def python(self) -> str:
        body = "".join(f"    {json.dumps(k)}: {json.dumps(v)},\n" for k, v in self.options.items())
        return "{\n" + body + "}"

    @property
    def yaml(self) -> str:
        return yaml.safe_dump({CUDA_EP: dict(self.options)}, sort_keys=False, default_flow_style=False)


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
                    raise OrtfixError(Msg(N_("--shapes {value}: with several inputs, name each one: NAME=DIMS"),
                                          value=repr(value)))
                name = name.strip()
                if eq and not name:
                    raise OrtfixError(Msg(N_("--shapes {value}: an input name is missing before '='"),
                                          value=repr(value)))
                parts = dims.strip().lower().split("x")
                bad = next((p for p in parts if not p.strip().isdigit()), None)
                if bad is not None:
                    raise OrtfixError(Msg(N_("--shapes {value}: {bad} is not a number (dimensions look like "
                                             "1x3x224x224)"), value=repr(value), bad=repr(bad.strip())))
                parsed = [int(p) for p in parts]
                if any(d <= 0 for d in parsed):
                    raise OrtfixError(Msg(N_("--shapes {value}: dimensions must be positive"), value=repr(value)))
                if name in spec:
                    raise OrtfixError(Msg(N_("--shapes {value}: {name} is given twice"), value=repr(value),
                                          name=name or Msg(N_("the input"))))
                spec[name] = parsed
            sets.append(spec)
    return sets


def _phase(doc: Mapping[str, Any] | None) -> Phase | None:
    if not doc:
        return None
    return Phase(first_ms=float(doc["first_ms"]), steady_ms=float(doc["steady_ms"]), min_ms=float(doc["min_ms"]),
                 runs=int(doc["runs"]), first_max_ms=doc.get("first_max_ms"), total_ms=doc.get("total_ms"))


def results_of(outcome: RunOutcome, wanted: Sequence[Config]) -> list[ConfigResult]:
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
                              Msg(N_("not measured here (the CUDA part could not run); the usual choice for changing "
                                     "shapes. Run `ortfix tune` on the GPU machine to measure")))
    if changing and all(r.changing is not None and r.changing.total_ms is not None for r in ok):
        best = min(ok, key=lambda r: float(r.changing.total_ms or 0.0) if r.changing else 0.0)
        basis = Msg(N_("fastest over the changing-shape runs, first runs included ({name}: {ms} ms in all)"),
                    name=best.config.name, ms=f"{best.changing.total_ms if best.changing else 0:.1f}")
    else:
        best = min(ok, key=lambda r: r.fixed.steady_ms if r.fixed else 0.0)
        basis = Msg(N_("fastest steady state with the fixed shape ({name}: {ms} ms)"), name=best.config.name,
                    ms=f"{best.fixed.steady_ms if best.fixed else 0:.2f}")
    return Recommendation(dict(best.config.options), True, basis)
