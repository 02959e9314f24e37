"""Real onnxruntime venvs shared by test_verify.py, test_tune.py, test_realwheels.py, test_shadowing.py and
test_damaged.py: built once per machine with this machine's own pip and pip configuration, in the tests' cache folder
(tests/support/testcache.py), under its lock, so that pytest-xdist workers and concurrent runs share one copy (the GPU
venv is about 3.3 GB). Tests only read them; a test that changes one works on `linked_copy` of it.

The CPU venv also carries a switch for tests of the paths that need a working CUDA provider, which this machine
cannot give: with ORTFIX_TEST_FAKE_CUDA=1 in the environment, a `.pth` hook wraps the real onnxruntime so that a
session asked for CUDAExecutionProvider reports it (`get_providers()`) while the real CPU provider computes. With
ORTFIX_TEST_FAKE_CUDA=skew its outputs are off by 0.5. Without the variable the hook does nothing. This fakes the
*target*; ortfix, the thing under test, runs unchanged.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from checktools import site_packages
from support.slowguard import refuse_slow
from support.testcache import cache_root, locked

FAKE_CUDA_ENV = "ORTFIX_TEST_FAKE_CUDA"

_SHIM = '''
import os

if os.environ.get("ORTFIX_TEST_FAKE_CUDA"):
    import onnxruntime as _ort

    _Real = _ort.InferenceSession
    _available = _ort.get_available_providers
    _CUDA = "CUDAExecutionProvider"
    _cold = [os.environ.get("ORTFIX_TEST_FAKE_CUDA") == "coldstart"]  # the process's first CUDA session: 0.5 s

    def get_available_providers():
        return [_CUDA] + [p for p in _available() if p != _CUDA]

    class InferenceSession(_Real):
        def __init__(self, path, sess_options=None, providers=None, provider_options=None, **kwargs):
            names = [p[0] if isinstance(p, tuple) else p for p in (providers or [])]
            self._fake_cuda = _CUDA in names
            if self._fake_cuda and _cold[0]:
                import time

                time.sleep(0.5)
                _cold[0] = False
            _Real.__init__(self, path, sess_options, providers=["CPUExecutionProvider"], **kwargs)

        def get_providers(self):
            return ([_CUDA] if self._fake_cuda else []) + _Real.get_providers(self)

        def run(self, *args, **kwargs):
            out = _Real.run(self, *args, **kwargs)
            if self._fake_cuda and os.environ.get("ORTFIX_TEST_FAKE_CUDA") == "skew":
                out = [o + 0.5 for o in out]
            return out

    _ort.InferenceSession = InferenceSession
    _ort.get_available_providers = get_available_providers
'''


def cached_venv(kind: str, *requirements: str, no_deps: bool = False, with_pip: bool = False) -> Path:
    """A venv with `requirements` installed by real pip, made once per machine in the tests' cache (keyed by them and
    the interpreter running the tests); `kind` names the folder. With `with_pip`, the venv has its own pip, as
    `python -m venv` gives it (for a copy that ortfix installs into). Read-only for tests: see linked_copy."""
    refuse_slow(f"pip ({' '.join(requirements)})")
    base = getattr(sys, "_base_executable", sys.executable)
    flags = f"{no_deps}|pip" if with_pip else f"{no_deps}"  # the key of a venv without pip is as before
    key = hashlib.sha256(f"{base}|{sys.version}|{flags}|{requirements}".encode()).hexdigest()[:12]
    root = cache_root() / f"{kind}-{key}"
    venv = root / "venv"
    with locked(cache_root() / f"{kind}-{key}.lock"):
        if not (root / "complete").exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            subprocess.run([sys.executable, "-m", "venv", "--clear", *([] if with_pip else ["--without-pip"]),
                            str(venv)], check=True)
            subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                            "--disable-pip-version-check", *(["--no-deps"] if no_deps else []), *requirements],
                           check=True)
            (root / "complete").write_text("\n".join(requirements) + "\n")
    return venv


def _link(src: str, dst: str) -> None:
    """`src` hard-linked at `dst`, or copied where they are on different file systems. Never over an existing `dst`:
    copying into a file that is itself a link into the cache would change the cache."""
    try:
        os.link(src, dst)
    except FileExistsError:
        raise
    except OSError:
        shutil.copy2(src, dst)


def linked_copy(venv: Path, dest: Path) -> Path:
    """A copy of a cached venv for a test that changes it: files hard-linked (a change replaces a file, never writes
    into it: pip, ortfix and rollback all do that), copied where the cache is on another file system; `dest`."""
    shutil.copytree(venv, dest, symlinks=True, copy_function=_link)
    return dest


def linked_into(venv: Path, prefix: Path) -> None:
    """What pip installed into the cached `venv` (its site-packages and scripts) hard-linked into the environment at
    `prefix` (a venv or a base installation of the same Python), as pip would have installed it there: RECORD names
    files relative to site-packages. For a test that needs a wheel the cache holds in an environment of its own; the
    scripts still start the cached venv's interpreter (nothing here runs them)."""
    site, dest = site_packages(venv), site_packages(prefix)
    for entry in site.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, dest / entry.name, symlinks=True, copy_function=_link)
        else:
            _link(str(entry), str(dest / entry.name))
    for script in (venv / "bin").iterdir():
        if not script.name.startswith(("python", "activate", "Activate")):
            _link(str(script), str(prefix / "bin" / script.name))


def linked_numpy(prefix: Path, requirement: str = "numpy") -> None:
    """numpy (`requirement`; onnxruntime imports it) hard-linked into the environment at `prefix` from a venv made once
    per machine (linked_into): pip downloads, unpacks and compiles it once a run, not once a test that needs it."""
    linked_into(cached_venv("numpy", requirement, no_deps=True), prefix)


def cpu_venv() -> Path:
    """onnxruntime 1.22.0 (CPU) with the fake-CUDA switch (see above)."""
    venv = cached_venv("ortvenv-cpu", "onnxruntime==1.22.0")
    sp = site_packages(venv)
    with locked(venv.parent / "shim.lock"):
        if not (sp / "ortfix_test_fake_cuda.pth").exists():
            (sp / "ortfix_test_fake_cuda.py").write_text(_SHIM, encoding="utf-8")
            subprocess.run([str(venv / "bin" / "python"), "-m", "py_compile", str(sp / "ortfix_test_fake_cuda.py")],
                           check=True)  # its bytecode now, not by a test that may be hashing the tree
            (sp / "ortfix_test_fake_cuda.pth").write_text("import ortfix_test_fake_cuda\n", encoding="utf-8")
    return venv


def gpu_venv() -> Path:
    """onnxruntime-gpu with its extras: every NVIDIA library installed, none findable without LD_LIBRARY_PATH."""
    return cached_venv("ortvenv-gpu", "onnxruntime-gpu[cuda,cudnn]==1.22.0")
