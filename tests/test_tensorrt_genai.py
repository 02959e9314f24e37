"""TensorRT and onnxruntime-genai (issue 24): the addons matrix (compat/addons.yaml), check's TensorRT block and
genai findings, and the plan that swaps a CPU onnxruntime-genai beside the GPU ORT for onnxruntime-genai-cuda."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from clitools import REPO, assert_one_line_error, run_ortfix
from ortfix.compat.load import load_matrix
from ortfix.errors import OrtfixError

COMPAT = REPO / "compat"


def _copy(tmp_path: Path, old: str, new: str) -> Path:
    d = tmp_path / "compat"
    shutil.copytree(COMPAT, d)
    text = (d / "addons.yaml").read_text(encoding="utf-8")
    assert old in text
    (d / "addons.yaml").write_text(text.replace(old, new, 1), encoding="utf-8")
    return d


def test_tensorrt_major_agrees_with_the_wheels_needed_libnvinfer() -> None:
    """addons.yaml's TensorRT major of every ORT minor equals the N of the libnvinfer.so.N that ort.yaml's rows
    (read off the real wheels with readelf) list for the TensorRT provider; every such minor has a row."""
    matrix = load_matrix(COMPAT, use_cache=False)
    checked = 0
    for build in matrix.builds:
        nvinfer = [n for n in build.tensorrt_needed if re.fullmatch(r"libnvinfer\.so\.\d+", n)]
        if not nvinfer or build.index == "withdrawn":
            continue
        for version in build.versions:
            row = matrix.addons.tensorrt_for(version)
            assert row is not None, f"no tensorrt row for ORT {version}"
            assert f"libnvinfer.so.{row.major}" == nvinfer[0], version
            checked += 1
    assert checked > 20


def test_genai_cuda_pairs_only_with_an_ort_it_accepts() -> None:
    matrix = load_matrix(COMPAT, use_cache=False)
    assert matrix.addons.genai_cuda_for("1.22.0", 12) == "0.9.2"  # 0.10.0 needs onnxruntime-gpu>=1.23.0
    assert matrix.addons.genai_cuda_for("1.22.0", 13) is None  # no CUDA 13 genai accepts ORT 1.22
    assert matrix.addons.genai_cuda_for("1.31.1", 13) == "0.18.0"
    assert matrix.addons.genai_cuda_for("1.18.0", 12) is None  # older than every genai-cuda's requirement
    row = matrix.addons.genai_release("onnxruntime-genai-cuda", "0.11.1")  # an unlisted patch: its minor's row
    assert row is not None and row.cuda_major == 12


def test_matrix_validate_accepts_the_addons_file() -> None:
    proc = run_ortfix("matrix", "validate", str(COMPAT / "addons.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert "addons.yaml: ok (addons" in proc.stdout


@pytest.mark.parametrize(("old", "new", "message"), [
    ('ort: ["1.22"]', 'ort: ["1.21"]', "ORT 1.21 is already in an earlier tensorrt row"),
    ('major: 10, min_version: "10.9"', 'major: ten, min_version: "10.9"', "major"),
    ('cuda_major: 13, ort_min: "1.31.0"', 'cuda_major: 13, ort_min: "1.31"', "ort_min"),
    ('package: "onnxruntime-genai-cuda", versions: ["0.4.0"]', 'package: "genai", versions: ["0.4.0"]', "package"),
])
def test_a_broken_addons_file_names_its_line(tmp_path: Path, old: str, new: str, message: str) -> None:
    line = next(i for i, text in enumerate((COMPAT / "addons.yaml").read_text().splitlines(), 1) if old in text)
    d = _copy(tmp_path, old, new)
    with pytest.raises(OrtfixError) as err:
        load_matrix(d, use_cache=False)
    assert f"addons.yaml:{line}:" in err.value.message and message in err.value.message
    proc = run_ortfix("matrix", "validate", str(d / "addons.yaml"))
    assert_one_line_error(proc, f"addons.yaml:{line}:")


def test_a_compat_folder_without_addons_loads_with_no_rows(tmp_path: Path) -> None:
    d = tmp_path / "compat"
    shutil.copytree(COMPAT, d)
    (d / "addons.yaml").unlink()
    matrix = load_matrix(d, use_cache=False)
    assert matrix.addons.tensorrt == () and matrix.addons.genai_cuda_for("1.22.0", 12) is None
