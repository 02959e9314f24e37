"""TensorRT and onnxruntime-genai (issue 24): the addons matrix (compat/addons.yaml), check's TensorRT block and
genai findings, and the plan that swaps a CPU onnxruntime-genai beside the GPU ORT for onnxruntime-genai-cuda."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from checktools import check_json, codes, finding, nvidia_lib_path, site_packages
from clitools import REPO, assert_one_line_error, run_ortfix
from ortfix.compat.addons import TENSORRT_WHEEL_DIR
from ortfix.compat.load import load_matrix
from ortfix.errors import OrtfixError
from support.fixtures import (
    NVIDIA_CU12,
    _native_tag,
    build_stub_lib,
    build_wheel,
    fake_nvidia_wheel,
    fake_ort_gpu_wheel,
    make_venv,
    nvidia_cu12_set,
    pip_install,
)
from support.testcache import cache_root, locked
from txtools import assert_same_tree, copy_venv, fresh_process, ortfix, ortfix_json, tree_state

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


# --------------------------------------------------------------------------------------------------------------------
# check: the TensorRT block and findings, genai (hermetic wheels, real venvs, the real `ortfix check`)
# --------------------------------------------------------------------------------------------------------------------

# The SONAMEs of a tensorrt-cuNN-libs wheel's tensorrt_libs/ (plugin and parser NEED libnvinfer), by TensorRT major.
def _tensorrt_libs_wheel(house: Path, version: str, distribution: str = "tensorrt-cu12-libs") -> Path:
    major = version.split(".")[0]
    libs = {f"lib{n}.so.{major}": f"lib{n}.so.{major}" for n in ("nvinfer", "nvinfer_plugin", "nvonnxparser")}
    needed = {f"libnvinfer_plugin.so.{major}": [f"libnvinfer.so.{major}"],
              f"libnvonnxparser.so.{major}": [f"libnvinfer.so.{major}"]}
    return fake_nvidia_wheel(house, distribution, version, libs, TENSORRT_WHEEL_DIR, needed=needed)


def _genai_wheel(house: Path, package: str, version: str, *, cudart: str | None, requires: str) -> Path:
    """A wheel laid out like onnxruntime-genai(-cuda): the package folder and, for CUDA, the library whose NEEDED
    libcudart.so.N says its CUDA major (as in the real 0.11.4 wheel)."""
    with tempfile.TemporaryDirectory() as tmp:
        files: dict[str, bytes | Path] = {"onnxruntime_genai/__init__.py": b""}
        if cudart:
            files["onnxruntime_genai/libonnxruntime-genai-cuda.so"] = build_stub_lib(
                Path(tmp) / "libonnxruntime-genai-cuda.so", soname="libonnxruntime-genai-cuda.so", needed=[cudart])
        return build_wheel(house, package, version, files, requires=[requires], tag=_native_tag())


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trt-house")
    fake_ort_gpu_wheel(out, version="1.22.0", tensorrt=True)
    nvidia_cu12_set(out)
    _tensorrt_libs_wheel(out, "10.0.1")
    _tensorrt_libs_wheel(out, "10.9.0")
    _tensorrt_libs_wheel(out, "8.6.1", "tensorrt-libs")  # TensorRT 8's name for the same tensorrt_libs/ folder
    _tensorrt_libs_wheel(out, "10.9.0", "tensorrt-cu13-libs")  # the same SONAMEs, built for CUDA 13
    _genai_wheel(out, "onnxruntime-genai", "0.9.2", cudart=None, requires="onnxruntime>=1.22.0")
    _genai_wheel(out, "onnxruntime-genai-cuda", "0.15.2", cudart="libcudart.so.13", requires="onnxruntime-gpu>=1.28")
    _genai_wheel(out, "onnxruntime-genai-cuda", "0.9.2", cudart="libcudart.so.12", requires="onnxruntime-gpu>=1.22.0")
    build_wheel(out, "genai-app", "1.0", {"genai_app/__init__.py": b""}, requires=["onnxruntime-genai>=0.9"])
    return out


@pytest.fixture(scope="module")
def gpu_template(tmp_path_factory: pytest.TempPathFactory, house: Path) -> Path:
    """A venv (no pip) with the GPU build 1.22.0 and its [cuda,cudnn] extras from `house`, made once: _env copies it."""
    venv = tmp_path_factory.mktemp("trt-gpu") / "venv"
    pip_install(make_venv(venv), "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=house)
    return venv


def _env(tmp_path: Path, house: Path, *extra: str, template: Path | None = None) -> Path:
    """The GPU build 1.22.0 with its extras at tmp_path/venv, `extra` beside it: a copy of `template` where it was
    made from `house` (pip installs the set once a module, not once a test)."""
    if template is None:
        python = make_venv(tmp_path / "venv")
        pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=house)
    else:
        python = copy_venv(template, tmp_path / "venv") / "bin" / "python"
    if extra:
        pip_install(python, *extra, find_links=house, no_deps=True)
    return python


_NO_CACHE = {"ORTFIX_NO_CACHE": "1"}
_TRT_TABLE = "libonnxruntime_providers_tensorrt.so needs"


@pytest.mark.slow
def test_no_tensorrt_block_where_nobody_installed_or_asked_for_it(tmp_path: Path, house: Path,
                                                                  gpu_template: Path) -> None:
    """Seeds 000/003: a GPU build whose TensorRT nobody installed shows no TensorRT table (six NOT FOUND lines before)
    and no TensorRT finding; `--with tensorrt` shows the table and says which libraries would not load."""
    python = _env(tmp_path, house, template=gpu_template)
    plain = run_ortfix("check", "--python", str(python), env=_NO_CACHE)
    assert "Traceback" not in plain.stderr, plain.stderr
    assert _TRT_TABLE not in plain.stdout and "libnvinfer" not in plain.stdout, plain.stdout
    asked = run_ortfix("check", "--python", str(python), "--with", "tensorrt", env=_NO_CACHE)
    assert asked.returncode == 1, asked.stderr
    assert _TRT_TABLE in asked.stdout and re.search(r"libnvinfer\.so\.10\s+NOT FOUND", asked.stdout), asked.stdout
    _, doc = check_json(python, "--with", "tensorrt", env=_NO_CACHE)
    assert {"libnvinfer.so.10", "libnvinfer_plugin.so.10", "libnvonnxparser.so.10"} <= set(
        finding(doc, "TRT001")["data"]["sonames"])
    _, plain_doc = check_json(python, env=_NO_CACHE)
    assert not {c for c in codes(plain_doc) if c.startswith("TRT")}


@pytest.mark.slow
def test_installed_tensorrt_is_judged_without_being_asked(tmp_path: Path, house: Path, gpu_template: Path) -> None:
    """tensorrt-cu12-libs 10.0.1 installed (in site-packages/tensorrt_libs, which no loader path names): the table
    appears, TRT001 names the libraries the loader misses, TRT003 says 10.0.1 is older than ORT 1.22's 10.9."""
    python = _env(tmp_path, house, "tensorrt-cu12-libs==10.0.1", template=gpu_template)
    proc = run_ortfix("check", "--python", str(python), env=_NO_CACHE)
    assert _TRT_TABLE in proc.stdout, proc.stdout
    _, doc = check_json(python, env=_NO_CACHE)
    assert "libnvinfer.so.10" in finding(doc, "TRT001")["data"]["sonames"]
    assert "10.9" in finding(doc, "TRT003")["summary"]
    assert "TRT002" not in codes(doc)
    # the loader path made to name tensorrt_libs (and the NVIDIA wheels): every TensorRT library loads, no TRT001
    env = {**_NO_CACHE, "LD_LIBRARY_PATH": f"{nvidia_lib_path(tmp_path / 'venv')}:"
                                           f"{site_packages(tmp_path / 'venv') / TENSORRT_WHEEL_DIR}"}
    _, found = check_json(python, env=env)
    assert "TRT001" not in codes(found) and "TRT003" in codes(found)


