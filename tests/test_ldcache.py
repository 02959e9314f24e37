"""Our reading of /etc/ld.so.cache must agree with ldconfig's own."""

from __future__ import annotations

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
