"""The platform seam: the Linux platform object satisfies the Platform Protocol and answers exactly as the modules it
delegates to do, on this machine's real ld.so.cache, ld.so and ELF files."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ortfix.errors import OrtfixError
from ortfix.system.linux.elfcache import ElfReader
from ortfix.system.linux.ldcache import load_ld_cache
from ortfix.system.linux.ldso import find_interpreter, system_search_dirs
from ortfix.system.linux.platform import LinuxPlatform
from ortfix.system.loader import LinuxLoader, LoaderConfig
from ortfix.system.platform import Platform
from ortfix.system.platforms import platform_for
from ortfix.target.probe import ProbeFacts, run_probe

pytestmark = pytest.mark.skipif(sys.platform != "linux" or find_interpreter() is None, reason="needs glibc's ld.so")


@pytest.fixture(scope="module")
def probe() -> ProbeFacts:
    return run_probe(Path(sys.executable))


def test_the_linux_platform_is_a_platform() -> None:
    typed: Platform = LinuxPlatform()  # mypy checks every member's signature here
    assert isinstance(typed, Platform)
    assert isinstance(platform_for(sys.platform), LinuxPlatform)


def test_an_unsupported_platform_is_one_line() -> None:
    with pytest.raises(OrtfixError, match=r"^Darwin is not supported yet"):
        platform_for("darwin")


def test_library_names_are_read_as_their_sonames_say() -> None:
    plat = LinuxPlatform()
    assert plat.parse_library_name("libcudnn.so.9.1.0") == ("cudnn", (9, 1, 0))
    assert plat.parse_library_name("libcublasLt.so.12") == ("cublasLt", (12,))
    assert plat.parse_library_name("libc.so.6") is None  # not a CUDA/cuDNN/TensorRT library
    assert (plat.library_major("libcudnn.so.9"), plat.library_major("libcufft.so.11")) == (9, 11)
    assert plat.provider_libraries["cuda"] == "libonnxruntime_providers_cuda.so"
    assert "libcuda.so.1" in plat.driver_libraries


def test_the_machine_loader_is_ld_so_and_its_cache() -> None:
    plat = LinuxPlatform()
    machine = plat.machine_loader()
    assert machine.index_source == load_ld_cache().source == "/etc/ld.so.cache"
    assert machine.default_dirs == system_search_dirs(find_interpreter())[0]
    assert plat.ld_cache.entries == load_ld_cache().entries


def test_a_simulated_process_resolves_as_the_loader_does(probe: ProbeFacts, tmp_path: Path) -> None:
    """The platform's fresh process and a LinuxLoader set up by hand give the same answers for the real
    interpreter and for a bare dlopen of real system libraries."""
    interp = find_interpreter()
    assert interp is not None
    dirs, hwcaps = system_search_dirs(interp)
    search = str(tmp_path)
    config = LoaderConfig(ld_library_path=search, cache=load_ld_cache(), default_dirs=dirs, hwcaps_subdirs=hwcaps,
                          cwd=probe.cwd, elf_class=probe.pointer_bits,
                          machine={"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}[probe.machine])
    by_hand = LinuxLoader(config, ElfReader(use_disk=False))
    by_hand.preload(interp)
    ours = LinuxPlatform().new_process(probe, search, ElfReader(use_disk=False))
    executable = os.path.realpath(probe.real_executable)
    assert ours.start_process(executable) == by_hand.start_process(executable)
    assert ours.loaded_paths() == by_hand.loaded_paths()
    for name in ("libc.so.6", "libm.so.6", "libz.so.1", "libnothere.so.7"):
        assert ours.locate(name) == by_hand.locate(name), name
    libc = ours.locate("libc.so.6")
    assert libc.path is not None and os.path.samefile(libc.path, load_ld_cache().lookup("libc.so.6") or "")
