"""The compatibility matrix (Matrix) and its queries: the builds of a version, the NVIDIA wheel that ships a library,
the CUDA a driver runs, and the version cap that keeps pip off NVIDIA wheels the driver cannot run."""

from __future__ import annotations

from collections.abc import Mapping

from ortfix.compat.addons import Addons
from ortfix.compat.model import CudaMajor, CudnnWheel, OrtBuild, WheelRequirement, WheelSpec, WheelVersions
from ortfix.compat.platforms import wheel_platform
from ortfix.compat.versions import InvalidVersion, Version, driver_version, same_version
from ortfix.i18n import N_, Msg
from ortfix.record import field, frozen, replace


@frozen
class Matrix:
    builds: tuple[OrtBuild, ...]
    cuda: Mapping[int, CudaMajor]
    cudnn: tuple[CudnnWheel, ...]
    data_version: str
    files: tuple[str, ...] = field(default=())
    widely_deployed_driver: str | None = None  # cuda.yaml's: what a plan with no driver known prefers to run on
    addons: Addons = field(default_factory=Addons)  # addons.yaml's TensorRT and onnxruntime-genai rows (optional file)

    def builds_for(self, version: str) -> list[OrtBuild]:
        try:
            wanted = Version(version)
        except InvalidVersion:
            return []
        return [b for b in self.builds if any(same_version(v, wanted) for v in b.versions)]

    @property
    def nvidia_wheels(self) -> tuple[tuple[int, WheelSpec], ...]:
        """Every NVIDIA pip wheel the matrix knows, CUDA libraries and cuDNN alike, with its CUDA major."""
        return (*((c.major, w) for c in self.cuda.values() for w in c.wheels),
                *((r.cuda_major, r.wheel) for r in self.cudnn))

    def size_estimate(self, distribution: str) -> tuple[float, float] | None:
        """(download, unpacked) MiB of a wheel of `distribution`, the largest any row measured; None if none did."""
        name = distribution.lower().replace("_", "-")
        sizes = [b.size_mib for b in self.builds if b.package == name and b.size_mib]
        sizes += [w.size_mib for _, w in self.nvidia_wheels if w.distribution == name and w.size_mib]
        return max(sizes, key=lambda s: s[1]) if sizes else None

    def cuda_major(self, major: int) -> CudaMajor | None:
        return self.cuda.get(major)

    def cudnn_wheel(self, cudnn_major: int, cuda_major: int) -> CudnnWheel | None:
        for row in self.cudnn:
            if row.major == cudnn_major and row.cuda_major == cuda_major:
                return row
        return None

    def wheel_for_soname(self, soname: str, cuda_major: int, cudnn_major: int | None) -> WheelSpec | None:
        """The NVIDIA pip wheel that ships `soname` for this CUDA (and cuDNN) major."""
        if cudnn_major is not None:
            row = self.cudnn_wheel(cudnn_major, cuda_major)
            if row and soname in row.wheel.sonames:
                return row.wheel
        cuda = self.cuda.get(cuda_major)
        for wheel in cuda.wheels if cuda else ():
            if soname in wheel.sonames:
                return wheel
        return None

    def highest_cuda_for_driver(self, driver: str, os_name: str = "linux") -> Version | None:
        """The newest CUDA toolkit release whose GA driver requirement this driver meets (what nvidia-smi calls the
        driver's 'CUDA Version'); minor-version compatibility may let newer minors of the same major run too."""
        have = driver_version(driver)
        best: Version | None = None
        for cuda in self.cuda.values():
            for version, linux, windows in cuda.releases:
                need = windows if os_name == "windows" else linux
                if need and have >= driver_version(need) and (best is None or Version(version) > best):
                    best = Version(version)
        return best

    def driver_supports_major(self, driver: str, major: int, os_name: str = "linux") -> bool | None:
        cuda = self.cuda.get(major)
        if cuda is None:
            return None
        need = cuda.driver_min.get(os_name) or cuda.driver_min.get("linux")
        return driver_version(driver) >= driver_version(need) if need else None

    def wheel_requirement(self, wheel: WheelSpec, driver: str | None, os_name: str = "linux",
                          machine: str = "x86_64") -> WheelRequirement:
        """Distribution + specifier + a version cap that keeps pip off wheels this driver cannot run.

        plan.make_plan asks for every NVIDIA wheel it installs this way and adds `note` to the plan's notes.

        `os_name` is "linux" or "windows"; `machine` as platform.machine() says it ("x86_64", "aarch64", "AMD64").
        No driver (or no `published` data): the bare distribution + specifier.

        One rule for every wheel, from the `published` data (which versions ship with which CUDA minor):
        a version runs when the driver supports its CUDA minor natively (Matrix.highest_cuda_for_driver), or when
        minor-version compatibility covers it: the driver meets its CUDA major's `driver_min` and the wheel is not
        `ptx_jit`. NVIDIA's CUDA Compatibility guide, "Minor Version Compatibility": from CUDA 11 on, anything built
        with a toolkit of a major family runs on that family's minimum driver, with the caveat "Applications using
        PTX will see runtime issues: applications that compile device code to PTX will not work on older drivers".
        NVRTC (ptx_jit) hands PTX to the driver's JIT compiler, so it must not be newer than the driver's CUDA.
        nvJitLink is not ptx_jit: it links to a cubin itself, and its guide says it is compatible across the
        minors of a major (it must only be >= the toolkit that produced its inputs: cuFFT's LTO kernels), and the
        cuDNN support matrix runs every cuDNN 9 for CUDA 12 on >= 525.60.13 for toolkits 12.0-12.9. A version group
        may also carry its own `driver` floor (the cuDNN support matrix's driver column).

        The cap is `<B`, B the shortest version prefix between the newest version that runs and the oldest one that
        does not, so it admits at least one published version with a wheel for this platform. When none runs (or
        none that runs has a wheel for the platform), no cap is given and `note` says which driver the oldest one
        needs; versions newer than the data knows are not capped (scripts/wheel_caps.py keeps the data current).
        """
        base = wheel.distribution + wheel.specifier
        published = wheel.published
        if not driver or published is None:
            return WheelRequirement(base, None, (), None)
        platform = wheel_platform(os_name, machine)
        missing = set(published.not_on.get(platform, ())) if platform else set()
        # Loading made sure every published version lies inside the wheel's specifier (compat/validate.py).
        rows = [(Version(v), group) for group in published.by_cuda for v in group.versions]
        highest = self.highest_cuda_for_driver(driver, os_name)
        mvc = (not wheel.ptx_jit and wheel.cuda_major is not None
               and self.driver_supports_major(driver, wheel.cuda_major, os_name) is True)
        runs = [(v, g) for v, g in rows if _runs(g, driver, os_name, highest, mvc)]
        here = [str(v) for v, _ in runs if str(v) not in missing]
        if len(runs) == len(rows):
            return _with_note(WheelRequirement(base, None, tuple(here), None),
                              None if here else self._no_wheel(wheel, platform))
        if not here:
            offered = [(v, g) for v, g in rows if str(v) not in missing]
            if not offered:
                return _with_note(WheelRequirement(base, None, (), None), self._no_wheel(wheel, platform))
            oldest, group = offered[0]
            supports = f" (CUDA {highest.major}.{highest.minor})" if highest else ""
            needs = self._needed_driver(wheel, group, os_name)
            if wheel.ptx_jit:
                needs = Msg(N_("{driver} for the driver to compile the PTX it generates"), driver=needs)
            if runs:
                note = Msg(N_("{wheel}: none of the versions driver {driver} runs has a wheel for {platform}, so it is "
                              "left uncapped; the oldest for {platform}, {oldest} (CUDA {cuda}), needs {needs}"),
                           wheel=wheel.distribution, driver=driver, platform=str(platform), oldest=str(oldest),
                           cuda=group.cuda, needs=needs)
            else:
                note = Msg(N_("{wheel}: no published version runs with driver {driver}{supports}, so it is left "
                              "uncapped; the oldest, {oldest} (CUDA {cuda}), needs {needs}"),
                           wheel=wheel.distribution, driver=driver, supports=supports, oldest=str(oldest),
                           cuda=group.cuda, needs=needs)
            return _with_note(WheelRequirement(base, None, (), None), note)
        newest = max(v for v, _ in runs)
        bound = _cap_bound(newest, min(v for v, _ in rows if v > newest))
        return WheelRequirement(f"{base},<{bound}", f"<{bound}", tuple(here), None)

    def _needed_driver(self, wheel: WheelSpec, group: WheelVersions, os_name: str) -> Msg:
        """The lowest driver at which `group` runs, in words."""
        wanted = Version(group.cuda)
        native = [r[2] if os_name == "windows" else r[1] for c in self.cuda.values() for r in c.releases
                  if Version(r[0]).release[:2] == wanted.release[:2]]
        options = [d for d in native if d]
        cuda = self.cuda.get(wheel.cuda_major) if wheel.cuda_major is not None else None
        if cuda is not None and not wheel.ptx_jit:
            mvc = cuda.driver_min.get(os_name) or cuda.driver_min.get("linux")
            options += [mvc] if mvc else []
        if not options:
            return Msg(N_("a driver newer than any this matrix knows (it has no CUDA {cuda} release)"), cuda=group.cuda)
        need = min(options, key=driver_version)
        floor = group.driver.get(os_name)
        if floor and driver_version(floor) > driver_version(need):
            need = floor
        return Msg(N_("driver >= {version}"), version=need)

    @staticmethod
    def _no_wheel(wheel: WheelSpec, platform: str | None) -> Msg:
        return Msg(N_("{requirement}: no published version has a wheel for {platform}"),
                   requirement=wheel.distribution + wheel.specifier, platform=str(platform))


def _runs(group: WheelVersions, driver: str, os_name: str, highest: Version | None, mvc: bool) -> bool:
    """Whether this driver runs the versions of `group`: its own driver floor met, and its CUDA minor supported
    natively or through minor-version compatibility (`mvc`: the wheel's major's driver_min met, not ptx_jit)."""
    floor = group.driver.get(os_name)
    if floor and driver_version(driver) < driver_version(floor):
        return False
    return mvc or (highest is not None and Version(group.cuda) <= highest)


def _cap_bound(newest_ok: Version, oldest_not: Version) -> str:
    """The shortest prefix of `oldest_not` above `newest_ok`: `<12.1` rather than `<12.1.55` (the same versions)."""
    release = oldest_not.release
    for n in range(1, len(release) + 1):
        prefix = ".".join(map(str, release[:n]))
        if Version(prefix) > newest_ok:
            return prefix
    return str(oldest_not)


def _with_note(wanted: WheelRequirement, note: Msg | None) -> WheelRequirement:
    """`wanted` with `note` (English in `note`, the Msg in `note_msg`)."""
    return replace(wanted, note=None if note is None else str(note), note_msg=note)
