"""speed/fsrecord.py: what a computation looked at, recorded through the os-level functions, and looked at again."""

from __future__ import annotations

import builtins
import glob
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from ortfix.speed import fsrecord

pytestmark = pytest.mark.skipif(not fsrecord.supported(), reason="recording needs Python >= 3.11 on POSIX")


def test_pathlib_glob_which_and_realpath_are_all_recorded(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libx.so.1").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "lib")
    with fsrecord.recording() as rec:
        assert (tmp_path / "lib" / "libx.so.1").read_bytes() == b"x"
        assert (tmp_path / "lib").is_dir()
        assert not (tmp_path / "absent").exists()
        assert glob.glob(str(tmp_path / "l*"))
        assert os.path.realpath(tmp_path / "link") == str(tmp_path / "lib")
        shutil.which("no-such-program-here", path=str(tmp_path))
        sorted(os.listdir(tmp_path / "lib"))
    seen = {(op, path) for op, path, _answer in rec.observations}
    assert ("read", str(tmp_path / "lib" / "libx.so.1")) in seen
    assert ("stat", str(tmp_path / "lib")) in seen
    assert ("stat", str(tmp_path / "absent")) in seen
    assert ("list", str(tmp_path)) in seen
    assert ("readlink", str(tmp_path / "link")) in seen
    assert ("list", str(tmp_path / "lib")) in seen
    assert rec.unrepeatable is None
    assert fsrecord.still_true(rec.observations)


def test_each_kind_of_change_is_seen(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    f = lib / "libx.so.1"
    f.write_bytes(b"one")
    (tmp_path / "link").symlink_to("lib")

    def record() -> list[list[object]]:
        with fsrecord.recording() as rec:
            f.read_bytes()
            os.listdir(lib)
            os.path.exists(tmp_path / "absent")
            os.readlink(tmp_path / "link")
        return rec.observations

    changes = [
        lambda: f.write_bytes(b"two"),  # same size, new contents: mtime and ctime
        lambda: f.chmod(0o600),  # ctime and mode
        lambda: (lib / "libnew.so").write_bytes(b""),  # the listing
        lambda: (tmp_path / "absent").write_bytes(b""),  # was missing, is there
        lambda: ((tmp_path / "link").unlink(), (tmp_path / "link").symlink_to("other")),
        lambda: (f.unlink(), f.write_bytes(b"one")),  # same bytes, a new file (and a new inode or ctime)
    ]
    for change in changes:
        obs = record()
        assert fsrecord.still_true(obs)
        change()
        assert not fsrecord.still_true(obs), change


def test_a_folder_stat_ignores_its_times_but_its_listing_does_not(tmp_path: Path) -> None:
    with fsrecord.recording() as rec:
        os.path.isdir(tmp_path)
    (tmp_path / "new").write_text("")  # /tmp gets entries all the time: a plain stat of it must not care
    assert fsrecord.still_true(rec.observations)
    with fsrecord.recording() as rec:
        os.listdir(tmp_path)
    (tmp_path / "newer").write_text("")
    assert not fsrecord.still_true(rec.observations)


def test_proc_is_compared_by_content() -> None:
    with fsrecord.recording() as rec:
        Path("/proc/uptime").read_text()
    answer = next(a for op, p, a in rec.observations if (op, p) == ("read", "/proc/uptime"))
    assert answer[0] == "content"
    time.sleep(0.05)  # /proc/uptime counts in hundredths of a second; its mtime means nothing
    assert not fsrecord.still_true(rec.observations)


def test_writes_outside_the_ignored_folder_make_it_unrepeatable(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    with fsrecord.recording(ignored=[str(cache)]) as rec:
        (cache / "entry.json").write_text("{}")
        (cache / "entry.json").read_text()
    assert rec.unrepeatable is None and rec.observations == []
    with fsrecord.recording(ignored=[str(cache)]) as rec:
        (tmp_path / "elsewhere").write_text("x")
    assert rec.unrepeatable and "elsewhere" in rec.unrepeatable


def test_a_change_while_looking_is_noticed(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("1")
    with fsrecord.recording() as rec:
        f.stat()
        f.write_text("22")
        f.stat()
    assert rec.unrepeatable and "changed" in rec.unrepeatable


def test_the_real_functions_come_back_even_after_an_error() -> None:
    real = (os.stat, os.lstat, os.listdir, os.scandir, os.access, os.readlink, os.open, builtins.open)
    with pytest.raises(ZeroDivisionError), fsrecord.recording():
        assert os.stat is not real[0]
        1 / 0  # noqa: B018
    assert (os.stat, os.lstat, os.listdir, os.scandir, os.access, os.readlink, os.open, builtins.open) == real
    with fsrecord.recording(), pytest.raises(RuntimeError), fsrecord.recording():
        pass
    assert os.stat is real[0]


def test_newest_change(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    os.utime(f, ns=(1_000_000_000, 1_000_000_000))
    with fsrecord.recording() as rec:
        f.stat()
    newest = fsrecord.newest_change_ns(rec.observations)
    assert newest == f.stat().st_ctime_ns  # the ctime, which utime cannot set back
    assert newest > 1_000_000_000


@pytest.mark.skipif(sys.platform != "linux", reason="Linux paths")
def test_missing_and_unreadable_answers_are_errors() -> None:
    assert fsrecord.answer("stat", "/nonexistent/x") == ["e", 2]
    assert fsrecord.answer("list", "/nonexistent") == ["e", 2]


def test_a_saved_pattern_is_compiled_only_when_it_is_a_watched_one(tmp_path: Path) -> None:
    """The observations come back from a file (untrusted): a listing's pattern is one system/listing.py names, never
    one of the file's choosing (one that does not parse raised re.error, a traceback; one that never finishes matching
    would hang every check), and a malformed observation is a full check, not an error."""
    import re

    from ortfix.system import listing

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "notes.txt").write_text("")
    folder = str(tmp_path)
    assert fsrecord.still_true([[f"match:{listing.PROJECT_FILES}", folder, ["names", ["pyproject.toml"]]]])
    assert not fsrecord.still_true([["match:(", folder, ["names", []]]])
    # it would answer exactly what was saved: still refused
    assert not fsrecord.still_true([["match:.*", folder, ["names", ["notes.txt", "pyproject.toml"]]]])
    assert not fsrecord.still_true([["match:(a+)+\\Z", folder, ["names", []]]])
    for malformed in ([5, folder, []], ["stat", folder], ["stat", 7, []], ["stat", folder, "d"], "stat"):
        assert not fsrecord.still_true([malformed]), malformed
    # and a listing by a pattern that is not watched is never saved
    with fsrecord.recording() as rec:
        assert listing.names_matching(folder, re.compile(r"notes\.txt\Z")) == ["notes.txt"]
    assert rec.unrepeatable is not None and "not watched" in rec.unrepeatable
    with fsrecord.recording() as rec:
        assert listing.names_matching(folder, re.compile(listing.PROJECT_FILES)) == ["pyproject.toml"]
    assert rec.unrepeatable is None
