#!/usr/bin/env python3
"""Regenerate the `published:` blocks of compat/cuda.yaml: which published versions of each NVIDIA wheel exist, on
which platforms, and which CUDA toolkit minor each belongs to. `Matrix.wheel_requirement` caps wheel versions from them.

Where the facts come from (all through pip and its configuration; no index address is named here):

1. Which versions exist: `pip index versions --only-binary=:all: --python-version 3.11 --platform TAG...` for each
   platform in PLATFORMS. Versions that do not satisfy the wheel's `specifier` are left out (nvidia-cublas-cu11 0.0.1
   is an empty placeholder).
2. Which CUDA minor a version ships with: every release of the `cuda-toolkit` metapackage on the index pins its
   components exactly, per extra (`Requires-Dist: nvidia-cublas-cu12==12.4.5.8.*; ... extra == "cublas"`;
   nvJitLink since 12.8.2 as `>=X,<next major`, X the version it shipped). Each is downloaded with
   `pip download --no-deps` (a 2 kB wheel) and its METADATA read. The index's first cuda-toolkit is 11.8.0.
3. Versions no cuda-toolkit release pins: placed with the CUDA minor of the nearest lower pinned version of the same
   wheel (standalone updates published between two toolkit releases; component versions grow with the toolkit).
   Versions below every pin come from EXTRA_PINS, a hand-checked table that names its source.
4. cuDNN wheels are not part of a toolkit: CUDNN gives, per cuDNN major and CUDA major, the oldest CUDA minor and the
   lowest driver the cuDNN support matrix lists for them.

Usage:
    python scripts/wheel_caps.py            # print what would change
    python scripts/wheel_caps.py --write    # rewrite compat/cuda.yaml (and bump its data_version)
    python scripts/wheel_caps.py --check    # exit 1 when compat/cuda.yaml differs from what the index says now
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parents[1]
CUDA_YAML = REPO / "compat" / "cuda.yaml"


def _manylinux(arch: str, top: int) -> list[str]:
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(17, top + 1)] + [f"manylinux2014_{arch}"]
    if arch == "x86_64":
        tags += ["manylinux_2_12_x86_64", "manylinux2010_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64"]
    return tags


# pip matches --platform tags exactly (it does not widen a manylinux tag to older glibc levels), so every tag a wheel
# may carry is listed. Linux: glibc up to 2.28 (RHEL 8, Ubuntu 20.04 and later have it).
PLATFORMS: dict[str, list[str]] = {
    "linux_x86_64": _manylinux("x86_64", 28),
    "linux_aarch64": _manylinux("aarch64", 28),
    "win_amd64": ["win_amd64"],
}

# Versions older than every cuda-toolkit release on the index (its first is 11.8.0).
EXTRA_PINS: dict[str, dict[str, str]] = {
    "nvidia-cuda-runtime-cu11": {"11.7.99": "11.7"},
    "nvidia-cublas-cu11": {"11.10.3.66": "11.7"},
    "nvidia-cufft-cu11": {"10.7.2.91": "11.7"},
    "nvidia-curand-cu11": {"10.2.10.91": "11.7"},
    "nvidia-cuda-nvrtc-cu11": {"11.7.99": "11.7"},
}
EXTRA_SOURCE = ("CUDA 11.7 Update 1's component versions (NVIDIA's CUDA Linux package repository, 11.7.1 set: "
                "cuda-cudart-11-7 11.7.99, cuda-nvrtc-11-7 11.7.99, libcublas-11-7 11.10.3.66, libcufft-11-7 "
                "10.7.2.91, libcurand-11-7 10.2.10.91)")


@dataclass(frozen=True)
class CudnnRow:
    cuda: str  # oldest CUDA minor of the row
    linux: str  # lowest driver
    windows: str | None  # None: the support matrix gives none (the CUDA major's driver_min applies)
    source: str


# Keyed by (distribution, cuDNN major). Driver columns of the cuDNN support matrix ("NVIDIA Driver Version for Linux /
# for Windows"); the Blackwell-only rows (CUDA 12.8+, >= 570.26) are left out: a driver older than that cannot run a
# Blackwell GPU at all.
CUDNN: dict[tuple[str, int], CudnnRow] = {
    ("nvidia-cudnn-cu11", 8): CudnnRow(
        "11.0", "450.80.02", "452.39",
        "cuDNN support matrix 8.5.0-8.9.x, 'cuDNN 8.x for CUDA 11.x': CUDA 11.0-11.8, driver >= 450.80.02 Linux, "
        ">= 452.39 Windows"),
    ("nvidia-cudnn-cu11", 9): CudnnRow(
        "11.0", "450.80.02", "452.39",
        "cuDNN support matrix 9.0.0-9.10.2, 'cuDNN 9.x for CUDA 11.x': CUDA 11.0-11.8, driver >= 450.80.02 Linux, "
        ">= 452.39 Windows"),
    ("nvidia-cudnn-cu12", 8): CudnnRow(
        "12.0", "525.60.13", "527.41",
        "cuDNN support matrix 8.8.0-8.9.7, 'cuDNN 8.9.x for CUDA 12.x': CUDA 12.0-12.2, driver >= 525.60.13 "
        "Linux, >= 527.41 Windows"),
    ("nvidia-cudnn-cu12", 9): CudnnRow(
        "12.0", "525.60.13", "527.41",
        "cuDNN support matrix 9.0.0, 9.5.x, 9.10.2, 9.17.0, 'cuDNN 9.x for CUDA 12.x': CUDA 12.0-12.9, driver "
        ">= 525.60.13 Linux, >= 527.41 Windows (Blackwell needs CUDA 12.8 and >= 570.26)"),
    ("nvidia-cudnn-cu13", 9): CudnnRow(
        "13.0", "580.65.06", None,
        "cuDNN support matrix 9.17.0, 'cuDNN 9.x for CUDA 13.x': CUDA 13.0-13.1, driver >= 580.65.06 Linux, "
        "Windows N/A"),
}


# -- pip ------------------------------------------------------------------------------------------------------


def _pip(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0 and "No matching distribution" not in proc.stderr:
        raise SystemExit(f"pip {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def index_versions(distribution: str, platform_tags: Sequence[str] = ()) -> list[Version]:
    """What `pip index versions` lists (for these platform tags, or for any platform when none are given)."""
    args = ["index", "versions", distribution]
    if platform_tags:
        args += ["--only-binary=:all:", "--python-version", "3.11"]
        for tag in platform_tags:
            args += ["--platform", tag]
    out = _pip(*args)
    match = re.search(r"^Available versions:(.*)$", out, re.MULTILINE)
    if not match:
        return []
    return sorted(Version(v.strip()) for v in match.group(1).split(",") if v.strip())


@dataclass(frozen=True)
class Pins:
    first: dict[str, dict[Version, Version]]  # distribution -> {pinned version -> first release pinning it}
    releases: dict[str, set[Version]]  # distribution -> every cuda-toolkit release that names it


def toolkit_pins(download_dir: Path) -> Pins:
    """What every cuda-toolkit release on the index pins."""
    pins: dict[str, dict[Version, Version]] = {}
    releases: dict[str, set[Version]] = {}
    for release in index_versions("cuda-toolkit"):
        target = download_dir / str(release)
        _pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(target), f"cuda-toolkit=={release}")
        wheels = sorted(target.glob("cuda_toolkit-*.whl"))
        if not wheels:
            raise SystemExit(f"pip download cuda-toolkit=={release} saved no wheel in {target}")
        with zipfile.ZipFile(wheels[0]) as zf:
            meta = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        for line in meta.splitlines():
            if not line.startswith("Requires-Dist:"):
                continue
            try:
                req = Requirement(line.split(":", 1)[1].strip())
            except InvalidRequirement:
                continue
            releases.setdefault(req.name, set()).add(release)
            for spec in req.specifier:
                if spec.operator in ("==", ">="):  # "==12.4.5.8.*" or ">=13.1.115" (with "<14")
                    try:
                        pinned = Version(spec.version.removesuffix(".*"))
                    except InvalidVersion:
                        continue
                    seen = pins.setdefault(req.name, {}).setdefault(pinned, release)
                    if (seen.major, seen.minor) != (release.major, release.minor):
                        raise SystemExit(f"{req.name} {pinned} is pinned by cuda-toolkit {seen} and {release}")
    return Pins(pins, releases)


# -- the data ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wheel:
    distribution: str
    specifier: str
    cudnn: tuple[str, int] | None  # (distribution, cuDNN major) of a cudnn row


@dataclass(frozen=True)
class Block:
    source: str
    groups: list[tuple[str, list[Version]]]  # (CUDA minor, versions)
    driver: tuple[str, str | None] | None  # cuDNN: (linux, windows)
    not_on: dict[str, list[Version]]


def wheels_of(doc: Mapping[str, object]) -> list[Wheel]:
    out = []
    for cuda in doc["cuda"]:  # type: ignore[attr-defined]
        out += [Wheel(w["distribution"], w["specifier"], None) for w in cuda["wheels"]]
    for row in doc["cudnn"]:  # type: ignore[attr-defined]
        out.append(Wheel(row["distribution"], row["specifier"], (row["distribution"], row["major"])))
    return out


def block_for(wheel: Wheel, pins: Pins, today: str) -> Block:
    spec = SpecifierSet(wheel.specifier)
    per_platform = {p: {v for v in index_versions(wheel.distribution, tags) if v in spec}
                    for p, tags in PLATFORMS.items()}
    every = sorted(set().union(*per_platform.values()))
    if not every:
        raise SystemExit(f"{wheel.distribution}{wheel.specifier}: no published version on any platform")
    not_on = {p: sorted(set(every) - have) for p, have in per_platform.items() if set(every) - have}
    listed = (f"versions and platforms: pip index versions ({', '.join(PLATFORMS)}; manylinux up to glibc 2.28), "
              f"{today}")
    if wheel.cudnn is not None:
        row = CUDNN.get(wheel.cudnn)
        if row is None:
            raise SystemExit(f"{wheel.cudnn}: add its cuDNN support-matrix row to CUDNN in {__file__}")
        return Block(f"{row.source}; {listed}", [(row.cuda, every)], (row.linux, row.windows), not_on)
    pinned = {v: f"{r.major}.{r.minor}" for v, r in pins.first.get(wheel.distribution, {}).items()}
    extra = {Version(v): cuda for v, cuda in EXTRA_PINS.get(wheel.distribution, {}).items()}
    minors: dict[Version, str] = {}
    placed: list[Version] = []
    for version in every:
        if version in pinned:
            minors[version] = pinned[version]
        elif version in extra:
            minors[version] = extra[version]
        else:
            lower = [v for v in pinned if v < version]
            if not lower:
                raise SystemExit(f"{wheel.distribution} {version}: older than every cuda-toolkit pin; add it to "
                                 f"EXTRA_PINS with its source")
            minors[version] = pinned[max(lower)]
            placed.append(version)
    order = [Version(minors[v]) for v in every]
    if order != sorted(order):
        raise SystemExit(f"{wheel.distribution}: versions and CUDA minors do not grow together: {minors}")
    groups: dict[str, list[Version]] = {}
    for version in every:
        groups.setdefault(minors[version], []).append(version)
    releases = sorted(pins.releases.get(wheel.distribution, ()))
    parts = []
    if releases:
        span = f"{releases[0]}-{releases[-1]}"
        if len(releases) == 1:
            span = f"{releases[0]} (its only release for CUDA {releases[0].major})"
        parts.append(f"CUDA minor: the Requires-Dist pins of the cuda-toolkit metapackage on the index, {span}")
    if any(v in extra for v in every):
        parts.append(f"{', '.join(str(v) for v in every if v in extra)}: {EXTRA_SOURCE}")
    if placed:
        parts.append(f"pinned by no cuda-toolkit release, given the CUDA minor of the nearest lower pinned version: "
                     f"{', '.join(map(str, placed))}")
    parts.append(listed)
    return Block("; ".join(parts), list(groups.items()), None, not_on)


# -- YAML text --------------------------------------------------------------------------------------------------


def _flow(items: Iterable[str], first: str, indent: int, width: int = 118) -> list[str]:
    """`first` + a flow sequence of quoted items, wrapped at `width` with continuation lines at `indent`."""
    lines, line = [], first + "["
    quoted = [f'"{i}"' for i in items]
    for n, item in enumerate(quoted):
        piece = item + ("]" if n == len(quoted) - 1 else ", ")
        if len(line) + len(piece.rstrip()) > width and not line.endswith("["):
            lines.append(line.rstrip())
            line = " " * indent
        line += piece
    return [*lines, line]


def render(block: Block, indent: int) -> list[str]:
    pad = " " * indent
    out = [f"{pad}published:", f'{pad}  source: "{block.source}"', f"{pad}  by_cuda:"]
    for cuda, versions in block.groups:
        head = f'{pad}    - cuda: "{cuda}"'
        out.append(head)
        if block.driver is not None:
            linux, windows = block.driver
            win = f', windows: "{windows}"' if windows else ""
            out.append(f'{pad}      driver: {{linux: "{linux}"{win}}}')
        out += _flow(map(str, versions), f"{pad}      versions: ", indent + 7)
    if block.not_on:
        out.append(f"{pad}  not_on:")
        for platform in PLATFORMS:
            if platform in block.not_on:
                out += _flow(map(str, block.not_on[platform]), f"{pad}    {platform}: ", indent + 5)
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def rewrite(text: str, blocks: Sequence[tuple[Wheel, Block]]) -> str:
    """Replace (or add, as the entry's last key) the `published:` block of every wheel entry."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r'^\s*(- )?distribution: "', line)]
    if len(starts) != len(blocks):
        raise SystemExit(f"{CUDA_YAML}: {len(starts)} distribution lines, {len(blocks)} wheels")
    for start, (wheel, block) in reversed(list(zip(starts, blocks))):
        if f'distribution: "{wheel.distribution}"' not in lines[start]:
            raise SystemExit(f"{CUDA_YAML}:{start + 1}: expected {wheel.distribution}")
        key = lines[start].index("distribution")
        end = start + 1  # the entry ends before the next line indented less than its keys
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) >= key):
            end += 1
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        first = next((i for i in range(start, end) if _indent(lines[i]) == key
                      and lines[i].lstrip().startswith("published:")), None)
        if first is None:
            lines[end:end] = render(block, key)
            continue
        last = first + 1
        while last < end and (not lines[last].strip() or _indent(lines[last]) > key):
            last += 1
        lines[first:last] = render(block, key)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite compat/cuda.yaml")
    mode.add_argument("--check", action="store_true", help="exit 1 if compat/cuda.yaml is not up to date")
    args = parser.parse_args(argv)
    text = CUDA_YAML.read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    today = datetime.date.today().isoformat()
    with tempfile.TemporaryDirectory(prefix="wheel-caps-") as tmp:
        pins = toolkit_pins(Path(tmp))
    blocks = [(w, block_for(w, pins, today)) for w in wheels_of(doc)]
    new = rewrite(text, blocks)
    # The listing date alone is not a change.
    def _undated(s: str) -> str:
        return re.sub(r"\), \d{4}-\d{2}-\d{2}\"", '), DATE"', s)

    if _undated(new) == _undated(text):
        print("compat/cuda.yaml: published versions are up to date")
        return 0
    if args.write:
        # data_version never moves back (another script may have bumped it today or later).
        old = str(doc.get("data_version", ""))
        new = re.sub(r'^data_version: "[^"]*"', f'data_version: "{max(old, today.replace("-", "."))}"', new,
                     count=1, flags=re.MULTILINE)
        from ortfix.compat.validate import validate_document
        from ortfix.errors import OrtfixError

        try:  # what ortfix will load: written only when it validates, as `ortfix matrix validate` checks it
            validate_document(new.encode("utf-8"), str(CUDA_YAML))
        except OrtfixError as exc:
            print(f"not written: {exc.one_line()}", file=sys.stderr)
            return 1
        CUDA_YAML.write_text(new, encoding="utf-8")
        print(f"rewrote {CUDA_YAML}")
        return 0
    sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), "cuda.yaml", "index"))
    return 1 if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
