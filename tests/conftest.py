"""Shared pytest fixtures (a session-wide wheelhouse of fake-but-real wheels, see tests/support/fixtures.py; the
venvs the apply, export and installer tests copy) and the fast tier: which tests are `slow`, and the guard that fails
a test not marked slow when it builds a venv, runs pip or uv, or starts wine (tests/support/slowguard.py)."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.fixtures import fake_ort_cpu_wheel, fake_ort_gpu_wheel, make_venv, nvidia_cu12_set, pip_install
from support.slowguard import pytest_runtest_call, pytest_runtest_setup  # noqa: F401 (hooks)
from support.testcache import cache_root
from txtools import copy_venv, ortfix_env, pip_config

# Fixtures that build a venv, run pip or uv or start wine: a test that uses one (directly or through another fixture)
# is marked slow by pytest_collection_modifyitems below. Modules whose every test is slow say so with `pytestmark`.
SLOW_FIXTURES = frozenset({
    "venv_template", "cpu_template", "cpu_venv", "gpu_template", "uv_bin", "export_base",
})


def _cost(item: pytest.Item) -> float:
    """A rough guess at a test's seconds on CI's machine: a real-wheel test a minute, another slow one a few seconds."""
    if item.get_closest_marker("realwheels"):
        return 60.0
    return 5.0 if item.get_closest_marker("slow") else 0.05


def _costliest_modules_first(items: list[pytest.Item]) -> None:
    """Each module's tests together, the modules by their summed cost, highest first (a stable sort)."""
    cost: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        cost[module] = cost.get(module, 0.0) + _cost(item)
    items.sort(key=lambda item: -cost[item.nodeid.split("::")[0]])


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: it reads the marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        uses = SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if (uses or item.get_closest_marker("realwheels")) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    # CI (.ci/run) hands whole modules to its three workers (`--dist loadscope`: a module-scope fixture is made
    # once), in the order given here (`--no-loadscope-reorder`; a worker sees that option, not `--dist`): the
    # costliest modules start first, side by side, and the run ends on the fast tier's short modules, not on the
    # real-wheel tests of one module while the other workers idle.
    if os.environ.get("PYTEST_XDIST_WORKER") and getattr(config.option, "loadscopereorder", True) is False:
        _costliest_modules_first(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything alive once the tests are collected (pytest, the imported modules, the collected items) moves out of
    the garbage collector's sight (gc.freeze): it is never garbage, and a full collection no longer walks it. pefile
    runs one each time a PE file is closed, and in a pytest worker's heap each took 70 ms: 10 of the 14 s of three
    tests in test_windows_plan.py. Objects the tests make are collected as before."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A --find-links folder with onnxruntime-gpu 1.22.0, onnxruntime 1.22.0 and the NVIDIA CUDA 12 set.

    Built once per session (about a second; the compiled stubs are cached across sessions). Shared by every test:
    one that needs other wheels builds them into a folder of its own, never into this one."""
    house = tmp_path_factory.mktemp("wheelhouse")
    fake_ort_gpu_wheel(house, version="1.22.0")
    fake_ort_cpu_wheel(house, version="1.22.0")
    nvidia_cu12_set(house)
    return house


@pytest.fixture(scope="session")
def cpu_template(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, venv_template: Path) -> Path:
    """A venv with its own pip and the CPU package onnxruntime 1.22.0 from `wheelhouse`, made once; tests copy it. A
    copy of `venv_template` (ensurepip once a session, not once a template)."""
    venv = copy_venv(venv_template, tmp_path_factory.mktemp("cpu-template") / "venv")
    pip_install(venv / "bin" / "python", "onnxruntime==1.22.0", find_links=wheelhouse)
    return venv


@pytest.fixture(scope="session")
def gpu_template(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """A venv (no pip) with onnxruntime-gpu 1.22.0 and its [cuda,cudnn] extras from `wheelhouse`, made once; tests
    copy it (gpu_venv)."""
    venv = tmp_path_factory.mktemp("gpu-template") / "venv"
    pip_install(make_venv(venv), "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    return venv


@pytest.fixture()
def gpu_venv(tmp_path: Path, gpu_template: Path) -> Path:
    """onnxruntime-gpu 1.22.0 with its [cuda,cudnn] extras, the most common broken setup: the venv's folder,
    tmp_path/venv. A full copy of `gpu_template` (pip installs it once, not once a test), the test's own to change."""
    return copy_venv(gpu_template, tmp_path / "venv")


# Each pytest-xdist worker runs wine in a prefix of its own (tests/wintools.wine_slot): with one shared prefix, a test
# ending its wineserver in one worker left an `ortfix apply` under wine waiting in the other for 8 minutes.


@pytest.fixture(scope="session")
def venv_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with its own pip (apply runs `<python> -m pip`), made once and copied for each test."""
    path = tmp_path_factory.mktemp("template") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True)
    return path


@pytest.fixture()
def cpu_venv(tmp_path: Path, cpu_template: Path) -> Path:
    """A venv with its own pip and onnxruntime 1.22.0 from `wheelhouse`: the venv's folder, tmp_path/"cpu venv". A full
    copy of `cpu_template` (pip installs it once, not once a test), the test's own to change."""
    return copy_venv(cpu_template, tmp_path / "cpu venv")


@pytest.fixture()
def env(tmp_path: Path, wheelhouse: Path) -> dict[str, str]:
    """ortfix's environment with pip configured to install from `wheelhouse` only (txtools.ortfix_env)."""
    return ortfix_env(pip_config(tmp_path, wheelhouse), tmp_path)


@pytest.fixture(scope="module")
def uv_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding only `uv` (to put on PATH): pip-installed once into a cached tools venv."""
    tools = cache_root() / "uv-tools"
    uv = tools / "bin" / "uv"
    if not uv.exists():
        shutil.rmtree(tools, ignore_errors=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(tools)], capture_output=True, text=True, check=False)
        got = made.returncode == 0 and subprocess.run(
            [str(tools / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "uv"],
            capture_output=True, text=True, check=False).returncode == 0
        if not got or not uv.exists():
            shutil.rmtree(tools, ignore_errors=True)
            pytest.skip("uv could not be installed with pip here (no index reachable?)")
    folder = tmp_path_factory.mktemp("uv-bin")
    (folder / "uv").symlink_to(uv)
    return folder


@pytest.fixture(scope="module")
def export_base(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, venv_template: Path,
                cpu_template: Path) -> dict[str, Path]:
    """Made once a module: an empty venv (with pip) and a CPU venv (onnxruntime 1.22.0), copied by each test (copies
    of the session's templates); the pip configuration that installs from `wheelhouse` only."""
    root = tmp_path_factory.mktemp("export")
    empty = copy_venv(venv_template, root / "empty")
    cpu = copy_venv(cpu_template, root / "cpu")
    conf = root / "pip.conf"
    conf.write_text(f"[global]\nno-index = true\nfind-links = {wheelhouse}\n")
    return {"empty": empty, "cpu": cpu, "conf": conf, "root": root}


@pytest.fixture(scope="module")
def export_env(export_base: dict[str, Path]) -> dict[str, str]:
    """ortfix's environment with `export_base`'s pip configuration."""
    return ortfix_env(export_base["conf"], export_base["root"])
