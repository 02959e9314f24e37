"""`ortfix verify`: three levels, each a verdict, each out of process.

Hermetic tests use the stub wheels of tests/support/fixtures.py with an `onnxruntime` package whose CUDA session
kills its own process with SIGSEGV (as the real provider does without a driver) or hangs: the thing under test is
ortfix's handling of the target, so the target may be a fake. The `realwheels` tests use the real onnxruntime-gpu
and onnxruntime 1.22.0 wheels from the configured index (see ortvenvs.py)."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checktools import nvidia_lib_path, site_packages
from clitools import REPO, assert_one_line_error, run_ortfix
from ortvenvs import FAKE_CUDA_ENV, cpu_venv, gpu_venv
from support.fixtures import make_venv
from txtools import copy_venv

MODEL = REPO / "src" / "ortfix" / "verify" / "models" / "verify_conv.onnx"


def _has_driver() -> bool:
    from ortfix.system.linux.driver import detect_driver
    from ortfix.system.linux.ldcache import load_ld_cache

    return detect_driver(load_ld_cache(), query_gpus=False).present


NO_DRIVER = not _has_driver()


def verify_json(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    proc = run_ortfix("verify", "--json", *args, env=env, timeout=600)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1, 3), (proc.returncode, proc.stderr)
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def levels(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {lv["name"]: lv for lv in doc["levels"]}


def statuses(doc: dict[str, Any]) -> list[str]:
    return [lv["status"] for lv in doc["levels"]]


# ---------------------------------------------------------------------------------------------------------------------
# The shipped model
# ---------------------------------------------------------------------------------------------------------------------


def _make_models() -> Any:
    spec = importlib.util.spec_from_file_location("make_models", REPO / "scripts" / "make_models.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_model_is_what_the_script_makes() -> None:
    assert _make_models().build_all() == {"verify_conv.onnx": MODEL.read_bytes()}
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "make_models.py"), "--check"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _reference(x: list[float], n: int, h: int, w: int) -> list[float]:
    """verify_conv.onnx computed by hand: Conv 3->8 3x3 pad 1, Relu, Conv 8->3 1x1, + x (NCHW, flat lists)."""
    mm = _make_models()
    w1, b1 = mm._weights(8 * 27, 1), mm._weights(8, 2)
    w2, b2 = mm._weights(24, 3), mm._weights(3, 4)

    def at(c: int, i: int, j: int, b: int) -> float:
        return x[((b * 3 + c) * h + i) * w + j] if 0 <= i < h and 0 <= j < w else 0.0

    out = []
    for b in range(n):
        hidden = [[[max(0.0, b1[o] + sum(w1[((o * 3 + c) * 3 + ki) * 3 + kj] * at(c, i + ki - 1, j + kj - 1, b)
                                         for c in range(3) for ki in range(3) for kj in range(3)))
                    for j in range(w)] for i in range(h)] for o in range(8)]
        for c in range(3):
            for i in range(h):
                for j in range(w):
                    out.append(b2[c] + sum(w2[c * 8 + o] * hidden[o][i][j] for o in range(8)) + at(c, i, j, b))
    return out


@pytest.mark.realwheels
def test_shipped_model_computes_conv_relu_conv_add_in_real_onnxruntime(
        tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    venv = cpu_venv()
    n, h, w = 2, 4, 5
    x = [((i * 13) % 7 - 3) / 4.0 for i in range(n * 3 * h * w)]
    code = ("import sys, struct, numpy as np, onnxruntime as ort\n"
            "n, h, w = 2, 4, 5\n"
            "x = np.array(struct.unpack('<%df' % (n*3*h*w), sys.stdin.buffer.read()), dtype=np.float32)\n"
            "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
            "y = s.run(None, {'x': x.reshape(n, 3, h, w)})[0]\n"
            "sys.stdout.buffer.write(struct.pack('<%df' % y.size, *y.ravel().tolist()))\n")
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", code, str(MODEL)],
                          input=struct.pack(f"<{len(x)}f", *x), capture_output=True, check=True)
    got = struct.unpack(f"<{len(x)}f", proc.stdout)
    want = _reference(x, n, h, w)
    assert all(math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-5) for a, b in zip(got, want)), (got[:6], want[:6])


# ---------------------------------------------------------------------------------------------------------------------
# Hermetic: a provider that crashes or hangs becomes a verdict
# ---------------------------------------------------------------------------------------------------------------------

_FAKE_ORT = '''"""A fake onnxruntime for ortfix's tests: CPU sessions load (nothing runs), CUDA ones crash or hang."""
import os
import signal
import time

__version__ = "1.22.0"


def get_available_providers():
    return ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


class _Arg(object):
    def __init__(self, name):
        self.name = name
        self.shape = ["N", 3, "H", "W"]
        self.type = "tensor(float)"


