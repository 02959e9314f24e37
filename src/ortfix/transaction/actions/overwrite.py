"""What an install may overwrite, found before it runs: exactly the files of local wheels, else every file under the
top-level folder a distribution's name suggests. The pip-install handler saves those aside first (hard links), so a
rollback can put the old bytes back."""

from __future__ import annotations

import contextlib
import os
import re
import zipfile
from collections.abc import Iterable, Mapping

from packaging.utils import canonicalize_name

from ortfix.errors import OrtfixError
from ortfix.transaction.actions.base import TargetEnv
from ortfix.transaction.actions.resolve import ResolvedJson, local_file
from ortfix.transaction.actions.snapshot import SnapshotRow


def overwrite_candidates(env: TargetEnv, resolution: Iterable[ResolvedJson], requirements: Iterable[str],
                         before: Mapping[str, SnapshotRow]) -> list[str]:
    """Files in the snapshot `before` (rel paths) that the install may overwrite: exactly those of local wheels, else
    every file under the top-level folder a distribution's name suggests (nvidia/ for the NVIDIA wheels)."""
    wanted: set[str] = set()
    guesses: set[str] = set()
    for item in resolution:
        if not isinstance(item, dict):
            continue
        url = item.get("url")
        local = local_file(url if isinstance(url, str) else None)
        if local and local.endswith(".whl"):
            for p in _wheel_targets(env, local):
                with contextlib.suppress(OrtfixError):
                    wanted.add(env.rel(p))
        guesses.add(_top_level_guess(str(item.get("name", ""))))
    for name in requirements:
        guesses.add(_top_level_guess(re.split(r"[<>=!~;\[ ]", str(name), maxsplit=1)[0]))
    tops = {env.rel(os.path.join(d, g)) for d in env.site_dirs for g in guesses if g}
    out = []
    for rel, meta in before.items():
        if meta[0] != "f":
            continue
        if rel in wanted or any(rel.startswith(t + "/") for t in tops):
            out.append(rel)
    return sorted(out)


def _top_level_guess(name: str) -> str:
    # nvidia-cublas-cu12 → nvidia, onnxruntime-gpu → onnxruntime: the folder a wheel of that name most likely writes.
    return re.split(r"[-_.]", canonicalize_name(name))[0]


def _wheel_targets(env: TargetEnv, wheel: str) -> list[str]:
    """Where pip would put each file of a local wheel (purelib/platlib root, .data/scripts → bin, .data/<scheme>)."""
    out = []
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            wheel_meta = next((n for n in names if n.endswith(".dist-info/WHEEL") and n.count("/") == 1), None)
            purelib = b"Root-Is-Purelib: true" in zf.read(wheel_meta) if wheel_meta else True
    except (OSError, zipfile.BadZipFile, KeyError):
        return []
    root = env.purelib if purelib else env.platlib
    for n in names:
        if n.endswith("/"):
            continue
        parts = n.split("/")
        if parts[0].endswith(".data") and len(parts) > 2:
            base = {"scripts": env.scripts, "purelib": env.purelib, "platlib": env.platlib}.get(parts[1])
            if base is None:
                continue
            out.append(os.path.join(base, *parts[2:]))
        else:
            out.append(os.path.join(root, *parts))
    return out
