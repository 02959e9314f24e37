"""The loader simulation must say what the real ld.so says, on real ELF files built here and on the system's own."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ortfix.system.linux.elfcache import ElfReader
from ortfix.system.linux.ldcache import load_ld_cache
from ortfix.system.linux.ldso import find_interpreter, system_search_dirs
from ortfix.system.linux.loader import LinuxLoader, LoaderConfig
from ortfix.system.loader import VIA_LOADED
from support.fixtures import build_stub_lib, ld_so_list

INTERP = find_interpreter()
pytestmark = pytest.mark.skipif(INTERP is None or sys.platform != "linux", reason="needs glibc's ld.so")


def simulate(lib: Path, env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """What our loader says for `ld.so --list lib`: every library mapped, by the name it was asked for."""
    dirs, hwcaps = system_search_dirs(INTERP)
    config = LoaderConfig(ld_library_path=(env or {}).get("LD_LIBRARY_PATH"), cache=load_ld_cache(),
                          default_dirs=dirs, hwcaps_subdirs=hwcaps, cwd=os.getcwd())
    loader = LinuxLoader(config, ElfReader(use_disk=False))
    assert INTERP is not None
    loader.preload(INTERP)
    report = loader.start_process(str(lib), resolve_origin=False)
    out: dict[str, str | None] = {}
    for r in report.resolutions:
        if r.via == VIA_LOADED and not r.name.startswith("ld-linux"):
            continue
        out.setdefault(r.name, r.path)
    return out


def oracle(lib: Path, env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    real = ld_so_list(lib, dict(env or {}))
    return {k: v for k, v in real.items() if not k.startswith(("linux-vdso", "ld-linux", "/"))}


def agree(lib: Path, env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    ours = {k: v for k, v in simulate(lib, env).items() if not k.startswith("ld-linux")}
    theirs = oracle(lib, env)
    assert ours == theirs
    return ours


def test_runpath_origin_chain(tmp_path: Path) -> None:
    build_stub_lib(tmp_path / "deps" / "libleaf.so.1", soname="libleaf.so.1")
    build_stub_lib(tmp_path / "deps" / "libmid.so.2", soname="libmid.so.2", needed=["libleaf.so.1"],
                   runpath=["$ORIGIN"])
    top = build_stub_lib(tmp_path / "top" / "libtop.so", soname="libtop.so", needed=["libmid.so.2"],
                         runpath=["$ORIGIN/../deps"])
    got = agree(top)
    assert got["libmid.so.2"] == str(tmp_path / "top" / ".." / "deps" / "libmid.so.2")
    assert got["libleaf.so.1"] is not None


def test_runpath_is_not_inherited_but_rpath_is(tmp_path: Path) -> None:
    build_stub_lib(tmp_path / "hidden" / "libleaf.so.1", soname="libleaf.so.1")
    build_stub_lib(tmp_path / "mid" / "libmid.so.2", soname="libmid.so.2", needed=["libleaf.so.1"])
    with_runpath = build_stub_lib(tmp_path / "a" / "libtop.so", soname="libtop.so", needed=["libmid.so.2"],
                                  runpath=[str(tmp_path / "mid"), str(tmp_path / "hidden")])
    got = agree(with_runpath)
    assert got["libleaf.so.1"] is None  # DT_RUNPATH applies to the object's own NEEDED only
    with_rpath = build_stub_lib(tmp_path / "b" / "libtop.so", soname="libtop.so", needed=["libmid.so.2"],
                                rpath=[str(tmp_path / "mid"), str(tmp_path / "hidden")])
    got = agree(with_rpath)
    assert got["libleaf.so.1"] == str(tmp_path / "hidden" / "libleaf.so.1")  # DT_RPATH is inherited


def test_ld_library_path_order_against_rpath_and_runpath(tmp_path: Path) -> None:
    for d in ("one", "two"):
        build_stub_lib(tmp_path / d / "libx.so.1", soname="libx.so.1")
    env = {"LD_LIBRARY_PATH": str(tmp_path / "two")}
    rpath = build_stub_lib(tmp_path / "r" / "libtop.so", soname="libtop.so", needed=["libx.so.1"],
                           rpath=[str(tmp_path / "one")])
    assert agree(rpath, env)["libx.so.1"] == str(tmp_path / "one" / "libx.so.1")  # RPATH beats LD_LIBRARY_PATH
    runpath = build_stub_lib(tmp_path / "u" / "libtop.so", soname="libtop.so", needed=["libx.so.1"],
                             runpath=[str(tmp_path / "one")])
    assert agree(runpath, env)["libx.so.1"] == str(tmp_path / "two" / "libx.so.1")  # LD_LIBRARY_PATH beats RUNPATH


def test_missing_library_and_its_siblings(tmp_path: Path) -> None:
    build_stub_lib(tmp_path / "libpresent.so.3", soname="libpresent.so.3")
    top = build_stub_lib(tmp_path / "top" / "libtop.so", soname="libtop.so",
                         needed=["libcudnn.so.9", "libpresent.so.3"], runpath=[str(tmp_path)])
    got = agree(top)
    assert got["libcudnn.so.9"] is None and got["libpresent.so.3"] is not None


def test_empty_ld_library_path_entry_means_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_stub_lib(tmp_path / "libx.so.1", soname="libx.so.1")
    top = build_stub_lib(tmp_path / "t" / "libtop.so", soname="libtop.so", needed=["libx.so.1"])
    monkeypatch.chdir(tmp_path)  # restored after the test: its tmp_path is removed when it passes
    ours = simulate(top, {"LD_LIBRARY_PATH": ":/nonexistent"})
    assert ours["libx.so.1"] == str(tmp_path / "libx.so.1")
    # ld.so records the relative name it opened ("libx.so.1 (0x...)", no "=>"): found, relative to the cwd
    import subprocess

    assert INTERP is not None
    real = subprocess.run([INTERP, str(top)], capture_output=True, text=True, cwd=tmp_path,
                          env={"LD_LIBRARY_PATH": ":/nonexistent", "LD_TRACE_LOADED_OBJECTS": "1"}).stdout
    assert "libx.so.1 (0x" in real and "not found" not in real


def test_wrong_elf_class_is_skipped(tmp_path: Path) -> None:
    try:
        build_stub_lib(tmp_path / "bad" / "libx.so.1", soname="libx.so.1", machine_32bit=True)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    build_stub_lib(tmp_path / "good" / "libx.so.1", soname="libx.so.1")
    top = build_stub_lib(tmp_path / "t" / "libtop.so", soname="libtop.so", needed=["libx.so.1"],
                         runpath=[str(tmp_path / "bad"), str(tmp_path / "good")])
    assert agree(top)["libx.so.1"] == str(tmp_path / "good" / "libx.so.1")


def test_a_file_that_is_not_elf_stops_the_search(tmp_path: Path) -> None:
    # Unlike a wrong ELF class, a non-ELF file with the wanted name is a fatal error for glibc ("file too short").
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "libx.so.1").write_text("/* GNU ld script */\n")
    build_stub_lib(tmp_path / "good" / "libx.so.1", soname="libx.so.1")
    top = build_stub_lib(tmp_path / "t" / "libtop.so", soname="libtop.so", needed=["libx.so.1"],
                         runpath=[str(tmp_path / "bad"), str(tmp_path / "good")])
    assert simulate(top)["libx.so.1"] is None
    with pytest.raises(RuntimeError, match=r"bad/libx\.so\.1"):
        oracle(top)


def test_system_binaries_agree() -> None:
    for candidate in (Path(sys.executable).resolve(), Path("/bin/ls").resolve()):
        got = agree(candidate)
        assert any(v for v in got.values())


def test_soname_already_loaded_is_reused(tmp_path: Path) -> None:
    # Two different files both named libdup.so.1: the second NEEDED resolves to the one already mapped.
    build_stub_lib(tmp_path / "a" / "libdup.so.1", soname="libdup.so.1")
    build_stub_lib(tmp_path / "b" / "libdup.so.1", soname="libdup.so.1")
    build_stub_lib(tmp_path / "b" / "libuser.so.1", soname="libuser.so.1", needed=["libdup.so.1"],
                   runpath=["$ORIGIN"])
    top = build_stub_lib(tmp_path / "t" / "libtop.so", soname="libtop.so", needed=["libdup.so.1", "libuser.so.1"],
                         runpath=[str(tmp_path / "a"), str(tmp_path / "b")])
    assert agree(top)["libdup.so.1"] == str(tmp_path / "a" / "libdup.so.1")


def test_the_elf_cache_keeps_one_file_per_folder(tmp_path: Path) -> None:
    """A check reads the cache entries of the folders its libraries are in, not of every file ever parsed: one file
    per folder, read back by a new reader; a folder's file never answers for another folder."""
    a = build_stub_lib(tmp_path / "a" / "liba.so.1", soname="liba.so.1")
    b = build_stub_lib(tmp_path / "b" / "libb.so.2", soname="libb.so.2", needed=["liba.so.1"])
    cache = tmp_path / "cache"
    reader = ElfReader(cache)
    assert (reader.read(str(a)).soname, reader.read(str(b)).soname) == ("liba.so.1", "libb.so.2")
    reader.save()
    shards = sorted(cache.glob("*.json"))
    assert len(shards) == 2
    assert sorted(len(json.loads(s.read_text())["entries"]) for s in shards) == [1, 1]

    class Unparsed(ElfReader):
        def parse(self, path: str) -> Any:
            raise AssertionError(f"{path} was parsed again")

    again = Unparsed(cache)
    assert list(again.read(str(b)).needed) == ["liba.so.1"]
    assert list(again._shards) == [str(tmp_path / "b")]  # only b's folder was read


