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
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from checktools import site_packages
from support.fixtures import build_wheel, fake_nvidia_wheel
from support.testcache import cache_root
from txtools import (
    assert_same_tree,
    copy_venv,
    fresh_process,
    load_code,
    one_line_error,
    ortfix,
    ortfix_env,
    ortfix_json,
    tree_state,
)

pytestmark = pytest.mark.slow  # every test here builds a venv, runs pip or starts wine


@pytest.fixture(scope="module")
def ortfix_deps() -> Path:
    """Wheels of ortfix's runtime dependencies and of its build backend (hatchling, and editables for an editable
    install), from this machine's index."""
    own = [r for r in metadata.requires("ortfix") or [] if "extra" not in r]
    folder = cache_root() / "wheelhouse-ortfix-deps-2"
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent))
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(tmp), "--only-binary=:all:",
                           *own, "hatchling", "editables"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.skip("cannot download ortfix's dependencies (no index reachable)")
    tmp.rename(folder)
    return folder


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, ortfix_deps: Path, venv_template: Path,
          cpu_template: Path) -> dict[str, Path]:
    """The module's own copies of the session's templates (tests/conftest.py): a venv with its own pip, and one with
    the CPU package from `wheelhouse` too."""
    root = tmp_path_factory.mktemp("wheelhouse")
    empty = copy_venv(venv_template, root / "empty")
    cpu = copy_venv(cpu_template, root / "cpu")
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
    assert manifest["files"] == doc["files"] and manifest["schema"] == "ortfix.wheelhouse-manifest/2"
    for entry in manifest["files"]:
        assert hashlib.sha256((folder / entry["file"]).read_bytes()).hexdigest() == entry["sha256"]
    # the folder holds exactly what was downloaded, the manifest and ortfix's pinned requirements
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [*(f["file"] for f in manifest["files"]), "ortfix-wheelhouse.json", "ortfix-requirements.txt"])
    assert {f["distribution"].lower() for f in manifest["files"] if f["for_ortfix"]} >= {"ortfix", "click", "pyyaml"}
    assert not any(f["for_ortfix"] for f in manifest["files"] if f["distribution"].startswith("nvidia"))
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
    # pip install --no-index --find-links DIR --require-hashes -r DIR/ortfix-requirements.txt
    command = shlex.split(doc["install_ortfix_command"])
    assert command[:2] == ["pip", "install"] and "--require-hashes" in command
    installed = subprocess.run([str(fresh / "bin" / "python"), "-m", *command, "-q"], capture_output=True, text=True,
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


def test_wheelhouse_carries_with_tensorrt(setup: dict[str, Path], wheelhouse: Path, ortfix_deps: Path,
                                         tmp_path: Path) -> None:
    """`wheelhouse --with tensorrt`: the plan's tensorrt-cu12-libs (the TensorRT 10 of onnxruntime-gpu 1.22's
    provider, at least the 10.9 ORT documents) is downloaded and listed with the plan's reason; without it, not."""
    trt = tmp_path / "trt"
    trt.mkdir()
    libs = {f"lib{n}.so.10": f"lib{n}.so.10" for n in ("nvinfer", "nvinfer_plugin", "nvonnxparser")}
    fake_nvidia_wheel(trt, "tensorrt-cu12-libs", "10.0.1", libs, "tensorrt_libs")
    fake_nvidia_wheel(trt, "tensorrt-cu12-libs", "10.9.0", libs, "tensorrt_libs")
    index = tmp_path / "index.conf"
    index.write_text(f"[global]\nno-index = true\nfind-links = {wheelhouse} {ortfix_deps} {trt}\n")
    env = ortfix_env(index, setup["root"])
    doc = ortfix_json("wheelhouse", "--python", str(setup["cpu"]), "-d", str(tmp_path / "with"), "--with", "tensorrt",
                      env=env)
    [entry] = [f for f in doc["files"] if f["distribution"].lower().replace("_", "-") == "tensorrt-cu12-libs"]
    assert entry["file"].startswith("tensorrt_cu12_libs-10.9.0-") and entry["why"].startswith("the plan"), entry
    assert (tmp_path / "with" / entry["file"]).is_file()
    plain = ortfix_json("wheelhouse", "--python", str(setup["cpu"]), "-d", str(tmp_path / "without"), env=env)
    assert not any("tensorrt" in f["distribution"].lower() for f in plain["files"])


def test_a_folder_that_is_not_empty_is_refused(setup: dict[str, Path], tmp_path: Path) -> None:
    """-d in a folder others can write: a newer wheel of a planned package planted there was listed in the manifest
    with its own sha256, as if the plan had asked for it; a link planted at the manifest's name pointed at a file of
    the user's. A wheelhouse starts empty: both are refused, nothing is written or listed."""
    env = ortfix_env(setup["index"], setup["root"])
    planted = tmp_path / "shared wheels"
    planted.mkdir()
    build_wheel(planted, "nvidia-cublas-cu12", "12.99.0", {"nvidia/cublas/lib/evil.py": b"print('planted')\n"})
    before = tree_state(planted)
    one_line_error(ortfix("wheelhouse", "--python", str(setup["cpu"]), "-d", str(planted), env=env), "is not empty",
                   "nvidia_cublas_cu12-12.99.0", "empty folder")
    assert_same_tree(before, tree_state(planted))

    victim = tmp_path / "victim"
    victim.write_text("the user's file\n")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "ortfix-wheelhouse.json").symlink_to(victim)
    one_line_error(ortfix("wheelhouse", "--python", str(setup["cpu"]), "-d", str(linked), env=env), "is not empty")
    assert victim.read_text() == "the user's file\n"
    assert [p.name for p in linked.iterdir()] == ["ortfix-wheelhouse.json"]


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