@pytest.mark.slow
def test_tensorrt_of_another_major_is_trt002(tmp_path: Path) -> None:
    own = tmp_path / "house"
    own.mkdir()
    fake_ort_gpu_wheel(own, version="1.22.0", tensorrt=True)
    nvidia_cu12_set(own)
    _tensorrt_libs_wheel(own, "8.6.1")
    python = _env(tmp_path, own, "tensorrt-cu12-libs==8.6.1")
    _, doc = check_json(python, env=_NO_CACHE)
    f = finding(doc, "TRT002")
    assert f["data"]["soname"] == "libnvinfer.so.10"
    assert any(p.endswith("libnvinfer.so.8") for p in f["data"]["present"])


@pytest.mark.slow
def test_genai_cpu_beside_the_gpu_build_and_genai_of_another_cuda_major(tmp_path: Path, house: Path,
                                                                        gpu_template: Path) -> None:
    cpu = _env(tmp_path / "cpu", house, "onnxruntime-genai==0.9.2", template=gpu_template)
    proc = run_ortfix("check", "--python", str(cpu), env=_NO_CACHE)
    assert "genai       onnxruntime-genai 0.9.2 (CPU)" in proc.stdout, proc.stdout
    _, doc = check_json(cpu, env=_NO_CACHE)
    data = finding(doc, "GENAI001")["data"]
    assert data["installed"] == "onnxruntime-genai" and data["replacement"] == "0.9.2"
    other = _env(tmp_path / "cu13", house, "onnxruntime-genai-cuda==0.15.2", template=gpu_template)
    proc = run_ortfix("check", "--python", str(other), env=_NO_CACHE)
    assert "onnxruntime-genai-cuda 0.15.2 (CUDA 13)" in proc.stdout, proc.stdout  # read from its library's NEEDED
    _, doc = check_json(other, env=_NO_CACHE)
    assert "CUDA 13" in finding(doc, "GENAI002")["summary"] and "GENAI001" not in codes(doc)


