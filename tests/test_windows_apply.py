"""ortfix's whole flow on Windows, under wine's real loader: ortfix itself runs on the Windows CPython, and
`check` → `plan` → `apply` → a fresh Windows process that creates a CUDA session gets past DLL loading (it stops at the
absent driver, "CUDA failure 35") → `rollback` leaves the target as it was, byte for byte.

The targets are the seeds' Windows states (support/winwheels.py): the CPU `onnxruntime` instead of `onnxruntime-gpu`;
`onnxruntime-gpu` with the NVIDIA wheels installed but not findable (one install shared by the PATH hook, conda and
user PATH tests, each rolling back to exactly it; the stub wheels are checked against the matrix and the real
provider's imports on it). The real onnxruntime 1.23.2 wheels, the real
cudart, stub DLLs for the rest of the NVIDIA set (same names, the exports the real provider imports). The Windows pip
that apply runs installs from local wheelhouses only (support/winwheels.pip_env). This machine has no driver: apply
is told the GPU machine's (`--driver`), as on a CPU build host. The user PATH case runs in a wine prefix of its own
and is read back with wine's reg.exe."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path, PureWindowsPath
from typing import Any

import pytest

from support import winwheels
from support.winstubs import mingw_missing
from txtools import assert_same_tree, tree_state
from wintools import WinPython, to_windows, win_python

pytestmark = pytest.mark.realwheels
Stage = tuple[Path, list[winwheels.StubWheel]]  # the target's python.exe, the NVIDIA wheels installed
DRIVER = "552.44"  # a Windows driver of the CUDA 12.4 era: runs the CUDA 12 build
# What apply's fresh-process check loads by bare name for onnxruntime-gpu 1.23.2 (it imports cuDNN 9, so nothing of
# ORT's own is loaded on demand): the sub-libraries every cuDNN 9 loads by name (the 9.1 wheel's set), whichever hook
# made them findable (issue 21: the PATH hook counted 14, their imports as well, --hook user-path 1, none of them).
CUDNN9_BY_NAME = frozenset({"cudnn_adv64_9.dll", "cudnn_cnn64_9.dll", "cudnn_engines_precompiled64_9.dll",
                            "cudnn_engines_runtime_compiled64_9.dll", "cudnn_graph64_9.dll",
                            "cudnn_heuristic64_9.dll", "cudnn_ops64_9.dll"})


@pytest.fixture(scope="module")
def w() -> WinPython:
    missing = mingw_missing()
    if missing:
        pytest.skip(missing)
    return win_python()


@pytest.fixture(scope="module")
def gpu(w: WinPython, tmp_path_factory: pytest.TempPathFactory) -> Stage:
    """One Windows CPython with onnxruntime-gpu 1.23.2 and the stub NVIDIA wheels installed by its own pip (about 30 s
    under wine), shared by the tests below: each applies a fix, proves it and rolls it back to exactly this state."""
    return winwheels.gpu_target(w, tmp_path_factory.mktemp("gpu-target"))


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.onnx"
    path.write_bytes(winwheels.tiny_model())
    return path


def _ortfix(w: WinPython, *args: str, houses: list[Path], expect: int,
            env: Mapping[str, str] | None = None) -> dict[str, Any]:
    proc = winwheels.ortfix_windows(w, *args, "--json", wheelhouses=houses, env=env)
    assert proc.returncode == expect, (args, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def _loaded_by_name(applied: Mapping[str, Any]) -> set[str]:
    """The DLLs apply's verification loaded by bare name (all of them loaded: the apply succeeded)."""
    loader = applied["verification"]["loader"]
    assert loader["ok"], loader
    return {PureWindowsPath(n).name for n in loader["libraries"]} - {"onnxruntime_providers_cuda.dll"}


def _codes(doc: Mapping[str, Any]) -> set[str]:
    return {f["code"] for f in doc["findings"]}


