"""The platform seam: the Linux platform object satisfies the Platform Protocol and answers exactly as the modules it
delegates to do, on this machine's real ld.so.cache, ld.so and ELF files."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from factsdata import load_facts
from ortfix.check.codes import FindingCode
from ortfix.check.diagnose import diagnose
from ortfix.compat.load import load_matrix
from ortfix.errors import OrtfixError
from ortfix.plan.make import make_plan
from ortfix.plan.model import PlanOptions
from ortfix.system.linux.elfcache import ElfReader
from ortfix.system.linux.ldcache import load_ld_cache
from ortfix.system.linux.ldso import find_interpreter, system_search_dirs
from ortfix.system.linux.loader import LinuxLoader, LoaderConfig
from ortfix.system.linux.platform import LinuxPlatform
from ortfix.system.platform import HookFile
from ortfix.system.platform_protocols import Platform
from ortfix.system.platforms import PLATFORMS, platform_for
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


class _FakeOsPlatform(LinuxPlatform):
    """A platform for an OS ortfix does not know, registered by the test alone: its own search summary, hook file
    and --hook none advice (the rest as Linux's, so recorded Linux facts can stand in for its target)."""

    system = "FakeOS"
    sys_platform = "fakeos"
    hook_kinds = ("preload",)

    def search_summary(self, search_path: str | None, index_source: str, default_dirs: Sequence[str]) -> str:
        return f"fakeos loader searched: FAKE_LIBRARY_PATH={search_path or '(unset)'}"

    def no_hook_advice(self, paths: Sequence[str]) -> str:
        return "set FAKE_LIBRARY_PATH to " + ":".join(sorted({os.path.dirname(p) for p in paths}))

    def hook_files(self, kind: str, paths: Sequence[str], prefix: str, site: str) -> tuple[HookFile, ...]:
        return (HookFile(os.path.join(site, "_fakeos_hook.py"), "".join(f"{p}\n" for p in paths),
                         f"fakeos hook: {len(paths)} libraries"),)


def test_a_platform_registered_for_a_new_os_reaches_check_and_plan_without_caller_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Adding an OS is one folder plus one registration: here the registration alone, and check's rules and plan's
    # stages answer with the new platform's texts and files, none of Linux's.
    monkeypatch.setitem(PLATFORMS, "fakeos", _FakeOsPlatform)
    plat = platform_for("fakeos")
    assert isinstance(plat, _FakeOsPlatform)
    facts = dataclasses.replace(load_facts("e120"), platform=plat)  # the CUDA 12 wheels installed, not findable
    matrix = load_matrix()
    findings = diagnose(facts, matrix)
    [not_on_path] = [f for f in findings if f.code is FindingCode.LIB_NOT_ON_PATH]
    assert not_on_path.evidence[-1] == "fakeos loader searched: FAKE_LIBRARY_PATH=(unset)"
    plan = make_plan(facts, findings, matrix, PlanOptions(hook="preload")).to_json()
    writes = [a["details"] for a in plan["actions"] if a["kind"] == "write-file"]
    assert [Path(w["path"]).name for w in writes] == ["_fakeos_hook.py"]
    assert "libcudart.so.12" in writes[0]["content"] and "libcudnn.so.9" in writes[0]["content"]
    none = make_plan(facts, findings, matrix, PlanOptions(hook="none")).to_json()
    assert not [a for a in none["actions"] if a["kind"] == "write-file"]
    [note] = [n for n in none["notes"] if "--hook none" in n]
    assert note.startswith("libraries need to be made findable but --hook none was given: set FAKE_LIBRARY_PATH to ")