@pytest.fixture(scope="module")
def house(setup: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheelhouse made by `ortfix wheelhouse` for the CPU venv's plan (copied by each test that changes it)."""
    folder = tmp_path_factory.mktemp("house") / "wheels"
    ortfix_json("wheelhouse", "--python", str(setup["cpu"]), "-d", str(folder),
                env=ortfix_env(setup["index"], setup["root"]))
    return folder


def _other_bytes(wheel: Path, scratch: Path) -> Path:
    """A different wheel with the same file name (another build of the same name and version)."""
    dist, version = wheel.name.split("-")[:2]
    scratch.mkdir()
    other = build_wheel(scratch, dist, version, {f"{dist}_swapped.py": b"print('not the downloaded file')\n"},
                        tag="-".join(wheel.name[:-4].split("-")[2:]))
    assert other.name == wheel.name, (other.name, wheel.name)
    return other


def test_apply_refuses_a_wheel_planted_in_the_wheelhouse_or_swapped(setup: dict[str, Path], house: Path,
                                                                    tmp_path: Path) -> None:
    """The printed `PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR ortfix apply`: a newer wheel of a planned package put into DIR
    afterwards (pip prefers it), or a listed file swapped for another, is refused before anything changes."""
    wheels = tmp_path / "wheels"
    shutil.copytree(house, wheels)
    target = tmp_path / "target"
    shutil.copytree(setup["cpu"], target, symlinks=True)
    before = tree_state(target)
    offline = ortfix_env(setup["nothing"], setup["root"], PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels))
    planted = build_wheel(wheels, "nvidia-cublas-cu12", "12.99.0", {"nvidia/cublas/lib/evil.py": b"print(1)\n"})
    for args in (["apply", "--dry-run"], ["apply", "--yes"], ["export", "requirements"]):
        one_line_error(ortfix(*args, "--python", str(target), env=offline), str(planted),
                       "is not listed in the manifest")
    assert_same_tree(before, tree_state(target))
    planted.unlink()

    [cudnn] = wheels.glob("nvidia_cudnn_cu12-*.whl")
    shutil.copy(_other_bytes(cudnn, tmp_path / "scratch"), cudnn)
    one_line_error(ortfix("apply", "--python", str(target), "--yes", env=offline), str(cudnn),
                   "is not the file the wheelhouse's manifest lists")
    assert_same_tree(before, tree_state(target))


def test_what_pip_took_is_judged_by_the_hash_pip_reports(house: Path, tmp_path: Path, setup: dict[str, Path]) -> None:
    """After the install, the check reads pip's own report: the hash of the file pip took, even if the file in the
    folder is the listed one again by the time ortfix looks."""
    from ortfix.errors import OrtfixError
    from ortfix.system.wheelmanifest import check_wheelhouse_files
    from ortfix.transaction.actions.resolve import report_archives

    wheels = tmp_path / "wheels"
    shutil.copytree(house, wheels)
    [cudnn] = wheels.glob("nvidia_cudnn_cu12-*.whl")
    original = cudnn.read_bytes()
    shutil.copy(_other_bytes(cudnn, tmp_path / "scratch"), cudnn)
    report = tmp_path / "report.json"
    subprocess.run([str(setup["empty"] / "bin" / "python"), "-m", "pip", "install", "--dry-run", "--no-deps",
                    "--ignore-installed", "--report", str(report), "-q", "nvidia-cudnn-cu12"], check=True,
                   env=ortfix_env(setup["nothing"], setup["root"], PIP_FIND_LINKS=str(wheels)))
    cudnn.write_bytes(original)
    [(path, sha)] = report_archives(report)
    assert path == str(cudnn) and sha is not None and sha != hashlib.sha256(original).hexdigest()
    with pytest.raises(OrtfixError, match="is not the file the wheelhouse's manifest lists"):
        check_wheelhouse_files(report_archives(report))
    check_wheelhouse_files([(str(cudnn), None)])  # the listed file itself passes


