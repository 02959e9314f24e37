"""Helpers for the transaction tests: run the real `ortfix` command, and compare whole environment trees."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clitools import NEUTRAL


def tree_state(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under root → (type, mode, content or link target); `.ortfix` at the top is ortfix's own."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d != ".ortfix"]
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            rel = str(p.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("f", stat.S_IMODE(st.st_mode), p.read_bytes())
    return out


def assert_same_tree(before: Mapping[str, tuple[Any, ...]], after: Mapping[str, tuple[Any, ...]]) -> None:
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in before if k in after and before[k] != after[k])
    assert not (added or removed or changed), {"added": added[:10], "removed": removed[:10], "changed": changed[:10]}


def ortfix(*args: str, env: Mapping[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ortfix", *args], capture_output=True, text=True, env=dict(env),
                          stdin=subprocess.DEVNULL, cwd=NEUTRAL, timeout=timeout, check=False)


def ortfix_json(*args: str, env: Mapping[str, str], expect: int = 0) -> dict[str, Any]:
    proc = ortfix(*args, "--json", env=env)
    assert proc.returncode == expect, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str, code: int = 2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("ortfix: error:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


# What libonnxruntime_providers_cuda.so of onnxruntime-gpu 1.22.0 links against from the NVIDIA wheels.
CU12_SONAMES = ["libcublasLt.so.12", "libcublas.so.12", "libcurand.so.10", "libcufft.so.11", "libcudart.so.12",
                "libcudnn.so.9", "libnvrtc.so.12"]


def fresh_process(python: Path, code: str, *, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The target as a user starts it: no variables set by hand, bytecode writing on (as by default)."""
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          env=dict(env) if env is not None else {"PATH": "/usr/bin:/bin"}, check=False)


def load_code(provider: Path | None = None) -> str:
    """A script that imports onnxruntime (so a preload hook fires), loads every CU12 SONAME and prints 'all loaded'."""
    code = f"import ctypes, onnxruntime\nfor n in {CU12_SONAMES!r}:\n    ctypes.CDLL(n)\n"
    if provider is not None:  # the fake provider is a stub: loading it is safe here (never with the real one)
        code += f"ctypes.CDLL({str(provider)!r})\n"
    return code + "print('all loaded')\n"


def real_cpu_venv(venv: Path) -> Path:
    """A venv with its own pip and the real CPU onnxruntime 1.22.0 from this machine's pip configuration; its python."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "onnxruntime==1.22.0"],
                   check=True)
    return python
