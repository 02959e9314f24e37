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
