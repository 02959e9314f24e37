"""Copies that shadow the environment's (issue 20, item 2): an older, partial cuDNN on LD_LIBRARY_PATH (libcudnn.so.9
and libcudnn_graph.so.9 only) beside a venv with onnxruntime-gpu[cuda,cudnn]. `check` names both versions in full
and the partial copy (LIB009); the preload hook loads the environment's whole cuDNN, libcudnn_graph before the
sub-libraries that NEED it, so that none of them pulls the shadowing copy in; cuDNN's own version checks prove it in
a process of their own; rollback restores every byte.

Hermetic: the fake-but-real NVIDIA wheels of tests/support/fixtures.py and gcc stubs with the real SONAMEs. Real: the
real onnxruntime-gpu 1.22.0 venv (tests/ortvenvs.py) and libcudnn.so.9 + libcudnn_graph.so.9 out of the real
nvidia-cudnn-cu12 9.1.0.70 wheel, kept in the test cache (tests/support/testcache.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from checktools import site_packages
from ortvenvs import gpu_venv, linked_copy
from support.fixtures import build_stub_lib
from support.testcache import cache_root, locked
from txtools import assert_same_tree, copy_venv, ortfix, ortfix_json, tree_state

_MAPPED_CUDNN = ("import json, os, onnxruntime\n"
                 "maps = [ln.split(None, 5)[5].strip() for ln in open('/proc/self/maps')\n"
                 "        if len(ln.split(None, 5)) == 6]\n"
                 "print(json.dumps(sorted({p for p in maps if os.path.basename(p).startswith('libcudnn')})))\n")


def _env(ld_library_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH")}
    env["LD_LIBRARY_PATH"] = str(ld_library_path)
    return env


def _json(*args: str, env: dict[str, str]) -> dict[str, Any]:
    """check/plan's JSON: exit 1 where findings are left for the user (DRV001 on a machine without the driver)."""
    proc = ortfix(*args, "--json", env=env)
    assert proc.returncode in (0, 1), (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def _mapped_cudnn(python: Path, env: dict[str, str]) -> list[str]:
    run = subprocess.run([str(python), "-c", _MAPPED_CUDNN], capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stderr
    mapped: list[str] = json.loads(run.stdout.strip().splitlines()[-1])
    return mapped


def _finding(doc: dict[str, object], code: str) -> list[dict[str, object]]:
    findings = doc["findings"]
    assert isinstance(findings, list)
    return [f for f in findings if f["code"] == code]


def _preload_libraries(plan: dict[str, object]) -> list[str]:
    actions = plan["plan"]["actions"] if "plan" in plan else plan["actions"]  # type: ignore[index]
    module = next(a for a in actions if a["details"].get("path", "").endswith("_ortfix_preload.py"))
    line = next(ln for ln in module["details"]["content"].splitlines() if ln.startswith("LIBRARIES = "))
    return [os.path.basename(p) for p in json.loads(line[len("LIBRARIES = "):].replace("'", '"'))]


# ---------------------------------------------------------------------------------------------------------------------
# hermetic: stub wheels and a stub partial copy
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_partial_older_cudnn_on_ld_library_path_is_named_and_beaten(tmp_path: Path, gpu_template: Path) -> None:
    venv = copy_venv(gpu_template, tmp_path / "venv")  # onnxruntime-gpu[cuda,cudnn] 1.22.0 from `wheelhouse`
    python = venv / "bin" / "python"
    shadow = tmp_path / "old cudnn"
    shadow.mkdir()
    # an older cuDNN 9 (9.0.0.312), half of it: its libcudnn_graph records its version as cuDNN's does
    build_stub_lib(shadow / "libcudnn.so.9", soname="libcudnn.so.9")
    build_stub_lib(shadow / "libcudnn_graph.so.9", soname="libcudnn_graph.so.9",
                   marker="cudnn_version_9_0_0_312_c0ffee_e0")
    env = _env(shadow)
    own = site_packages(venv) / "nvidia" / "cudnn" / "lib"

    check = _json("check", "--python", str(python), env=env)
    shadowed = {f["data"]["soname"]: f for f in _finding(check, "LIB004")}  # type: ignore[index]
    evidence = shadowed["libcudnn.so.9"]["evidence"]
    assert f"loaded: {shadow / 'libcudnn.so.9'} (version 9.0.0.312)" in evidence, evidence
    assert f"environment's copy: {own / 'libcudnn.so.9'} (version 9.1.0.70)" in evidence, evidence  # the wheel's
    [partial] = _finding(check, "LIB009")
    assert partial["severity"] == "error" and partial["data"]["directory"] == str(shadow)  # type: ignore[index]
    assert "libcudnn_ops.so.9" in partial["data"]["missing"]  # type: ignore[index]
    assert "libcudnn_graph.so.9" not in partial["data"]["missing"]  # type: ignore[index]

    plan = _json("plan", "--python", str(python), env=env)
    libs = _preload_libraries(plan)
    cudnn = [n for n in libs if n.startswith("libcudnn")]
    assert cudnn[:2] == ["libcudnn.so.9", "libcudnn_graph.so.9"], cudnn  # graph before everything that NEEDs it
    assert cudnn.index("libcudnn_ops.so.9") < min(cudnn.index("libcudnn_cnn.so.9"), cudnn.index("libcudnn_adv.so.9"))
    assert cudnn[-1] == "libcudnn_heuristic.so.9" and len(cudnn) == 8, cudnn

    before = tree_state(venv)
    doc = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert doc["status"] == "applied", doc.get("verification")
    mapped = _mapped_cudnn(python, env)
    assert mapped and all(os.path.dirname(p) == str(own) for p in mapped), mapped  # not one from the shadowing copy
    after = _json("check", "--python", str(python), env=env)
    [partial] = _finding(after, "LIB009")
    assert partial["severity"] == "warning"  # still there (not ours to touch), no longer what the provider loads

    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))


