"""Helpers for tests that run the real `ortfix check`/`plan` against real venvs built from hermetic wheels."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from clitools import run_ortfix


def check_json(python: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    proc = run_ortfix("check", "--python", str(python), "--json", *extra, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def plan_json(python: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    proc = run_ortfix("plan", "--python", str(python), "--json", *extra, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def codes(doc: dict[str, Any]) -> set[str]:
    return {f["code"] for f in doc["findings"]}


def finding(doc: dict[str, Any], code: str) -> dict[str, Any]:
    for f in doc["findings"]:
        if f["code"] == code:
            return f
    raise AssertionError(f"{code} not in {sorted(codes(doc))}")


def tree_hash(root: Path) -> str:
    """A hash of every file, link and folder under root: proof that nothing was touched."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(filenames + dirnames):
            p = Path(dirpath) / name
            h.update(str(p.relative_to(root)).encode())
            if p.is_symlink():
                h.update(b"L" + os.readlink(p).encode())
            elif p.is_file():
                h.update(p.read_bytes())
    return h.hexdigest()


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def nvidia_lib_path(venv: Path) -> str:
    """LD_LIBRARY_PATH that makes the venv's NVIDIA wheel libraries findable."""
    return ":".join(str(p) for p in sorted((site_packages(venv) / "nvidia").glob("*/lib")))