class InferenceSession(object):
    def __init__(self, path, sess_options=None, providers=None, provider_options=None, **kwargs):
        with open(path, "rb") as f:
            f.read()
        names = [p[0] if isinstance(p, tuple) else p for p in (providers or [])]
        if "CUDAExecutionProvider" in names:
            if os.environ.get("FAKE_ORT_CUDA") == "hang":
                time.sleep(600)
            os.kill(os.getpid(), signal.SIGSEGV)
        self._providers = ["CPUExecutionProvider"]

    def get_providers(self):
        return list(self._providers)

    def get_inputs(self):
        return [_Arg("x")]

    def get_outputs(self):
        return [_Arg("y")]
'''


@pytest.fixture()
def crashing_gpu_venv(tmp_path: Path, gpu_template: Path) -> Path:
    """onnxruntime-gpu 1.22.0 [cuda,cudnn] from stub wheels (a full copy of the session's `gpu_template`, installed by
    pip once, tests/conftest.py), its Python package replaced by _FAKE_ORT."""
    venv = copy_venv(gpu_template, tmp_path / "venv")
    (site_packages(venv) / "onnxruntime" / "__init__.py").write_text(_FAKE_ORT, encoding="utf-8")
    return venv


def _lib_env(venv: Path, **extra: str) -> dict[str, str]:
    return {"LD_LIBRARY_PATH": nvidia_lib_path(venv), **extra}


@pytest.mark.slow
def test_segfaulting_provider_is_a_verdict_not_a_crash(crashing_gpu_venv: Path) -> None:
    rc, doc, _ = verify_json("--python", str(crashing_gpu_venv), env=_lib_env(crashing_gpu_venv))
    lv = levels(doc)
    assert lv["loader"]["status"] == "pass", lv["loader"]
    provider = lv["provider"]
    assert "SIGSEGV" in provider["verdict"]
    assert provider["data"]["signal"] == 11
    if NO_DRIVER:
        assert rc == 3 and doc["exit_code"] == 3
        assert provider["status"] == "not-run"
        assert provider["verdict"].startswith("libraries complete; no NVIDIA driver, so the provider cannot start")
        assert lv["numbers"]["status"] == "not-run"
        assert [x["level"] for x in doc["not_run"]] == [2, 3]
    else:
        assert rc == 1 and provider["status"] == "fail"


@pytest.mark.slow
def test_segfault_verdict_in_text(crashing_gpu_venv: Path) -> None:
    proc = run_ortfix("verify", "--python", str(crashing_gpu_venv), env=_lib_env(crashing_gpu_venv))
    assert "Traceback" not in proc.stderr and proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert any(line.startswith("1. libraries load") and "✓ pass" in line for line in lines), proc.stdout
    assert any(line.startswith("2. provider starts") and "SIGSEGV" in line for line in lines), proc.stdout
    if NO_DRIVER:
        assert proc.returncode == 3
        assert "Could not run here: level 2 (provider starts), level 3 (numbers match)." in proc.stdout


@pytest.mark.slow
def test_hanging_provider_times_out_into_a_verdict(crashing_gpu_venv: Path) -> None:
    rc, doc, _ = verify_json("--python", str(crashing_gpu_venv), "--timeout", "3",
                             env=_lib_env(crashing_gpu_venv, FAKE_ORT_CUDA="hang"))
    provider = levels(doc)["provider"]
    assert "did not finish within 3 s" in provider["verdict"]
    assert provider["data"]["timed_out"] is True
    assert rc == (3 if NO_DRIVER else 1)


@pytest.mark.slow
def test_libraries_not_findable_fails_level_1_by_name(crashing_gpu_venv: Path) -> None:
    env = {"LD_LIBRARY_PATH": ""}
    rc, doc, _ = verify_json("--python", str(crashing_gpu_venv), env=env)
    loader = levels(doc)["loader"]
    assert rc == 1 and loader["status"] == "fail"
    assert loader["verdict"].startswith("libcublasLt.so.12 cannot be loaded")
    assert any(e.startswith("libcudnn.so.9: ") for e in loader["evidence"])


@pytest.mark.slow
def test_no_onnxruntime(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    rc, doc, _ = verify_json("--python", str(python))
    assert rc == 1
    assert statuses(doc) == ["fail", "not-run", "not-run"]
    assert "onnxruntime is not installed" in doc["levels"][0]["verdict"]


def test_model_that_does_not_exist(tmp_path: Path) -> None:
    assert_one_line_error(run_ortfix("verify", "--model", str(tmp_path / "nope.onnx")), "nope.onnx", "no such file")


def test_shapes_need_a_model() -> None:
    assert_one_line_error(run_ortfix("verify", "--shapes", "1x3x8x8"), "--shapes goes with --model")


# ---------------------------------------------------------------------------------------------------------------------
# Real wheels
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.realwheels
def test_real_gpu_libraries_not_findable_fail_level_1_naming_the_library(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = gpu_venv()
    rc, doc, _ = verify_json("--python", str(venv), env={"LD_LIBRARY_PATH": ""})
    lv = levels(doc)
    assert rc == 1
    assert lv["loader"]["status"] == "fail"
    assert lv["loader"]["verdict"].startswith("libcublasLt.so.12 cannot be loaded"), lv["loader"]
    assert "libcudnn.so.9: cannot open shared object file: No such file or directory" in lv["loader"]["evidence"]
    # level 2 ran and fell back to the CPU (ORT says why); without a driver that is "could not run", not a crash
    provider = lv["provider"]
    assert provider["data"]["providers"] == ["CPUExecutionProvider"]
    assert any("libcublasLt.so.12" in e for e in provider["evidence"]), provider
    assert provider["status"] == ("not-run" if NO_DRIVER else "fail")


@pytest.mark.realwheels
def test_real_gpu_libraries_complete_level_1_passes_and_level_2_says_no_driver(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = gpu_venv()
    if not NO_DRIVER:
        pytest.skip("this machine has an NVIDIA driver: the provider may start")
    rc, doc, stderr = verify_json("--python", str(venv), env={"LD_LIBRARY_PATH": nvidia_lib_path(venv)})
    lv = levels(doc)
    assert lv["loader"]["status"] == "pass", lv["loader"]
    assert {"libcublasLt.so.12", "libcudnn.so.9", "libcudart.so.12"} <= set(lv["loader"]["data"]["cuda"])
    provider = lv["provider"]
    assert provider["status"] == "not-run"
    assert provider["verdict"].startswith("libraries complete; no NVIDIA driver, so the provider cannot start here")
    assert provider["data"]["signal"] == 11  # the real provider, without a driver, dies of SIGSEGV
    assert lv["numbers"]["status"] == "not-run"
    assert rc == 3 and stderr == ""


@pytest.mark.realwheels
def test_real_cpu_build_says_no_cuda_provider(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = cpu_venv()
    rc, doc, _ = verify_json("--python", str(venv))
    lv = levels(doc)
    assert rc == 1
    assert lv["loader"]["status"] == "fail" and "CPU-only build" in lv["loader"]["verdict"]
    assert lv["provider"]["status"] == "fail"
    assert lv["provider"]["verdict"].startswith("CUDAExecutionProvider is not in this onnxruntime build")
    assert lv["numbers"]["status"] == "not-run"


@pytest.mark.realwheels
def test_levels_2_and_3_pass_when_the_session_gets_cuda(tmp_path_factory: pytest.TempPathFactory) -> None:
    """No GPU here: the target's onnxruntime is wrapped to report CUDA while the real CPU provider computes."""
    venv = cpu_venv()
    rc, doc, _ = verify_json("--python", str(venv), env={FAKE_CUDA_ENV: "1"})
    lv = levels(doc)
    assert lv["provider"]["status"] == "pass"
    assert lv["provider"]["data"]["providers"][0] == "CUDAExecutionProvider"
    numbers = lv["numbers"]
    assert numbers["status"] == "pass", numbers
    assert numbers["data"]["shapes"] == {"x": [2, 3, 17, 23]}
    assert numbers["data"]["outputs"][0]["max_abs_diff"] == 0.0
    assert rc == 1  # level 1: the CPU build has no CUDA provider library


@pytest.mark.realwheels
def test_level_3_fails_when_cuda_computes_something_else(tmp_path_factory: pytest.TempPathFactory,
                                                         tmp_path: Path) -> None:
    venv = cpu_venv()
    model = tmp_path / "mine.onnx"
    shutil.copy(MODEL, model)
    rc, doc, _ = verify_json("--python", str(venv), "--model", str(model), "--shapes", "1x3x5x7",
                             env={FAKE_CUDA_ENV: "skew"})
    numbers = levels(doc)["numbers"]
    assert rc == 1 and numbers["status"] == "fail"
    assert numbers["verdict"].startswith("the CUDA output differs from the CPU's: y [1, 3, 5, 7]")
    assert doc["model"] == {"path": str(model), "builtin": False}


@pytest.mark.realwheels
def test_corrupt_model_is_one_line(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    venv = cpu_venv()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a model\n" * 10)
    line = assert_one_line_error(run_ortfix("verify", "--python", str(venv), "--model", str(bad)), str(bad))
    assert "cannot load it" in line


@pytest.mark.realwheels
def test_wrong_shapes_for_the_model_is_a_level_3_verdict(tmp_path_factory: pytest.TempPathFactory) -> None:
    venv = cpu_venv()
    rc, doc, _ = verify_json("--python", str(venv), "--model", str(MODEL), "--shapes", "1x3x8",
                             env={FAKE_CUDA_ENV: "1"})
    numbers = levels(doc)["numbers"]
    assert rc == 1 and numbers["status"] == "fail"
    assert "input x has 4 dimensions" in numbers["verdict"]