def test_cpu_package_swapped_for_the_gpu_build_verified_and_rolled_back(w: WinPython, tmp_path: Path,
                                                                         model: Path) -> None:
    exe = winwheels.cpu_target(w, tmp_path)
    winwheels.nvidia_win_wheels(tmp_path / "nvidia-house")
    houses = winwheels.stage_wheelhouses(tmp_path)
    python = to_windows(exe)

    check = _ortfix(w, "check", "--python", python, houses=houses, expect=1)
    assert "ORT002" in _codes(check), check["findings"]  # the CPU package where the GPU build is wanted

    plan = _ortfix(w, "plan", "--python", python, "--driver", DRIVER, houses=houses, expect=1)  # changes pending
    kinds = [a["kind"] for a in plan["actions"]]
    assert kinds[0] == "pip-uninstall" and plan["actions"][0]["details"]["distribution"] == "onnxruntime", kinds
    installs = [r for a in plan["actions"] if a["kind"] == "pip-install" for r in a["details"]["requirements"]]
    assert any(r.startswith("onnxruntime-gpu") for r in installs), installs
    assert any(r.startswith("nvidia-cublas-cu12") for r in installs), installs
    written = [a["details"]["path"] for a in plan["actions"] if a["kind"] == "write-file"]
    assert written and all(p.lower().startswith(str(to_windows(exe.parent)).lower()) for p in written), written

    before = tree_state(exe.parent)
    unfixed = winwheels.fresh_cuda_session(w, exe, model)
    assert "CUDAExecutionProvider" not in (winwheels.available_providers(unfixed) or []), unfixed

    applied = _ortfix(w, "apply", "--python", python, "--driver", DRIVER, "--yes", "--system", houses=houses,
                      expect=0)
    assert applied["status"] == "applied", applied
    fixed = winwheels.fresh_cuda_session(w, exe, model)
    assert winwheels.missing_dll(fixed) is None and winwheels.reached_driver(fixed), fixed

    after = _ortfix(w, "check", "--python", python, houses=houses, expect=1)  # the driver is still absent here
    assert not {c for c in _codes(after) if c.startswith(("ORT", "LIB"))}, after["findings"]

    rolled = _ortfix(w, "rollback", "--python", python, "--yes", houses=houses, expect=0)
    assert rolled["transaction"]["status"] == "rolled-back" and not rolled["warnings"], rolled
    assert_same_tree(before, tree_state(exe.parent))


def test_gpu_build_with_unfound_nvidia_dlls_gets_the_path_hook(w: WinPython, gpu: Stage, model: Path) -> None:
    exe, _stubs = gpu
    houses = winwheels.stage_wheelhouses(exe.parent.parent)
    python = to_windows(exe)
    check = _ortfix(w, "check", "--python", python, houses=houses, expect=1)
    assert "LIB002" in _codes(check) or "LIB001" in _codes(check), check["findings"]
    assert winwheels.missing_dll(winwheels.fresh_cuda_session(w, exe, model)) == "cublasLt64_12.dll"

    before = tree_state(exe.parent)
    applied = _ortfix(w, "apply", "--python", python, "--driver", DRIVER, "--yes", "--system", houses=houses,
                      expect=0)
    steps = applied["transaction"]["steps"]
    assert [s["kind"] for s in steps] == ["write-file", "write-file"], steps  # the hook's module and .pth: no install
    assert _loaded_by_name(applied) == CUDNN9_BY_NAME
    hook = (exe.parent / "Lib" / "site-packages" / "_ortfix_dllpath.py").read_text(encoding="utf-8")
    folders = ast.literal_eval(next(ln for ln in hook.splitlines() if ln.startswith("FOLDERS = "))[10:])
    # cuDNN 9 loads nvrtc64_120_0.dll by a name it builds, never imported: its folder is on the hook too (issue 21)
    assert any(PureWindowsPath(f).parts[-3:] == ("nvidia", "cuda_nvrtc", "bin") for f in folders), folders
    fixed = winwheels.fresh_cuda_session(w, exe, model)  # PATH is not set by the test: the hook does it
    assert winwheels.reached_driver(fixed), fixed

    _ortfix(w, "rollback", "--python", python, "--yes", houses=houses, expect=0)
    assert_same_tree(before, tree_state(exe.parent))
    assert winwheels.missing_dll(winwheels.fresh_cuda_session(w, exe, model)) == "cublasLt64_12.dll"