def test_the_installer_takes_only_what_the_manifest_lists(house: Path, tmp_path: Path) -> None:
    """install.sh --find-links DIR: an `ortfix` of a higher version planted in DIR was installed instead of the
    wheelhouse's; a swapped dependency was installed as it was. pip's hash-checking mode with the manifest's pins."""
    from test_installers import Box, one_line_failure

    wheels = tmp_path / "wheels"
    shutil.copytree(house, wheels)
    build_wheel(wheels, "ortfix", "0.2.0", {"ortfix_impostor.py": b"print('not ortfix')\n"})
    (tmp_path / "box").mkdir()
    box = Box(tmp_path / "box")
    offline = ("--no-index", "--find-links", str(wheels), "--no-check")
    proc = box.install_sh(*offline)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "installed ortfix 0.1.0" in proc.stdout and "--require-hashes" in proc.stdout
    venv = box.data / "venv"
    assert not list(venv.glob("lib/python*/site-packages/ortfix_impostor.py"))

    [click] = wheels.glob("click-*.whl")
    shutil.copy(_other_bytes(click, tmp_path / "scratch"), click)
    before = tree_state(venv)
    one_line_failure(box.install_sh(*offline, "--upgrade"), 5, "pip install ortfix failed", "HASHES")
    assert_same_tree(before, tree_state(venv))


