"""The real thing: onnxruntime-gpu / onnxruntime 1.22.0 and the NVIDIA wheels from the configured index, installed by
real pip into fresh venvs (pip's cache keeps reruns quick). Marked `realwheels`; CI runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

import ortvenvs
from checktools import check_json, codes, finding, nvidia_lib_path, plan_json, site_packages, tree_hash
from support.fixtures import ld_so_list

pytestmark = pytest.mark.realwheels


@pytest.fixture(scope="module")
def real_gpu_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ortvenvs.gpu_venv()


@pytest.fixture(scope="module")
def real_cpu_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ortvenvs.cpu_venv()


def test_gpu_with_extras_check_names_the_libraries(real_gpu_venv: Path) -> None:
    rc, doc = check_json(real_gpu_venv / "bin" / "python")
    assert rc == 1
    f = finding(doc, "LIB002")
    sp = site_packages(real_gpu_venv)
    assert f["data"]["libraries"]["libcublasLt.so.12"] == [str(sp / "nvidia/cublas/lib/libcublasLt.so.12")]
    assert {"libcudnn.so.9", "libcudart.so.12", "libcufft.so.11", "libcurand.so.10", "libnvrtc.so.12",
            "libcublas.so.12"} <= set(f["data"]["libraries"])
    assert "MTX002" not in codes(doc), finding(doc, "MTX002")  # the matrix agrees with the real binary


def test_gpu_with_extras_plan_installs_nothing(real_gpu_venv: Path) -> None:
    before = tree_hash(real_gpu_venv)
    rc, plan = plan_json(real_gpu_venv / "bin" / "python")
    assert rc == 1
    kinds = {a["kind"] for a in plan["actions"]}
    assert kinds == {"write-file"}
    assert tree_hash(real_gpu_venv) == before


def test_real_provider_resolution_agrees_with_ld_so(real_gpu_venv: Path) -> None:
    sp = site_packages(real_gpu_venv)
    dirs = nvidia_lib_path(real_gpu_venv)
    _, doc = check_json(real_gpu_venv / "bin" / "python", env={"LD_LIBRARY_PATH": dirs})
    assert not codes(doc) & {"LIB001", "LIB002", "LIB003"}
    cuda = next(p for p in doc["facts"]["onnxruntime"][0]["providers"] if p["provider"] == "cuda")
    ours: dict[str, str | None] = {}
    for lib in cuda["libraries"]:
        if not lib["lazy"]:
            ours.setdefault(lib["name"], lib["path"])
    real = ld_so_list(sp / "onnxruntime/capi/libonnxruntime_providers_cuda.so", {"LD_LIBRARY_PATH": dirs})
    for name, path in real.items():
        if name.startswith(("linux-vdso", "/", "ld-linux")):
            continue
        assert ours.get(name) == path, name


def test_cpu_package_plan_swaps_to_gpu(real_cpu_venv: Path) -> None:
    _rc, doc = check_json(real_cpu_venv / "bin" / "python")
    assert "ORT002" in codes(doc)
    _, plan = plan_json(real_cpu_venv / "bin" / "python")
    assert [a["details"]["distribution"] for a in plan["actions"] if a["kind"] == "pip-uninstall"] == ["onnxruntime"]
    reqs = next(a for a in plan["actions"] if a["kind"] == "pip-install")["details"]["requirements"]
    assert reqs[0] == "onnxruntime-gpu==1.22.0"
    names = {r.split("~")[0].split("=")[0].split(",")[0].split("<")[0] for r in reqs[1:]}
    assert {"nvidia-cudnn-cu12", "nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cufft-cu12",
            "nvidia-curand-cu12", "nvidia-cuda-nvrtc-cu12"} <= names
