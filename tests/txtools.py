"""Helpers for the transaction tests: run the real `ortfix` command, and compare whole environment trees."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clitools import NEUTRAL
from ortvenvs import cached_venv, linked_copy


def tree_state(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under root → (type, mode, a digest of the content or the link target); `.ortfix` at the top is
    ortfix's own. A digest, not the bytes: a real-wheel venv is GBs, and holding it made a test worker 6.8 GB."""
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
                out[rel] = ("f", stat.S_IMODE(st.st_mode), _digest(p, st))
    return out


# A file's digest by its inode and change time: the state after a rollback reads again only what changed (a 3.3 GB
# real-wheel venv read twice was 12 s of a test). Any change to a file's content or its links moves its ctime (which
# no program can set back); a file replaced is another inode.
_DIGESTS: dict[tuple[int, int, int, int, int], bytes] = {}


def _digest(path: Path, st: os.stat_result) -> bytes:
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _DIGESTS.get(key)
    if known is not None:
        return known
    h = hashlib.sha256()  # sha256 reads 1.7x as fast as blake2b here (SHA extensions)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    _DIGESTS[key] = h.digest()
    return _DIGESTS[key]


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
    """A venv at `venv` with its own pip and the real CPU onnxruntime 1.22.0 from this machine's pip configuration;
    its python. A hard-linked copy (tests/ortvenvs.linked_copy) of one made once per machine in the tests' cache."""
    linked_copy(cached_venv("ortvenv-cpu-pip", "onnxruntime==1.22.0", with_pip=True), venv)
    return venv / "bin" / "python"


# The folders a child's PATH holds in the tests: the system's own, never the caller's. Run from an activated venv, the
# caller's PATH starts with that venv's bin, and ortfix's default target (the python3 on PATH) would be it.
SYSTEM_PATH = os.pathsep.join(["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"])


def pip_venv(template: Path, dest: Path) -> Path:
    """A copy of the venv `template` at `dest`; its python."""
    shutil.copytree(template, dest, symlinks=True)
    return dest / "bin" / "python"


def copy_venv(source: Path, dest: Path) -> Path:
    """A copy of the venv `source` at `dest`; `dest`."""
    shutil.copytree(source, dest, symlinks=True)
    return dest


def pip_config(tmp_path: Path, *find_links: Path, name: str = "pip.conf") -> Path:
    """How a user with an offline wheelhouse configures pip."""
    conf = tmp_path / name
    conf.write_text("[global]\nno-index = true\nfind-links = " + " ".join(str(f) for f in find_links) + "\n")
    return conf


def ortfix_env(conf: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment ortfix runs in: this process's, without pip's, the tests' own or an activated environment's
    variables; PATH the system's folders (SYSTEM_PATH) unless `extra` names one; pip configured by `conf` only."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "ORTFIX_TEST_")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    isolated = tmp_path / "no-pip-config"
    isolated.mkdir(exist_ok=True)
    # Only the test's pip configuration: none of this machine's global or user files.
    env.update(PATH=SYSTEM_PATH, PIP_CONFIG_FILE=str(conf), XDG_CONFIG_HOME=str(isolated),
               XDG_CONFIG_DIRS=str(isolated))
    env.update(extra)
    return env


class GatedWheelhouse:
    """The wheelhouse served over local HTTP as a find-links page, with a gate: a download of `gated` made while pip
    is installing (the journal holds the installer's pid) is held until the test opens the gate. So the test knows
    pip is in the middle of the install when it presses Ctrl-C, however fast or slow the machine is."""

    def __init__(self, root: Path, gated: str, journals: Path) -> None:
        import functools
        import http.server
        import threading

        self.reached = threading.Event()
        self.release = threading.Event()
        gate = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                if gated in self.path and any('"pid"' in j.read_text() for j in journals.glob("*/journal.json")):
                    gate.reached.set()
                    gate.release.wait(120)
                super().do_GET()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      functools.partial(Handler, directory=str(root)))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def pip_env(self, tmp_path: Path) -> dict[str, str]:
        """ortfix's environment with a pip configuration that takes wheels from this server only, uncached (so the
        install downloads again after the preflight's resolution)."""
        conf = tmp_path / "http-pip.conf"
        conf.write_text(f"[global]\nno-index = true\nfind-links = {self.url}\ntrusted-host = 127.0.0.1\n"
                        "no-cache-dir = true\n")
        return ortfix_env(conf, tmp_path)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
