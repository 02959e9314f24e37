"""Wheel platform tags as the compatibility matrix names them (`linux_x86_64`, `win_amd64`): the platforms NVIDIA
wheels are published for, and the one function that turns an OS and a machine name into such a tag."""

from __future__ import annotations

# Platforms an NVIDIA wheel is published for (`published.not_on` keys); see Matrix.wheel_requirement.
WHEEL_PLATFORMS = ("linux_x86_64", "linux_aarch64", "win_amd64")

# The names platform.machine() and installers use for one architecture, as a Linux wheel tag spells it.
_LINUX_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
# Windows wheel tags spell the same architectures their own way.
_WINDOWS_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def wheel_platform(system: str, machine: str) -> str | None:
    """The wheel platform tag of a machine: `system` as platform.system() says it (Linux, Windows, Darwin; the
    matrix's lowercase os names "linux" and "windows" too), `machine` as platform.machine() says it ("x86_64",
    "aarch64", "AMD64", "ARM64"). An architecture this table does not know keeps its own name (`linux_ppc64le`).
    None for a system no wheel of the matrix is for (macOS)."""
    name = machine.strip().lower()
    arch = _LINUX_ARCH.get(name, name)
    os_name = system.strip().lower()
    if os_name == "linux":
        return f"linux_{arch}"
    if os_name == "windows":
        return f"win_{_WINDOWS_ARCH.get(arch, arch)}"
    return None
