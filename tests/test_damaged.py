"""Damaged and half-finished installs (ORT007, ORT008, LIB007): real venvs, real wheels installed by real pip, then
damaged the way it happens — a file deleted or cut short, or pip stopped in the middle of a wheel — and diagnosed,
planned, applied and rolled back by the real `ortfix` command.

pip is stopped mid-install deterministically by the kernel: with RLIMIT_FSIZE set, no file may grow past the limit, so
the first file of the wheel that is larger fails to write (EFBIG; Python ignores SIGXFSZ) and pip gives up right there,
leaving everything it has written so far in place and nothing after it, as a pip killed at that point leaves it."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

import ortvenvs
from checktools import check_json, codes, finding, plan_json, site_packages
from clitools import run_ortfix
from support.fixtures import ORT_122_EXTRAS, build_wheel, fake_ort_cpu_wheel, make_venv, pip_install
from support.testcache import cache_root, locked
from txtools import assert_same_tree, ortfix, ortfix_env, ortfix_json, pip_config, pip_venv, tree_state

pytestmark = pytest.mark.slow  # every test here builds a venv, runs pip or starts wine

MACHINE = ("--driver", "550.54.14", "--compute-capability", "8.6")
DAMAGE_CODES = {"ORT007", "ORT008", "LIB007"}
PYBIND = "onnxruntime/capi/onnxruntime_pybind11_state"


# ---------------------------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------------------------


def record_rows(dist_info: Path) -> list[tuple[str, int | None]]:
    rows = []
    for line in (dist_info / "RECORD").read_text(encoding="utf-8").splitlines():
        path, _digest, size = line.rsplit(",", 2)
        rows.append((path, int(size) if size else None))
    return rows


def record_path(venv: Path, dist_info: str, startswith: str) -> str:
    """The one RECORD row of `dist_info` (a folder name in site-packages) that starts with `startswith`."""
    [path] = [p for p, _ in record_rows(site_packages(venv) / dist_info) if p.startswith(startswith)]
    return path


def check_reports(python: Path, code: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """`ortfix check` (text and --json) on the GPU machine of the issue: the finding is an error, rc is 1, and the
    environment is never called healthy. Returns the finding and the whole document."""
    text = run_ortfix("check", "--python", str(python), *MACHINE)
    assert text.returncode == 1, (text.stdout[-2000:], text.stderr[-2000:])
    assert "looks healthy" not in text.stdout and code in text.stdout
    rc, doc = check_json(python, *MACHINE)
    assert rc == 1
    f = finding(doc, code)
    assert f["severity"] == "error" and f["fix"]
    return f, doc


def uninstalls(plan: dict[str, Any]) -> list[str]:
    return [a["details"]["distribution"] for a in plan["actions"] if a["kind"] == "pip-uninstall"]


def install(plan: dict[str, Any]) -> dict[str, Any]:
    [action] = [a for a in plan["actions"] if a["kind"] == "pip-install"]
    return action


def wheel_with_big_file(wheelhouse: Path, out: Path, arcname: str, size: int) -> Path:
    """The wheelhouse's onnxruntime-gpu 1.22.0 rebuilt with `arcname` made `size` bytes (padded with zeros, or a new
    file), so that a file-size limit stops pip exactly there. Zip order is sorted (package files, then .dist-info)."""
    [source] = wheelhouse.glob("onnxruntime_gpu-1.22.0-*.whl")
    files: dict[str, bytes | Path] = {}
    with zipfile.ZipFile(source) as zf:
        for name in zf.namelist():
            if ".dist-info/" not in name:
                files[name] = zf.read(name)
    if arcname.startswith(PYBIND):
        [arcname] = [n for n in files if n.startswith(PYBIND)]
    data = files.get(arcname, b"")
    assert isinstance(data, bytes)
    files[arcname] = data + b"\0" * (size - len(data))
    tag = source.name[: -len(".whl")].split("-", 2)[2]
    return build_wheel(out, "onnxruntime-gpu", "1.22.0", files, extras=ORT_122_EXTRAS, tag=tag,
                       requires_python=">=3.10")


def pip_stopped_by_file_size(python: Path, wheel: Path, limit: int) -> subprocess.CompletedProcess[str]:
    """Real pip installs `wheel` (no index, no dependencies) with no file allowed to grow past `limit` bytes."""

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env["PIP_CONFIG_FILE"] = os.devnull
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps",
                           "--no-cache-dir", "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, env=env, preexec_fn=limit_file_size, check=False)
    assert proc.returncode != 0 and "File too large" in proc.stderr, (proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


# ---------------------------------------------------------------------------------------------------------------------
# ORT007: an ONNX Runtime build whose files do not match its RECORD
# ---------------------------------------------------------------------------------------------------------------------


def test_deleted_file_is_damage_and_the_plan_reinstalls(gpu_venv: Path) -> None:
    python = gpu_venv / "bin" / "python"
    _, healthy = check_json(python, *MACHINE)
    assert not codes(healthy) & DAMAGE_CODES  # an intact install (NVIDIA wheels' empty __init__.py files and all)

    pybind = record_path(gpu_venv, "onnxruntime_gpu-1.22.0.dist-info", PYBIND)
    (site_packages(gpu_venv) / pybind).unlink()
    f, doc = check_reports(python, "ORT007")
    assert f["data"]["distribution"] == "onnxruntime-gpu" and f["data"]["version"] == "1.22.0"
    assert (f["data"]["missing"], f["data"]["wrong_size"], f["data"]["paths"]) == (1, 0, [pybind])
    assert f"missing: {pybind}" in f["evidence"]
    assert not codes(doc) & {"ORT008", "LIB007"}

    rc, plan = plan_json(python, *MACHINE)
    assert rc == 1
    kinds = [a["kind"] for a in plan["actions"]]
    assert kinds.index("pip-uninstall") < kinds.index("pip-install")
    assert uninstalls(plan) == ["onnxruntime-gpu"]
    assert "ORT007" in plan["actions"][kinds.index("pip-uninstall")]["fixes"]
    action = install(plan)
    assert action["details"]["requirements"] == ["onnxruntime-gpu==1.22.0"] and "ORT007" in action["fixes"]
    assert "ORT007" not in {f["code"] for f in plan["unresolved"]}


@pytest.mark.parametrize("what", ["onnxruntime/capi/build_and_package_info.py",
                                  "onnxruntime/capi/libonnxruntime_providers_cuda.so"])
def test_file_cut_short_is_damage_and_the_version_still_comes_through(gpu_venv: Path, what: str) -> None:
    """Cut short: build_and_package_info.py (then the build's version cannot be read from it: the plan takes it
    from the distribution's METADATA) or the CUDA provider itself (its ELF cannot be read)."""
    python = gpu_venv / "bin" / "python"
    path = site_packages(gpu_venv) / what
    size = path.stat().st_size
    os.truncate(path, 20)
    f, _ = check_reports(python, "ORT007")
    assert (f["data"]["missing"], f["data"]["wrong_size"], f["data"]["paths"]) == (0, 1, [what])
    assert f"cut short or changed: {what} (20 bytes on disk, RECORD says {size})" in f["evidence"]

    _, plan = plan_json(python, *MACHINE)
    assert plan["target"]["version"] == "1.22.0"
    assert uninstalls(plan) == ["onnxruntime-gpu"]
    assert install(plan)["details"]["requirements"] == ["onnxruntime-gpu==1.22.0"]


def test_files_another_build_overwrote_are_not_damage_but_deleted_ones_are(tmp_path: Path, wheelhouse: Path) -> None:
    """onnxruntime over onnxruntime-gpu (ORT003): the files the CPU build overwrote have the sizes its RECORD lists,
    so they are ORT003's business; a file of the GPU build that is gone is damage all the same."""
    python = make_venv(tmp_path / "venv")
    pip_install(python, "onnxruntime-gpu==1.22.0", find_links=wheelhouse)
    pip_install(python, "onnxruntime==1.22.0", find_links=wheelhouse)
    venv = python.parent.parent
    provider = record_path(venv, "onnxruntime_gpu-1.22.0.dist-info", "onnxruntime/capi/libonnxruntime_providers_cuda")
    (site_packages(venv) / provider).unlink()
    f, doc = check_reports(python, "ORT007")
    assert "ORT003" in codes(doc)
    assert [x["data"]["distribution"] for x in doc["findings"] if x["code"] == "ORT007"] == ["onnxruntime-gpu"]
    assert (f["data"]["missing"], f["data"]["wrong_size"], f["data"]["paths"]) == (1, 0, [provider])
    _, plan = plan_json(python, *MACHINE)
    assert set(uninstalls(plan)) == {"onnxruntime", "onnxruntime-gpu"}
    assert install(plan)["details"]["requirements"][0] == "onnxruntime-gpu==1.22.0"


# ---------------------------------------------------------------------------------------------------------------------
# pip stopped in the middle of a wheel: ORT008 (no .dist-info yet), ORT007 (a .dist-info without RECORD)
# ---------------------------------------------------------------------------------------------------------------------


def test_pip_stopped_mid_install_leaves_a_folder_nobody_owns(tmp_path: Path, wheelhouse: Path) -> None:
    """pip stopped while writing the extension module: the CUDA provider is there, the extension module is cut short,
    and there is no .dist-info. Today's `check` calls that healthy."""
    wheel = wheel_with_big_file(wheelhouse, tmp_path / "house", PYBIND, 2 << 20)
    python = make_venv(tmp_path / "venv")
    pip_stopped_by_file_size(python, wheel, 1 << 20)
    sp = site_packages(python.parent.parent)
    assert (sp / "onnxruntime/capi/libonnxruntime_providers_cuda.so").is_file()
    assert [p.stat().st_size for p in (sp / "onnxruntime/capi").glob("onnxruntime_pybind11_state*")] == [1 << 20]
    assert not list(sp.glob("*.dist-info"))

    f, doc = check_reports(python, "ORT008")
    assert f["data"]["package_dir"] == str(sp / "onnxruntime")
    assert (f["data"]["package"], f["data"]["version"]) == ("onnxruntime-gpu", "1.22.0")
    assert any("libonnxruntime_providers_cuda.so" in e for e in f["evidence"])
    assert "ORT001" not in codes(doc)

    rc, plan = plan_json(python, *MACHINE)
    assert rc == 1 and uninstalls(plan) == []  # nothing to uninstall: pip overwrites what was left
    action = install(plan)
    assert action["details"]["requirements"][0] == "onnxruntime-gpu==1.22.0" and "ORT008" in action["fixes"]
    assert not {f["code"] for f in plan["unresolved"]} & DAMAGE_CODES

    # The same folder outside site-packages, on PYTHONPATH (how a build from source is used): nothing pip left.
    dev = tmp_path / "build-from-source"
    shutil.copytree(sp / "onnxruntime", dev / "onnxruntime")
    _, doc = check_json(make_venv(tmp_path / "dev venv"), *MACHINE, env={"PYTHONPATH": str(dev)})
    assert doc["facts"]["onnxruntime"][0]["dir"] == str(dev / "onnxruntime")
    assert "ORT008" not in codes(doc)


def test_apply_repairs_a_half_installed_build_and_rollback_restores_it(tmp_path: Path, wheelhouse: Path,
                                                                        venv_template: Path) -> None:
    """ORT008 end to end: apply installs the build over what the stopped pip left (those files are saved first),
    the result is whole; rollback brings back exactly the half-installed state, nothing more, nothing less."""
    python = pip_venv(venv_template, tmp_path / "venv")
    venv = python.parent.parent
    wheel = wheel_with_big_file(wheelhouse, tmp_path / "house", PYBIND, 2 << 20)
    pip_stopped_by_file_size(python, wheel, 1 << 20)
    sp = site_packages(venv)
    assert (sp / "onnxruntime").is_dir() and not list(sp.glob("onnxruntime*.dist-info"))
    environ = ortfix_env(pip_config(tmp_path, wheelhouse), tmp_path)
    before = tree_state(venv)

    doc = ortfix_json("apply", "--python", str(python), "--yes", env=environ)
    assert doc["status"] == "applied", doc
    [dist_info] = sp.glob("onnxruntime_gpu-1.22.0.dist-info")
    for rel, size in record_rows(dist_info):  # every file pip lists is there, whole
        if size is not None:
            assert (sp / rel).stat().st_size == size, rel
    _, after = check_json(python, *MACHINE)
    assert not codes(after) & DAMAGE_CODES

    ortfix_json("rollback", "--python", str(python), "--yes", env=environ)
    assert_same_tree(before, tree_state(venv))


def test_pip_stopped_before_it_wrote_record(tmp_path: Path, wheelhouse: Path) -> None:
    """pip stopped after the .dist-info's METADATA but before RECORD (written last): neither pip nor ortfix can
    uninstall that exactly, and pip would call it installed; check says so, the plan leaves it unresolved."""
    dist_info = "onnxruntime_gpu-1.22.0.dist-info"
    wheel = wheel_with_big_file(wheelhouse, tmp_path / "house", f"{dist_info}/licenses/NOTICES.txt", 2 << 20)
    python = make_venv(tmp_path / "venv")
    pip_stopped_by_file_size(python, wheel, 1 << 20)
    sp = site_packages(python.parent.parent)
    assert (sp / dist_info / "METADATA").is_file() and not (sp / dist_info / "RECORD").exists()

    f, doc = check_reports(python, "ORT007")
    assert f["data"]["record"] is False and f["data"]["remove"] == []
    assert str(sp / dist_info) in f["fix"]
    assert "ORT008" not in codes(doc)  # the folder has an owner: the distribution without a RECORD
    _, plan = plan_json(python, *MACHINE)
    assert uninstalls(plan) == []
    assert "ORT007" in {f["code"] for f in plan["unresolved"]}


# ---------------------------------------------------------------------------------------------------------------------
# LIB007: an NVIDIA wheel with a file missing
# ---------------------------------------------------------------------------------------------------------------------


def test_nvidia_wheel_with_a_missing_file(gpu_venv: Path) -> None:
    python = gpu_venv / "bin" / "python"
    # Uninstalling one NVIDIA wheel removes nvidia/__init__.py, which every one of them lists (empty): not damage.
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "uninstall", "-y", "nvidia-curand-cu12"],
                   check=True, capture_output=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    sp = site_packages(gpu_venv)
    assert not (sp / "nvidia" / "__init__.py").exists()
    (sp / "nvidia/cublas/lib/libcublasLt.so.12").unlink()

    f, doc = check_reports(python, "LIB007")
    assert [x["data"]["distribution"] for x in doc["findings"] if x["code"] == "LIB007"] == ["nvidia-cublas-cu12"]
    assert (f["data"]["version"], f["data"]["paths"]) == ("12.4.5.8", ["nvidia/cublas/lib/libcublasLt.so.12"])
    assert "ORT007" not in codes(doc)

    _, plan = plan_json(python, *MACHINE)
    assert uninstalls(plan) == ["nvidia-cublas-cu12"]
    reqs = install(plan)["details"]["requirements"]
    assert "nvidia-cublas-cu12==12.4.5.8" in reqs
    assert [r for r in reqs if r.startswith("nvidia-cublas-cu12")] == ["nvidia-cublas-cu12==12.4.5.8"]
    assert "onnxruntime-gpu==1.22.0" not in reqs  # the GPU build itself is fine
    assert "LIB007" not in {f["code"] for f in plan["unresolved"]}