@pytest.mark.slow
def test_verify_loads_tensorrt_and_reports_genai(tmp_path: Path, house: Path, gpu_template: Path) -> None:
    """`verify` with TensorRT installed loads the TensorRT provider's NEEDED (libnvinfer.so.10 & co.) in its fresh
    process, and reports onnxruntime-genai-cuda: its CUDA major (12, from its library's NEEDED) against ORT's, and
    whether its CUDA library loads (it NEEDs libcudart.so.12: only where the loader path names the NVIDIA wheels)."""
    python = _env(tmp_path, house, "tensorrt-cu12-libs==10.9.0", "onnxruntime-genai-cuda==0.9.2",
                  template=gpu_template)
    venv = tmp_path / "venv"
    findable = {**_NO_CACHE, "LD_LIBRARY_PATH": f"{nvidia_lib_path(venv)}:{site_packages(venv) / TENSORRT_WHEEL_DIR}"}
    doc = json.loads(run_ortfix("verify", "--python", str(python), "--json", env=findable).stdout)
    loader = doc["levels"][0]
    assert loader["data"]["tensorrt_checked"], loader
    trt = {"libnvinfer.so.10", "libnvinfer_plugin.so.10", "libnvonnxparser.so.10"}
    assert trt <= set(loader["data"]["tensorrt"]) and trt <= set(loader["data"]["check"]["libraries"]), loader
    assert not any(loader["data"]["check"]["libraries"][n] for n in trt), loader  # loaded: no error
    [genai] = doc["genai"]
    assert (genai["package"], genai["kind"], genai["cuda_major"], genai["ort_cuda_major"]) == (
        "onnxruntime-genai-cuda", "CUDA", 12, 12)
    assert (genai["fits"], genai["imported"], genai["library"], genai["ok"]) == (True, "ok", "ok", True), genai
    plain = run_ortfix("verify", "--python", str(python), env=_NO_CACHE)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr, plain.stderr
    assert re.search(r"libnvinfer\.so\.10.*(cannot|not)", plain.stdout), plain.stdout
    line = next(ln for ln in plain.stdout.splitlines() if ln.startswith("genai"))
    assert "FAIL" in line and "onnxruntime-genai-cuda 0.9.2 (CUDA 12)" in line and "libcudart.so.12" in line, line
    [genai] = json.loads(run_ortfix("verify", "--python", str(python), "--json", env=_NO_CACHE).stdout)["genai"]
    assert genai["fits"] and not genai["ok"] and "libcudart.so.12" in genai["library"], genai


# --------------------------------------------------------------------------------------------------------------------
# plan/apply/rollback: the genai swap (hermetic wheels, real pip, the real `ortfix apply` and `rollback`)
# --------------------------------------------------------------------------------------------------------------------


