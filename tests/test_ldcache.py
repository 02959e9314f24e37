"""Our reading of /etc/ld.so.cache must agree with ldconfig's own."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from ortfix.system.linux.ldcache import load_ld_cache, parse_ld_cache


@pytest.mark.skipif(not Path("/etc/ld.so.cache").exists() or not shutil.which("ldconfig"), reason="no ld.so.cache")
def test_agrees_with_ldconfig() -> None:
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    first: dict[str, str] = {}
    for line in out.splitlines()[1:]:
        name, sep, path = line.strip().partition(" => ")
        if sep and "x86-64" in name:
            first.setdefault(name.split(" (")[0], path)
    assert first, "ldconfig listed nothing"
    cache = load_ld_cache()
    for name, path in first.items():
        assert cache.lookup(name) == path, name


def test_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        parse_ld_cache(b"not a cache at all")


def test_missing_cache_is_empty(tmp_path: Path) -> None:
    assert load_ld_cache(tmp_path / "nope").lookup("libc.so.6") is None


@pytest.mark.skipif(not Path("/etc/ld.so.cache").exists(), reason="no ld.so.cache")
def test_a_table_cut_short_is_refused_and_a_whole_one_read_entry_for_entry() -> None:
    """The table is read in one pass (speed): an entry table that runs past the end of the data is still an error
    (load_ld_cache then asks ldconfig), and each entry is the one at its place in the file."""
    import struct

    data = Path("/etc/ld.so.cache").read_bytes()
    cache = parse_ld_cache(data)
    offset = data.find(b"glibc-ld.so.cache1.1")
    (nlibs,) = struct.unpack_from("<I", data, offset + 20)
    assert len(cache.entries) == nlibs > 2
    flags, key, value, _os, hwcap = struct.unpack_from("<iIIIQ", data, offset + 48 + 24 * (nlibs - 1))
    last = cache.entries[-1]
    assert (last.flags, last.hwcap) == (flags, hwcap)
    assert data[offset + key:].split(b"\0", 1)[0].decode() == last.name
    assert data[offset + value:].split(b"\0", 1)[0].decode() == last.path
    with pytest.raises(struct.error):
        parse_ld_cache(data[:offset + 48 + 24 * 2 + 10])


def _cache_bytes(rows: list[tuple[int, str, str | int]]) -> bytes:
    """A new-format ld.so.cache of (flags, name, path or a path offset of its own) rows."""
    import struct

    strings = b""
    table = b""
    start = 48 + 24 * len(rows)
    for flags, name, path in rows:
        key = start + len(strings)
        strings += name.encode() + b"\0"
        if isinstance(path, int):
            value = path
        else:
            value = start + len(strings)
            strings += path.encode() + b"\0"
        table += struct.pack("<iIIIQ", flags, key, value, 0, 0)
    header = b"glibc-ld.so.cache1.1" + struct.pack("<II", len(rows), len(strings)) + b"\0" * 20
    return header + table + strings


def test_a_path_past_the_end_of_the_cache_is_refused_when_read() -> None:
    """Paths are decoded when looked up (speed): one that runs past the end is still refused when the file is read,
    not when a later lookup meets it (load_ld_cache then asks ldconfig)."""
    good = _cache_bytes([(0x0303, "liba.so.1", "/lib/a/liba.so.1"), (0x0303, "libb.so.2", "/lib/b/libb.so.2")])
    cache = parse_ld_cache(good)
    assert (cache.lookup("liba.so.1"), cache.lookup("libb.so.2"), cache.lookup("libc.so.9")) == (
        "/lib/a/liba.so.1", "/lib/b/libb.so.2", None)
    assert [(e.name, e.path) for e in cache.entries] == [("liba.so.1", "/lib/a/liba.so.1"),
                                                          ("libb.so.2", "/lib/b/libb.so.2")]
    with pytest.raises(ValueError):
        parse_ld_cache(_cache_bytes([(0x0303, "liba.so.1", "/lib/a/liba.so.1"), (0x0303, "libb.so.2", 10_000)]))


@pytest.mark.skipif(not Path("/etc/ld.so.cache").exists(), reason="no ld.so.cache")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the flags below are x86-64's (lookup's default machine)")
def test_every_lookup_answers_as_the_entries_in_file_order_do() -> None:
    """A lookup (paths decoded on demand) gives the first compatible entry for its name in file order, a
    glibc-hwcaps copy only where nothing else fits: computed here from the entries."""
    cache = parse_ld_cache(Path("/etc/ld.so.cache").read_bytes())
    assert cache.names() and set(cache.names()) == {e.name for e in cache.entries}
    for name in cache.names():
        same = [e for e in cache.entries if e.name == name and e.flags & 0xFF == 0x03 and e.flags & 0xFF00 == 0x0300]
        plain = [e.path for e in same if not e.hwcap & (1 << 62)]
        expected = plain[0] if plain else same[0].path if same else None
        assert cache.lookup(name) == expected, name
    assert any(cache.lookup(name) for name in cache.names())  # something was compared, not None against None