def test_a_damaged_wheel_the_plan_cannot_repair_stays_unresolved(gpu_venv: Path) -> None:
    """Two damaged NVIDIA wheels: one with a file missing (repaired: uninstalled and pinned again), one without a
    RECORD (no exact uninstall exists). The plan's repair of the first must not count as fixing the second."""
    python = gpu_venv / "bin" / "python"
    sp = site_packages(gpu_venv)
    (sp / "nvidia/cublas/lib/libcublasLt.so.12").unlink()
    [curand] = sp.glob("nvidia_curand_cu12-*.dist-info")
    (curand / "RECORD").unlink()

    _, doc = check_json(python, *MACHINE)
    damaged = sorted(x["data"]["distribution"] for x in doc["findings"] if x["code"] == "LIB007")
    assert damaged == ["nvidia-cublas-cu12", "nvidia-curand-cu12"]
    _, plan = plan_json(python, *MACHINE)
    assert uninstalls(plan) == ["nvidia-cublas-cu12"]
    unresolved = [f for f in plan["unresolved"] if f["code"] == "LIB007"]
    assert [f["data"]["distribution"] for f in unresolved] == ["nvidia-curand-cu12"]


def test_nvidia_wheel_with_its_metadata_emptied_is_pinned_by_its_folder_name(gpu_venv: Path) -> None:
    """METADATA cut to nothing: no name, no version in it; the .dist-info folder's name still says both."""
    python = gpu_venv / "bin" / "python"
    os.truncate(site_packages(gpu_venv) / "nvidia_cufft_cu12-11.2.1.3.dist-info" / "METADATA", 0)
    f, _ = check_reports(python, "LIB007")
    assert (f["data"]["version"], f["data"]["paths"]) == ("11.2.1.3", ["nvidia_cufft_cu12-11.2.1.3.dist-info/METADATA"])
    _, plan = plan_json(python, *MACHINE)
    assert f["data"]["distribution"] == "nvidia_cufft_cu12"  # the name the folder says (not from the code under test)
    assert uninstalls(plan) == ["nvidia_cufft_cu12"]
    reqs = install(plan)["details"]["requirements"]
    assert reqs == ["nvidia_cufft_cu12==11.2.1.3"]