def _pip_env(tmp_path: Path, house: Path) -> dict[str, str]:
    """Only the test's pip configuration (an offline wheelhouse), none of this machine's."""
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nno-index = true\nfind-links = {house}\n")
    isolated = tmp_path / "no-pip-config"
    isolated.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "ORTFIX_TEST_")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PIP_CONFIG_FILE=str(conf), XDG_CONFIG_HOME=str(isolated), XDG_CONFIG_DIRS=str(isolated),
               ORTFIX_NO_CACHE="1")
    return env


@pytest.fixture(scope="module")
def genai_template(tmp_path_factory: pytest.TempPathFactory, house: Path) -> Path:
    """A venv with its own pip, the GPU build 1.22.0 and the CPU onnxruntime-genai 0.9.2 from `house`, made once:
    _genai_venv copies it (ensurepip and two pip installs once a module, not once a test)."""
    venv = tmp_path_factory.mktemp("genai") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=house)
    pip_install(python, "onnxruntime-genai==0.9.2", find_links=house, no_deps=True)
    return venv


def _genai_venv(tmp_path: Path, template: Path, house: Path, *extra: str) -> Path:
    """The GPU build 1.22.0 with the CPU onnxruntime-genai 0.9.2 beside it, in a venv with its own pip: a copy of
    `template`, `extra` installed from `house`."""
    python = copy_venv(template, tmp_path / "venv") / "bin" / "python"
    if extra:
        pip_install(python, *extra, find_links=house, no_deps=True)
    return python


