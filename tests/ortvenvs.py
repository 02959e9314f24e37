"""Real onnxruntime venvs shared by test_verify.py and test_tune.py: built once per test session (in pytest's base
temp folder) with this machine's own pip and pip configuration, as tests/test_realwheels.py builds its own.

The CPU venv also carries a switch for tests of the paths that need a working CUDA provider, which this machine
cannot give: with ORTFIX_TEST_FAKE_CUDA=1 in the environment, a `.pth` hook wraps the real onnxruntime so that a
session asked for CUDAExecutionProvider reports it (`get_providers()`) while the real CPU provider computes. With
ORTFIX_TEST_FAKE_CUDA=skew its outputs are off by 0.5. Without the variable the hook does nothing. This fakes the
*target*; ortfix, the thing under test, runs unchanged.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from checktools import site_packages

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


def real_venv(factory: pytest.TempPathFactory, name: str, requirement: str) -> Path:
    """A venv with `requirement` installed by real pip; made once per session whichever test module asks first."""
    root = factory.getbasetemp() / f"ortvenv-{name}"
    venv = root / "venv"
    done = root / "complete"
    if done.exists():
        return venv
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--disable-pip-version-check", requirement], check=True)
    done.write_text(requirement + "\n")
    return venv


def cpu_venv(factory: pytest.TempPathFactory) -> Path:
    venv = real_venv(factory, "cpu", "onnxruntime==1.22.0")
    sp = site_packages(venv)
    if not (sp / "ortfix_test_fake_cuda.pth").exists():
        (sp / "ortfix_test_fake_cuda.py").write_text(_SHIM, encoding="utf-8")
        (sp / "ortfix_test_fake_cuda.pth").write_text("import ortfix_test_fake_cuda\n", encoding="utf-8")
    return venv


def gpu_venv(factory: pytest.TempPathFactory) -> Path:
    """onnxruntime-gpu with its extras: every NVIDIA library installed, none findable without LD_LIBRARY_PATH."""
    return real_venv(factory, "gpu", "onnxruntime-gpu[cuda,cudnn]==1.22.0")
