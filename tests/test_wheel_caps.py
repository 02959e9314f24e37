"""Version caps for NVIDIA wheels (Matrix.wheel_requirement) against what the index has.

The expectations are not computed by the code under test: which CUDA minor a wheel version ships with is copied below
from the `cuda-toolkit` metapackage's METADATA (Requires-Dist pins) and from the CUDA 11.7 Update 1 package set; which
CUDA a driver supports, from the CUDA release notes' driver table. The realwheels tests ask real pip."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from clitools import REPO
from ortfix.compat.load import load_matrix
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import WheelSpec
from support.resolve import resolved

MATRIX: Matrix = load_matrix(REPO / "compat", use_cache=False)


def _req(wheel: WheelSpec, driver: str | None, os_name: str = "linux", machine: str = "x86_64") -> str:
    return MATRIX.wheel_requirement(wheel, driver, os_name, machine).requirement



WHEELS: list[WheelSpec] = [w for c in MATRIX.cuda.values() for w in c.wheels] + [r.wheel for r in MATRIX.cudnn]

# A driver per band, with the CUDA it supports (GA drivers of the CUDA release notes' "CUDA Toolkit and Corresponding
# Driver Versions" table).
BANDS: dict[str, str] = {
    "450.80.02": "11.0", "470.57.02": "11.4", "515.43.04": "11.7", "520.61.05": "11.8", "525.60.13": "12.0",
    "535.54.03": "12.2", "550.54.14": "12.4", "570.26": "12.8", "575.51.03": "12.9", "580.65.06": "13.0",
    "590.44.01": "13.1",
}
PLATFORMS = [("linux", "x86_64", "linux_x86_64"), ("linux", "aarch64", "linux_aarch64"),
             ("windows", "AMD64", "win_amd64")]

# Components pinned by cuda-toolkit releases on the index (Requires-Dist of their METADATA, read 2026-11-23), and the
# CUDA 11.7 Update 1 versions (the index has no cuda-toolkit before 11.8.0).
TOOLKIT: dict[str, dict[str, str]] = {
    "11.7.1": {"nvidia-cuda-runtime-cu11": "11.7.99", "nvidia-cublas-cu11": "11.10.3.66",
               "nvidia-cufft-cu11": "10.7.2.91", "nvidia-curand-cu11": "10.2.10.91",
               "nvidia-cuda-nvrtc-cu11": "11.7.99"},
    "11.8.0": {"nvidia-cuda-runtime-cu11": "11.8.89", "nvidia-cublas-cu11": "11.11.3.6",
               "nvidia-cufft-cu11": "10.9.0.58", "nvidia-curand-cu11": "10.3.0.86",
               "nvidia-cuda-nvrtc-cu11": "11.8.89"},
    "12.0.1": {"nvidia-cuda-runtime-cu12": "12.0.146", "nvidia-cublas-cu12": "12.0.2.224",
               "nvidia-cufft-cu12": "11.0.1.95", "nvidia-curand-cu12": "10.3.1.124",
               "nvidia-cuda-nvrtc-cu12": "12.0.140", "nvidia-nvjitlink-cu12": "12.0.140"},
    "12.2.2": {"nvidia-cuda-runtime-cu12": "12.2.140", "nvidia-cublas-cu12": "12.2.5.6",
               "nvidia-cufft-cu12": "11.0.8.103", "nvidia-curand-cu12": "10.3.3.141",
               "nvidia-cuda-nvrtc-cu12": "12.2.140", "nvidia-nvjitlink-cu12": "12.2.140"},
    "12.4.1": {"nvidia-cuda-runtime-cu12": "12.4.127", "nvidia-cublas-cu12": "12.4.5.8",
               "nvidia-cufft-cu12": "11.2.1.3", "nvidia-curand-cu12": "10.3.5.147",
               "nvidia-cuda-nvrtc-cu12": "12.4.127", "nvidia-nvjitlink-cu12": "12.4.127"},
    "12.8.1": {"nvidia-cuda-runtime-cu12": "12.8.90", "nvidia-cublas-cu12": "12.8.4.1",
               "nvidia-cufft-cu12": "11.3.3.83", "nvidia-curand-cu12": "10.3.9.90",
               "nvidia-cuda-nvrtc-cu12": "12.8.93", "nvidia-nvjitlink-cu12": "12.8.93"},
    "12.9.1": {"nvidia-cuda-runtime-cu12": "12.9.79", "nvidia-cublas-cu12": "12.9.1.4",
               "nvidia-cufft-cu12": "11.4.1.4", "nvidia-curand-cu12": "10.3.10.19",
               "nvidia-cuda-nvrtc-cu12": "12.9.86", "nvidia-nvjitlink-cu12": "12.9.86"},
    "13.0.2": {"nvidia-cuda-runtime": "13.0.96", "nvidia-cublas": "13.1.0.3", "nvidia-cufft": "12.0.0.61",
               "nvidia-curand": "10.4.0.35", "nvidia-cuda-nvrtc": "13.0.88", "nvidia-nvjitlink": "13.0.88"},
    "13.1.1": {"nvidia-cuda-runtime": "13.1.80", "nvidia-cublas": "13.2.1.1", "nvidia-cufft": "12.1.0.78",
               "nvidia-curand": "10.4.1.81", "nvidia-cuda-nvrtc": "13.1.115", "nvidia-nvjitlink": "13.1.115"},
    "13.4.2": {"nvidia-cuda-runtime": "13.4.92", "nvidia-cublas": "13.8.0.4", "nvidia-cufft": "12.4.0.43",
               "nvidia-curand": "10.4.4.72", "nvidia-cuda-nvrtc": "13.4.92", "nvidia-nvjitlink": "13.4.92"},
}

# What pip should pick on Linux x86_64 for NVRTC, whose PTX the driver compiles: the newest NVRTC of the newest CUDA
# minor the driver supports (TOOLKIT above). None: no NVRTC is old enough, the requirement stays uncapped with a note
# naming the driver the oldest one needs.
NVRTC: dict[tuple[str, str], tuple[str | None, str | None]] = {
    ("450.80.02", "nvidia-cuda-nvrtc-cu11"): (None, "515.43.04"),
    ("470.57.02", "nvidia-cuda-nvrtc-cu11"): (None, "515.43.04"),
    ("515.43.04", "nvidia-cuda-nvrtc-cu11"): ("11.7.99", None),
    ("520.61.05", "nvidia-cuda-nvrtc-cu11"): ("11.8.89", None),
    ("525.60.13", "nvidia-cuda-nvrtc-cu12"): ("12.0.140", None),
    ("535.54.03", "nvidia-cuda-nvrtc-cu12"): ("12.2.140", None),
    ("550.54.14", "nvidia-cuda-nvrtc-cu12"): ("12.4.127", None),
    ("570.26", "nvidia-cuda-nvrtc-cu12"): ("12.8.93", None),
    ("575.51.03", "nvidia-cuda-nvrtc-cu12"): ("12.9.86", None),
    ("575.51.03", "nvidia-cuda-nvrtc"): (None, "580.65.06"),
    ("580.65.06", "nvidia-cuda-nvrtc"): ("13.0.88", None),
    ("590.44.01", "nvidia-cuda-nvrtc"): ("13.1.115", None),
}
DRIVERS: list[str] = sorted(BANDS, key=lambda d: Version(d))
RELEASES: list[str] = sorted(TOOLKIT, key=lambda r: Version(r))
# Minor-version compatibility: a driver >= the major's minimum runs every other wheel of that major uncapped.
MVC = {11: "450.80.02", 12: "525.60.13", 13: "580"}


def _wheel(distribution: str, specifier: str | None = None) -> WheelSpec:
    found = [w for w in WHEELS if w.distribution == distribution and specifier in (None, w.specifier)]
    assert len(found) == 1, (distribution, specifier, found)
    return found[0]


def _on(wheel: WheelSpec, platform: str) -> list[Version]:
    """Published versions of the wheel that have a file for `platform`, read straight off the data."""
    assert wheel.published is not None
    missing = set(wheel.published.not_on.get(platform, ()))
    return [Version(v) for g in wheel.published.by_cuda for v in g.versions if v not in missing]


def _minor_of(wheel: WheelSpec, version: str) -> str:
    assert wheel.published is not None
    hits = [g.cuda for g in wheel.published.by_cuda if version in g.versions]
    assert hits, f"{wheel.distribution} {version} is not in the data"
    return hits[0]


def _picks(requirement: str, wheel: WheelSpec, platform: str) -> list[Version]:
    req = Requirement(requirement)
    assert req.name == wheel.distribution
    return [v for v in _on(wheel, platform) if req.specifier.contains(v, prereleases=True)]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize(("os_name", "machine", "platform"), PLATFORMS)
def test_every_cap_admits_a_published_version(driver: str, os_name: str, machine: str, platform: str) -> None:
    for wheel in WHEELS:
        req = MATRIX.wheel_requirement(wheel, driver, os_name, machine)
        picks = _picks(req.requirement, wheel, platform)  # parses, and names the distribution
        if req.cap is None:
            assert req.requirement == wheel.distribution + wheel.specifier
        else:
            assert req.requirement == f"{wheel.distribution}{wheel.specifier},{req.cap}"
            assert picks, f"{req.requirement} admits no published {platform} wheel"
            assert [str(v) for v in picks] == list(req.admitted)
        if not picks:
            assert req.note, f"{req.requirement}: nothing for {platform} and no note"


@pytest.mark.parametrize(("band", "distribution"), sorted(NVRTC))
def test_nvrtc_is_capped_to_the_cuda_of_the_driver(band: str, distribution: str) -> None:
    expected, needs = NVRTC[(band, distribution)]
    wheel = _wheel(distribution)
    req = MATRIX.wheel_requirement(wheel, band)
    picks = _picks(req.requirement, wheel, "linux_x86_64")
    if expected is None:
        assert req.cap is None and req.note and f"driver >= {needs}" in req.note, req
    else:
        assert req.note is None
        assert max(picks) == Version(expected), req.requirement
        assert Version(_minor_of(wheel, expected)) <= Version(BANDS[band])


@pytest.mark.parametrize("band", DRIVERS)
def test_minor_version_compatibility_leaves_other_wheels_uncapped(band: str) -> None:
    for wheel in WHEELS:
        if wheel.ptx_jit or wheel.cuda_major is None:
            continue
        req = MATRIX.wheel_requirement(wheel, band)
        covered = Version(band) >= Version(MVC[wheel.cuda_major])
        floor = wheel.published.by_cuda[0].driver.get("linux") if wheel.published else None
        if covered and not (floor and Version(band) < Version(floor)):
            assert req.requirement == wheel.distribution + wheel.specifier and req.note is None, req
        else:  # the major (or this cuDNN) does not run at all: nothing to cap to
            assert req.cap is None and req.note and "needs driver >= " in req.note, req


def test_the_issue_bands() -> None:
    """plan --driver 470.57.02 asked for nvidia-cublas-cu11~=11.0,<11.5: no cuBLAS 11.x below 11.5 exists."""
    cublas = _req(_wheel("nvidia-cublas-cu11"), "470.57.02")
    assert cublas == "nvidia-cublas-cu11~=11.0"
    assert _req(_wheel("nvidia-cuda-runtime-cu11"), "470.57.02") == "nvidia-cuda-runtime-cu11~=11.0"
    # 525.60.13 (CUDA 12.0): the same rule for cuBLAS, cudart, cuFFT, nvJitLink, cuRAND and cuDNN; NVRTC capped.
    for name, specifier in (("nvidia-cublas-cu12", "~=12.0"), ("nvidia-cuda-runtime-cu12", "~=12.0"),
                            ("nvidia-cufft-cu12", "~=11.0"), ("nvidia-nvjitlink-cu12", "~=12.0"),
                            ("nvidia-curand-cu12", "~=10.0")):
        assert _req(_wheel(name), "525.60.13") == name + specifier
    assert _req(_wheel("nvidia-cudnn-cu12", "~=9.0"), "525.60.13") == "nvidia-cudnn-cu12~=9.0"
    assert _req(_wheel("nvidia-cuda-nvrtc-cu12"), "525.60.13") == "nvidia-cuda-nvrtc-cu12~=12.0,<12.1"
    # 575.51.03 supports CUDA 12.9: no CUDA 13 wheel runs, none is capped, and the note names the driver.
    req = MATRIX.wheel_requirement(_wheel("nvidia-cudnn-cu13"), "575.51.03")
    assert req.requirement == "nvidia-cudnn-cu13~=9.0" and req.note and "580.65.06" in req.note


@pytest.mark.parametrize("release", RELEASES)
def test_data_puts_each_toolkit_component_in_its_minor(release: str) -> None:
    minor = ".".join(release.split(".")[:2])
    for distribution, version in TOOLKIT[release].items():
        assert _minor_of(_wheel(distribution), version) == minor, (distribution, version)


def test_aarch64_without_an_old_enough_wheel_is_left_uncapped() -> None:
    # CUDA 12.2's NVRTC has no aarch64 wheel (the first is 12.3.107): no cap, and the note says why.
    req = MATRIX.wheel_requirement(_wheel("nvidia-cuda-nvrtc-cu12"), "535.54.03", "linux", "aarch64")
    assert req.requirement == "nvidia-cuda-nvrtc-cu12~=12.0" and req.cap is None
    assert req.note and "linux_aarch64" in req.note and "12.3.107" in req.note
    assert _req(_wheel("nvidia-cuda-nvrtc-cu12"), "550.54.14", "linux", "aarch64") \
        == "nvidia-cuda-nvrtc-cu12~=12.0,<12.5"


def test_windows_uses_the_windows_driver_column() -> None:
    nvrtc = _wheel("nvidia-cuda-nvrtc-cu12")
    # 536.25 is CUDA 12.2's Windows driver (535.54.03 on Linux).
    assert _req(nvrtc, "536.25", "windows", "AMD64") == "nvidia-cuda-nvrtc-cu12~=12.0,<12.3"
    assert _req(nvrtc, "536.25", "linux", "x86_64") == "nvidia-cuda-nvrtc-cu12~=12.0,<12.3"
    # 527.41 runs cuDNN 9 for CUDA 12 on Windows (support matrix), below the CUDA 12 minimum of 528.33 for the rest.
    cudnn = MATRIX.wheel_requirement(_wheel("nvidia-cudnn-cu12", "~=9.0"), "527.41", "windows", "AMD64")
    assert cudnn.requirement == "nvidia-cudnn-cu12~=9.0" and cudnn.note is None


def test_no_driver_or_no_data_is_the_bare_specifier() -> None:
    wheel = _wheel("nvidia-cuda-nvrtc-cu12")
    assert _req(wheel, None) == "nvidia-cuda-nvrtc-cu12~=12.0"
    bare = WheelSpec("nvidia-cuda-nvrtc-cu12", "~=12.0", ("libnvrtc.so.12",), "nvidia/cuda_nvrtc/lib", cuda_major=12,
                     ptx_jit=True)
    assert _req(bare, "525.60.13") == "nvidia-cuda-nvrtc-cu12~=12.0"


# -- against the index ----------------------------------------------------------------------------------------------

REAL_BANDS = ("470.57.02", "515.43.04", "525.60.13", "550.54.14", "580.65.06", "590.44.01")


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], capture_output=True,
                          text=True, timeout=900, check=False)


@pytest.mark.realwheels
@pytest.mark.parametrize("band", REAL_BANDS)
def test_pip_resolves_every_requirement_to_an_allowed_minor(band: str) -> None:
    supports = Version(BANDS[band])
    wheels = [w for w in WHEELS if w.cuda_major == supports.major]  # the band's own major: what plan asks for there
    versions = resolved(MATRIX.wheel_requirement(w, band).requirement for w in wheels)  # one pip run, shared
    for wheel in wheels:
        req = MATRIX.wheel_requirement(wheel, band)
        version = versions[req.requirement]
        assert version is not None, req.requirement  # pip picked exactly one wheel for it
        minor = Version(_minor_of(wheel, version))  # the index gave a version the data knows
        if wheel.ptx_jit:
            expected, _ = NVRTC.get((band, wheel.distribution), (None, None))
            if expected is not None:
                assert version == expected, (req.requirement, version)
                assert minor <= supports
        else:
            assert minor.major == wheel.cuda_major


@pytest.mark.realwheels
def test_data_lists_what_the_index_has() -> None:
    """Every version the index offers this machine (Linux x86_64) within the specifier is in the data, and no other
    (scripts/wheel_caps.py --write updates the data)."""
    for wheel in WHEELS:
        proc = _pip("index", "versions", wheel.distribution)
        assert proc.returncode == 0, proc.stderr
        line = next(x for x in proc.stdout.splitlines() if x.startswith("Available versions:"))
        offered = {Version(v.strip()) for v in line.split(":", 1)[1].split(",")}
        spec = Requirement(wheel.distribution + wheel.specifier).specifier
        assert {v for v in offered if spec.contains(v, prereleases=True)} == set(_on(wheel, "linux_x86_64")), \
            f"{wheel.distribution}: run scripts/wheel_caps.py --write"


@pytest.mark.realwheels
@pytest.mark.parametrize("release", ["11.8.0", "12.0.1", "12.4.1", "12.9.1", "13.0.2", "13.4.2"])
def test_cuda_toolkit_metadata_agrees(release: str) -> None:
    """The cuda-toolkit metapackage's own pins put each component in the minor the data says (and the table above)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = _pip("download", "--no-deps", "--only-binary=:all:", "--quiet", "-d", tmp, f"cuda-toolkit=={release}")
        assert proc.returncode == 0, proc.stderr
        [whl] = Path(tmp).glob("cuda_toolkit-*.whl")
        with zipfile.ZipFile(whl) as zf:
            meta = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    pinned: dict[str, str] = {}
    for line in meta.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            for spec in req.specifier:
                if spec.operator in ("==", ">="):
                    pinned[req.name] = spec.version.removesuffix(".*")
    names = {w.distribution for w in WHEELS if w.published and not w.distribution.startswith("nvidia-cudnn")}
    minor = ".".join(release.split(".")[:2])
    checked = 0
    for name in sorted(names & set(pinned)):
        assert _minor_of(_wheel(name), pinned[name]) == minor, (name, pinned[name])
        checked += 1
    assert checked >= 5
    for name, version in TOOLKIT.get(release, {}).items():
        assert pinned.get(name) == version, (release, name)
