"""Analyses of `ortfix explain` for messages about the platform rather than a CUDA library: `glibcxx` (which GCC a
GLIBCXX_3.4.N symbol version comes from, which glibc a GLIBC_2.N one needs), `wheel-platform` (what uv's "only has
wheels for the following platforms" hint and pip's "is not a supported wheel" mean: the architecture, the manylinux
glibc, the tags in a wheel's file name) and `wsl` (whether this machine is WSL2, with facts)."""

from __future__ import annotations

import re

from ortfix.explain.context import AnalysisContext

# The GCC release whose libstdc++ first exported each GLIBCXX_3.4.N (GCC's libstdc++ ABI policy, "abi.html").
_GLIBCXX_GCC = {19: "4.8.3", 20: "4.9", 21: "5", 22: "6", 23: "7.1", 24: "7.2", 25: "8", 26: "9.1", 27: "9.2",
                28: "9.3 / 10", 29: "11", 30: "12", 31: "13.1", 32: "13.2", 33: "14", 34: "15"}
_MANYLINUX = re.compile(r"manylinux_(?P<major>\d+)_(?P<minor>\d+)_(?P<arch>\w+)")
_WHEEL = re.compile(r"(?:^|[\\/])(?P<name>[^-\\/]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-"
                    r"(?P<plat>[^-]+)\.whl$")


def glibcxx(ctx: AnalysisContext) -> list[str]:
    """The symbol version a module needs, what it says about its compiler or glibc, and the libstdc++ that was
    loaded instead (a conda environment's own, when the path shows it)."""
    g = ctx.groups
    out: list[str] = []
    cxx = re.fullmatch(r"GLIBCXX_3\.4\.(\d+)", g.get("symver", ""))
    glibc = re.fullmatch(r"GLIBC_(2\.\d+)", g.get("symver", ""))
    if cxx:
        gcc = _GLIBCXX_GCC.get(int(cxx.group(1)))
        out.append(f"{cxx.group(0)} first appeared in the libstdc++ of GCC {gcc}: the module was built with that GCC "
                   "or a newer one, and the libstdc++.so.6 loaded first is older." if gcc else
                   f"{cxx.group(0)} is newer than any GCC ortfix knows: the libstdc++.so.6 loaded first is older "
                   "than the one the module was built with.")
    elif glibc:
        out.append(f"The module needs glibc {glibc.group(1)} or newer and this system's glibc is older: use a build "
                   "whose manylinux tag fits this glibc, or a newer OS or container image.")
    loaded = g.get("loaded", "")
    if "conda" in loaded or "/envs/" in loaded or "/bin/../lib/" in loaded:
        out.append(f"The libstdc++ loaded is the conda environment's own ({loaded}), which conda puts before the "
                   "system's: update it in the environment (`conda install -c conda-forge libstdcxx-ng`).")
    if ctx.facts is not None and ctx.facts.probe.glibc:
        out.append(f"This machine's glibc is {ctx.facts.probe.glibc}.")
    return out


def _uv_platform(here: str, available: str, version: str) -> list[str]:
    m = _MANYLINUX.search(here)
    if m is None:
        return []
    arch, glibc = m.group("arch"), f"{m.group('major')}.{m.group('minor')}"
    offered = [t for t in _MANYLINUX.finditer(available) if t.group("arch") == arch]
    if not offered:
        if arch == "aarch64":
            return [f"This is Linux aarch64 and onnxruntime-gpu {version} has no aarch64 wheel: Linux aarch64 wheels "
                    "exist only from 1.29. On a Jetson use the onnxruntime-gpu build for your JetPack (NVIDIA's "
                    "JetPack index or the Jetson Zoo wheels); uv needs that index, or a marker that keeps "
                    "onnxruntime-gpu to x86_64 (`platform_machine == 'x86_64'`)."]
        return [f"onnxruntime-gpu {version} has no wheel for {arch}."]
    needs = " / ".join(f"glibc {t.group('major')}.{t.group('minor')} (manylinux_{t.group('major')}_"
                       f"{t.group('minor')})" for t in offered)
    return [f"This machine has glibc {glibc} (uv says manylinux_{m.group('major')}_{m.group('minor')}), and "
            f"onnxruntime-gpu {version}'s {arch} wheels need {needs}: the OS (or container image) is too old for "
            "them; a newer distribution (RHEL 8 / Ubuntu 18.10 or later for 2.28) installs them."]


def _wheel_file(wheel: str, python_tag: str | None) -> list[str]:
    m = _WHEEL.search(wheel)
    if m is None:
        return []
    py, abi, plat = m.group("py"), m.group("abi"), m.group("plat")
    out = [f"pip reads a wheel's tags from its file name: Python {py}, ABI {abi}, platform {plat}; it installs the "
           "file only when all three are tags this interpreter supports."]
    old_abi = re.fullmatch(r"cp3(\d+)m", abi)
    if old_abi and int(old_abi.group(1)) >= 8:
        out.append(f"CPython 3.8 and later have no 'm' ABI tag, so {abi} fits no interpreter: the file was renamed "
                   f"(for example by `wget -O`); give it its real tags ({py}-{py}).")
    if python_tag and python_tag not in (py, *py.split(".")):
        out.append(f"This environment's Python is {python_tag}, the wheel's {py}.")
    return out


def wheel_platform(ctx: AnalysisContext) -> list[str]:
    """uv's platform hint (groups `here`, `available`, `version`) or pip's unsupported wheel (group `wheel`)."""
    g = ctx.groups
    if "here" in g:
        return _uv_platform(g["here"], g.get("available", ""), g.get("version", "this release"))
    if "wheel" in g:
        return _wheel_file(g["wheel"], ctx.facts.probe.python_tag if ctx.facts else None)
    return []


def wsl(ctx: AnalysisContext) -> list[str]:
    """With facts: whether this machine is WSL2, where the driver's libcuda lives."""
    if ctx.facts is None:
        return []
    if ctx.facts.probe.wsl:
        return ["This machine is WSL2: the driver's libcuda.so.1 (and an unversioned libcuda.so) are in "
                "/usr/lib/wsl/lib, mounted from Windows."]
    return ["This machine is not WSL2, so the message was printed elsewhere (or the driver here is a Linux one)."]
