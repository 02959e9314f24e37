"""Host side of the probe: pick the target interpreter, run `_probe.py` inside it, and type what it reports."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ortfix import subproc
from ortfix.errors import OrtfixError
from ortfix.target import resolve_target, start_probe

__all__ = [
    "Dependent",
    "Distribution",
    "OrtDir",
    "ProbeFacts",
    "TorchInfo",
    "finish_probe",
    "parse_probe",
    "resolve_target",
    "run_probe",
    "start_probe",
]

PROBE_SCHEMA = 1


@dataclass(frozen=True)
class Distribution:
    name: str
    normalized: str
    version: str
    location: str
    dist_info: str
    requires: tuple[str, ...]
    installer: str
    files: tuple[tuple[str, str, int | None], ...]  # RECORD rows (path, hash, size), read for ORT packages only


@dataclass(frozen=True)
class Dependent:
    name: str
    version: str
    requires: tuple[str, ...]


@dataclass(frozen=True)
class OrtDir:
    package_dir: str
    location: str
    build_info: Mapping[str, str]
    files: tuple[str, ...]  # shared libraries in onnxruntime/capi

    @property
    def capi(self) -> str:
        return os.path.join(self.package_dir, "capi")

    def lib(self, name: str) -> str | None:
        return os.path.join(self.capi, name) if name in self.files else None

    @property
    def pybind(self) -> str | None:
        for f in self.files:
            if f.startswith("onnxruntime_pybind11_state"):
                return os.path.join(self.capi, f)
        return None


@dataclass(frozen=True)
class TorchInfo:
    dir: str
    version: str | None
    cuda: str | None
    lib_dir: str
    libs: tuple[str, ...]


@dataclass(frozen=True)
class ProbeFacts:
    executable: str
    real_executable: str
    python_version: str
    cache_tag: str
    pointer_bits: int
    has_pip: bool
    system: str
    machine: str
    glibc: str | None
    wsl: bool
    env_kind: str  # venv | conda | system
    prefix: str
    base_prefix: str
    site_packages: tuple[str, ...]
    purelib: str
    platlib: str
    user_site: str | None
    prefix_writable: bool
    environ: Mapping[str, str]
    cwd: str
    sys_path: tuple[str, ...]
    distributions: tuple[Distribution, ...]
    dependents: tuple[Dependent, ...]
    distribution_count: int
    ort_dirs: tuple[OrtDir, ...]
    torch: TorchInfo | None
    report: str = field(default="", repr=False, compare=False)  # the probe's output as it came (checkcache.py)

    def dist(self, normalized: str) -> Distribution | None:
        for d in self.distributions:
            if d.normalized == normalized:
                return d
        return None

    @property
    def python_tag(self) -> str:
        major, minor = self.python_version.split(".")[:2]
        return f"cp{major}{minor}"


def finish_probe(run: subprocess.Popen[str] | subprocess.CompletedProcess[str], python: Path) -> ProbeFacts:
    done = run if isinstance(run, subprocess.CompletedProcess) else subproc.finish(run, timeout=60)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise OrtfixError(f"{python} is not a working Python interpreter (probe exited {done.returncode}: {last})")
    try:
        doc = json.loads(done.stdout)
    except ValueError as exc:
        raise OrtfixError(f"{python} is not a Python interpreter ortfix can inspect (no JSON from the probe)") from exc
    if not isinstance(doc, dict) or doc.get("probe_schema") != PROBE_SCHEMA:
        raise OrtfixError(f"{python}: the probe answered in an unknown format")
    return parse_probe(doc, report=done.stdout)


def run_probe(python: Path) -> ProbeFacts:
    return finish_probe(start_probe(python), python)


def parse_probe(doc: Mapping[str, Any], report: str = "") -> ProbeFacts:
    py, osinfo, env = doc["python"], doc["os"], doc["env"]
    torch = doc.get("torch")
    return ProbeFacts(
        executable=py["executable"],
        real_executable=py["real_executable"],
        python_version=py["version"],
        cache_tag=py.get("cache_tag") or "",
        pointer_bits=int(py.get("pointer_bits", 64)),
        has_pip=bool(py.get("has_pip")),
        system=osinfo["system"],
        machine=osinfo["machine"],
        glibc=osinfo.get("glibc"),
        wsl=bool(osinfo.get("wsl")),
        env_kind=env["kind"],
        prefix=env["prefix"],
        base_prefix=env["base_prefix"],
        site_packages=tuple(env.get("site_packages") or ()),
        purelib=env["purelib"],
        platlib=env["platlib"],
        user_site=env.get("user_site"),
        prefix_writable=bool(env.get("prefix_writable")),
        environ=dict(doc.get("environ") or {}),
        cwd=doc.get("cwd") or "/",
        sys_path=tuple(doc.get("sys_path") or ()),
        distributions=tuple(
            Distribution(
                name=d["name"],
                normalized=d["normalized"],
                version=d["version"],
                location=d["location"],
                dist_info=d["dist_info"],
                requires=tuple(d.get("requires") or ()),
                installer=d.get("installer") or "",
                files=tuple((f[0], f[1], f[2]) for f in d.get("files") or ()),
            )
            for d in doc.get("distributions") or ()
        ),
        dependents=tuple(
            Dependent(name=d["name"], version=d["version"], requires=tuple(d.get("requires") or ()))
            for d in doc.get("dependents") or ()
        ),
        distribution_count=int(doc.get("distribution_count") or 0),
        ort_dirs=tuple(
            OrtDir(package_dir=o["package_dir"], location=o["location"], build_info=dict(o.get("build_info") or {}),
                   files=tuple(o.get("files") or ()))
            for o in doc.get("onnxruntime_dirs") or ()
        ),
        torch=TorchInfo(dir=torch["dir"], version=torch.get("version"), cuda=torch.get("cuda"),
                        lib_dir=torch["lib_dir"], libs=tuple(torch.get("libs") or ())) if torch else None,
        report=report,
    )
