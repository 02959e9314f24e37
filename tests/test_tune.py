"""`ortfix tune MODEL`: end to end through the real CLI, with the real onnxruntime 1.22.0 (CPU build, and the GPU
build without a driver) and ortfix's shipped model, whose input shapes change between runs."""

from __future__ import annotations

import ast
import ctypes
import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from checktools import nvidia_lib_path
from clitools import REPO, assert_one_line_error, run_ortfix
from ortfix.errors import OrtfixError
from ortfix.tune import Config, ConfigResult, Phase, configs, parse_shapes, recommend
from ortvenvs import FAKE_CUDA_ENV, cpu_venv, gpu_venv

MODEL = REPO / "src" / "ortfix" / "verify" / "models" / "verify_conv.onnx"
SHAPES = ["--shapes", "1x3x16x16", "--shapes", "2x3x24x20;1x3x9x31"]


def tune_json(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    proc = run_ortfix("tune", "--json", *args, env=env, timeout=600)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def snippet_from_text(text: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The Python dict and the YAML exactly as printed, parsed."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("cuda_options = {"))
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "}")
    literal = "\n".join([lines[start].split("=", 1)[1], *lines[start + 1:end + 1]])
    yaml_at = next(i for i, line in enumerate(lines) if line.strip() == "YAML:")
    block = textwrap.dedent("\n".join(lines[yaml_at + 1:]))
    return ast.literal_eval(literal.strip()), yaml.safe_load(block)


# ---------------------------------------------------------------------------------------------------------------------
# Hermetic
# ---------------------------------------------------------------------------------------------------------------------


def test_parse_shapes() -> None:
    assert parse_shapes([]) == []
    assert parse_shapes(["1x3x224x224"]) == [{"": [1, 3, 224, 224]}]
    assert parse_shapes(["1x3x8x8;2x3x16x16", "4x3x4x4"]) == [{"": [1, 3, 8, 8]}, {"": [2, 3, 16, 16]},
                                                               {"": [4, 3, 4, 4]}]
    assert parse_shapes(["ids=1x128, mask=1x128"]) == [{"ids": [1, 128], "mask": [1, 128]}]
    for bad in ("1x3xAx4", "1x0x3", "1x3,2x3", "=1x3", "a=1x2,a=1x2"):
        with pytest.raises(OrtfixError):
            parse_shapes([bad])


def test_grid_is_every_combination_the_readme_promises() -> None:
    """README and `tune --help`: every combination of cudnn_conv_algo_search (EXHAUSTIVE, HEURISTIC, DEFAULT),
    cudnn_conv_use_max_workspace (1, 0) and arena_extend_strategy (kNextPowerOfTwo, kSameAsRequested), written out."""
    expected = [
        ("EXHAUSTIVE", "1", "kNextPowerOfTwo"), ("EXHAUSTIVE", "1", "kSameAsRequested"),
        ("EXHAUSTIVE", "0", "kNextPowerOfTwo"), ("EXHAUSTIVE", "0", "kSameAsRequested"),
        ("HEURISTIC", "1", "kNextPowerOfTwo"), ("HEURISTIC", "1", "kSameAsRequested"),
        ("HEURISTIC", "0", "kNextPowerOfTwo"), ("HEURISTIC", "0", "kSameAsRequested"),
        ("DEFAULT", "1", "kNextPowerOfTwo"), ("DEFAULT", "1", "kSameAsRequested"),
        ("DEFAULT", "0", "kNextPowerOfTwo"), ("DEFAULT", "0", "kSameAsRequested"),
    ]
    grid = configs()
    keys = ("cudnn_conv_algo_search", "cudnn_conv_use_max_workspace", "arena_extend_strategy")
    assert all(set(c.options) == set(keys) for c in grid), [dict(c.options) for c in grid]
    assert sorted(tuple(c.options[k] for k in keys) for c in grid) == sorted(expected)
    assert len(grid) == 12
    assert {c.provider for c in grid} == {"cuda"}
    assert len({c.name for c in grid}) == 12  # the table and the JSON tell the configurations apart by name
    assert grid[0].name == "CUDA EXHAUSTIVE workspace=max kNextPowerOfTwo"


def _cuda(name: str, algo: str, arena: str, *, fixed_steady: float, changing_total: float | None,
          error: str | None = None) -> ConfigResult:
    options = {"cudnn_conv_algo_search": algo, "cudnn_conv_use_max_workspace": "1", "arena_extend_strategy": arena}
    changing = None if changing_total is None else Phase(first_ms=50.0, steady_ms=5.0, min_ms=4.0, runs=9,
                                                         first_max_ms=80.0, total_ms=changing_total)
    return ConfigResult(Config(name, "cuda", options), load_ms=100.0,
                        fixed=Phase(first_ms=40.0, steady_ms=fixed_steady, min_ms=fixed_steady, runs=3),
                        changing=changing, error=error)


# Made by hand so that the right answer is known: EXHAUSTIVE is the fastest with the fixed shape but searches again
# for every new shape (slowest with changing shapes); HEURISTIC/kSameAsRequested is the fastest with changing shapes;
# a configuration that failed would beat both and must never be chosen; the CPU row is never a CUDA option.
HAND_MADE = [
    ConfigResult(Config("CPU", "cpu"), 10.0, Phase(1.0, 0.1, 0.1, 3), Phase(1.0, 0.1, 0.1, 9, 1.0, 1.0)),
    _cuda("exhaustive", "EXHAUSTIVE", "kNextPowerOfTwo", fixed_steady=1.25, changing_total=900.0),
    _cuda("heuristic", "HEURISTIC", "kSameAsRequested", fixed_steady=2.5, changing_total=120.0),
    _cuda("default", "DEFAULT", "kNextPowerOfTwo", fixed_steady=3.0, changing_total=150.0),
    _cuda("broken", "DEFAULT", "kSameAsRequested", fixed_steady=0.5, changing_total=10.0, error="CUDA failure 2"),
]


def test_recommendation_with_changing_shapes_is_the_fastest_over_all_changing_runs() -> None:
    rec = recommend(HAND_MADE, changing=True)
    assert rec.measured is True
    assert dict(rec.options) == {"cudnn_conv_algo_search": "HEURISTIC", "cudnn_conv_use_max_workspace": "1",
                                 "arena_extend_strategy": "kSameAsRequested"}
    assert str(rec.basis) == "fastest over the changing-shape runs, first runs included (heuristic: 120.0 ms in all)"


def test_recommendation_with_one_shape_is_the_fastest_steady_state() -> None:
    rec = recommend(HAND_MADE, changing=False)
    assert rec.measured is True
    assert dict(rec.options) == {"cudnn_conv_algo_search": "EXHAUSTIVE", "cudnn_conv_use_max_workspace": "1",
                                 "arena_extend_strategy": "kNextPowerOfTwo"}
    assert str(rec.basis) == "fastest steady state with the fixed shape (exhaustive: 1.25 ms)"


def test_recommendation_without_cuda_timings_is_the_usual_choice_unmeasured() -> None:
    for results in ([], HAND_MADE[:1], [HAND_MADE[0], HAND_MADE[-1]]):  # nothing, the CPU only, a failed CUDA run
        rec = recommend(results, changing=True)
        assert rec.measured is False
        assert dict(rec.options) == {"cudnn_conv_algo_search": "HEURISTIC", "cudnn_conv_use_max_workspace": "1",
                                     "arena_extend_strategy": "kSameAsRequested"}
        assert str(rec.basis).startswith("not measured here (the CUDA part could not run)")


def test_missing_model_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("tune", str(tmp_path / "missing.onnx")), "missing.onnx", "no such file")


def test_bad_shapes_are_one_line() -> None:
    assert_one_line_error(run_ortfix("tune", str(MODEL), "--shapes", "1x3xbig"), "--shapes", "'big'")


# ---------------------------------------------------------------------------------------------------------------------
# Real wheels
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.realwheels
def test_tune_cpu_with_changing_shapes_end_to_end(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = cpu_venv()
    rc, doc, stderr = tune_json("--python", str(venv), str(MODEL), *SHAPES, "--runs", "3", "--progress")
    assert rc == 3 and doc["exit_code"] == 3  # incomplete: the CUDA part could not run
    assert doc["shapes"]["fixed"] == {"x": [1, 3, 16, 16]}
    assert doc["shapes"]["changing"] == [{"x": [1, 3, 16, 16]}, {"x": [2, 3, 24, 20]}, {"x": [1, 3, 9, 31]}]
    [cpu] = doc["results"]
    assert cpu["provider"] == "cpu"
    for phase, runs in (("fixed", 3), ("changing", 9)):
        timing = cpu[phase]
        assert timing["first_ms"] > 0 and timing["steady_ms"] > 0 and timing["runs"] == runs, (phase, timing)
    assert cpu["changing"]["first_max_ms"] >= cpu["changing"]["first_ms"]
    assert doc["cuda"] == {"complete": False, "ran": False, "startup_ms": None,
                           "note": "this onnxruntime build has no CUDAExecutionProvider (available: "
                                   "AzureExecutionProvider, CPUExecutionProvider)"}
    rec = doc["recommendation"]
    assert rec["measured"] is False
    assert ast.literal_eval(rec["python"]) == rec["options"]
    assert yaml.safe_load(rec["yaml"]) == {"CUDAExecutionProvider": rec["options"]}
    assert "ortfix: tune: CPU [1/1] CPU: changing shapes" in stderr  # progress, on stderr


@pytest.mark.realwheels
def test_tune_text_table_and_snippets(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = cpu_venv()
    proc = run_ortfix("tune", "--python", str(venv), str(MODEL), *SHAPES, "--runs", "2")
    assert proc.returncode == 3, proc.stderr
    out = proc.stdout
    assert "changing shapes: x=1x3x16x16  x=2x3x24x20  x=1x3x9x31" in out
    row = next(line for line in out.splitlines() if line.startswith("CPU "))
    assert len(row.split()) == 7 and all(float(v) > 0 for v in row.split()[1:])
    assert "CUDA part not run: this onnxruntime build has no CUDAExecutionProvider" in out
    options, doc = snippet_from_text(out)
    assert doc == {"CUDAExecutionProvider": options}
    assert options == {"cudnn_conv_algo_search": "HEURISTIC", "cudnn_conv_use_max_workspace": "1",
                       "arena_extend_strategy": "kSameAsRequested"}  # not measured: the usual choice


@pytest.mark.realwheels
def test_tune_default_shapes_change(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = cpu_venv()
    rc, doc, _ = tune_json("--python", str(venv), str(MODEL), "--runs", "1")
    assert rc == 3
    assert [s["x"] for s in doc["shapes"]["changing"]] == [[8, 3, 8, 8], [16, 3, 16, 16], [12, 3, 12, 12],
                                                           [24, 3, 24, 24]]


@pytest.mark.realwheels
def test_tune_shapes_that_do_not_fit_the_model(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = cpu_venv()
    line = assert_one_line_error(run_ortfix("tune", "--python", str(venv), str(MODEL), "--shapes", "1x4x8x8"))
    assert "input x: dimension 1 is fixed at 3, not 4" in line
    line = assert_one_line_error(run_ortfix("tune", "--python", str(venv), str(MODEL), "--shapes", "y=1x3x8x8"))
    assert "no input named y" in line


@pytest.mark.realwheels
def test_tune_corrupt_model_is_one_line(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    venv = cpu_venv()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    assert_one_line_error(run_ortfix("tune", "--python", str(venv), str(bad)), str(bad))


@pytest.mark.realwheels
def test_tune_measures_every_cuda_configuration_when_cuda_runs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """No GPU here: the target's onnxruntime reports CUDA while the real CPU provider computes (ortvenvs.py)."""
    venv = cpu_venv()
    rc, doc, _ = tune_json("--python", str(venv), str(MODEL), *SHAPES, "--runs", "2", env={FAKE_CUDA_ENV: "1"})
    assert rc == 0, doc
    cuda = [r for r in doc["results"] if r["provider"] == "cuda"]
    assert len(cuda) == 12 and all(r["fixed"] and r["changing"] for r in cuda)
    rec = doc["recommendation"]
    assert rec["measured"] is True and rec["basis"].startswith("fastest over the changing-shape runs")
    named = [r for r in cuda if f"({r['name']}: " in rec["basis"]]  # the rule itself: the hand-made tests above
    assert len(named) == 1 and rec["options"] == named[0]["options"], rec
    assert doc["cuda"]["complete"] is True and doc["cuda"]["note"] is None


@pytest.mark.realwheels
def test_tune_times_the_cuda_start_apart_from_every_configuration(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Seen on a real H100: the first CUDA row paid the process's CUDA start (394 ms of load against 4 ms for every
    other row). The fake CUDA here takes 0.5 s for the process's first CUDA session (ortvenvs.py, "coldstart")."""
    venv = cpu_venv()
    rc, doc, _ = tune_json("--python", str(venv), str(MODEL), "--shapes", "1x3x16x16", "--runs", "1",
                           env={FAKE_CUDA_ENV: "coldstart"})
    assert rc == 0, doc
    cuda = [r for r in doc["results"] if r["provider"] == "cuda"]
    assert len(cuda) == 12 and max(r["load_ms"] for r in cuda) < 400, [r["load_ms"] for r in cuda]
    assert doc["cuda"]["startup_ms"] >= 500


def _nvidia_driver_present() -> str | None:
    """Why this machine has an NVIDIA driver, or None: its kernel module's version file, or a libcuda.so.1 the
    loader finds (ctypes raises OSError when it does not; nothing is started)."""
    if os.path.exists("/proc/driver/nvidia/version"):
        return "/proc/driver/nvidia/version exists"
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    return "libcuda.so.1 loads"


@pytest.mark.realwheels
def test_tune_gpu_build_without_driver_runs_the_cpu_part(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Needs a machine WITHOUT an NVIDIA driver (skipped where one is present): the real CUDA provider then dies of
    SIGSEGV, the CPU part still runs, and tune exits 3."""
    driver = _nvidia_driver_present()
    if driver:
        pytest.skip(f"this test needs a machine without an NVIDIA driver ({driver})")
    venv = gpu_venv()
    rc, doc, _ = tune_json("--python", str(venv), str(MODEL), *SHAPES, "--runs", "2",
                           env={"LD_LIBRARY_PATH": nvidia_lib_path(venv)})
    assert rc == 3
    assert [r["provider"] for r in doc["results"]] == ["cpu"]
    assert doc["cuda"]["complete"] is False and doc["cuda"]["ran"] is False
    note = doc["cuda"]["note"]
    assert note.startswith("no NVIDIA driver, so the CUDA provider cannot start here (the process was killed by "
                           "signal 11 (SIGSEGV)"), note
    assert doc["recommendation"]["measured"] is False
