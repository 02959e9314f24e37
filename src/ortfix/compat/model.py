"""The typed rows of the compatibility matrix: an ONNX Runtime build (OrtBuild), a CUDA major with its NVIDIA wheels
(CudaMajor, WheelSpec), a cuDNN wheel (CudnnWheel), which versions of a wheel are published (Published,
WheelVersions), and what to ask pip for (WheelRequirement). compat/load.py builds them from the validated YAML."""

from __future__ import annotations

from collections.abc import Mapping

from ortfix.compat.versions import Version
from ortfix.i18n import Msg
from ortfix.record import field, frozen

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` for mypy only: a check imports this module (speed/__init__.py)
    from typing import Literal

    # Where a build is published: PyPI, the separate feed (configured as an extra index), or nowhere any more.
    IndexName = Literal["default", "alternate", "withdrawn"]


@frozen
class OrtBuild:
    versions: tuple[str, ...]
    package: str
    index: IndexName
    cuda_major: int
    cuda_build: str | None
    cudnn_major: int | None
    cuda_needed: tuple[str, ...]
    cuda_lazy: tuple[str, ...]
    tensorrt_needed: tuple[str, ...]
    compute_capabilities: tuple[str, ...]
    extras: Mapping[str, tuple[str, ...]]
    requires_python: str | None
    python_tags: tuple[str, ...]
    platforms: tuple[str, ...]
    source: str
    note: str | None
    size_mib: tuple[float, float] | None = None  # (download, unpacked) of one measured wheel

    @property
    def newest(self) -> Version:
        return max(Version(v) for v in self.versions)

    def admits_python(self, python_version: str) -> bool:
        """Its Requires-Python admits this Python (an unreadable one admits everything)."""
        if not self.requires_python:
            return True
        # Deferred: packaging.specifiers is needed only when plan or explain asks, not by a plain `ortfix check`.
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            return SpecifierSet(self.requires_python).contains(python_version)
        except InvalidSpecifier:
            return True

    def installs_for(self, python_tag: str, python_version: str, platform: str | None) -> bool:
        """A wheel of this build exists for the interpreter and the platform (`linux_x86_64`), as far as the row says;
        None, a platform no wheel is for (macOS), has none."""
        return (platform is not None and (not self.platforms or platform in self.platforms)
                and (not self.python_tags or python_tag in self.python_tags)
                and self.admits_python(python_version))


@frozen
class WheelVersions:
    """Published versions of a wheel that ship with one CUDA toolkit minor."""

    cuda: str  # "12.4"
    versions: tuple[str, ...]  # ascending
    driver: Mapping[str, str] = field(default_factory=dict)  # lowest driver they need whatever the CUDA minor (cuDNN)


@frozen
class Published:
    """Which versions of a wheel the index has, by CUDA minor (ascending: a later minor only has later versions)."""

    by_cuda: tuple[WheelVersions, ...]
    # platform (compat.platforms.WHEEL_PLATFORMS) -> published versions with no wheel for it
    not_on: Mapping[str, tuple[str, ...]]
    source: str


@frozen
class WheelSpec:
    distribution: str
    specifier: str
    sonames: tuple[str, ...]
    dir: str
    windows_dir: str | None = None  # where the win_amd64 wheel puts its DLLs (site-packages-relative, '/'-separated)
    dlls: tuple[str, ...] = ()  # the DLL file names the win_amd64 wheel installs in windows_dir (empty: none known)
    size_mib: tuple[float, float] | None = None  # (download, unpacked) of one measured wheel
    cuda_major: int | None = None  # the CUDA major whose row (or cuDNN row) lists the wheel
    ptx_jit: bool = False  # hands PTX it generates to the driver to compile: minor-version compatibility does not cover
    published: Published | None = None


@frozen
class WheelRequirement:
    """What to ask pip for: `requirement` = distribution + specifier + `cap` (see Matrix.wheel_requirement)."""

    requirement: str  # "nvidia-cuda-nvrtc-cu12~=12.0,<12.1"
    cap: str | None  # "<12.1"; None when the driver runs every published version, or when no cap can be satisfied
    admitted: tuple[str, ...]  # published versions for the platform that the requirement admits and the driver runs
    note: str | None  # why no cap could be given (no published version runs with this driver), for the user
    note_msg: Msg | None = None  # the same note as a Msg (ortfix/i18n.py): `note` is its English, `.text()` translated


@frozen
class CudaMajor:
    major: int
    driver_min: Mapping[str, str]
    releases: tuple[tuple[str, str, str | None], ...]  # (toolkit version, linux driver, windows driver)
    cc_min: str
    cc_max: str
    wheels: tuple[WheelSpec, ...]
    source: str


@frozen
class CudnnWheel:
    major: int
    cuda_major: int
    wheel: WheelSpec
    cc_min: str | None
    cc_max: str | None
    source: str
