"""Every release line, on real wheels: `check` names the build exactly, `plan` is coherent for the installed build and
for driver bands of each CUDA major (every requirement resolves on the configured index), and no plan mixes CUDA
majors. The expected majors are read off the wheels themselves (../shared/facts/ort-gpu-wheels.md), not from ortfix.

One venv per release holds the ORT wheel alone (`--no-deps`); pip's cache keeps reruns quick."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checktools import site_packages
from clitools import run_ortfix
from ortvenvs import cached_venv, linked_copy, linked_into, linked_numpy
from plantools import assert_coherent, requirement_name, requirements
from support.fixtures import base_python
from support.resolve import dry_run, resolved
from txtools import assert_same_tree, ortfix_json, tree_state

pytestmark = pytest.mark.realwheels

# CUDA and cuDNN major of each release line's provider library (readelf -d / _ld_preload.py of the real wheels).
RELEASES: dict[str, tuple[int, int]] = {
    "1.15.1": (11, 8), "1.16.3": (11, 8), "1.17.1": (11, 8), "1.18.1": (11, 8),
    "1.19.2": (12, 9), "1.20.2": (12, 9), "1.21.1": (12, 9), "1.22.0": (12, 9), "1.23.2": (12, 9),
    "1.24.4": (12, 9), "1.25.1": (12, 9), "1.26.0": (12, 9),
    "1.27.0": (13, 9), "1.28.0": (13, 9), "1.29.0": (13, 9), "1.30.0": (13, 9), "1.31.1": (13, 9),
}
# One driver per band: CUDA 11 only (11.4), CUDA 12.0 exactly, the last CUDA 12 driver (12.9), CUDA 13.
DRIVER_BANDS = ("470.57.02", "525.60.13", "575.51.03", "580.65.06")


def _venv(root: Path, *requirements: str) -> Path:
    """A fresh venv at root/venv with `requirements` alone (`--no-deps`), for a test that changes it."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--disable-pip-version-check", *requirements], check=True)
    return venv


@pytest.fixture(scope="module")
def release_venv() -> Any:
    """The venv of one release (onnxruntime-gpu alone), made once per machine in the tests' cache (tests/ortvenvs.py):
    the tests that use it only run check and plan on it."""
    def make(version: str) -> Path:
        return cached_venv("releases", f"onnxruntime-gpu=={version}", no_deps=True)

    return make


def _json(args: list[str]) -> dict[str, Any]:
    result = run_ortfix(*args, "--json", timeout=300)
    assert result.returncode in (0, 1), result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.mark.parametrize("version", sorted(RELEASES, key=lambda v: tuple(map(int, v.split(".")))))
def test_release_identified_and_planned(release_venv: Any, version: str) -> None:
    venv = release_venv(version)
    python = str(venv / "bin" / "python")
    check = _json(["check", "--python", python])
    [ort] = check["facts"]["onnxruntime"]
    cuda, cudnn = RELEASES[version]
    assert (ort["package"], ort["version"], ort["cuda_major"], ort["cudnn_major"]) == (
        "onnxruntime-gpu", version, cuda, cudnn)
    assert ort["in_matrix"] is True
    codes = {f["code"] for f in check["findings"]}
    assert not codes & {"MTX001", "MTX002"}, check["findings"]  # the matrix knows it and agrees with the binary

    assert_coherent(_json(["plan", "--python", python]), version, cuda, str(venv))
    for driver in DRIVER_BANDS:
        plan = _json(["plan", "--python", python, "--driver", driver])
        assert_coherent(plan, version, cuda, str(venv))
        if plan["target"]["index"] == "default":
            _assert_resolves(requirements(plan))


def _assert_resolves(requirements: list[str]) -> None:
    """Every pinned or capped requirement has a wheel for this Python and platform on the configured index. With
    `--no-deps` each resolves on its own, so the answers are shared across plans (tests/support/resolve.py); a set
    that names one project twice is resolved together, as pip intersects the two."""
    names = [requirement_name(r) for r in requirements]
    if len(set(names)) == len(names):
        resolved(requirements)  # asserts each resolves
        return
    result = dry_run(requirements, report=False)
    assert result.returncode == 0, f"{requirements}: {result.stderr.strip().splitlines()[-1:]}"


