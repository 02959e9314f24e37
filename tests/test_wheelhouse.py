"""`ortfix wheelhouse`: a real download with pip from an "index" (the hermetic stub wheelhouse and ortfix's own
dependencies as find-links, offline), then the offline machine's side: `ortfix apply` with only that folder
(PIP_NO_INDEX, PIP_FIND_LINKS) fixes a CPU venv (the fresh-process loader check says so), and ortfix itself installs
from it into a fresh venv with `--no-index`. And the one-line failures: no wheel for the platform, an unreachable
index, an unwritable folder.

ortfix's dependencies and its build backend are downloaded once with this machine's pip configuration into the test
cache; without an index the module is skipped with one line."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from checktools import site_packages
from support.fixtures import build_wheel, pip_install
from support.testcache import cache_root
from test_apply import ortfix_env
from txtools import assert_same_tree, fresh_process, load_code, one_line_error, ortfix, ortfix_json, tree_state


@pytest.fixture(scope="module")
def ortfix_deps() -> Path:
    """Wheels of ortfix's runtime dependencies and of its build backend (hatchling), from this machine's index."""
    own = [r for r in metadata.requires("ortfix") or [] if "extra" not in r]
    folder = cache_root() / "wheelhouse-ortfix-deps"
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent))
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(tmp), "--only-binary=:all:",
                           *own, "hatchling"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.skip("cannot download ortfix's dependencies (no index reachable)")
    tmp.rename(folder)
    return folder


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, ortfix_deps: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wheelhouse")
    empty = root / "empty"
    subprocess.run([sys.executable, "-m", "venv", str(empty)], check=True, capture_output=True)
    cpu = root / "cpu"
    shutil.copytree(empty, cpu, symlinks=True)
    pip_install(cpu / "bin" / "python", "onnxruntime==1.22.0", find_links=wheelhouse)
    index = root / "index.conf"  # the "index": the stub wheels and ortfix's dependencies, nothing else
    index.write_text(f"[global]\nno-index = true\nfind-links = {wheelhouse} {ortfix_deps}\n")
    nothing = root / "nothing.conf"  # the offline machine: no index, no find-links
    nothing.write_text("[global]\nno-index = true\n")
    return {"root": root, "empty": empty, "cpu": cpu, "index": index, "nothing": nothing}


def test_wheelhouse_serves_an_offline_apply_and_ortfix_itself(setup: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "target"
    shutil.copytree(setup["cpu"], target, symlinks=True)
    before = tree_state(target)
    folder = tmp_path / "carry" / "wheels"
    doc = ortfix_json("wheelhouse", "--python", str(target), "-d", str(folder),
                      env=ortfix_env(setup["index"], setup["root"]))
    assert_same_tree(before, tree_state(target))
    names = {f["distribution"].lower().replace("_", "-"): f for f in doc["files"]}
    assert {"onnxruntime-gpu", "nvidia-cublas-cu12", "nvidia-cudnn-cu12", "ortfix", "click", "pyyaml"} <= set(names)
    assert "onnxruntime" not in names  # the CPU package is what the plan removes
    assert names["ortfix"]["why"] == "ortfix itself" and doc["ortfix"].startswith("built from ")
    assert names["onnxruntime-gpu"]["why"].startswith("the plan: ORT002")
    manifest = json.loads((folder / "ortfix-wheelhouse.json").read_text())
    assert manifest["files"] == doc["files"]
    for entry in manifest["files"]:
        assert hashlib.sha256((folder / entry["file"]).read_bytes()).hexdigest() == entry["sha256"]
    assert doc["apply_command"].startswith(f"PIP_NO_INDEX=1 PIP_FIND_LINKS={folder} ortfix apply --python ")

    # The offline machine: nothing but the folder.
    offline = ortfix_env(setup["nothing"], setup["root"], PIP_NO_INDEX="1", PIP_FIND_LINKS=str(folder))
    proc = ortfix("apply", "--python", str(target), "--yes", env=offline)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    run = fresh_process(target / "bin" / "python",
                        load_code(site_packages(target) / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so"))
    assert "all loaded" in run.stdout, run.stderr

    fresh = tmp_path / "ortfix venv"
    shutil.copytree(setup["empty"], fresh, symlinks=True)
    installed = subprocess.run([str(fresh / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index",
                                "--find-links", str(folder), "ortfix"], capture_output=True, text=True,
                               env=ortfix_env(setup["nothing"], setup["root"]), check=False)
    assert installed.returncode == 0, installed.stderr[-2000:]
    version = subprocess.run([str(fresh / "bin" / "python"), "-m", "ortfix", "--version"], capture_output=True,
                             text=True, check=False, cwd=tmp_path)
    assert version.returncode == 0 and "0.1.0" in version.stdout, version.stderr


def test_wheelhouse_failures_are_one_line(setup: dict[str, Path], tmp_path: Path) -> None:
    target = str(setup["cpu"])
    env = ortfix_env(setup["index"], setup["root"])
    blocker = tmp_path / "a file"
    blocker.write_text("")
    one_line_error(ortfix("wheelhouse", "--python", target, "-d", str(blocker / "wheels"), env=env),
                   "cannot write to")
    one_line_error(ortfix("wheelhouse", "--python", target, "-d", str(tmp_path / "w1"), "--platform", "win_amd64",
                          "--python-version", "3.11", env=env), "no wheel of onnxruntime-gpu==1.22.0",
                   "win_amd64")
    closed = tmp_path / "closed.conf"
    closed.write_text("[global]\nindex-url = http://127.0.0.1:9/simple\nretries = 1\ntimeout = 2\n")
    one_line_error(ortfix("wheelhouse", "--python", target, "-d", str(tmp_path / "w2"),
                          env=ortfix_env(closed, setup["root"])), "the package index is unreachable",
                   "Connection refused")


def test_a_link_planted_at_the_manifest_is_replaced_not_written_through(setup: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    """-d in a folder others can write: the manifest's name linked to a file of the user's must not overwrite it."""
    victim = tmp_path / "victim"
    victim.write_text("the user's file\n")
    folder = tmp_path / "shared wheels"
    folder.mkdir()
    (folder / "ortfix-wheelhouse.json").symlink_to(victim)
    proc = ortfix("wheelhouse", "--python", str(setup["cpu"]), "-d", str(folder),
                  env=ortfix_env(setup["index"], setup["root"]))
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "the user's file\n"
    manifest = folder / "ortfix-wheelhouse.json"
    assert not manifest.is_symlink()
    assert json.loads(manifest.read_text())["schema"] == "ortfix.wheelhouse-manifest/1"


def test_from_a_checkout_the_index_ortfix_is_never_taken(setup: dict[str, Path], tmp_path: Path) -> None:
    """An index with another project's `ortfix` of the same version: the wheelhouse carries the running ortfix."""
    impostor = tmp_path / "impostor"
    wheel = build_wheel(impostor, "ortfix", "0.1.0", {"ortfix_impostor.py": b"print('not ortfix')\n"})
    conf = tmp_path / "index.conf"
    conf.write_text(setup["index"].read_text().rstrip("\n") + f" {impostor}\n")
    folder = tmp_path / "wheels"
    doc = ortfix_json("wheelhouse", "--python", str(setup["cpu"]), "-d", str(folder),
                      env=ortfix_env(conf, setup["root"]))
    assert doc["ortfix"].startswith("built from "), doc["ortfix"]
    [ortfix_wheel] = [f for f in doc["files"] if f["distribution"] == "ortfix"]
    assert ortfix_wheel["sha256"] != hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert "ortfix/cli/app.py" in zipfile.ZipFile(folder / ortfix_wheel["file"]).namelist()