@pytest.mark.parametrize("damage", ["[]", '"text"', '{"version": VERSION, "folder": FOLDER, "entries": {"K": []}}'])
def test_a_damaged_elf_cache_file_is_parsed_again(tmp_path: Path, damage: str) -> None:
    """A cache file that is not what ortfix wrote (a JSON list ended in AttributeError) is read as no cache."""
    a = build_stub_lib(tmp_path / "a" / "liba.so.1", soname="liba.so.1")
    cache = tmp_path / "cache"
    reader = ElfReader(cache)
    reader.read(str(a))
    reader.save()
    (shard,) = cache.glob("*.json")
    good = json.loads(shard.read_text())
    (key,) = good["entries"]
    text = damage.replace("VERSION", json.dumps(good["version"])).replace("FOLDER", json.dumps(good["folder"]))
    shard.write_text(text.replace('"K"', json.dumps(key)))
    assert ElfReader(cache).read(str(a)).soname == "liba.so.1"


@pytest.mark.skipif(not hasattr(os, "uname"), reason="ld.so's tokens are a POSIX matter")
def test_runpath_tokens_expand_as_ld_so_expands_them() -> None:
    """$ORIGIN, $LIB and $PLATFORM (also in braces), ld.so's dynamic string tokens; the platform module they need is
    imported only when one of the last two appears."""
    from ortfix.system.linux.loader import _expand_tokens

    machine = os.uname().machine
    lib = "lib64" if os.path.isdir("/lib64") and machine in ("x86_64", "aarch64") else "lib"
    assert _expand_tokens("$ORIGIN/../${LIB}/x/$PLATFORM", "/o") == f"/o/../{lib}/x/{machine}"
    assert _expand_tokens("${ORIGIN}/y", "/o") == "/o/y"


@pytest.mark.skipif(sys.platform != "linux", reason="ld.so is Linux's loader")
@pytest.mark.parametrize("damage", ['{"dirs": 1, "hwcaps": 2}', "[[1], [2]]", '["/lib", "/usr/lib"]'])
def test_a_damaged_cache_of_ld_so_s_answer_is_asked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          damage: str) -> None:
    """ld.so's search folders, cached by its identity: a cache file of another shape (a JSON object unpacked into
    its two keys read as folder names "dirs" and "hwcaps") is no answer."""
    from ortfix.system.linux import ldso

    interpreter = ldso.find_interpreter()
    if interpreter is None:
        pytest.skip("no ld.so found")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("ORTFIX_NO_CACHE", raising=False)
    ldso._system_search_dirs.cache_clear()
    first = ldso.system_search_dirs(interpreter)
    (cache_file,) = (tmp_path / "ortfix").glob("ldso-*.json")
    cache_file.write_text(damage)
    ldso._system_search_dirs.cache_clear()
    try:
        assert ldso.system_search_dirs(interpreter) == first
    finally:
        ldso._system_search_dirs.cache_clear()
