"""`ortfix check` replays an identical earlier check while nothing it depended on has changed (speed/replay.py,
speed/fsrecord.py). What matters is that it never replays a stale answer: every change below must give exactly what a
full check (`--fresh`) gives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from checktools import nvidia_lib_path, site_packages
from clitools import run_ortfix
from ortfix.speed.replay import RACY_MARGIN_NS
from support.fixtures import build_stub_lib, fake_ort_cpu_wheel, make_venv, pip_install

SETTLE_S = RACY_MARGIN_NS / 1e9 + 0.2  # results that depend on files changed within the margin are not kept

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="the check cache records on Python >= 3.11")


class Env:
    """One gpu venv with its own ortfix cache folder and an (initially empty) folder on LD_LIBRARY_PATH."""

    def __init__(self, root: Path, wheelhouse: Path) -> None:
        self.root = root
        self.python = make_venv(root / "venv")
        pip_install(self.python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
        self.extra_dir = root / "extra-libs"
        self.extra_dir.mkdir()
        # ortfix's own state, as after an apply: its presence must not stop check results from being kept
        (root / "venv" / ".ortfix" / "transactions").mkdir(parents=True)
        # made now: check reads the folder that holds the environment (a project's files there), so a cache folder
        # created there by the first check would change what the first check read
        self.cache = root / "cache"
        self.cache.mkdir()
        self.env = {"ORTFIX_CACHE_DIR": str(self.cache), "LD_LIBRARY_PATH": str(self.extra_dir)}

    def check(self, *extra: str) -> subprocess.CompletedProcess[str]:
        proc = run_ortfix("check", "--python", str(self.python), *extra, env=self.env)
        assert proc.returncode in (0, 1), proc.stderr
        return proc

    def entries(self) -> list[Path]:
        return sorted((self.cache / "checks").glob("*.json"))

    @property
    def site(self) -> Path:
        return site_packages(self.python.parent.parent)


CHANGES = ["library-appears", "library-removed", "library-rewritten", "hook-written", "distribution-installed",
           "transaction-damaged"]


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Iterator[dict[str, Env]]:
    built = {name: Env(tmp_path_factory.mktemp(name), wheelhouse)
             for name in [*CHANGES, "replay", "corrupt", "racy", "busy"]}
    time.sleep(SETTLE_S)  # once for all of them
    yield built


def _saved(env: Env) -> subprocess.CompletedProcess[str]:
    """Run check until its result is kept (it is, the environment having settled) and show that it is replayed."""
    first = env.check()
    assert len(env.entries()) == 1, "a settled environment's check result is kept"
    again = env.check()
    assert (again.returncode, again.stdout) == (first.returncode, first.stdout)
    return first


@pytest.mark.slow
def test_an_identical_check_is_replayed(envs: dict[str, Env]) -> None:
    env = envs["replay"]
    first = _saved(env)
    assert first.returncode == 1 and "LIB002" in first.stdout
    # Proof that the second run answered from the entry: doctor the entry, and that is what check prints.
    entry_file = env.entries()[0]
    entry = json.loads(entry_file.read_text())
    entry["output"] = "doctored by the test"
    entry_file.write_text(json.dumps(entry))
    assert env.check().stdout == "doctored by the test\n"
    fresh = env.check("--fresh")
    assert fresh.stdout == first.stdout and fresh.returncode == first.returncode
    # --json is another command line: its own entry, never the text one.
    as_json = env.check("--json")
    assert json.loads(as_json.stdout)["exit_code"] == 1


@pytest.mark.slow
def test_a_corrupt_entry_is_ignored_and_replaced(envs: dict[str, Env]) -> None:
    env = envs["corrupt"]
    first = _saved(env)
    entry_file = env.entries()[0]
    entry_file.write_text("{ not json")
    assert env.check().stdout == first.stdout
    assert json.loads(entry_file.read_text())["output"] + "\n" == first.stdout


@pytest.mark.slow
def test_a_busy_folder_around_the_environment_does_not_stop_a_replay(envs: dict[str, Env]) -> None:
    """A venv in /tmp or the home folder: files come and go beside it all the time. Only a project file appearing
    there changes what check reports (PRJ001), so only that stops a replay (system/listing.py)."""
    env = envs["busy"]
    first = _saved(env)
    entry_file = env.entries()[0]
    entry = json.loads(entry_file.read_text())
    entry["output"] = "doctored by the test"
    entry_file.write_text(json.dumps(entry))
    (env.root / "download.part").write_text("another program's file\n")
    (env.root / "requirements-old").mkdir()  # not a project file either: a folder, and no .txt/.in
    assert env.check().stdout == "doctored by the test\n"
    (env.root / "requirements.txt").write_text("onnxruntime==1.22.0\n")
    after = env.check()
    assert after.stdout != "doctored by the test\n" and after.stdout != first.stdout and "PRJ001" in after.stdout


def _link_nvidia_libs(env: Env) -> None:
    for lib_dir in nvidia_lib_path(env.python.parent.parent).split(":"):
        for lib in Path(lib_dir).glob("*.so*"):
            (env.extra_dir / lib.name).symlink_to(lib)


def _remove_cudnn(env: Env) -> None:
    (env.site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9").unlink()


def _rewrite_provider(env: Env) -> None:
    """Same path, same inode, other contents: the provider now needs only libcudart.so.12."""
    provider = env.site / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so"
    stub = build_stub_lib(env.root / "provider.so", soname=None, needed=["libcudart.so.12"], marker="rewritten")
    inode = provider.stat().st_ino
    with open(provider, "r+b") as f:
        f.truncate(0)
        f.write(stub.read_bytes())
    assert provider.stat().st_ino == inode


def _write_hook(env: Env) -> None:
    proc = run_ortfix("plan", "--python", str(env.python), "--json", env=env.env)
    for action in json.loads(proc.stdout)["actions"]:
        Path(action["details"]["path"]).write_text(action["details"]["content"])


def _install_cpu_package(env: Env) -> None:
    house = env.root / "cpu-wheel"
    house.mkdir()
    fake_ort_cpu_wheel(house, version="1.22.0")
    pip_install(env.python, "onnxruntime==1.22.0", find_links=house)


def _damaged_transaction(env: Env) -> None:
    """A transaction folder whose journal is gone (TX001: cannot be read)."""
    (env.python.parent.parent / ".ortfix" / "transactions" / "20260101T000000000Z-abcd").mkdir()


CHANGE_FUNCTIONS: dict[str, Callable[[Env], None]] = {
    "library-appears": _link_nvidia_libs,
    "library-removed": _remove_cudnn,
    "library-rewritten": _rewrite_provider,
    "hook-written": _write_hook,
    "distribution-installed": _install_cpu_package,
    "transaction-damaged": _damaged_transaction,
}


@pytest.mark.slow
@pytest.mark.parametrize("change", CHANGES)
def test_every_change_is_seen(envs: dict[str, Env], change: str) -> None:
    env = envs[change]
    before = _saved(env)
    CHANGE_FUNCTIONS[change](env)
    after = env.check()
    fresh = env.check("--fresh")
    assert (after.returncode, after.stdout) == (fresh.returncode, fresh.stdout)
    assert after.stdout != before.stdout, f"{change} should change what check reports"


@pytest.mark.slow
def test_a_just_changed_environment_is_not_kept(envs: dict[str, Env]) -> None:
    env = envs["racy"]
    (env.extra_dir / "README").write_text("a folder the loader searches, changed just now\n")
    env.check()
    assert env.entries() == [], "what changed less than 2 s ago may change again unseen within one clock tick"
    time.sleep(SETTLE_S)
    env.check()
    assert len(env.entries()) == 1, "once settled, the same check is kept"


@pytest.mark.slow
def test_no_cache_and_fresh_keep_nothing(envs: dict[str, Env], tmp_path: Path) -> None:
    env = envs["replay"]
    cache = tmp_path / "other-cache"
    for extra_env, args in (({"ORTFIX_CACHE_DIR": str(cache), "ORTFIX_NO_CACHE": "1"}, ()),
                            ({"ORTFIX_CACHE_DIR": str(cache)}, ("--fresh",))):
        proc = run_ortfix("check", "--python", str(env.python), *args, env={**env.env, **extra_env})
        assert proc.returncode == 1
        assert not (cache / "checks").exists() or not list((cache / "checks").iterdir())


@pytest.mark.slow
def test_the_recorder_misses_nothing_the_audit_hooks_see(envs: dict[str, Env], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a full check in this process under audit hooks (which see every open, listdir and scandir, whoever makes
    it) and the recorder: every file the check opened or folder it listed must be among the recorded observations,
    and the only programs it starts are the probe, ld.so and the GPU query."""
    from ortfix.cli.fastcheck import _check
    from ortfix.speed import fsrecord
    from ortfix.system import loader
    from ortfix.system.linux import elf

    env = envs["replay"]
    for key, value in env.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(tmp_path / "cache"))
    _check(str(env.python), False, None, None, False)  # imports everything first: imports are not the check's doing
    loader._listdir_cached.cache_clear()
    elf._read_elf_cached.cache_clear()

    events: list[tuple[str, str]] = []
    listening = [False]

    def hook(event: str, args: tuple[object, ...]) -> None:
        if not listening[0] or event not in ("open", "os.listdir", "os.scandir", "subprocess.Popen"):
            return
        target = args[0]
        if isinstance(target, (str, bytes, os.PathLike)):
            events.append((event, os.fsdecode(target)))

    sys.addaudithook(hook)  # hooks cannot be removed: this one only listens inside the block below
    with fsrecord.recording(ignored=[str(tmp_path / "cache")]) as recorder:
        listening[0] = True
        try:
            output, code, report = _check(str(env.python), False, None, None, False)
        finally:
            listening[0] = False
    assert code == 1 and report and "LIB002" in output
    recorded = {(op, path) for op, path, _answer in recorder.observations}
    opened = {p for e, p in events
              if e == "open" and p != os.devnull and not p.startswith(str(tmp_path / "cache"))}
    listed = {p for e, p in events if e in ("os.listdir", "os.scandir")}
    assert opened and listed
    assert {p for p in opened if ("read", p) not in recorded} == set()
    # a folder listed for the names that match a pattern is recorded by those names (system/listing.py)
    matched = {path for op, path in recorded if op.startswith("match:")}
    assert {p for p in listed if ("list", p) not in recorded and p not in matched} == set()
    started = {Path(p).name for e, p in events if e == "subprocess.Popen"}
    assert started <= {"python", Path(sys.executable).name, "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
    assert recorder.unrepeatable is None


@pytest.mark.slow
def test_a_replay_does_not_import_the_diagnosis(envs: dict[str, Env]) -> None:
    """What makes a replay fast, shown with -X importtime: the diagnosis machinery is not even imported."""
    env = envs["replay"]
    shutil.rmtree(env.cache / "checks", ignore_errors=True)
    full_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    full_env.update(env.env)
    argv = [sys.executable, "-X", "importtime", "-m", "ortfix", "check", "--python", str(env.python)]
    first = subprocess.run(argv, capture_output=True, text=True, env=full_env, check=False)
    assert first.returncode == 1 and "ortfix.check.facts" in first.stderr
    second = subprocess.run(argv, capture_output=True, text=True, env=full_env, check=False)
    assert (second.returncode, second.stdout) == (first.returncode, first.stdout)
    assert "ortfix.speed.replay" in second.stderr and "ortfix.check.facts" not in second.stderr


def test_a_recorded_check_lists_folders_the_loader_had_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader's in-process listing cache could answer without an os.listdir for the recorder to see: recording
    a check starts by emptying it, so a folder listed before is still recorded as listed."""
    from ortfix.speed.replay import SavedCheck
    from ortfix.system import loader

    folder = tmp_path / "libs"
    folder.mkdir()
    loader._listdir(str(folder))  # cached before the check starts
    saved = SavedCheck(Path(sys.executable), tmp_path / "cache" / "checks" / "entry.json", "key")
    monkeypatch.setattr("ortfix.speed.replay.RACY_MARGIN_NS", -RACY_MARGIN_NS)  # kept although just made
    saved.record(lambda: (str(sorted(loader._listdir(str(folder)) or ())), 0, "report"))
    entry = json.loads(saved.file.read_text(encoding="utf-8"))
    assert ["list", str(folder)] in [obs[:2] for obs in entry["observations"]]


def test_a_replayed_entry_outlives_entries_saved_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache keeps MAX_ENTRIES checks. One replayed again and again is never written again: dropped as the
    oldest written once as many other checks had been saved, it ran in full now and then (a shared cache folder, a
    user with many environments). A replay dates its entry, so what is pruned is what was used least recently."""
    from ortfix.speed import prefetch
    from ortfix.speed.replay import MAX_ENTRIES, SavedCheck

    monkeypatch.setattr(prefetch, "_started", None)  # the probe run here is this test's (restored after it)
    monkeypatch.setattr("ortfix.speed.replay.RACY_MARGIN_NS", -RACY_MARGIN_NS)  # kept although just made
    python = Path(sys.executable)
    folder = tmp_path / "cache" / "checks"
    report = prefetch.finished(python).stdout  # the real probe's report of this interpreter
    used = SavedCheck(python, folder / "used.json", "used")
    used.record(lambda: ("used output", 1, report))
    long_ago = time.time() - 3600
    os.utime(used.file, (long_ago, long_ago))  # saved an hour ago
    assert used.replay() == ("used output", 1)
    for i in range(MAX_ENTRIES):  # then as many other checks saved after it, before the next replay
        other = folder / f"other-{i:02d}.json"
        other.write_text("{}")
        os.utime(other, (long_ago + 60 + i, long_ago + 60 + i))
    SavedCheck(python, folder / "newest.json", "newest").record(lambda: ("newest output", 0, report))
    assert used.replay() == ("used output", 1)
    assert len(list(folder.glob("*.json"))) == MAX_ENTRIES
