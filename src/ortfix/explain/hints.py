"""Analyses of `ortfix explain` for messages about the platform rather than a CUDA library: `glibcxx` (which GCC a
GLIBCXX_3.4.N symbol version comes from, which glibc a GLIBC_2.N one needs), `wheel-platform` (what uv's "only has
wheels for the following platforms" hint and pip's "is not a supported wheel" mean: the architecture, the manylinux
glibc, the tags in a wheel's file name) and `wsl` (whether this machine is WSL2, with facts)."""

from __future__ import annotations

import re

from ortfix.explain.context import AnalysisContext
from ortfix.i18n import N_, Msg

# The GCC release whose libstdc++ first exported each GLIBCXX_3.4.N (GCC's libstdc++ ABI policy, "abi.html").
_GLIBCXX_GCC = {19: "4.8.3", 20: "4.9", 21: "5", 22: "6", 23: "7.1", 24: "7.2", 25: "8", 26: "9.1", 27: "9.2",
                28: "9.3 / 10", 29: "11", 30: "12", 31: "13.1", 32: "13.2", 33: "14", 34: "15"}
_MANYLINUX = re.compile(r"manylinux_(?P<major>\d+)_(?P<minor>\d+)_(?P<arch>\w+)")
_WHEEL = re.compile(r"(?:^|[\\/])(?P<name>[^-\\/]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-"
                    r"(?P<plat>[^-]+)\.whl$")


def glibcxx(ctx: AnalysisContext) -> list[Msg]:
    """The symbol version a module needs, what it says about its compiler or glibc, and the libstdc++ that was
    loaded instead (a conda environment's own, when the path shows it)."""
    g = ctx.groups
    out: list[Msg] = []
    cxx = re.fullmatch(r"GLIBCXX_3\.4\.(\d+)", g.get("symver", ""))
    glibc = re.fullmatch(r"GLIBC_(2\.\d+)", g.get("symver", ""))
    if cxx:
        gcc = _GLIBCXX_GCC.get(int(cxx.group(1)))
        out.append(Msg(N_("{symbol} first appeared in the libstdc++ of GCC {gcc}: the module was built with that GCC "
                          "or a newer one, and the libstdc++.so.6 loaded first is older."),
                       symbol=cxx.group(0), gcc=gcc)
                   if gcc else
                   Msg(N_("{symbol} is newer than any GCC ortfix knows: the libstdc++.so.6 loaded first is older than "
                          "the one the module was built with."), symbol=cxx.group(0)))
    elif glibc:
        out.append(Msg(N_("The module needs glibc {version} or newer and this system's glibc is older: use a build "
                          "whose manylinux tag fits this glibc, or a newer OS or container image."),
                       version=glibc.group(1)))
    loaded = g.get("loaded", "")
    if "conda" in loaded or "/envs/" in loaded or "/bin/../lib/" in loaded:
        out.append(Msg(N_("The libstdc++ loaded is the conda environment's own ({loaded}), which conda puts before the "
                          "system's: update it in the environment (`conda install -c conda-forge libstdcxx-ng`)."),
                       loaded=loaded))
    if ctx.facts is not None and ctx.facts.probe.glibc:
        out.append(Msg(N_("This machine's glibc is {version}."), version=ctx.facts.probe.glibc))
    return out


def _uv_platform(here: str, available: str, version: str) -> list[Msg]:
    m = _MANYLINUX.search(here)
    if m is None:
        return []
    arch, glibc = m.group("arch"), f"{m.group('major')}.{m.group('minor')}"
    offered = [t for t in _MANYLINUX.finditer(available) if t.group("arch") == arch]
    if not offered:
        if arch == "aarch64":
            return [Msg(N_("This is Linux aarch64 and onnxruntime-gpu {version} has no aarch64 wheel: Linux aarch64 "
                           "wheels exist only from 1.29. On a Jetson use the onnxruntime-gpu build for your JetPack "
                           "(NVIDIA's JetPack index or the Jetson Zoo wheels); uv needs that index, or a marker that "
                           "keeps onnxruntime-gpu to x86_64 (`platform_machine == 'x86_64'`)."), version=version)]
        return [Msg(N_("onnxruntime-gpu {version} has no wheel for {arch}."), version=version, arch=arch)]
    needs = " / ".join(f"glibc {t.group('major')}.{t.group('minor')} (manylinux_{t.group('major')}_"
                       f"{t.group('minor')})" for t in offered)
    return [Msg(N_("This machine has glibc {glibc} (uv says {tag}), and onnxruntime-gpu {version}'s {arch} wheels need "
                   "{needs}: the OS (or container image) is too old for them; a newer distribution (RHEL 8 / Ubuntu "
                   "18.10 or later for 2.28) installs them."), glibc=glibc,
                tag=f"manylinux_{m.group('major')}_{m.group('minor')}", version=version, arch=arch, needs=needs)]


def _wheel_file(wheel: str, python_tag: str | None) -> list[Msg]:
    m = _WHEEL.search(wheel)
    if m is None:
        return []
    py, abi, plat = m.group("py"), m.group("abi"), m.group("plat")
    out = [Msg(N_("pip reads a wheel's tags from its file name: Python {py}, ABI {abi}, platform {plat}; it installs "
                  "the file only when all three are tags this interpreter supports."), py=py, abi=abi, plat=plat)]
    old_abi = re.fullmatch(r"cp3(\d+)m", abi)
    if old_abi and int(old_abi.group(1)) >= 8:
        out.append(Msg(N_("CPython 3.8 and later have no 'm' ABI tag, so {abi} fits no interpreter: the file was "
                          "renamed (for example by `wget -O`); give it its real tags ({py}-{py})."), abi=abi, py=py))
    if python_tag and python_tag not in (py, *py.split(".")):
        out.append(Msg(N_("This environment's Python is {tag}, the wheel's {py}."), tag=python_tag, py=py))
    return out


def wheel_platform(ctx: AnalysisContext) -> list[Msg]:
    """uv's platform hint (groups `here`, `available`, `version`) or pip's unsupported wheel (group `wheel`)."""
    g = ctx.groups
    if "here" in g:
        return _uv_platform(g["here"], g.get("available", ""), g.get("version", "this release"))
    if "wheel" in g:
        return _wheel_file(g["wheel"], ctx.facts.probe.python_tag if ctx.facts else None)
    return []


def wsl(ctx: AnalysisContext) -> list[Msg]:
    """With facts: whether this machine is WSL2, where the driver's libcuda lives."""
    if ctx.facts is None:
        return []
    if ctx.facts.probe.wsl:
        return [Msg(N_("This machine is WSL2: the driver's libcuda.so.1 (and an unversioned libcuda.so) are in "
                       "/usr/lib/wsl/lib, mounted from Windows."))]
    return [Msg(N_("This machine is not WSL2, so the message was printed elsewhere (or the driver here is a Linux "
                   "one)."))]
