"""Unit tests of make_plan's stages (plan/make.py `_draft`), each on its own: swap (plan/swap.py), libraries
(plan/needed_libraries.provide_libraries), packages (plan/pip_actions.py), links, hooks and the closing notes
(plan/make.py). Facts recorded in real environments (tests/data/facts/, see its README for how each was built), each
as recorded or with one fact changed. Fast: no venv, no subprocess."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import pytest

from factsdata import load_facts
from ortfix.check.codes import FindingCode
from ortfix.check.diagnose import diagnose, gpu_install
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding
from ortfix.compat.load import load_matrix
from ortfix.errors import OrtfixError
from ortfix.plan.genai import GenaiChange
from ortfix.plan.installer import InstallerChoice
from ortfix.plan.make import closing_notes, hook_stage, link_actions
from ortfix.plan.model import ChosenBuild, PlanOptions
from ortfix.plan.needed_libraries import provide_libraries
from ortfix.plan.pip_actions import installer_notes, pip_changes
from ortfix.plan.swap import Swap, choose_swap
from ortfix.plan.tensorrt import TensorrtChange
from ortfix.system.inventory import LibCopy
from plantools import hook_libraries

MATRIX = load_matrix()
# What the README's recorded environments hold (tests/data/facts/README.md).
GPU_122 = ChosenBuild("onnxruntime-gpu", "1.22.0", 12, 9, "default", ("the test's target",))
GPU_120 = ChosenBuild("onnxruntime-gpu", "1.20.2", 12, 9, "default", ())


def _by_code(findings: Sequence[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in findings:
        out.setdefault(f.code, []).append(f)
    return out


def _swap(facts: Facts, target: ChosenBuild | None, *, alternative: bool = False) -> Swap:
    return choose_swap(facts, _by_code(diagnose(facts, MATRIX)), PlanOptions(), gpu_install(facts), target, (),
                       alternative=alternative)


# --- swap ---------------------------------------------------------------------------------------------------------

def test_swap_stage_replaces_the_cpu_package_by_the_target_and_uninstalls_it() -> None:
    swap = _swap(load_facts("cpu"), GPU_122)  # onnxruntime 1.22.0 only
    assert swap.swap
    assert swap.target == GPU_122
    assert swap.remove == ("onnxruntime",)


def test_swap_stage_keeps_a_working_install_and_makes_it_the_target() -> None:
    swap = _swap(load_facts("e120"), GPU_122)  # onnxruntime-gpu 1.20.2 for CUDA 12, its wheels not findable
    assert not swap.swap
    assert swap.target is not None and (swap.target.version, swap.target.cuda_major) == ("1.20.2", 12)
    assert swap.remove == ()


def test_swap_stage_for_an_alternative_uninstalls_the_installed_build_of_another_version() -> None:
    swap = _swap(load_facts("e120"), GPU_122, alternative=True)
    assert swap.swap and swap.target == GPU_122
    assert swap.remove == ("onnxruntime-gpu",)


# --- libraries ----------------------------------------------------------------------------------------------------

def test_libraries_stage_hooks_the_installed_wheels_and_installs_nothing() -> None:
    facts = load_facts("e120")
    provided = provide_libraries(facts, MATRIX, _by_code(diagnose(facts, MATRIX)), GPU_120, gpu_install(facts), False)
    assert provided.to_install == {}
    assert provided.missing == ()
    cudnn = [p for s, p in provided.hook_libs.items() if s.startswith("libcudnn")]
    assert cudnn and all(p.startswith(os.path.join(facts.probe.purelib, "nvidia", "cudnn", "lib")) for p in cudnn)
    assert any(s.startswith("libcublas.so.12") for s in provided.hook_libs)


def test_libraries_stage_installs_the_cuda_12_wheels_where_nothing_is_installed() -> None:
    facts = load_facts("empty")
    provided = provide_libraries(facts, MATRIX, _by_code(diagnose(facts, MATRIX)), GPU_122, None, True)
    assert {"nvidia-cublas-cu12", "nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12"} <= set(provided.to_install)
    site = facts.probe.purelib
    assert provided.hook_libs["libcublas.so.12"] == os.path.join(site, "nvidia", "cublas", "lib", "libcublas.so.12")


# --- packages -----------------------------------------------------------------------------------------------------

def test_packages_stage_uninstalls_the_cpu_package_then_installs_the_gpu_build() -> None:
    facts = load_facts("cpu")
    findings = diagnose(facts, MATRIX)
    swap = _swap(facts, GPU_122)
    pip = pip_changes(facts, MATRIX, _by_code(findings), swap, GenaiChange(), TensorrtChange(), {},
                      InstallerChoice(None), ())
    assert [a.kind for a in pip.actions] == ["pip-uninstall", "pip-install"]
    assert pip.actions[0].details["distribution"] == "onnxruntime"
    assert pip.requirements == ("onnxruntime-gpu==1.22.0",)
    assert FindingCode.CPU_ONLY in pip.actions[1].fixes
    # The venv was made --without-pip and no uv is there: the install cannot run until pip is.
    assert "the target environment has no pip (and no uv was found): install pip into it first" in [
        str(n) for n in pip.notes]
    assert pip.broken == ()


def test_packages_stage_without_a_requirement_has_no_install_and_asks_nothing_of_the_installer() -> None:
    facts = load_facts("e120")
    swap = _swap(facts, GPU_120)
    refused = InstallerChoice(None, refused="no uv executable was found")
    pip = pip_changes(facts, MATRIX, {}, swap, GenaiChange(), TensorrtChange(), {}, refused, ())
    assert pip.actions == () and pip.requirements == ()


def test_installer_refused_is_one_error_that_says_what_to_pass() -> None:
    with pytest.raises(OrtfixError, match="--installer uv: no uv executable"):
        installer_notes(load_facts("cpu"), InstallerChoice(None, refused="no uv executable was found"))


# --- links and hooks ----------------------------------------------------------------------------------------------

def test_links_stage_links_a_missing_soname_inside_the_environment_only() -> None:
    facts = load_facts("e120")
    folder = os.path.join(facts.probe.purelib, "nvidia", "cublas-without-link", "lib")
    versioned = os.path.join(folder, "libcublas.so.12.4.5.8")
    outside = "/opt/ortfix-test-no-such-folder/libcudart.so.13.0.48"
    libraries = tuple(dataclasses.replace(c, path=versioned, version="12.4.5.8") if c.name == "libcublas.so.12" else c
                      for c in facts.libraries)
    facts = dataclasses.replace(facts, libraries=(*libraries, LibCopy(
        outside, "cudart", "libcudart.so.13", 13, "13.0.48", "CUDA toolkit", False, 13)))
    actions, linked = link_actions(_by_code(diagnose(facts, MATRIX)))
    link = os.path.join(folder, "libcublas.so.12")
    assert [(a.kind, dict(a.details)) for a in actions] == [
        ("symlink", {"path": link, "target": "libcublas.so.12.4.5.8"})]
    assert linked == {"libcublas.so.12": link}


def test_hooks_stage_with_hook_none_says_which_folders_to_put_on_ld_library_path() -> None:
    facts = load_facts("e120")
    libs = {"libcublas.so.12": "/env/nvidia/cublas/lib/libcublas.so.12",
            "libcudnn.so.9": "/env/nvidia/cudnn/lib/libcudnn.so.9"}
    actions, notes = hook_stage(facts, PlanOptions(hook="none"), (), libs, TensorrtChange())
    assert actions == []
    assert [str(n) for n in notes] == ["libraries need to be made findable but --hook none was given: set "
                                       "LD_LIBRARY_PATH to /env/nvidia/cublas/lib:/env/nvidia/cudnn/lib"]


def test_hooks_stage_writes_a_hook_for_the_libraries_and_nothing_without_them() -> None:
    facts = load_facts("e120")
    assert hook_stage(facts, PlanOptions(), (), {}, TensorrtChange()) == ([], [])
    lib = os.path.join(facts.probe.purelib, "nvidia", "cublas", "lib", "libcublas.so.12")
    actions, notes = hook_stage(facts, PlanOptions(), (), {"libcublas.so.12": lib}, TensorrtChange())
    assert actions and all(a.kind == "write-file" for a in actions)
    # The preload hook names the library relative to site-packages (plantools.hook_libraries reads it back).
    assert hook_libraries({"actions": [{"kind": a.kind, "details": dict(a.details)} for a in actions]}) == [
        os.path.join("nvidia", "cublas", "lib", "libcublas.so.12")]
    assert notes == []


# --- notes --------------------------------------------------------------------------------------------------------

def test_notes_stage_names_each_library_no_wheel_provides() -> None:
    notes = closing_notes(MATRIX, PlanOptions(), set(), _swap(load_facts("empty"), None), ("libfoo.so.1",), 99)
    assert [str(n) for n in notes] == ["no NVIDIA pip wheel is known for libfoo.so.1 (CUDA 99): install it from the "
                                       "CUDA toolkit or your distribution"]


def test_notes_stage_gives_the_targets_reasons_only_when_it_is_installed() -> None:
    facts = load_facts("cpu")
    assert "the test's target" in closing_notes(MATRIX, PlanOptions(), set(), _swap(facts, GPU_122), (), 12)
    kept = _swap(load_facts("e120"), GPU_122)
    assert not kept.swap
    assert "the test's target" not in closing_notes(MATRIX, PlanOptions(), set(), kept, (), 12)
