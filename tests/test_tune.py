"""`ortfix tune MODEL`: end to end through the real CLI, with the real onnxruntime 1.22.0 (CPU build, and the GPU
build without a driver) and ortfix's shipped model, whose input shapes change between runs."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from checktools import nvidia_lib_path
from clitools import REPO, assert_one_line_error, run_ortfix
from ortfix.errors import OrtfixError
from ortfix.tune import ALGO_SEARCH, ARENA, configs, parse_shapes
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


def test_grid_covers_the_options_that_matter() -> None:
    grid = configs()
    assert len(grid) == 12
    assert {c.options["cudnn_conv_algo_search"] for c in grid} == set(ALGO_SEARCH)
    assert {c.options["arena_extend_strategy"] for c in grid} == set(ARENA)
    assert {c.options["cudnn_conv_use_max_workspace"] for c in grid} == {"0", "1"}


def test_missing_model_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("tune", str(tmp_path / "missing.onnx")), "missing.onnx", "no such file")


def test_bad_shapes_are_one_line() -> None:
    assert_one_line_error(run_ortfix("tune", str(MODEL), "--shapes", "1x3xbig"), "--shapes", "'big'")


# ---------------------------------------------------------------------------------------------------------------------
# Real wheels
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.realwheels
def test_tune_cpu_with_changing_shapes_end_to_end(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = cpu_venv(tmp_path_factory)
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
    assert doc["cuda"] == {"complete": False, "ran": False,
                           "note": "this onnxruntime build has no CUDAExecutionProvider (available: "
                                   "AzureExecutionProvider, CPUExecutionProvider)"}
    rec = doc["recommendation"]
    assert rec["measured"] is False
    assert ast.literal_eval(rec["python"]) == rec["options"]
    assert yaml.safe_load(rec["yaml"]) == {"CUDAExecutionProvider": rec["options"]}
    assert "ortfix: tune: CPU [1/1] CPU: changing shapes" in stderr  # progress, on stderr


@pytest.mark.realwheels
def test_tune_text_table_and_snippets(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = cpu_venv(tmp_path_factory)
    proc = run_ortfix("tune", "--python", str(venv), str(MODEL), *SHAPES, "--runs", "2")
    assert proc.returncode == 3, proc.stderr
    out = proc.stdout
    assert "changing shapes: x=1x3x16x16  x=2x3x24x20  x=1x3x9x31" in out
    row = next(line for line in out.splitlines() if line.startswith("CPU "))
    assert len(row.split()) == 7 and all(float(v) > 0 for v in row.split()[1:])
    assert "CUDA part not run: this onnxruntime build has no CUDAExecutionProvider" in out
    options, doc = snippet_from_text(out)
    assert doc == {"CUDAExecutionProvider": options}
    assert options["cudnn_conv_algo_search"] in ALGO_SEARCH


@pytest.mark.realwheels
def test_tune_default_shapes_change(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = cpu_venv(tmp_path_factory)
    rc, doc, _ = tune_json("--python", str(venv), str(MODEL), "--runs", "1")
    assert rc == 3
    assert [s["x"] for s in doc["shapes"]["changing"]] == [[8, 3, 8, 8], [16, 3, 16, 16], [12, 3, 12, 12],
                                                           [24, 3, 24, 24]]


@pytest.mark.realwheels
def test_tune_shapes_that_do_not_fit_the_model(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = cpu_venv(tmp_path_factory)
    line = assert_one_line_error(run_ortfix("tune", "--python", str(venv), str(MODEL), "--shapes", "1x4x8x8"))
    assert "input x: dimension 1 is fixed at 3, not 4" in line
    line = assert_one_line_error(run_ortfix("tune", "--python", str(venv), str(MODEL), "--shapes", "y=1x3x8x8"))
    assert "no input named y" in line


@pytest.mark.realwheels
def test_tune_corrupt_model_is_one_line(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    venv = cpu_venv(tmp_path_factory)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    assert_one_line_error(run_ortfix("tune", "--python", str(venv), str(bad)), str(bad))


@pytest.mark.realwheels
def test_tune_measures_every_cuda_configuration_when_cuda_runs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """No GPU here: the target's onnxruntime reports CUDA while the real CPU provider computes (ortvenvs.py)."""
    venv = cpu_venv(tmp_path_factory)
    rc, doc, _ = tune_json("--python", str(venv), str(MODEL), *SHAPES, "--runs", "2", env={FAKE_CUDA_ENV: "1"})
    assert rc == 0, doc
    cuda = [r for r in doc["results"] if r["provider"] == "cuda"]
    assert len(cuda) == 12 and all(r["fixed"] and r["changing"] for r in cuda)
    rec = doc["recommendation"]
    assert rec["measured"] is True and rec["basis"].startswith("fastest over the changing-shape runs")
    best = min(cuda, key=lambda r: r["changing"]["total_ms"])
    assert rec["options"] == best["options"]
    assert doc["cuda"]["complete"] is True and doc["cuda"]["note"] is None


@pytest.mark.realwheels
def test_tune_gpu_build_without_driver_runs_the_cpu_part(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = gpu_venv(tmp_path_factory)
    rc, doc, _ = tune_json("--python", str(venv), str(MODEL), *SHAPES, "--runs", "2",
                           env={"LD_LIBRARY_PATH": nvidia_lib_path(venv)})
    assert rc == 3
    assert [r["provider"] for r in doc["results"]] == ["cpu"]
    note = doc["cuda"]["note"]
    assert "cannot start here" in note or "did not run" in note, note
    assert "SIGSEGV" in note or "did not get CUDAExecutionProvider" in note, note