def _checkout_copy(dest: Path) -> Path:
    """A copy of this checkout's buildable source (what a user's `pip install ./S` or `pip install -e S` reads)."""
    repo = Path(__file__).resolve().parents[1]
    dest.mkdir()
    for name in ("src", "compat"):
        shutil.copytree(repo / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(repo / name, dest / name)
    return dest


def _install_ortfix(venv: Path, ortfix_deps: Path, env: dict[str, str], *spec: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "--no-index", "--find-links", str(ortfix_deps), *spec], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return venv / "bin" / "python"


def _own_wheelhouse(python: Path, setup: dict[str, Path], folder: Path, cwd: Path) -> dict[str, Any]:
    proc = subprocess.run([str(python), "-m", "ortfix", "wheelhouse", "--python", str(setup["cpu"]), "-d",
                           str(folder), "--json"], capture_output=True, text=True, cwd=cwd, check=False,
                          env=ortfix_env(setup["index"], setup["root"]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def test_a_plain_install_never_builds_the_folder_it_was_installed_from(setup: dict[str, Path], ortfix_deps: Path,
                                                                       tmp_path: Path) -> None:
    """`pip install ./S`, then S changes (another version, another build backend): the wheelhouse followed
    direct_url.json back to S and ran S's build backend, and listed what S held today as the installed version."""
    source = _checkout_copy(tmp_path / "S")
    env = ortfix_env(setup["nothing"], setup["root"])
    python = _install_ortfix(tmp_path / "venv", ortfix_deps, env, str(source))
    marker = tmp_path / "BUILT"
    pyproject = source / "pyproject.toml"
    text = pyproject.read_text().replace('version = "0.1.0"', 'version = "6.6.6"')
    text = text.replace('requires = ["hatchling>=1.21"]\nbuild-backend = "hatchling.build"',
                        'requires = []\nbuild-backend = "hostile"\nbackend-path = ["."]')
    pyproject.write_text(text)
    (source / "hostile.py").write_text(f"open({str(marker)!r}, 'a').write('S was built\\n')\n"
                                       "def get_requires_for_build_wheel(config_settings=None):\n    return []\n")
    folder = tmp_path / "wheels"
    doc = _own_wheelhouse(python, setup, folder, tmp_path)
    assert not marker.exists(), "the source of a plain install was built"
    assert not [f for f in doc["files"] if f["distribution"] == "ortfix"] and not list(folder.glob("ortfix-*.whl"))
    assert "runs from an installed copy" in doc["ortfix_missing"] and "pip install -e" in doc["ortfix_missing"]
    assert "\n" not in doc["ortfix_missing"]


def test_an_editable_checkout_that_builds_another_version_is_refused(setup: dict[str, Path], ortfix_deps: Path,
                                                                     tmp_path: Path) -> None:
    """An editable install whose checkout says another version now: its wheel is not what runs, so it is not carried
    (the manifest said the running version)."""
    source = _checkout_copy(tmp_path / "S")
    env = ortfix_env(setup["nothing"], setup["root"])
    python = _install_ortfix(tmp_path / "venv", ortfix_deps, env, "-e", str(source))
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "6.6.6"'))
    folder = tmp_path / "wheels"
    doc = _own_wheelhouse(python, setup, folder, tmp_path)
    assert not list(folder.glob("ortfix-*.whl")) and not [f for f in doc["files"] if f["distribution"] == "ortfix"]
    assert f"{source} now builds ortfix 6.6.6, not the running 0.1.0" in doc["ortfix_missing"]
    assert not (folder / "ortfix-requirements.txt").exists()


def test_uv_is_not_chosen_for_a_wheelhouse(house: Path, tmp_path: Path) -> None:
    """uv reports no hashes of what it takes, so a find-links folder holding a manifest keeps `auto` on pip."""
    from ortfix.system.pipconfig import PipConfig
    from ortfix.system.uvargs import UvOptions, translate

    plain = tmp_path / "plain"
    plain.mkdir()
    assert isinstance(translate(PipConfig(no_index=True, find_links=(str(plain),))), UvOptions)
    for link in (str(house), house.as_uri()):
        refused = translate(PipConfig(no_index=True, find_links=(str(plain), link)))
        assert not isinstance(refused, UvOptions) and "is an ortfix wheelhouse" in str(refused), refused


@pytest.fixture()
def http_index(setup: dict[str, Path], wheelhouse: Path, ortfix_deps: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The stub wheels and ortfix's dependencies served over HTTP (pip logs "Downloading NAME (SIZE)" and draws its
    bars only for what it downloads), uncached."""
    import functools
    import http.server
    import threading

    root = tmp_path / "served"
    root.mkdir()
    for wheel in [*wheelhouse.glob("*.whl"), *ortfix_deps.glob("*.whl")]:
        shutil.copy(wheel, root)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conf = tmp_path / "http.conf"
    conf.write_text(f"[global]\nno-index = true\nfind-links = http://127.0.0.1:{server.server_address[1]}/\n"
                    "trusted-host = 127.0.0.1\nno-cache-dir = true\n")
    yield ortfix_env(conf, setup["root"])
    server.shutdown()
    server.server_close()


def _size(n: int) -> str:
    return next((f"{n / s:.1f} {u}" for u, s in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)) if n >= s), f"{n} bytes")


def test_wheelhouse_says_files_and_bytes_as_it_downloads(setup: dict[str, Path], http_index: dict[str, str],
                                                         tmp_path: Path) -> None:
    """Off a terminal (a log): a line per file as pip starts it, with the files and bytes so far, and the total."""
    folder = tmp_path / "wheels"
    proc = ortfix("wheelhouse", "--python", str(setup["cpu"]), "-d", str(folder), "--json", env=http_index)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ortfix: wheelhouse: downloaded ")]
    started = [ln for ln in lines if "; now " in ln]
    assert any("; now onnxruntime_gpu-1.22.0" in ln for ln in started), proc.stderr
    assert started[0].startswith("ortfix: wheelhouse: downloaded 0 files, 0 bytes; now "), started
    assert started[1].startswith("ortfix: wheelhouse: downloaded 1 file, "), started
    for k, line in enumerate(started[2:], 2):  # counted over both downloads (the plan's, ortfix's)
        assert line.startswith(f"ortfix: wheelhouse: downloaded {k} files, "), started
    assert not any("127.0.0.1" in ln for ln in lines), lines  # a find-links URL shows as its file name
    total = sum((folder / f["file"]).stat().st_size for f in doc["files"])
    assert lines[-1] == f"ortfix: wheelhouse: downloaded {len(doc['files'])} files, {_size(total)}", lines


def test_wheelhouse_shows_pips_progress_bars_on_a_terminal(setup: dict[str, Path], http_index: dict[str, str],
                                                          tmp_path: Path) -> None:
    """Standard error a terminal: pip's own bars (for the files over pip's 40 kB threshold), with nothing but cursor
    and colour sequences left unescaped; standard output keeps the result alone."""
    import os
    import pty

    from clitools import REPO

    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ortfix", "wheelhouse", "--python", str(setup["cpu"]), "-d",
                             str(tmp_path / "wheels"), "--json"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=follower, env=http_index, cwd=REPO)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        shown += chunk
    out, _ = proc.communicate(timeout=300)
    os.close(leader)
    assert proc.returncode == 0, shown[-3000:]
    assert json.loads(out)["command"] == "wheelhouse"
    text = shown.decode("utf-8", "replace")
    assert "━" in text and "Downloading" in text, text[-3000:]
    assert "PyYAML" in text or "pyyaml" in text.lower()
    stripped = re.sub(r"\x1b\[[0-9;?]*[ABCDGKJhlm]", "", text)
    assert "\x1b" not in stripped, stripped[-2000:]
