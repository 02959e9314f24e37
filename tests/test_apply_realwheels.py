"""The real thing, end to end: a fresh venv with the real CPU onnxruntime 1.22.0 from the configured index (this
machine's own pip configuration), `ortfix apply --yes` swaps it for onnxruntime-gpu and the real NVIDIA wheels, a
fresh process loads every library the CUDA provider needs (never the provider itself: without a GPU driver it can
crash), and `ortfix rollback --yes` puts back every byte. Marked `realwheels` (downloads about 2 GB once; pip's
cache keeps reruns quick)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import ortvenvs
from txtools import (
    CU12_SONAMES,
    assert_same_tree,
    fresh_process,
    load_code,
    ortfix,
    ortfix_json,
    real_cpu_venv,
    tree_state,
)

pytestmark = pytest.mark.realwheels



def test_real_cpu_to_gpu_swap_applies_and_rolls_back(tmp_path: Path) -> None:
    venv = tmp_path / "real venv"
    python = real_cpu_venv(venv)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    before = tree_state(venv)

    doc = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert doc["status"] == "applied", doc.get("verification")
    libs = doc["verification"]["loader"]["libraries"]
    # every library the provider links against loads; cuDNN's runtime-compiled engines may not (they need the
    # driver's libcuda.so.1), which `ortfix verify` reports as a note, not a failure
    assert all(libs[name] is None for name in CU12_SONAMES), libs
    assert not any(name.startswith("libonnxruntime_providers_cuda") for name in libs)

    run = fresh_process(python, load_code())
    assert "all loaded" in run.stdout, run.stderr

    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))


@pytest.fixture(scope="module")
def real_gpu_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """onnxruntime-gpu with its extras: every NVIDIA library is installed, none is found by the loader. A hard-linked
    copy of the machine's cached one (tests/ortvenvs.py: pip installs those 3.3 GB once a run, not once a module),
    given its own pip as `python -m venv` would."""
    venv = ortvenvs.linked_copy(ortvenvs.gpu_venv(), tmp_path_factory.mktemp("gpu") / "gpu $venv 'q'")
    subprocess.run([str(venv / "bin" / "python"), "-m", "ensurepip", "--default-pip"], check=True,
                   capture_output=True)
    return venv


def test_real_gpu_venv_gets_the_preload_hook_and_rolls_back(real_gpu_venv: Path) -> None:
    python = real_gpu_venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH")}
    assert "all loaded" not in fresh_process(python, load_code()).stdout
    before = tree_state(real_gpu_venv)

    doc = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert doc["status"] == "applied", doc.get("verification")
    assert [s["kind"] for s in doc["transaction"]["steps"]] == ["write-file", "write-file"]
    run = fresh_process(python, load_code())
    assert "all loaded" in run.stdout, run.stderr
    # and `ortfix verify` says so: level 1 passes (cuDNN's sub-libraries through libcudnn.so.9's RUNPATH), level 2
    # cannot run without a driver (the real provider segfaults there; ortfix reports it)
    levels = json.loads(ortfix("verify", "--python", str(python), "--json", env=env).stdout)["levels"]
    assert levels[0]["status"] == "pass", levels[0]
    assert levels[1]["status"] == "not-run" and "no NVIDIA driver" in levels[1]["verdict"]

    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(real_gpu_venv))
    assert "all loaded" not in fresh_process(python, load_code()).stdout


def test_real_conda_layout_gets_activate_hooks_and_rolls_back(real_gpu_venv: Path) -> None:
    """The same real wheels in a conda-layout prefix (conda-meta/): the fix is an activate.d/deactivate.d pair,
    checked by sourcing it in a real sh, as `conda activate` does."""
    prefix = real_gpu_venv
    python = prefix / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH")}
    (prefix / "conda-meta").mkdir()
    try:
        before = tree_state(prefix)
        doc = ortfix_json("apply", "--python", str(python), "--yes", env=env)
        assert doc["status"] == "applied", doc.get("verification")
        activate = prefix / "etc/conda/activate.d/ortfix-cuda-libs.sh"
        deactivate = prefix / "etc/conda/deactivate.d/ortfix-cuda-libs.sh"
        shell = {"PATH": "/usr/bin:/bin", "CONDA_PREFIX": str(prefix), "LD_LIBRARY_PATH": "/opt/a b:/opt/$c"}
        run = subprocess.run(["sh", "-c", '. "$1"; exec "$2" -c "$3"', "sh", str(activate), str(python), load_code()],
                             capture_output=True, text=True, env=shell, check=False)
        assert "all loaded" in run.stdout, run.stderr
        show = 'printf "%s|" "${LD_LIBRARY_PATH-UNSET}"'
        out = subprocess.run(["sh", "-c", f'. "$1"; {show}; . "$2"; {show}', "sh", str(activate), str(deactivate)],
                             capture_output=True, text=True, env=shell, check=True).stdout.split("|")
        assert out[0].endswith(":/opt/a b:/opt/$c") and out[1] == "/opt/a b:/opt/$c"
        ortfix_json("rollback", "--python", str(python), "--yes", env=env)
        assert_same_tree(before, tree_state(prefix))
    finally:
        (prefix / "conda-meta").rmdir()


def test_uv_installs_into_an_environment_without_pip(tmp_path: Path, wheelhouse: Path, uv_bin: Path) -> None:
    """A venv with no pip (uv-managed environments look like this) and a real `uv` on PATH, with an offline wheelhouse
    in the pip configuration (which ortfix translates for uv; a uv.toml that says otherwise is not read): the plan
    installs with `uv pip install --python`, apply says so, the libraries load, and rollback restores every byte.
    uv is pip-installed once per machine into the tests' cache (tests/conftest.py `uv_bin`)."""
    from support.fixtures import make_venv, pip_install

    python = make_venv(tmp_path / "uv env")
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    venv = python.parent.parent
    config = tmp_path / "uv.toml"  # uv's own configuration: ortfix runs uv with --no-config
    config.write_text(f'find-links = ["{tmp_path / "not-this-one"}"]\n')
    pip_conf = tmp_path / "pip.conf"
    pip_conf.write_text(f"[global]\nno-index = true\nfind-links = {wheelhouse}\n")
    empty = tmp_path / "no-config"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")
           and not k.startswith(("UV_", "PIP_"))}
    env.update(PATH=f"{uv_bin}:/usr/bin:/bin", UV_CONFIG_FILE=str(config), UV_CACHE_DIR=str(tmp_path / "cache"),
               PIP_CONFIG_FILE=str(pip_conf), XDG_CONFIG_HOME=str(empty), XDG_CONFIG_DIRS=str(empty))
    before = tree_state(venv)

    proc = ortfix("apply", "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    uv = uv_bin / "uv"
    assert f"installing with uv: {uv} pip install --python {python}" in proc.stdout + proc.stderr
    run = fresh_process(python, load_code())
    assert "all loaded" in run.stdout, run.stderr

    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))
