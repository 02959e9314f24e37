"""The end-to-end stage under wine: real ONNX Runtime wheels for win_amd64, stub NVIDIA wheels whose DLLs the real
ORT provider accepts, Windows targets that have pip, and a fresh Windows process that tries a CUDA session.

Real wheels (`win_wheelhouse(gpu=...)`): onnxruntime / onnxruntime-gpu ORT_VERSION for win_amd64 and CPython 3.11,
with every runtime dependency their METADATA names (numpy pinned to 1.26.4: numpy 2.x does not start under wine 8;
pyreadline3, which humanfriendly needs only on Windows, named by hand because pip evaluates markers against the Linux
interpreter that downloads), and pip itself. Downloaded once per machine into the test cache with this machine's pip
and pip configuration (`pip download --platform win_amd64 --only-binary=:all: --python-version 3.11 --no-deps`);
pip's own cache makes a second machine-level download quick. The GPU wheel (about 245 MB) only when asked for.

Stub NVIDIA wheels (`nvidia_win_wheels(house)`): one real wheel per NVIDIA distribution of the CUDA 12 set of
onnxruntime-gpu ORT_VERSION (the matrix's CUDA 12 wheels and its cuDNN row), at the newest version the matrix says is
published for win_amd64, tagged py3-none-win_amd64 and purelib as the real ones. Each puts its DLLs, under their real
Windows names, in `nvidia\\<lib>\\bin`: real x86-64 DLLs built with mingw-w64 (support/winstubs.py) that export what
the real `onnxruntime_providers_cuda.dll` imports from them (read from the real provider with pefile) and import
what the real ones import (cublas64_12 imports cublasLt64_12; cuDNN 9's sub-libraries import cudnn_graph64_9). Every
stub export returns 0 (success). nvidia-cuda-runtime-cu12 is by default the real wheel (3.6 MB): its real
cudart64_12.dll finds no driver, so a CUDA session stops exactly where it stops on a machine without one ("CUDA
failure 35: CUDA driver version is insufficient"), which is the sign that every DLL was found.

Windows targets: `cpu_target(w, where)` (the CPU package installed), `gpu_target(w, where)` (onnxruntime-gpu and the
NVIDIA wheels installed, nothing on PATH), both on `home_with_pip(w, where)` (a copy of the CPython with pip in its
Lib\\site-packages); and `venv_with_pip(w, base_exe, venv)` (`python.exe -m venv --without-pip` under wine: this
CPython has no bundled pip wheel for ensurepip, so pip is put into the venv's site-packages from Linux). `pip_env(...)`
makes a Windows pip hermetic: no configuration file, no index, only the given wheelhouses; `ortfix_windows(w, ...)`
runs the real ortfix on the Windows CPython with it (what `apply` needs to install from the wheelhouses).
`fresh_cuda_session(w, python_exe, model)` runs a new Windows process that creates `InferenceSession(model,
providers=["CUDAExecutionProvider"])` and returns the verdict text; `missing_dll`, `reached_driver`,
`past_dll_loading`, `providers_of` and `available_providers` read it.

What wine needs (wintools.WinPython.env): WINEPREFIX, WINEDEBUG=-all,err+module (wine's own chatter off but for the
lines naming missing DLLs), WINEDLLOVERRIDES=mscoree,mshtml= (no Mono/Gecko install dialogs), stdin closed; for a
target process also no PYTHONPATH (the shared deps folder would shadow the target's packages) and no PIP_* variable
of this machine (wine passes the Linux environment through to Windows processes).

Over 400 lines on purpose: the stage is one piece (wheels, targets, pip under wine and the session's verdict are
used together by the end-to-end tests), and splitting it would scatter one set of pins and paths over modules.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from clitools import REPO
from support.fixtures import build_wheel
from support.testcache import cache_root, locked
from support.winstubs import build_stub_dll, exports_imported_by
from wintools import PY_VERSION, WinPython, to_windows

ORT_VERSION = "1.23.2"
NUMPY = "numpy==1.26.4"  # numpy 2.x needs crealf from ucrtbase, which wine 8 lacks
PIP = "pip==26.3"
# onnxruntime 1.23.2's Requires-Dist (both packages: coloredlogs, flatbuffers, numpy>=1.21.6, packaging, protobuf,
# sympy) and theirs (humanfriendly; pyreadline3 on Windows; mpmath), pinned to versions that run under wine 8.
ORT_RUNTIME_DEPS = ("coloredlogs==15.0.1", "humanfriendly==10.0", "pyreadline3==3.5.6", "flatbuffers==25.12.19",
                    "packaging==26.3", "protobuf==7.36.2", "sympy==1.14.0", "mpmath==1.3.0")
WIN_PLATFORM = "win_amd64"
PROVIDER = "onnxruntime/capi/onnxruntime_providers_cuda.dll"
_SCHEMA = 1


# --------------------------------------------------------------------------------------------------------------------
# Real wheels for win_amd64
# --------------------------------------------------------------------------------------------------------------------

def _download(dest: Path, *requirements: str) -> None:
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--dest", str(dest),
            "--platform", WIN_PLATFORM, "--only-binary=:all:", "--python-version", PY_VERSION, "--no-deps",
            *requirements]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"pip download {' '.join(requirements)} failed:\n{proc.stderr.strip()[-3000:]}")


def win_wheelhouse(*, gpu: bool = False) -> Path:
    """The cached folder of real win_amd64 wheels: onnxruntime ORT_VERSION (CPU), its runtime dependencies and pip;
    with `gpu`, onnxruntime-gpu ORT_VERSION too (about 245 MB: mark such tests `realwheels`)."""
    key = hashlib.sha256(json.dumps([_SCHEMA, ORT_VERSION, NUMPY, PIP, ORT_RUNTIME_DEPS]).encode()).hexdigest()[:12]
    house = cache_root() / f"win-wheelhouse-{key}"
    parts: dict[str, tuple[str, ...]] = {"base": (f"onnxruntime=={ORT_VERSION}", NUMPY, PIP, *ORT_RUNTIME_DEPS)}
    if gpu:
        parts["gpu"] = (f"onnxruntime-gpu=={ORT_VERSION}",)
    with locked(cache_root() / "win-wheelhouse.lock"):
        for part, requirements in parts.items():
            done = house / f".done-{part}"
            if not done.is_file():
                house.mkdir(parents=True, exist_ok=True)
                _download(house, *requirements)
                done.write_text("\n".join(requirements) + "\n")
    return house


def real_nvidia_wheel(distribution: str, version: str) -> Path:
    """The real win_amd64 wheel of an NVIDIA distribution (downloaded once into the wheelhouse's folder); used for
    nvidia-cuda-runtime-cu12 (3.6 MB), whose real cudart64_12.dll reports the absent driver as real users see it."""
    house = win_wheelhouse()
    requirement = f"{distribution}=={version}"
    with locked(cache_root() / "win-wheelhouse.lock"):
        done = house / f".done-{distribution}-{version}"
        if not done.is_file():
            _download(house, requirement)
            done.write_text(requirement + "\n")
    dist = re.sub(r"[-_.]+", "_", distribution).lower()
    return next(house.glob(f"{dist}-{version}-*-{WIN_PLATFORM}.whl"))


def ort_gpu_wheel() -> Path:
    """The real onnxruntime-gpu ORT_VERSION win_amd64 wheel (downloaded once)."""
    return next(win_wheelhouse(gpu=True).glob(f"onnxruntime_gpu-{ORT_VERSION}-*-win_amd64.whl"))


@cache
def provider_imports() -> Mapping[str, tuple[str, ...]]:
    """DLL name (lower case) → the functions the real CUDA provider of onnxruntime-gpu ORT_VERSION imports from it
    (pefile on the DLL in the real wheel; cached as JSON: reading the 366 MB DLL takes seconds)."""
    wheel = ort_gpu_wheel()
    cached = cache_root() / "winwheels" / f"{wheel.name}.{wheel.stat().st_size}.imports.json"
    if not cached.is_file():
        with zipfile.ZipFile(wheel) as zf:
            imports = exports_imported_by(zf.read(PROVIDER))
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}")
        tmp.write_text(json.dumps({k.lower(): list(v) for k, v in imports.items()}, indent=1, sort_keys=True))
        os.replace(tmp, cached)
    raw = json.loads(cached.read_text())
    return {str(k): tuple(str(f) for f in v) for k, v in raw.items()}


# --------------------------------------------------------------------------------------------------------------------
# Stub NVIDIA wheels
# --------------------------------------------------------------------------------------------------------------------

_CUDNN9_SUBS = ("adv", "cnn", "engines_precompiled", "engines_runtime_compiled", "graph", "heuristic", "ops")
# Sub-libraries added later in cuDNN 9 (compat/cuda.yaml's cuDNN source: the Linux wheels from these versions on; the
# win_amd64 9.28.0.42 ships both, 9.1.0.70 neither).
_CUDNN9_LATER = (("engines_tensor_ir", Version("9.21.0.82")), ("ext", Version("9.22.0.52")))


@dataclass(frozen=True)
class WinNvidiaLayout:
    """What a real win_amd64 NVIDIA wheel installs: its `bin` folder and the DLLs in it (real names, from the
    facts gathered on the real wheels), which of them import which, and the distributions it requires."""

    bin_dir: str
    dlls: tuple[str, ...]
    needed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    requires: tuple[str, ...] = ()


def _nvrtc_dlls(version: Version) -> tuple[str, ...]:
    major, minor = version.release[:2]
    return (f"nvrtc64_{major}0_0.dll", f"nvrtc64_{major}0_0.alt.dll", f"nvrtc-builtins64_{major}{minor}.dll")


def _cudnn9_dlls(version: Version) -> tuple[str, ...]:
    subs = (*_CUDNN9_SUBS, *(name for name, since in _CUDNN9_LATER if version >= since))
    return ("cudnn64_9.dll", *(f"cudnn_{s}64_9.dll" for s in sorted(subs)))


def cu12_layout(distribution: str, version: str) -> WinNvidiaLayout:
    """The layout of the real win_amd64 wheel of a CUDA 12 NVIDIA distribution at `version`."""
    v = Version(version)
    if distribution == "nvidia-cuda-runtime-cu12":
        return WinNvidiaLayout("nvidia/cuda_runtime/bin", ("cudart64_12.dll",))
    if distribution == "nvidia-cublas-cu12":
        return WinNvidiaLayout("nvidia/cublas/bin", ("cublas64_12.dll", "cublasLt64_12.dll", "nvblas64_12.dll"),
                               {"cublas64_12.dll": ("cublasLt64_12.dll",), "nvblas64_12.dll": ("cublas64_12.dll",)})
    if distribution == "nvidia-cufft-cu12":
        return WinNvidiaLayout("nvidia/cufft/bin", ("cufft64_11.dll", "cufftw64_11.dll"),
                               {"cufftw64_11.dll": ("cufft64_11.dll",)})
    if distribution == "nvidia-curand-cu12":
        return WinNvidiaLayout("nvidia/curand/bin", ("curand64_10.dll",))
    if distribution == "nvidia-cuda-nvrtc-cu12":
        return WinNvidiaLayout("nvidia/cuda_nvrtc/bin", _nvrtc_dlls(v))
    if distribution == "nvidia-nvjitlink-cu12":
        return WinNvidiaLayout("nvidia/nvjitlink/bin", ("nvJitLink_120_0.dll",))
    if distribution == "nvidia-cudnn-cu12":
        dlls = _cudnn9_dlls(v)
        graph = "cudnn_graph64_9.dll"
        needed = {d: ((graph,) if d in ("cudnn_ops64_9.dll", "cudnn_heuristic64_9.dll")
                      or d.startswith("cudnn_engines") else ("cudnn_ops64_9.dll", graph))
                  for d in dlls if d not in ("cudnn64_9.dll", graph)}
        return WinNvidiaLayout("nvidia/cudnn/bin", dlls, needed, ("nvidia-cublas-cu12",))
    raise ValueError(f"no Windows layout known for {distribution}")


@dataclass(frozen=True)
class StubWheel:
    """A stub NVIDIA wheel built for win_amd64: where it is, what it is, and what it installs."""

    path: Path
    distribution: str
    version: str
    layout: WinNvidiaLayout


def _pick_version(specifier: str, published: Sequence[str], missing: Sequence[str]) -> str:
    spec = SpecifierSet(specifier)
    offered = [Version(v) for v in published if v not in missing and Version(v) in spec]
    if not offered:
        raise ValueError(f"no published {WIN_PLATFORM} version within {specifier}")
    return str(max(offered))


def cu12_set_versions(*, driver: str | None = None) -> dict[str, str]:
    """Distribution → the version to build: for each NVIDIA wheel of onnxruntime-gpu ORT_VERSION's CUDA 12 set (the
    matrix's CUDA 12 wheels and its cuDNN row), the newest published one with a win_amd64 wheel (with `driver`: the
    newest the matrix's cap for that driver admits)."""
    from ortfix.compat.load import load_matrix

    matrix = load_matrix()
    build = next(b for b in matrix.builds_for(ORT_VERSION) if b.package == "onnxruntime-gpu")
    cuda = matrix.cuda_major(build.cuda_major)
    cudnn = matrix.cudnn_wheel(build.cudnn_major, build.cuda_major) if build.cudnn_major is not None else None
    if cuda is None or cudnn is None:
        raise ValueError(f"the matrix has no CUDA {build.cuda_major} / cuDNN set for onnxruntime-gpu {ORT_VERSION}")
    versions: dict[str, str] = {}
    for wheel in (*cuda.wheels, cudnn.wheel):
        if wheel.published is None:
            raise ValueError(f"the matrix has no published versions of {wheel.distribution}")
        published = [v for group in wheel.published.by_cuda for v in group.versions]
        if driver is not None:
            published = list(matrix.wheel_requirement(wheel, driver, "windows", "AMD64").admitted) or published
        versions[wheel.distribution] = _pick_version(wheel.specifier, published,
                                                     wheel.published.not_on.get(WIN_PLATFORM, ()))
    return versions


REAL_RUNTIME = "nvidia-cuda-runtime-cu12"


def nvidia_win_wheels(house: Path, cuda_major: int = 12, *, driver: str | None = None,
                      real_runtime: bool = True) -> list[StubWheel]:
    """Build the stub NVIDIA wheels of onnxruntime-gpu ORT_VERSION's CUDA 12 set into `house` (see the module
    docstring). Needs mingw-w64 and the real GPU wheel (for the provider's imports).

    With `real_runtime` (the default) nvidia-cuda-runtime-cu12 is the real wheel (3.6 MB, copied into `house`): its
    cudart64_12.dll finds no driver and ORT stops with "CUDA failure 35", as on a machine without one. A stub cudart
    returns success from everything, so ORT then creates the CUDA session (get_providers() lists it first)."""
    if cuda_major != 12:
        raise ValueError("only the CUDA 12 set (onnxruntime-gpu 1.23) is built so far")
    imports = provider_imports()
    out: list[StubWheel] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for distribution, version in cu12_set_versions(driver=driver).items():
            layout = cu12_layout(distribution, version)
            if real_runtime and distribution == REAL_RUNTIME:
                real = real_nvidia_wheel(distribution, version)
                house.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(real, house / real.name)
                out.append(StubWheel(house / real.name, distribution, version, layout))
                continue
            files: dict[str, bytes | Path] = {}
            for dll in layout.dlls:
                stub = build_stub_dll(tmp / distribution / dll, exports=imports.get(dll.lower(), ()),
                                      needed=layout.needed.get(dll, ()), marker=f"{distribution} {version} {dll}")
                files[f"{layout.bin_dir}/{dll}"] = stub
            path = build_wheel(house, distribution, version, files, requires=layout.requires,
                               tag=f"py3-none-{WIN_PLATFORM}", root_is_purelib=True)
            out.append(StubWheel(path, distribution, version, layout))
    return out


# --------------------------------------------------------------------------------------------------------------------
# Windows targets with pip, and pip under wine
# --------------------------------------------------------------------------------------------------------------------

def _put_pip(site_packages: Path) -> None:
    """pip (pure Python) into a Windows site-packages folder, installed from Linux with its RECORD."""
    from wintools import pip_install_windows_cached

    pip_install_windows_cached(site_packages, PIP, find_links=win_wheelhouse(), no_deps=True)


def home_with_pip(w: WinPython, where: Path) -> Path:
    """A copy of the Windows CPython with pip in its Lib\\site-packages; returns its python.exe."""
    home = w.new_home(where)
    _put_pip(home / "Lib" / "site-packages")
    return home / "python.exe"


def venv_with_pip(w: WinPython, base_exe: Path, venv: Path) -> Path:
    """A venv made under wine by `base_exe -m venv --without-pip`, then given pip; returns its Scripts\\python.exe."""
    proc = w.run("-m", "venv", "--without-pip", to_windows(venv), exe=base_exe, env={"PYTHONPATH": ""})
    if proc.returncode != 0:
        raise RuntimeError(f"python -m venv failed under wine:\n{proc.stdout}\n{proc.stderr}")
    _put_pip(venv / "Lib" / "site-packages")
    return venv / "Scripts" / "python.exe"


def cpu_target(w: WinPython, where: Path) -> Path:
    """The first seed's state: a Windows CPython (home_with_pip) with the CPU onnxruntime ORT_VERSION installed by its
    own pip under wine (about 10 s); returns its python.exe."""
    exe = home_with_pip(w, where)
    pip_windows(w, exe, "install", f"onnxruntime=={ORT_VERSION}", NUMPY, wheelhouses=[win_wheelhouse()])
    return exe


def gpu_target(w: WinPython, where: Path) -> tuple[Path, list[StubWheel]]:
    """The second state: onnxruntime-gpu ORT_VERSION and the NVIDIA wheels (nvidia_win_wheels, built into
    `where`/nvidia-house) installed by the target's own pip, nothing on PATH (about 20 s); returns its python.exe and
    the NVIDIA wheels. Needs the GPU wheel (realwheels) and mingw-w64."""
    house = where / "nvidia-house"
    stubs = nvidia_win_wheels(house)
    exe = home_with_pip(w, where)
    requirements = [f"onnxruntime-gpu=={ORT_VERSION}", NUMPY, *(f"{s.distribution}=={s.version}" for s in stubs)]
    pip_windows(w, exe, "install", *requirements, wheelhouses=stage_wheelhouses(where))
    return exe, stubs


def stage_wheelhouses(where: Path) -> list[Path]:
    """The wheelhouses a Windows pip of the stage installs from: the real wheels (GPU included) and the stub NVIDIA
    wheels built into `where`/nvidia-house (build them first: nvidia_win_wheels or gpu_target)."""
    return [win_wheelhouse(gpu=True), where / "nvidia-house"]


def pip_env(*wheelhouses: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a Windows `python -m pip` (run by ortfix's apply, or directly) needs to be hermetic: no configuration file,
    no index, only `wheelhouses`; no cache, no version check, no byte-compiling (under wine, compiling sympy and numpy
    turns a 10 s install of onnxruntime into 35 s). pip reads an environment variable of a `--no-X` switch as the
    value of X, so PIP_NO_COMPILE=0 is what means --no-compile (PIP_NO_CACHE_DIR is the one special case)."""
    return {"PIP_CONFIG_FILE": "nul", "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": " ".join(to_windows(h) for h in wheelhouses), "PIP_NO_CACHE_DIR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_COMPILE": "0", "PIP_NO_WARN_SCRIPT_LOCATION": "0",
            "PIP_NO_INPUT": "1", **(extra or {})}


def target_env(w: WinPython, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a wine process of a target interpreter: the prefix and wine settings of `w`, this
    machine's PIP_* variables gone (wine passes the Linux environment through), no PYTHONPATH (the target sees its
    own site-packages only), then `extra`."""
    env = {k: v for k, v in w.env().items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env.update(extra or {})
    return env


def ortfix_windows(w: WinPython, *args: str, wheelhouses: Sequence[Path] = (), env: Mapping[str, str] | None = None,
                   timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The real `ortfix ARGS` run by the shared Windows CPython (ortfix from this checkout's src/), with this machine's
    PIP_* variables gone; with `wheelhouses`, the pip that apply runs in the target is hermetic (pip_env)."""
    full = {k: v for k, v in w.env().items() if not k.startswith("PIP_")}
    full.update(pip_env(*wheelhouses) if wheelhouses else {})
    full.update(env or {})
    return subprocess.run(["wine", str(w.exe), "-m", "ortfix", *args], capture_output=True, text=True, env=full,
                          stdin=subprocess.DEVNULL, cwd=str(REPO), timeout=timeout, check=False)


def run_target(w: WinPython, python_exe: Path, *args: str, env: Mapping[str, str] | None = None,
               cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`wine <python_exe> ARGS` in the target's own environment (see target_env)."""
    return subprocess.run(["wine", str(python_exe), *args], capture_output=True, text=True,
                          env=target_env(w, env), stdin=subprocess.DEVNULL, cwd=str(cwd or python_exe.parent),
                          timeout=timeout, check=False)


def pip_windows(w: WinPython, python_exe: Path, *args: str, wheelhouses: Sequence[Path],
                env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m pip ARGS` run by the target under wine, hermetic (pip_env); raises with pip's output on failure."""
    proc = run_target(w, python_exe, "-m", "pip", *args, env=pip_env(*wheelhouses, extra=env))
    if proc.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} failed under wine (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc


# --------------------------------------------------------------------------------------------------------------------
# A tiny ONNX model and a fresh CUDA session
# --------------------------------------------------------------------------------------------------------------------

def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def tiny_model() -> bytes:
    """A valid ONNX model, encoded by hand (protobuf wire format, onnx.proto field numbers): y = x + x, x and y float
    tensors of shape [3]; IR version 8, opset 13."""
    def value_info(name: str) -> bytes:
        dim = _field(1, 3)  # TensorShapeProto.Dimension.dim_value
        tensor = _field(1, 1) + _field(2, _field(1, dim))  # elem_type FLOAT, shape
        return _field(1, name) + _field(2, _field(1, tensor))  # name, type.tensor_type
    node = _field(1, "x") + _field(1, "x") + _field(2, "y") + _field(3, "add") + _field(4, "Add")
    graph = _field(1, node) + _field(2, "ortfix-tiny") + _field(11, value_info("x")) + _field(12, value_info("y"))
    opset = _field(1, "") + _field(2, 13)
    return _field(1, 8) + _field(2, "ortfix-tests") + _field(7, graph) + _field(8, opset)


_SESSION_SCRIPT = r"""
import json, os, sys
dirs = json.loads(sys.argv[2])
if dirs:
    os.environ["PATH"] = os.pathsep.join(dirs + [os.environ.get("PATH", "")])
import onnxruntime as ort
print("ORTFIX-AVAILABLE " + json.dumps(ort.get_available_providers()), flush=True)
try:
    session = ort.InferenceSession(sys.argv[1], providers=["CUDAExecutionProvider"])
except Exception as exc:
    print("ORTFIX-ERROR " + json.dumps(str(exc)), flush=True)
else:
    print("ORTFIX-PROVIDERS " + json.dumps(session.get_providers()), flush=True)
"""


def fresh_cuda_session(w: WinPython, python_exe: Path, model: Path, *, path_dirs: Sequence[str] = (),
                       env: Mapping[str, str] | None = None, after_calling: Path | None = None) -> str:
    """A new Windows process of `python_exe` creates `InferenceSession(model, providers=["CUDAExecutionProvider"])`;
    the verdict text is everything it wrote (ORT logs its load errors on stderr, its fallback on stdout; see
    _decode), then `exit <code>`. `path_dirs` (Windows paths) are put in front of PATH inside the process before
    onnxruntime is imported, as ortfix's hook does. `after_calling`: a .bat that wine's cmd CALLs first, in the same
    cmd that then starts python (as `conda activate` runs activate.d's scripts in the user's shell)."""
    argv = [str(python_exe), "-c", _SESSION_SCRIPT, to_windows(model), json.dumps(list(path_dirs))]
    if after_calling is not None:  # a batch file of its own: wine quotes an argv for cmd in a way cmd misreads
        script = model.with_name("ortfix_session.py")
        script.write_text(_SESSION_SCRIPT, encoding="utf-8")
        batch = model.with_name("ortfix_session.bat")
        batch.write_text(f'@call "{to_windows(after_calling)}"\r\n'
                         f'@"{to_windows(python_exe)}" "{to_windows(script)}" "{to_windows(model)}" []\r\n',
                         encoding="utf-8")
        argv = ["cmd", "/c", to_windows(batch)]
    proc = subprocess.run(["wine", *argv], capture_output=True, env=target_env(w, env),
                          stdin=subprocess.DEVNULL, cwd=str(python_exe.parent), timeout=600, check=False)
    return f"{_decode(proc.stdout)}{_decode(proc.stderr)}exit {proc.returncode}\n"


def _decode(data: bytes) -> str:
    """A Windows process's output as text. ORT writes its log lines as UTF-16LE into the same pipe that Python writes
    UTF-8 into; UTF-8 never holds a NUL byte, so dropping them turns the (ASCII) UTF-16 parts into text too."""
    return data.replace(b"\x00", b"").decode("utf-8", "replace")


_MISSING = re.compile(r'which depends on "([^"]+)" which is missing')
_DRIVER = re.compile(r"CUDA failure (35|100)\b|CUDA driver version is insufficient|no CUDA-capable device")


def missing_dll(verdict: str) -> str | None:
    """The DLL ORT's load error names ("... which depends on "X" which is missing"), or None."""
    found = _MISSING.search(verdict)
    return found.group(1) if found else None


def reached_driver(verdict: str) -> bool:
    """The session got past DLL loading and failed on the absent driver (CUDA failure 35 or 100)."""
    return _DRIVER.search(verdict) is not None


def past_dll_loading(verdict: str) -> bool:
    """Every DLL of the provider was found: ORT stopped at the driver, or (stub cudart) created the CUDA session."""
    providers = providers_of(verdict)
    return reached_driver(verdict) or (providers is not None and providers[:1] == ["CUDAExecutionProvider"])


def providers_of(verdict: str) -> list[str] | None:
    """The providers the session ended up with (ORT falls back to the CPU on an EP error), or None."""
    found = re.search(r"^ORTFIX-PROVIDERS (.*)$", verdict, re.MULTILINE)
    return [str(p) for p in json.loads(found.group(1))] if found else None


def available_providers(verdict: str) -> list[str] | None:
    """`onnxruntime.get_available_providers()` in that process, or None when it did not get that far."""
    found = re.search(r"^ORTFIX-AVAILABLE (.*)$", verdict, re.MULTILINE)
    return [str(p) for p in json.loads(found.group(1))] if found else None