_FAKE_CUDNN = r"""
#include <stdlib.h>
#include <stdio.h>
size_t cudnnGetVersion(void) { return 90100; }
const char *cudnnGetErrorString(int status) { return status ? "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH" : "OK"; }
int cudnnGraphVersionCheck(void) { return 0; }
int cudnnOpsVersionCheck(void) {
    fprintf(stderr, "Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9}\n");
    abort();
}
int cudnnCnnVersionCheck(void) { return 4003; }
int cudnnAdvVersionCheck(void) { return 0; }
"""


def _fake_cudnn(folder: Path, source: str) -> Path:
    folder.mkdir()
    (folder / "fake.c").write_text(source)
    out = folder / "libcudnn.so.9"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.9", "-o", str(out), str(folder / "fake.c")],
                   check=True, capture_output=True)
    return out


def test_cudnn_version_checks_say_which_call_aborted(tmp_path: Path) -> None:
    """A libcudnn whose sub-library cannot load calls abort() inside the version check: the check runs in a process
    of its own and says which call ended it, with cuDNN's own message."""
    from ortfix.verify.cudnncheck import check_cudnn

    lib = _fake_cudnn(tmp_path / "lib", _FAKE_CUDNN)
    result = check_cudnn(sys.executable, "libcudnn.so.9", prefix=sys.prefix, folders=[str(lib.parent)])
    assert not result.ok and result.version_text == "9.1.0"
    assert [(c.function, c.status) for c in result.calls] == [("cudnnGraphVersionCheck", 0),
                                                              ("cudnnOpsVersionCheck", None)]
    assert result.process_error and "signal 6" in result.process_error
    assert "Unable to load any of {libcudnn_ops.so.9.1.0" in result.process_error

    mismatch = _fake_cudnn(tmp_path / "mismatch", _FAKE_CUDNN.replace("abort();", "return 0;"))
    result = check_cudnn(sys.executable, "libcudnn.so.9", prefix=sys.prefix, folders=[str(mismatch.parent)])
    assert not result.ok and result.process_error is None
    assert [c.status for c in result.calls] == [0, 0, 4003, 0]
    mismatched = "cudnnCnnVersionCheck: 4003 (CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)"
    assert any(mismatched in str(f) for f in result.failures)
    assert result.mapped == (str(mismatch),)