# ---------------------------------------------------------------------------------------------------------------------
# end to end: apply repairs it, rollback brings the damaged state back byte for byte
# ---------------------------------------------------------------------------------------------------------------------


def test_apply_repairs_a_damaged_install_and_rollback_restores_it(tmp_path: Path, wheelhouse: Path,
                                                                  venv_template: Path) -> None:
    env = ortfix_env(pip_config(tmp_path, wheelhouse), tmp_path)
    python = pip_venv(venv_template, tmp_path / "damaged venv")
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    venv = python.parent.parent
    sp = site_packages(venv)
    pybind = record_path(venv, "onnxruntime_gpu-1.22.0.dist-info", PYBIND)
    (sp / pybind).unlink()
    assert "ORT007" in codes(ortfix_json("check", "--python", str(python), env=env, expect=1))
    before = tree_state(venv)

    doc = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    kinds = [s["kind"] for s in doc["transaction"]["steps"]]
    assert kinds[:2] == ["pip-uninstall", "pip-install"], kinds
    after = ortfix_json("check", "--python", str(python), env=env, expect=1)  # no driver here: DRV001 stays
    assert not codes(after) & DAMAGE_CODES
    for path, size in record_rows(sp / "onnxruntime_gpu-1.22.0.dist-info"):
        if size is not None:
            assert (sp / path).stat().st_size == size, path
    assert (sp / pybind).is_file()

    proc = ortfix("rollback", "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert_same_tree(before, tree_state(venv))
    assert not (sp / pybind).exists()


def test_uninstalling_a_build_that_shares_the_folder_reinstalls_the_other(tmp_path: Path, wheelhouse: Path,
                                                                         venv_template: Path) -> None:
    """ORT004: onnxruntime-directml installed next to onnxruntime-gpu. Uninstalling it removes onnxruntime/__init__.py
    and every other file both RECORDs list, which would leave onnxruntime-gpu damaged (ORT007): the plan reinstalls
    the GPU build too, and after apply nothing is damaged."""
    extra = tmp_path / "extra"
    fake_ort_cpu_wheel(extra, version="1.22.0", package="onnxruntime-directml")
    env = ortfix_env(pip_config(tmp_path, wheelhouse, extra), tmp_path)
    python = pip_venv(venv_template, tmp_path / "variant venv")
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    pip_install(python, "onnxruntime-directml==1.22.0", find_links=extra, no_deps=True)
    venv = python.parent.parent
    _, doc = check_json(python, *MACHINE)
    assert "ORT004" in codes(doc) and not codes(doc) & DAMAGE_CODES  # what directml overwrote is not damage
    _, plan = plan_json(python, *MACHINE)
    assert uninstalls(plan) == ["onnxruntime-directml", "onnxruntime-gpu"]
    assert install(plan)["details"]["requirements"] == ["onnxruntime-gpu==1.22.0"]
    before = tree_state(venv)

    ortfix_json("apply", "--python", str(python), "--yes", env=env)
    after = ortfix_json("check", "--python", str(python), env=env, expect=1)
    assert not codes(after) & (DAMAGE_CODES | {"ORT004"})
    sp = site_packages(venv)
    for path, size in record_rows(sp / "onnxruntime_gpu-1.22.0.dist-info"):
        if size is not None:
            assert (sp / path).stat().st_size == size, path
    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))