def test_conda_environment_gets_activate_scripts_that_conda_runs(w: WinPython, gpu: Stage, model: Path) -> None:
    """A conda environment (conda-meta\\ in its prefix, python.exe at its root): the six activate.d/deactivate.d
    scripts, no --system needed; running python.exe directly runs none of them (still missing), the .bat CALLed first
    in cmd, as `conda activate` does, gets past loading; rollback removes them exactly."""
    exe, _stubs = gpu
    (exe.parent / "conda-meta").mkdir()
    (exe.parent / "conda-meta" / "history").write_text("")
    try:
        _conda_round_trip(w, exe, model)
    finally:
        shutil.rmtree(exe.parent / "conda-meta")  # the shared target is a plain install again


def _conda_round_trip(w: WinPython, exe: Path, model: Path) -> None:
    houses = winwheels.stage_wheelhouses(exe.parent.parent)
    python = to_windows(exe)
    env = {"CONDA_PREFIX": to_windows(exe.parent)}  # as inside `conda activate`
    before = tree_state(exe.parent)
    applied = _ortfix(w, "apply", "--python", python, "--driver", DRIVER, "--yes", houses=houses, expect=0, env=env)
    steps = applied["transaction"]["steps"]
    written = sorted(PureWindowsPath(s["details"]["path"]).relative_to(to_windows(exe.parent)).as_posix()
                     for s in steps if s["kind"] == "write-file")
    assert written == sorted(f"etc/conda/{d}.d/ortfix-cuda-dlls.{ext}" for d in ("activate", "deactivate")
                             for ext in ("bat", "ps1", "sh")), steps
    assert winwheels.missing_dll(winwheels.fresh_cuda_session(w, exe, model, env=env)) == "cublasLt64_12.dll"
    activate = exe.parent / "etc" / "conda" / "activate.d" / "ortfix-cuda-dlls.bat"
    assert winwheels.reached_driver(winwheels.fresh_cuda_session(w, exe, model, env=env, after_calling=activate))

    _ortfix(w, "rollback", "--python", python, "--yes", houses=houses, expect=0, env=env)
    assert_same_tree(before, tree_state(exe.parent))


def _user_path(w: WinPython, prefix: Path) -> tuple[str, str] | None:
    """(type, data) of HKCU\\Environment's Path in the wine prefix `prefix`, read with wine's reg.exe."""
    proc = subprocess.run(["wine", "reg", "query", "HKCU\\Environment", "/v", "Path"], capture_output=True, text=True,
                          env=w.env({"WINEPREFIX": str(prefix)}), stdin=subprocess.DEVNULL, timeout=120, check=False)
    for line in proc.stdout.splitlines():
        parts = line.strip().split("    ")
        if len(parts) == 3 and parts[0].lower() == "path":
            return parts[1], parts[2]
    return None