# ---------------------------------------------------------------------------------------------------------------------
# real wheels: onnxruntime-gpu 1.22.0 (cuDNN 9.28) and half of the real cuDNN 9.1.0.70
# ---------------------------------------------------------------------------------------------------------------------

_OLD_CUDNN = "nvidia-cudnn-cu12==9.1.0.70"
_HALF = ("libcudnn.so.9", "libcudnn_graph.so.9")


def _half_of_old_cudnn() -> Path:
    """libcudnn.so.9 and libcudnn_graph.so.9 of the real nvidia-cudnn-cu12 9.1.0.70 (a 660 MB wheel, downloaded once;
    only these two files, 3.5 MB, are kept in the test cache)."""
    folder = cache_root() / "cudnn-9.1.0.70-half"
    with locked(cache_root() / "cudnn-9.1.0.70-half.lock"):
        if all((folder / n).is_file() for n in _HALF):
            return folder
        staging = cache_root() / "cudnn-9.1.0.70-half.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                            "--disable-pip-version-check", "-d", tmp, _OLD_CUDNN], check=True)
            [wheel] = Path(tmp).glob("nvidia_cudnn_cu12-9.1.0.70-*.whl")
            with zipfile.ZipFile(wheel) as z:
                for name in _HALF:
                    (staging / name).write_bytes(z.read(f"nvidia/cudnn/lib/{name}"))
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    return folder


@pytest.mark.realwheels
def test_real_partial_cudnn_91_beside_cudnn_928_venv(tmp_path_factory: pytest.TempPathFactory,
                                                    tmp_path: Path) -> None:
    venv = linked_copy(gpu_venv(), tmp_path / "venv")  # the cached venv is shared: apply changes this copy
    python = venv / "bin" / "python"
    shadow = tmp_path / "old cudnn"
    shutil.copytree(_half_of_old_cudnn(), shadow)
    env = _env(shadow)
    own = site_packages(venv) / "nvidia" / "cudnn" / "lib"
    metadata = next(site_packages(venv).glob("nvidia_cudnn_cu12-*.dist-info")) / "METADATA"
    wheel_version = next(ln.split(":", 1)[1].strip() for ln in metadata.read_text().splitlines()
                         if ln.startswith("Version:"))

    check = _json("check", "--python", str(python), env=env)
    shadowed = {f["data"]["soname"]: f for f in _finding(check, "LIB004")}  # type: ignore[index]
    assert f"loaded: {shadow / 'libcudnn.so.9'} (version 9.1.0.70)" in shadowed["libcudnn.so.9"]["evidence"]
    assert (f"environment's copy: {own / 'libcudnn.so.9'} (version {wheel_version})"
            in shadowed["libcudnn.so.9"]["evidence"]), shadowed
    [partial] = _finding(check, "LIB009")
    assert partial["data"]["version"] == "9.1.0.70" and "libcudnn_cnn.so.9" in partial["data"]["missing"]  # type: ignore[index]

    before = tree_state(venv)
    doc = ortfix_json("apply", "--python", str(python), "--yes", env=env)
    assert doc["status"] == "applied", doc.get("verification")
    versions = doc["verification"]["loader"]["cudnn"]
    assert versions["ok"] and versions["version_text"] == ".".join(wheel_version.split(".")[:3]), versions
    assert [c["function"] for c in versions["calls"]] == ["cudnnGraphVersionCheck", "cudnnOpsVersionCheck",
                                                          "cudnnCnnVersionCheck", "cudnnAdvVersionCheck"]
    assert all(os.path.dirname(p) == str(own) for p in versions["mapped"]), versions["mapped"]
    mapped = _mapped_cudnn(python, env)
    assert {os.path.basename(p) for p in mapped} >= {"libcudnn.so.9", "libcudnn_graph.so.9", "libcudnn_ops.so.9",
                                                     "libcudnn_cnn.so.9", "libcudnn_adv.so.9",
                                                     "libcudnn_engines_precompiled.so.9", "libcudnn_heuristic.so.9"}
    assert all(os.path.dirname(p) == str(own) for p in mapped), mapped

    ortfix_json("rollback", "--python", str(python), "--yes", env=env)
    assert_same_tree(before, tree_state(venv))