# ---------------------------------------------------------------------------------------------------------------------
# the real wheels
# ---------------------------------------------------------------------------------------------------------------------


def real_ort_gpu_wheel() -> Path:
    """The real onnxruntime-gpu 1.22.0 wheel from the configured index, downloaded once per machine into the tests'
    cache (tests/support/testcache.py), as tests/ortvenvs.py keeps its venvs; tests only read it."""
    root = cache_root() / "real-wheel-onnxruntime-gpu"
    done = root / "complete"
    with locked(cache_root() / "real-wheel-onnxruntime-gpu.lock"):
        if not done.exists():
            root.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                            "-d", str(root), "onnxruntime-gpu==1.22.0"], check=True)
            done.write_text("onnxruntime-gpu==1.22.0\n")
    [wheel] = root.glob("onnxruntime_gpu-1.22.0-*.whl")
    return wheel


@pytest.mark.realwheels
def test_real_wheel_stopped_mid_install(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The real wheel, stopped while pip writes its 400 MB CUDA provider (the first file past 64 MiB in it)."""
    wheel = real_ort_gpu_wheel()
    python = make_venv(tmp_path / "venv")
    pip_stopped_by_file_size(python, wheel, 64 << 20)
    sp = site_packages(python.parent.parent)
    provider = sp / "onnxruntime/capi/libonnxruntime_providers_cuda.so"
    assert provider.stat().st_size == 64 << 20 and not list(sp.glob("*.dist-info"))
    assert not list((sp / "onnxruntime/capi").glob("onnxruntime_pybind11_state*"))

    f, _ = check_reports(python, "ORT008")
    assert (f["data"]["package"], f["data"]["version"]) == ("onnxruntime-gpu", "1.22.0")
    _, plan = plan_json(python, *MACHINE)
    assert uninstalls(plan) == []
    action = install(plan)
    assert action["details"]["requirements"][0] == "onnxruntime-gpu==1.22.0" and "ORT008" in action["fixes"]


@pytest.mark.realwheels
def test_real_nvidia_and_ort_wheels_checked_against_their_records(tmp_path: Path,
                                                                  tmp_path_factory: pytest.TempPathFactory) -> None:
    """onnxruntime-gpu[cuda,cudnn] as pip installs it from the index: no file of any of its wheels is reported; a
    cuDNN sub-library deleted is LIB007, and the plan reinstalls exactly the installed nvidia-cudnn-cu12."""
    venv = tmp_path / "venv"
    ortvenvs.linked_copy(ortvenvs.gpu_venv(), venv)
    python = venv / "bin" / "python"
    _, doc = check_json(python, *MACHINE)
    assert not codes(doc) & DAMAGE_CODES, [f for f in doc["findings"] if f["code"] in DAMAGE_CODES]

    sp = site_packages(venv)
    [dist_info] = sp.glob("nvidia_cudnn_cu12-*.dist-info")
    version = dist_info.name[len("nvidia_cudnn_cu12-"): -len(".dist-info")]
    (sp / "nvidia/cudnn/lib/libcudnn_graph.so.9").unlink()
    f, _ = check_reports(python, "LIB007")
    assert (f["data"]["distribution"], f["data"]["version"]) == ("nvidia-cudnn-cu12", version)
    assert f["data"]["paths"] == ["nvidia/cudnn/lib/libcudnn_graph.so.9"]
    _, plan = plan_json(python, *MACHINE)
    assert uninstalls(plan) == ["nvidia-cudnn-cu12"]
    assert f"nvidia-cudnn-cu12=={version}" in install(plan)["details"]["requirements"]
