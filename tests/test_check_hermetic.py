"""Every finding, reproduced with small real wheels (gcc-built stub libraries with the real SONAMEs and NEEDED
entries), installed by real pip into real venvs, diagnosed by the real `ortfix` command."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checktools import check_json, codes, finding, plan_json, site_packages, tree_hash
from support.fixtures import (
    NVIDIA_CU12,
    build_stub_lib,
    build_wheel,
    fake_nvidia_wheel,
    fake_ort_cpu_wheel,
    fake_ort_gpu_wheel,
    ld_so_list,
    make_venv,
    pip_install,
)

pytestmark = pytest.mark.slow  # every test here builds a venv, runs pip or starts wine

CU12_SONAMES = ["libcublasLt.so.12", "libcublas.so.12", "libcurand.so.10", "libcufft.so.11", "libcudart.so.12",
                "libcudnn.so.9", "libnvrtc.so.12"]


def missing_sonames(doc: dict[str, Any]) -> set[str]:
    """Sonames reported missing: entirely (LIB001) or with only another major present (LIB003)."""
    out = set()
    for f in doc["findings"]:
        if f["code"] == "LIB001":
            out |= set(f["data"]["sonames"])
        elif f["code"] == "LIB003":
            out.add(f["data"]["soname"])
    return out


def provider_lib(venv: Path) -> Path:
    return site_packages(venv) / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so"


def test_no_ort(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    rc, doc = check_json(python)
    assert rc == 1 and "ORT001" in codes(doc)


def test_installed_but_not_on_loader_path(gpu_venv: Path) -> None:
    rc, doc = check_json(gpu_venv / "bin" / "python")
    assert rc == 1
    f = finding(doc, "LIB002")
    assert f["severity"] == "error"
    assert set(f["data"]["libraries"]) == set(CU12_SONAMES)
    sp = site_packages(gpu_venv)
    assert f["data"]["libraries"]["libcublasLt.so.12"] == [str(sp / "nvidia" / "cublas" / "lib" / "libcublasLt.so.12")]
    # the real loader agrees that these are not found
    real = ld_so_list(provider_lib(gpu_venv), {})
    assert all(real[name] is None for name in CU12_SONAMES)


def test_plan_makes_them_findable_and_touches_nothing(gpu_venv: Path) -> None:
    before = tree_hash(gpu_venv)
    rc, plan = plan_json(gpu_venv / "bin" / "python")
    assert rc == 1
    kinds = [a["kind"] for a in plan["actions"]]
    assert "pip-install" not in kinds and "pip-uninstall" not in kinds
    assert kinds.count("write-file") == 2
    module = next(a for a in plan["actions"] if a["details"]["path"].endswith("_ortfix_preload.py"))
    for name in CU12_SONAMES:
        assert name in module["details"]["content"]
    assert tree_hash(gpu_venv) == before


def test_preload_hook_from_the_plan_really_loads(gpu_venv: Path) -> None:
    """Write exactly the files the plan shows; then check is clean and a real interpreter loads the provider."""
    _, plan = plan_json(gpu_venv / "bin" / "python")
    for action in plan["actions"]:
        Path(action["details"]["path"]).write_text(action["details"]["content"])
    _rc, doc = check_json(gpu_venv / "bin" / "python")
    assert not codes(doc) & {"LIB001", "LIB002"}
    lib = provider_lib(gpu_venv)
    code = f"import onnxruntime, ctypes; ctypes.CDLL({str(lib)!r}); print('provider loaded')"
    import subprocess

    proc = subprocess.run([str(gpu_venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, check=False)
    assert "provider loaded" in proc.stdout, proc.stderr


def test_ld_library_path_makes_it_healthy_and_the_oracle_agrees(gpu_venv: Path) -> None:
    sp = site_packages(gpu_venv)
    dirs = ":".join(str(p) for p in sorted((sp / "nvidia").glob("*/lib")))
    _rc, doc = check_json(gpu_venv / "bin" / "python", env={"LD_LIBRARY_PATH": dirs})
    assert not codes(doc) & {"LIB001", "LIB002", "LIB003"}
    ours = {x["name"]: x["path"] for p in doc["facts"]["onnxruntime"][0]["providers"] if p["provider"] == "cuda"
            for x in p["libraries"] if not x["lazy"]}
    real = ld_so_list(provider_lib(gpu_venv), {"LD_LIBRARY_PATH": dirs})
    for name in CU12_SONAMES:
        assert ours[name] == real[name]


def test_missing_entirely_plans_the_wheels(tmp_path: Path, wheelhouse: Path) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu==1.22.0", find_links=wheelhouse)
    _rc, doc = check_json(python)
    # A library with only another major on this machine (e.g. a system CUDA 13 libcudart.so.13) is LIB003, not LIB001.
    assert missing_sonames(doc) == set(CU12_SONAMES)
    _, plan = plan_json(python)
    install = next(a for a in plan["actions"] if a["kind"] == "pip-install")
    dists = {r.split("~")[0].split("=")[0].split(",")[0] for r in install["details"]["requirements"]}
    assert {"nvidia-cublas-cu12", "nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12"} <= dists
    assert "onnxruntime-gpu" not in dists  # the installed build stays


def test_cpu_only_plan_swaps(tmp_path: Path, wheelhouse: Path) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    _rc, doc = check_json(python)
    assert "ORT002" in codes(doc)
    _, plan = plan_json(python)
    assert plan["target"]["package"] == "onnxruntime-gpu" and plan["target"]["version"] == "1.22.0"
    uninstall = [a["details"]["distribution"] for a in plan["actions"] if a["kind"] == "pip-uninstall"]
    assert uninstall == ["onnxruntime"]
    reqs = next(a for a in plan["actions"] if a["kind"] == "pip-install")["details"]["requirements"]
    assert reqs[0] == "onnxruntime-gpu==1.22.0"
    assert any(r.startswith("nvidia-cudnn-cu12") for r in reqs)


def test_cpu_installed_over_gpu(tmp_path: Path, wheelhouse: Path) -> None:
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu==1.22.0", find_links=wheelhouse)
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    _rc, doc = check_json(python)
    f = finding(doc, "ORT003")
    assert f["severity"] == "error"
    assert "overwrote" in f["summary"]
    assert not codes(doc) & {"ORT007", "ORT008"}  # files one build overwrote are ORT003's, not damage
    _, plan = plan_json(python)
    removed = {a["details"]["distribution"] for a in plan["actions"] if a["kind"] == "pip-uninstall"}
    assert removed == {"onnxruntime", "onnxruntime-gpu"}


def test_other_variant_conflicts(tmp_path: Path, wheelhouse: Path) -> None:
    extra = tmp_path / "extra"
    fake_ort_cpu_wheel(extra, version="1.22.0", package="onnxruntime-directml")
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu==1.22.0", find_links=wheelhouse)
    pip_install(python, "onnxruntime-directml==1.22.0", find_links=extra, no_deps=True)
    _rc, doc = check_json(python)
    assert "ORT004" in codes(doc)


def test_dependents_pull_cpu_back(gpu_venv: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    build_wheel(extra, "needs-cpu-ort", "2.0", {"needs_cpu_ort/__init__.py": b""},
                requires=["onnxruntime>=1.15", "packaging"])
    pip_install(gpu_venv / "bin" / "python", "needs-cpu-ort", find_links=extra, no_deps=True)
    _rc, doc = check_json(gpu_venv / "bin" / "python")
    f = finding(doc, "ORT005")
    assert "needs-cpu-ort" in " ".join(f["evidence"])


def test_dependents_evidence_shows_only_the_marker_branches_that_apply(gpu_venv: Path, tmp_path: Path) -> None:
    """One requirement per Python version, as real packages write them: only the branch of this interpreter is
    evidence; a package whose every branch is for other Pythons (or an extra) pulls nothing."""
    python = gpu_venv / "bin" / "python"
    here = subprocess.run([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    extra = tmp_path / "extra"
    build_wheel(extra, "branchy", "1.0", {"branchy/__init__.py": b""}, requires=[
        f'onnxruntime>=1.16; python_version < "{here}"', f'onnxruntime>=1.20; python_version == "{here}"',
        f'onnxruntime>=1.22; python_version > "{here}"', 'onnxruntime-extensions; extra == "ext"'])
    build_wheel(extra, "elsewhere", "1.0", {"elsewhere/__init__.py": b""}, requires=[
        f'onnxruntime; python_version < "{here}"', 'onnxruntime; extra == "cpu"'])
    pip_install(python, "branchy", "elsewhere", find_links=extra, no_deps=True)
    _rc, doc = check_json(python)
    f = finding(doc, "ORT005")
    assert f["data"]["packages"] == ["branchy"]
    [line] = f["evidence"]
    assert line == f'branchy 1.0 requires onnxruntime>=1.20; python_version == "{here}"', line


def test_driver_given_too_old_and_new_enough(gpu_venv: Path) -> None:
    python = gpu_venv / "bin" / "python"
    _, doc = check_json(python, "--driver", "470.82.01")
    assert "DRV002" in codes(doc) and "DRV001" not in codes(doc)
    _, doc = check_json(python, "--driver", "535.104.12")
    assert not codes(doc) & {"DRV001", "DRV002"}
    _, plan = plan_json(python, "--driver", "470.82.01")
    # CUDA 12 cannot run on 470: the plan moves to a CUDA 11 build
    assert plan["target"]["cuda_major"] == 11


def test_gpu_architecture_not_built(tmp_path: Path) -> None:
    house = tmp_path / "house"
    fake_ort_gpu_wheel(house, version="1.24.4", cuda_version="12.8")
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu==1.24.4", find_links=house, no_deps=True)
    _, doc = check_json(python, "--driver", "570.86.10", "--compute-capability", "3.5")
    assert finding(doc, "GPU001")["severity"] == "error"


def test_wrong_major_present(gpu_venv: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    fake_nvidia_wheel(extra, "nvidia-cudnn-cu11", "8.9.4.25", {"libcudnn.so.8": "libcudnn.so.8"}, "nvidia/cudnn/lib")
    python = gpu_venv / "bin" / "python"
    # replace cuDNN 9 by cuDNN 8 (same folder, as a real downgrade does)
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "uninstall", "-y", "nvidia-cudnn-cu12"],
                   check=True, capture_output=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    pip_install(python, "nvidia-cudnn-cu11", find_links=extra, no_deps=True)
    _, doc = check_json(python)
    f = finding(doc, "LIB003")
    assert f["data"]["soname"] == "libcudnn.so.9"
    assert any("libcudnn.so.8" in p for p in f["data"]["present"])
    assert "LIB007" not in codes(doc)  # pip's uninstall took the shared empty __init__.py files: not damage


def test_shadowed_by_an_outside_copy(gpu_venv: Path, tmp_path: Path) -> None:
    outside = tmp_path / "usr-local-cuda" / "lib64"
    build_stub_lib(outside / "libcudnn.so.9.0.0", soname="libcudnn.so.9")
    os.symlink("libcudnn.so.9.0.0", outside / "libcudnn.so.9")
    sp = site_packages(gpu_venv)
    dirs = [str(outside), *(str(p) for p in sorted((sp / "nvidia").glob("*/lib")))]
    _, doc = check_json(gpu_venv / "bin" / "python", env={"LD_LIBRARY_PATH": ":".join(dirs)})
    f = finding(doc, "LIB004")
    assert f["data"]["soname"] == "libcudnn.so.9" and f["data"]["loaded"].startswith(str(outside))


def test_swap_plan_prefers_the_environments_copies_over_outside_ones(tmp_path: Path, wheelhouse: Path) -> None:
    """Seen on a real H100 machine: torch's NVIDIA wheels in the venv, a CUDA toolkit and cuDNN of the same majors in
    ld.so.cache. The CPU->GPU swap must hook the environment's copies (what `check` would call LIB004 after the
    apply), not leave the outside ones to win."""
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    pip_install(python, *(spec.distribution for spec in NVIDIA_CU12), find_links=wheelhouse)
    outside = tmp_path / "usr-local-cuda" / "lib64"
    for name in CU12_SONAMES:
        build_stub_lib(outside / name, soname=name)
    _, plan = plan_json(python, "--driver", "550.54.14", env={"LD_LIBRARY_PATH": str(outside)})
    kinds = [a["kind"] for a in plan["actions"]]
    assert "pip-install" in kinds, kinds
    module = next(a for a in plan["actions"] if a["details"].get("path", "").endswith("_ortfix_preload.py"))
    for name in CU12_SONAMES:
        assert name in module["details"]["content"], name
    assert str(outside) not in module["details"]["content"]


def test_soname_link_missing(tmp_path: Path, wheelhouse: Path) -> None:
    extra = tmp_path / "extra"
    fake_nvidia_wheel(extra, "nvidia-cudnn-cu12", "9.1.0.70",
                      {"libcudnn.so.9.1.0": "libcudnn.so.9"}, "nvidia/cudnn/lib")
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu[cuda]==1.22.0", find_links=wheelhouse)
    pip_install(python, "nvidia-cudnn-cu12==9.1.0.70", find_links=extra, no_deps=True)
    _, doc = check_json(python)
    f = finding(doc, "LIB005")
    assert f["data"]["link"] == "libcudnn.so.9" and f["data"]["target"] == "libcudnn.so.9.1.0"
    _, plan = plan_json(python)
    link = next(a for a in plan["actions"] if a["kind"] == "symlink")
    assert link["details"]["path"].endswith("nvidia/cudnn/lib/libcudnn.so.9")


# torch/version.py as torch 1.x wrote it, and as torch 2.x does (annotated: `cuda: Optional[str] = '11.8'`)
TORCH_VERSION_FILES = {
    "torch-1.x": b"__version__ = '2.3.0+cu118'\ncuda = '11.8'\n",
    "torch-2.x": (b"from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
                  b"__version__ = '2.3.0+cu118'\ndebug = False\ncuda: Optional[str] = '11.8'\n"
                  b"git_version = '6a7f4ec0e9a1b2c3d4e5f60718293a4b5c6d7e8f'\nhip: Optional[str] = None\n"),
}


@pytest.mark.parametrize("style", sorted(TORCH_VERSION_FILES))
def test_torch_with_other_majors(style: str, gpu_venv: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    build_wheel(extra, "torch", "2.3.0+cu118",
                {"torch/__init__.py": b"", "torch/version.py": TORCH_VERSION_FILES[style]},
                requires=["nvidia-cudnn-cu11==8.7.0.84"])
    pip_install(gpu_venv / "bin" / "python", "torch", find_links=extra, no_deps=True)
    _, doc = check_json(gpu_venv / "bin" / "python")
    f = finding(doc, "TORCH001")
    assert f["data"] == {"torch_cuda": 11, "torch_cudnn": 8}


def test_unknown_version_falls_back_to_the_binary(tmp_path: Path) -> None:
    house = tmp_path / "house"
    fake_ort_gpu_wheel(house, version="1.99.0", cuda_version="12.8")
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu==1.99.0", find_links=house, no_deps=True)
    _, doc = check_json(python)
    assert "MTX001" in codes(doc)
    assert missing_sonames(doc) == set(CU12_SONAMES)


def test_matrix_disagreement_binary_wins(tmp_path: Path) -> None:
    house = tmp_path / "house"
    fake_ort_gpu_wheel(house, version="1.22.0", provider_needed=[n for n in CU12_SONAMES if "nvrtc" not in n])
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu==1.22.0", find_links=house, no_deps=True)
    _, doc = check_json(python)
    assert "MTX002" in codes(doc)
    assert missing_sonames(doc) == set(CU12_SONAMES) - {"libnvrtc.so.12"}


def test_unreadable_dir_on_ld_library_path(gpu_venv: Path, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0)
    try:
        rc, doc = check_json(gpu_venv / "bin" / "python", env={"LD_LIBRARY_PATH": str(locked)})
        if os.geteuid() != 0:  # root reads it anyway, as the loader would
            assert "LIB006" in codes(doc)
        assert rc == 1
    finally:
        locked.chmod(0o755)


def test_conda_layout_gets_activate_hooks(tmp_path: Path, wheelhouse: Path) -> None:
    venv = tmp_path / "conda env"
    python = make_venv(venv)
    (venv / "conda-meta").mkdir()
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    _, plan = plan_json(python)
    paths = sorted(a["details"]["path"] for a in plan["actions"] if a["kind"] == "write-file")
    assert paths == [str(venv / "etc/conda/activate.d/ortfix-cuda-libs.sh"),
                     str(venv / "etc/conda/deactivate.d/ortfix-cuda-libs.sh")]
    for action in plan["actions"]:
        p = Path(action["details"]["path"])
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(action["details"]["content"])
    _, doc = check_json(python)
    assert not codes(doc) & {"LIB001", "LIB002"}
    assert any("conda activate" in n for n in doc["facts"]["notes"])


def test_plan_output_file_and_fingerprint(gpu_venv: Path, tmp_path: Path) -> None:
    import json

    from clitools import run_ortfix

    out = tmp_path / "plan.json"
    proc = run_ortfix("plan", "--python", str(gpu_venv / "bin" / "python"), "-o", str(out))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ortfix.plan/2" and len(doc["fingerprint"]) == 16
    _, again = plan_json(gpu_venv / "bin" / "python")
    assert again["fingerprint"] == doc["fingerprint"]
    (site_packages(gpu_venv) / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9").unlink()
    _, changed = plan_json(gpu_venv / "bin" / "python")
    assert changed["fingerprint"] != doc["fingerprint"]


def test_plan_reuses_torch_bundled_libraries(tmp_path: Path, wheelhouse: Path) -> None:
    """torch (as its Windows and older Linux builds do) bundles CUDA/cuDNN in torch/lib: reuse them, don't download."""
    extra = tmp_path / "extra"
    stubs = tmp_path / "stubs"
    bundled = {"libcudnn.so.9": "libcudnn.so.9", "libcublas.so.12": "libcublas.so.12",
               "libcublasLt.so.12": "libcublasLt.so.12"}
    files: dict[str, bytes | Path] = {
        "torch/__init__.py": b"",
        "torch/version.py": b"__version__ = '2.4.0+cu124'\ncuda = '12.4'\n",
    }
    for name, soname in bundled.items():
        files[f"torch/lib/{name}"] = build_stub_lib(stubs / name, soname=soname, runpath=["$ORIGIN"])
    build_wheel(extra, "torch", "2.4.0+cu124", files, tag="cp311-cp311-linux_x86_64")
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    pip_install(python, "torch", find_links=extra, no_deps=True)
    _, plan = plan_json(python)
    reqs = next(a for a in plan["actions"] if a["kind"] == "pip-install")["details"]["requirements"]
    assert not any(r.startswith(("nvidia-cudnn", "nvidia-cublas")) for r in reqs), reqs
    assert any(r.startswith("nvidia-cuda-runtime-cu12") for r in reqs)
    module = next(a for a in plan["actions"] if a["details"].get("path", "").endswith("_ortfix_preload.py"))
    assert "torch/lib/libcudnn.so.9" in module["details"]["content"]


def test_a_marker_ortfix_cannot_compare_does_not_stop_the_check(gpu_venv: Path) -> None:
    """Installed metadata is anybody's: `python_version ~= "x"` cannot be compared (packaging raises). The
    requirement is then reported rather than judged, and check still runs."""
    sp = site_packages(gpu_venv)
    dist_info = sp / "oddmarker-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text('Metadata-Version: 2.1\nName: oddmarker\nVersion: 1.0\n'
                                        'Requires-Dist: onnxruntime; python_version ~= "x"\n')
    rc, doc = check_json(gpu_venv / "bin" / "python")
    assert rc == 1, doc
    f = finding(doc, "ORT005")
    assert f["data"]["packages"] == ["oddmarker"]