def test_user_path_entries_added_and_removed_exactly(w: WinPython, gpu: Stage, tmp_path: Path, model: Path) -> None:
    exe, stubs = gpu
    houses = winwheels.stage_wheelhouses(exe.parent.parent)
    prefix = w.private_prefix(tmp_path)
    env = {"WINEPREFIX": str(prefix)}
    original = "%USERPROFILE%\\bin;C:\\keep me"
    try:
        subprocess.run(["wine", "reg", "add", "HKCU\\Environment", "/v", "Path", "/t", "REG_EXPAND_SZ", "/d",
                        original, "/f"], env=w.env(env), capture_output=True, stdin=subprocess.DEVNULL, timeout=120,
                       check=True)
        assert _user_path(w, prefix) == ("REG_EXPAND_SZ", original)
        python = to_windows(exe)
        applied = _ortfix(w, "apply", "--python", python, "--driver", DRIVER, "--hook", "user-path", "--yes",
                          "--system", houses=houses, expect=0, env=env)
        steps = applied["transaction"]["steps"]
        assert [s["kind"] for s in steps] == ["user-path"], steps
        assert _loaded_by_name(applied) == CUDNN9_BY_NAME  # the same as the PATH hook's
        value = _user_path(w, prefix)
        assert value is not None and value[0] == "REG_EXPAND_SZ", value
        entries = value[1].split(";")
        kept = original.split(";")
        assert entries[-len(kept):] == kept, entries  # the user's entries kept, in order, %USERPROFILE% unexpanded
        added = {e.lower() for e in entries[:-len(kept)]}  # in front of them
        site = exe.parent / "Lib" / "site-packages"
        # the folders of the DLLs the provider imports, and NVRTC's: cuDNN 9 loads `nvrtc64_*` by a name it builds
        # (cuRAND and nvJitLink nothing loads: not added)
        wanted = {to_windows(site / "nvidia" / lib / "bin").lower() for lib in ("cublas", "cudnn", "cufft",
                                                                                "cuda_runtime", "cuda_nvrtc")}
        assert added == wanted, entries
        assert {to_windows(site / s.layout.bin_dir).lower() for s in stubs} >= added
        # a process started afterwards (wine builds its PATH from the registry, as a new login does) gets past loading
        assert winwheels.reached_driver(winwheels.fresh_cuda_session(w, exe, model, env=env))
        _ortfix(w, "rollback", "--python", python, "--yes", houses=houses, expect=0, env=env)
        assert _user_path(w, prefix) == ("REG_EXPAND_SZ", original)
        assert winwheels.missing_dll(winwheels.fresh_cuda_session(w, exe, model, env=env)) == "cublasLt64_12.dll"
    finally:
        subprocess.run(["wineserver", "-k"], env=w.env(env), capture_output=True, timeout=60, check=False)


def test_stub_wheels_match_the_matrix_and_the_real_provider(gpu: Stage) -> None:
    from ortfix.compat.load import load_matrix
    from ortfix.system.windows.pe import read_pe

    exe, stubs = gpu
    site = exe.parent / "Lib" / "site-packages"
    matrix = load_matrix()
    build = next(b for b in matrix.builds_for(winwheels.ORT_VERSION) if b.package == "onnxruntime-gpu")
    cuda, cudnn = matrix.cuda_major(build.cuda_major), matrix.cudnn_wheel(build.cudnn_major or 0, build.cuda_major)
    assert cuda is not None and cudnn is not None
    specs = {w.distribution: w for w in (*cuda.wheels, cudnn.wheel)}
    versions = {s.distribution: s.version for s in stubs}
    # Every extra of the real build is satisfied by the set, and every wheel sits where the matrix says on Windows.
    for requirement in (r for reqs in build.extras.values() for r in reqs):
        name = requirement.split("~")[0]
        assert name in versions, requirement
    for stub in stubs:
        spec = specs[stub.distribution]
        assert spec.windows_dir == stub.layout.bin_dir, stub.distribution
        # The matrix lists the DLLs every version ships; the stubs carry those and the later ones (cuDNN's ext, ...).
        assert spec.dlls and set(spec.dlls) <= set(stub.layout.dlls), stub.distribution
        for dll in stub.layout.dlls:
            assert (site / stub.layout.bin_dir / dll).is_file(), dll
    # The provider's CUDA imports all land in the set, under the real names (read off the real provider).
    provider = read_pe(str(site / "onnxruntime" / "capi" / "onnxruntime_providers_cuda.dll"))
    shipped = {d.lower() for s in stubs for d in s.layout.dlls}
    cuda_imports = {n.lower() for n in provider.needed if n.lower().startswith(("cu", "nv"))}
    assert cuda_imports == {"cublaslt64_12.dll", "cublas64_12.dll", "cufft64_11.dll", "cudart64_12.dll",
                            "cudnn64_9.dll"}
    assert cuda_imports <= shipped
    cublas = read_pe(str(site / "nvidia" / "cublas" / "bin" / "cublas64_12.dll"))
    assert "cublasLt64_12.dll" in cublas.needed and cublas.machine == "AMD64"