@pytest.mark.slow
def test_cpu_genai_is_swapped_for_genai_cuda_applied_and_rolled_back(tmp_path: Path, house: Path,
                                                                     genai_template: Path) -> None:
    python = _genai_venv(tmp_path, genai_template, house)
    env = _pip_env(tmp_path, house)
    plan = ortfix_json("plan", "--python", str(python), env=env, expect=1)
    by_kind = {a["kind"]: a for a in plan["actions"]}
    assert by_kind["pip-uninstall"]["details"]["distribution"] == "onnxruntime-genai"
    assert "GENAI001" in by_kind["pip-uninstall"]["fixes"]
    install = next(a for a in plan["actions"] if a["kind"] == "pip-install")
    assert "onnxruntime-genai-cuda==0.9.2" in install["details"]["requirements"]
    assert not any(r.startswith("onnxruntime-gpu") for r in install["details"]["requirements"])  # ORT stays
    venv = python.parent.parent
    before = tree_state(venv)
    proc = ortfix("apply", "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    sp = site_packages(venv)
    assert (sp / "onnxruntime_genai_cuda-0.9.2.dist-info").is_dir()
    assert not (sp / "onnxruntime_genai-0.9.2.dist-info").exists()
    run = fresh_process(python, "import onnxruntime_genai, os; print(os.listdir(os.path.dirname("
                                "onnxruntime_genai.__file__)))")
    assert "libonnxruntime-genai-cuda.so" in run.stdout, run.stderr
    _, after = check_json(python, env=env)
    assert not {"GENAI001", "GENAI002"} & codes(after)
    back = ortfix("rollback", "--python", str(python), "--yes", env=env)
    assert back.returncode == 0, (back.stdout[-3000:], back.stderr[-3000:])
    assert_same_tree(before, tree_state(venv))


@pytest.mark.slow
def test_genai_swap_never_breaks_a_package_that_requires_the_cpu_genai(tmp_path: Path, house: Path,
                                                                       genai_template: Path) -> None:
    python = _genai_venv(tmp_path, genai_template, house, "genai-app==1.0")
    plan = ortfix_json("plan", "--python", str(python), env=_pip_env(tmp_path, house), expect=1)
    assert not any(a["details"].get("distribution") == "onnxruntime-genai" for a in plan["actions"])
    assert not any("onnxruntime-genai-cuda" in str(a["details"].get("requirements")) for a in plan["actions"])
    assert any("genai-app 1.0 requires onnxruntime-genai>=0.9" in n for n in plan["notes"]), plan["notes"]


@pytest.mark.slow
def test_with_tensorrt_installs_the_builds_tensorrt_and_makes_it_findable(tmp_path: Path, house: Path,
                                                                          genai_template: Path) -> None:
    """`--with tensorrt`: tensorrt-cu12-libs of the build's TensorRT major (10, from the provider's NEEDED) and at least
    the 10.9 ORT documents for 1.22, its tensorrt_libs/ hooked like the CUDA libraries; apply, load, rollback."""
    python = _genai_venv(tmp_path, genai_template, house)
    env = _pip_env(tmp_path, house)
    plan = ortfix_json("plan", "--python", str(python), "--with", "tensorrt", env=env, expect=1)
    install = next(a for a in plan["actions"] if a["kind"] == "pip-install")
    assert "tensorrt-cu12-libs>=10.9,<11" in install["details"]["requirements"] and "TRT001" in install["fixes"]
    plain = ortfix_json("plan", "--python", str(python), env=env, expect=1)
    assert not any("tensorrt-cu12-libs" in str(a["details"]) or "libnvinfer" in str(a["details"])
                   for a in plain["actions"])  # not asked: not planned
    venv = python.parent.parent
    before = tree_state(venv)
    proc = ortfix("apply", "--python", str(python), "--with", "tensorrt", "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert (site_packages(venv) / "tensorrt_cu12_libs-10.9.0.dist-info").is_dir()
    _, after = check_json(python, "--with", "tensorrt", env=env)
    assert "TRT001" not in codes(after) and "TRT003" not in codes(after)
    run = fresh_process(python, "import ctypes, onnxruntime\nfor n in ('libnvinfer.so.10', 'libnvinfer_plugin.so.10',"
                                " 'libnvonnxparser.so.10'):\n    ctypes.CDLL(n)\nprint('trt loaded')")
    assert "trt loaded" in run.stdout, run.stderr[-2000:]
    back = ortfix("rollback", "--python", str(python), "--yes", env=env)
    assert back.returncode == 0, (back.stdout[-3000:], back.stderr[-3000:])
    assert_same_tree(before, tree_state(venv))


@pytest.mark.slow
def test_with_tensorrt_first_uninstalls_the_other_tensorrt_in_its_folder(tmp_path: Path, house: Path,
                                                                         genai_template: Path) -> None:
    """tensorrt-libs 8.6.1 (TensorRT 8, before the cuNN names) owns site-packages/tensorrt_libs, the folder
    tensorrt-cu12-libs 10.x installs into: it is uninstalled first, as an NVIDIA wheel of another CUDA major in the
    folder of one to install is, or pip would leave both half-installed in one folder; rollback restores it."""
    python = _genai_venv(tmp_path, genai_template, house, "tensorrt-libs==8.6.1")
    env = _pip_env(tmp_path, house)
    plan = ortfix_json("plan", "--python", str(python), "--with", "tensorrt", env=env, expect=1)
    kinds = [a["kind"] for a in plan["actions"]]
    [first] = [i for i, a in enumerate(plan["actions"])
               if a["kind"] == "pip-uninstall" and a["details"]["distribution"] == "tensorrt-libs"]
    assert "tensorrt-cu12-libs installs into the same folder, tensorrt_libs" in plan["actions"][first]["summary"]
    assert first < kinds.index("pip-install")
    venv = python.parent.parent
    before = tree_state(venv)
    proc = ortfix("apply", "--python", str(python), "--with", "tensorrt", "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    sp = site_packages(venv)
    assert not (sp / "tensorrt_libs-8.6.1.dist-info").exists()
    assert sorted(p.name for p in (sp / TENSORRT_WHEEL_DIR).glob("lib*.so*")) == [
        "libnvinfer.so.10", "libnvinfer_plugin.so.10", "libnvonnxparser.so.10"]
    back = ortfix("rollback", "--python", str(python), "--yes", env=env)
    assert back.returncode == 0, (back.stdout[-3000:], back.stderr[-3000:])
    assert_same_tree(before, tree_state(venv))


@pytest.mark.slow
def test_tensorrt_of_another_cuda_major_is_trt004_and_replaced_by_with_tensorrt(tmp_path: Path, house: Path,
                                                                                genai_template: Path) -> None:
    """tensorrt-cu13-libs 10.9.0 in tensorrt_libs/ beside the CUDA 12 build: the very SONAMEs the provider NEEDs
    (libnvinfer.so.10 & co.), for CUDA 13. check says TRT004 (not TRT002: the TensorRT major fits); `plan --with
    tensorrt` uninstalls it and installs tensorrt-cu12-libs instead of hooking the CUDA 13 copies."""
    python = _genai_venv(tmp_path, genai_template, house, "tensorrt-cu13-libs==10.9.0")
    env = _pip_env(tmp_path, house)
    _, doc = check_json(python, env=env)
    trt004 = finding(doc, "TRT004")
    assert "CUDA 13" in trt004["summary"] and trt004["data"]["installed"] == "tensorrt-cu13-libs", trt004
    assert "TRT002" not in codes(doc)
    plan = ortfix_json("plan", "--python", str(python), "--with", "tensorrt", env=env, expect=1)
    [first] = [i for i, a in enumerate(plan["actions"])
               if a["kind"] == "pip-uninstall" and a["details"]["distribution"] == "tensorrt-cu13-libs"]
    install = next(i for i, a in enumerate(plan["actions"]) if a["kind"] == "pip-install")
    assert first < install and "tensorrt-cu12-libs>=10.9,<11" in plan["actions"][install]["details"]["requirements"]
    assert "TRT004" in plan["actions"][install]["fixes"]


@pytest.mark.slow
def test_export_carries_with_tensorrt(tmp_path: Path, house: Path, genai_template: Path) -> None:
    """`export --with tensorrt`: the requirements file pins tensorrt-cu12-libs, the Dockerfile puts tensorrt_libs/ on
    LD_LIBRARY_PATH, the sh script installs it and writes the hook that names its libraries; without it, none of
    that; a saved plan takes no --with."""
    python = _genai_venv(tmp_path, genai_template, house)
    env = _pip_env(tmp_path, house)
    folder = str(site_packages(python.parent.parent) / TENSORRT_WHEEL_DIR)
    reqs = ortfix_json("export", "requirements", "--python", str(python), "--with", "tensorrt", env=env)
    assert "tensorrt-cu12-libs==10.9.0" in reqs["pins"] and "tensorrt-cu12-libs==10.9.0" in reqs["text"], reqs
    docker = ortfix_json("export", "dockerfile", "--python", str(python), "--with", "tensorrt", env=env)
    env_line = next(ln for ln in docker["text"].splitlines() if ln.startswith("ENV LD_LIBRARY_PATH="))
    assert folder in env_line and "tensorrt-cu12-libs==10.9.0" in docker["text"], docker["text"]
    sh = ortfix_json("export", "sh", "--python", str(python), "--with", "tensorrt", env=env)
    assert "'tensorrt-cu12-libs==10.9.0'" in sh["text"] and "tensorrt_libs/libnvinfer.so.10" in sh["text"], sh["text"]
    plain = ortfix_json("export", "sh", "--python", str(python), env=env)
    assert "tensorrt" not in plain["text"], plain["text"]
    plan = tmp_path / "plan.json"
    ortfix("plan", "--python", str(python), "-o", str(plan), env=env)
    assert_one_line_error(ortfix("export", "sh", str(plan), "--python", str(python), "--with", "tensorrt", env=env),
                          "a saved plan is exported exactly as it is")


def _placeholder_sdist(folder: Path, name: str, version: str, marker: Path) -> Path:
    """A source distribution like NVIDIA's placeholder on the default index: its build fetches the real wheel from
    NVIDIA's own index, and where that is unreachable it fails (here: always, after writing `marker`)."""
    import io
    import tarfile

    dist = f"{name.replace('-', '_')}-{version}"
    files = {"pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "placeholder"\nbackend-path = ["."]\n',
             "placeholder.py": f"open({str(marker)!r}, 'a').write('built')\n"
                               "raise SystemExit('the real wheel is on another index, which is unreachable')\n",
             "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}
    path = folder / f"{dist}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in files.items():
            info = tarfile.TarInfo(f"{dist}/{rel}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path


@pytest.mark.slow
def test_tensorrt_only_as_nvidias_placeholder_sdist_is_one_line_and_changes_nothing(tmp_path: Path,
                                                                                    house: Path,
                                                                                    genai_template: Path) -> None:
    """Where pip cannot reach NVIDIA's index, the default index has tensorrt-cu12-libs only as a source package whose
    build fails: apply stops in its preflight (export in its pins) with one line that says where the wheels are, runs
    none of the sdist's code, and leaves the environment as it was."""
    links = tmp_path / "links"
    shutil.copytree(house, links)
    for wheel in links.glob("tensorrt_cu12_libs-*.whl"):
        wheel.unlink()
    marker = tmp_path / "BUILT"
    _placeholder_sdist(links, "tensorrt-cu12-libs", "10.9.0.34", marker)
    python = _genai_venv(tmp_path, genai_template, links)
    env = _pip_env(tmp_path, links)
    venv = python.parent.parent
    before = tree_state(venv)
    for args in (["apply", "--dry-run"], ["apply", "--yes"], ["export", "requirements"]):
        assert_one_line_error(ortfix(*args, "--python", str(python), "--with", "tensorrt", env=env),
                              "tensorrt-cu12-libs", "NVIDIA's own package index", "--with tensorrt")
        assert not marker.exists(), args
    assert_same_tree(before, tree_state(venv))


# --------------------------------------------------------------------------------------------------------------------
# The one real-wheel scenario: the real onnxruntime-genai 0.9.2 (CPU, 8.8 MB) beside the real onnxruntime-gpu 1.22.0
# (283 MB, downloaded once into the test cache); the NVIDIA libraries are hermetic stubs (a real download is GBs)
# --------------------------------------------------------------------------------------------------------------------


def _cached_wheel(requirement: str, prefix: str) -> Path:
    """The real manylinux wheel of `requirement` (its file name starting with `prefix`), downloaded once with pip
    into the test cache's ort-wheels folder."""
    cache = cache_root() / "ort-wheels"
    found = sorted(cache.glob(f"{prefix}-cp*-manylinux*.whl"))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        with locked(cache_root() / "ort-wheels.lock"), tempfile.TemporaryDirectory(dir=cache) as tmp:
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                                   "--no-deps", "--only-binary=:all:", "-d", tmp, requirement],
                                  capture_output=True, text=True, check=False, timeout=1800)
            assert proc.returncode == 0, proc.stderr[-2000:]
            for wheel in Path(tmp).glob("*.whl"):
                os.replace(wheel, cache / wheel.name)
        found = sorted(cache.glob(f"{prefix}-cp*-manylinux*.whl"))
    return found[-1]


@pytest.mark.realwheels
def test_real_cpu_genai_beside_real_gpu_ort_is_swapped_imported_and_rolled_back(tmp_path: Path) -> None:
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    ort = _cached_wheel("onnxruntime-gpu==1.22.0", f"onnxruntime_gpu-1.22.0-{tag}")
    genai = _cached_wheel("onnxruntime-genai==0.9.2", f"onnxruntime_genai-0.9.2-{tag}")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    nvidia_cu12_set(stubs)
    venv = tmp_path / "real genai"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, str(ort)], check=True)  # with its own requirements (numpy & co.) from the configured index
    subprocess.run([*pip, "--no-deps", str(genai)], check=True)  # as installed after the GPU build
    subprocess.run([*pip, "--no-deps", "--no-index", "--find-links", str(stubs),
                    *(spec.distribution for spec in NVIDIA_CU12)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["ORTFIX_NO_CACHE"] = "1"
    _, doc = check_json(python, env=env)
    assert finding(doc, "GENAI001")["data"]["replacement"] == "0.9.2"
    before = tree_state(venv)
    applied = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert applied["status"] == "applied", applied.get("verification")
    sp = site_packages(venv)
    assert (sp / "onnxruntime_genai_cuda-0.9.2.dist-info").is_dir()
    assert not (sp / "onnxruntime_genai-0.9.2.dist-info").exists()
    assert (sp / "onnxruntime_gpu-1.22.0.dist-info").is_dir()  # ORT stays
    run = fresh_process(python, "import onnxruntime_genai, os\n"
                                "print(sorted(os.listdir(os.path.dirname(onnxruntime_genai.__file__))))")
    assert run.returncode == 0 and "libonnxruntime-genai-cuda.so" in run.stdout, run.stderr[-2000:]
    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))
    assert "libonnxruntime-genai-cuda.so" not in fresh_process(
        python, "import onnxruntime_genai, os\nprint(os.listdir(os.path.dirname(onnxruntime_genai.__file__)))").stdout