def test_gpu_too_old_for_the_build_swaps_it(release_venv: Any) -> None:
    """GPU001 as an error (compute capability 7.0 under a CUDA 13 build): the plan swaps to a CUDA 12 build and says
    so in its header; the finding is fixed by the plan, not left over."""
    python = str(release_venv("1.31.1") / "bin" / "python")
    plan = _json(["plan", "--python", python, "--driver", "580.65.06", "--compute-capability", "7.0"])
    assert plan["target"]["cuda_major"] == 12
    assert_coherent(plan, "1.31.1", 13, python.rsplit("/bin/", 1)[0])
    assert any("GPU001" in a["fixes"] for a in plan["actions"] if a["kind"] == "pip-install")


def test_no_driver_prefers_the_widest_driver_range_and_says_what_it_needs(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    python = str(tmp_path / "v" / "bin" / "python")
    plan = _json(["plan", "--python", python])
    assert plan["target"]["cuda_major"] == 12  # runs on R535 and newer; a CUDA 13 build needs R580
    assert any("needs an NVIDIA driver >= 525.60.13" in n for n in plan["notes"]), plan["notes"]
    known = _json(["plan", "--python", python, "--driver", "580.65.06"])
    assert known["target"]["cuda_major"] == 13  # the driver runs the newest build: no reason to prefer another
    assert not any("needs an NVIDIA driver" in n for n in known["notes"])


def test_libraries_of_another_cuda_major_are_not_reused(tmp_path: Path) -> None:
    """A CUDA 12 build (1.19.2) beside CUDA 11's cuRAND wheel: libcurand.so.10 has the same SONAME in both, and both
    wheels install into nvidia/curand/lib. check says LIB008 once it is findable; the plan installs CUDA 12's cuRAND
    after uninstalling CUDA 11's, and never loads the CUDA 11 copy."""
    venv = linked_copy(cached_venv("releases", "onnxruntime-gpu==1.19.2", no_deps=True), tmp_path / "mixed")
    _install(venv / "bin" / "python", "nvidia-curand-cu11")
    python = str(venv / "bin" / "python")
    curand_dir = site_packages(venv) / "nvidia" / "curand" / "lib"
    assert (curand_dir / "libcurand.so.10").exists()

    plan = _json(["plan", "--python", python, "--driver", "550.54.14"])
    assert_coherent(plan, "1.19.2", 12, str(venv))
    uninstalled = [a["details"]["distribution"] for a in plan["actions"] if a["kind"] == "pip-uninstall"]
    assert uninstalled == ["nvidia-curand-cu11"]
    assert any(r.startswith("nvidia-curand-cu12") for r in requirements(plan))

    check = run_ortfix("check", "--python", python, "--json", env={"LD_LIBRARY_PATH": str(curand_dir)})
    findings = {f["code"]: f for f in json.loads(check.stdout)["findings"]}
    assert "LIB008" in findings and findings["LIB008"]["data"]["sonames"] == ["libcurand.so.10"]


def test_a_process_that_maps_two_cuda_majors_fails_the_load_check(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The fresh-process check reads /proc/self/maps: CUDA 11's and CUDA 12's runtimes side by side fail it, though
    each library loads."""
    from ortfix.verify.loadcheck import check_loadable

    venv = _venv(tmp_path / "two", "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12")
    lib = site_packages(venv) / "nvidia" / "cuda_runtime" / "lib"
    names = sorted(os.listdir(lib))
    assert "libcudart.so.12" in names and "libcudart.so.11.0" in names  # both wheels share the folder
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    python = str(venv / "bin" / "python")
    prefix = str(venv)
    check = check_loadable(python, ["libcudart.so.12", "libcudart.so.11.0"], prefix=prefix, cuda_major=12)
    assert all(x.error is None for x in check.libraries), check.failures
    assert check.mixed_majors and "CUDA 11" in str(check.mixed_majors) and "CUDA 12" in str(check.mixed_majors)
    one = check_loadable(python, ["libcudart.so.12"], prefix=prefix, cuda_major=12)
    assert one.mixed_majors is None and [os.path.basename(p) for p in one.mapped] == ["libcudart.so.12"]
    wrong = check_loadable(python, ["libcudart.so.12"], prefix=prefix, cuda_major=13)
    assert wrong.mixed_majors is not None and "needs CUDA 13" in str(wrong.mixed_majors)


def _base_python(root: Path) -> Path:
    base = base_python(root)
    if base is None:
        pytest.skip(f"the test interpreter's base ({sys.base_prefix}) is not a self-contained installation to copy")
    return base


def _install(python: Path, *requirements: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--disable-pip-version-check", *requirements], check=True)


def test_layered_venv_over_a_base_with_the_cpu_package(tmp_path: Path) -> None:
    """onnxruntime-gpu in a --system-site-packages venv whose base has the CPU onnxruntime: no false ORT003, nothing
    planned outside the venv; the reverse (the CPU package in the venv, the GPU build in the base): the venv's CPU
    folder is the active one, and the plan replaces it inside the venv only."""
    base = _base_python(tmp_path)
    _install(base, "onnxruntime==1.22.0")
    venv = tmp_path / "venv"
    subprocess.run([str(base), "-m", "venv", "--system-site-packages", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    linked_into(cached_venv("releases", "onnxruntime-gpu==1.22.0", no_deps=True), venv)  # pip, from the cache
    linked_numpy(venv)  # numpy, which onnxruntime imports: pip, from the cache

    check = _json(["check", "--python", str(python)])
    codes = {f["code"] for f in check["findings"]}
    assert "ORT003" not in codes and "ORT002" not in codes, check["findings"]
    active = check["facts"]["onnxruntime"][0]
    assert active["dir"].startswith(str(venv)) and active["package"] == "onnxruntime-gpu"
    plan = _json(["plan", "--python", str(python)])
    assert not [a for a in plan["actions"] if a["kind"] == "pip-uninstall"]
    for action in plan["actions"]:
        if action["kind"] == "write-file":
            assert action["details"]["path"].startswith(str(venv))

    # applied for real (the CUDA 12 wheels into the venv, the preload hook), verified, and rolled back byte for
    # byte; the base is never touched
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH")}
    base_root = base.parent.parent
    before, base_before = tree_state(venv), tree_state(base_root)
    applied = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert applied["status"] == "applied", applied.get("verification")
    loader = applied["verification"]["loader"]
    assert loader["mixed_majors"] is None and loader["libraries"]["libcudnn.so.9"] is None, loader
    assert all(p.startswith(str(venv)) for p in loader["mapped"]), loader["mapped"]
    assert_same_tree(base_before, tree_state(base_root))
    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))
    assert_same_tree(base_before, tree_state(base_root))

    reverse = tmp_path / "reverse"
    base_gpu = _base_python(tmp_path / "b2")
    linked_into(cached_venv("releases", "onnxruntime-gpu==1.22.0", no_deps=True), base_gpu.parent.parent)
    subprocess.run([str(base_gpu), "-m", "venv", "--without-pip", "--system-site-packages", str(reverse)],
                   check=True)
    _install(reverse / "bin" / "python", "onnxruntime==1.22.0")
    rcheck = _json(["check", "--python", str(reverse / "bin" / "python")])
    ractive = rcheck["facts"]["onnxruntime"][0]
    assert ractive["dir"].startswith(str(reverse)) and ractive["package"] == "onnxruntime"
    assert "ORT002" in {f["code"] for f in rcheck["findings"]}
    rplan = _json(["plan", "--python", str(reverse / "bin" / "python")])
    removed = [(a["details"]["distribution"], a["details"]["location"]) for a in rplan["actions"]
               if a["kind"] == "pip-uninstall"]
    assert removed and all(loc.startswith(str(reverse)) for _, loc in removed), removed
    assert "onnxruntime-gpu==1.22.0" in requirements(rplan)
