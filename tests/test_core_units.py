"""Unit tests of the pure core — diagnose and make_plan — on facts recorded in real environments
(tests/data/facts/, see factsdata.py), each as recorded or with one fact changed. Fast: no venv, no subprocess.

What each environment holds is written here from how it was built (tests/data/facts/README.md), and what ortfix
must say and do about it from the README's finding codes: never from the code's own output."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, cast

import pytest

from factsdata import load_facts
from ortfix.check.codes import FindingCode, Severity
from ortfix.check.diagnose import diagnose, gpu_install
from ortfix.check.facts import Facts, OrtInstall, ProviderLoad
from ortfix.check.findings import Finding, finding_json, problems, removal, soname_link
from ortfix.compat.load import load_matrix
from ortfix.errors import OrtfixError
from ortfix.plan.make import make_plan
from ortfix.plan.model import PlanOptions
from ortfix.system.driver import overridden_driver
from ortfix.system.inventory import LibCopy
from ortfix.system.loader import VIA_LD_LIBRARY_PATH
from plantools import WHEELS, assert_coherent, hook_libraries, requirement_name, requirements

if TYPE_CHECKING:
    from ortfix.check.findings import NotOnPathData  # a payload shape is a type for mypy only

MATRIX = load_matrix()
# The CUDA 13 toolkit of the machine the facts were recorded on (tests/data/facts/README.md).
TOOLKIT_13 = "/usr/local/cuda-13.0/lib"


def _codes(findings: list[Finding]) -> set[str]:
    return {f.code.value for f in findings}


def _one(findings: list[Finding], code: FindingCode) -> Finding:
    [found] = [f for f in findings if f.code is code]
    return found


def _plan(facts: Facts, options: PlanOptions | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = make_plan(facts, diagnose(facts, MATRIX), MATRIX, options or PlanOptions()).to_json()
    return doc


def _uninstalled(plan: dict[str, Any]) -> list[str]:
    return [a["details"]["distribution"] for a in plan["actions"] if a["kind"] == "pip-uninstall"]


# --- the CPU package ----------------------------------------------------------------------------------------------

def test_cpu_package_is_ort002_with_what_to_remove_and_the_version() -> None:
    facts = load_facts("cpu")  # onnxruntime 1.22.0, --no-deps, no driver
    findings = diagnose(facts, MATRIX)
    assert FindingCode.CPU_ONLY in {f.code for f in findings}
    cpu_only = _one(findings, FindingCode.CPU_ONLY)
    assert cpu_only.severity is Severity.ERROR
    assert removal(cpu_only) == {"remove": ["onnxruntime"], "version": "1.22.0"}
    assert dict(finding_json(cpu_only)["data"]) == {"remove": ["onnxruntime"], "version": "1.22.0"}
    assert gpu_install(facts) is None  # the CPU build is not a GPU install
    assert FindingCode.NO_DRIVER in {f.code for f in findings}  # recorded on a machine without one


def test_cpu_package_plan_swaps_it_for_the_gpu_build_of_the_same_version() -> None:
    facts = load_facts("cpu")
    plan = _plan(facts)
    assert _uninstalled(plan) == ["onnxruntime"]
    reqs = requirements(plan)
    assert "onnxruntime-gpu==1.22.0" in reqs  # the matching version (README: ORT002's fix)
    target = plan["target"]
    assert (target["package"], target["version"], target["cuda_major"]) == ("onnxruntime-gpu", "1.22.0", 12)
    # The CUDA 12 libraries come as NVIDIA wheels of that major, and are made findable by the preload hook.
    nvidia = [requirement_name(r) for r in reqs if r.startswith("nvidia-")]
    assert nvidia and set(nvidia) <= WHEELS[12], nvidia
    assert hook_libraries(plan)
    # The uninstall comes before the install, and both say they fix ORT002.
    kinds = [a["kind"] for a in plan["actions"]]
    assert kinds.index("pip-uninstall") < kinds.index("pip-install")
    for action in plan["actions"][:2]:
        assert "ORT002" in action["fixes"], action
    assert {f["code"] for f in plan["unresolved"]} == {"DRV001"}  # no plan installs a driver
    assert_coherent(plan, None, None, facts.probe.prefix)


def test_nothing_installed_is_ort001_and_the_plan_installs_the_gpu_build() -> None:
    facts = load_facts("empty")
    findings = diagnose(facts, MATRIX)
    assert _one(findings, FindingCode.NO_ORT).severity is Severity.ERROR
    plan = _plan(facts)
    assert _uninstalled(plan) == []
    [install] = [a for a in plan["actions"] if a["kind"] == "pip-install"]
    assert f"onnxruntime-gpu=={plan['target']['version']}" in install["details"]["requirements"]
    assert "ORT001" in install["fixes"]
    assert "ORT001" not in {f["code"] for f in plan["unresolved"]}


def test_asking_for_a_version_the_matrix_does_not_know_is_refused() -> None:
    with pytest.raises(OrtfixError, match=r"no onnxruntime-gpu 0\.0\.1 build is published"):
        _plan(load_facts("cpu"), PlanOptions(ort_version="0.0.1"))


# --- a GPU build whose NVIDIA wheels are installed but not findable ------------------------------------------------

def test_installed_wheels_not_on_the_loader_path_are_lib002_and_hooked_not_reinstalled() -> None:
    facts = load_facts("e120")  # onnxruntime-gpu 1.20.2 (CUDA 12) + the CUDA 12 NVIDIA wheels
    findings = diagnose(facts, MATRIX)
    installed = gpu_install(facts)
    assert installed is not None and installed.version == "1.20.2" and installed.cuda_major == 12
    libraries = cast("NotOnPathData", _one(findings, FindingCode.LIB_NOT_ON_PATH).data)["libraries"]
    for soname in ("libcublas.so.12", "libcudart.so.12", "libcudnn.so.9", "libcurand.so.10"):
        [path] = libraries[soname]
        assert path.startswith(facts.probe.purelib + "/nvidia/"), path
    assert FindingCode.LIB_MISSING not in {f.code for f in findings}  # the TensorRT provider is not judged
    plan = _plan(facts)
    # Keep the installed build: nothing to uninstall or download, only the hook.
    assert _uninstalled(plan) == [] and requirements(plan) == []
    assert (plan["target"]["version"], plan["target"]["cuda_major"]) == ("1.20.2", 12)
    hooked = hook_libraries(plan)
    assert {os.path.basename(p) for p in hooked} >= {"libcublas.so.12", "libcublasLt.so.12", "libcudart.so.12",
                                                     "libcudnn.so.9", "libcurand.so.10", "libcufft.so.11"}
    # Load order: the runtime before cuBLAS, cuBLASLt before cuBLAS, cuBLAS before cuDNN.
    names = [os.path.basename(p) for p in hooked]
    assert names.index("libcudart.so.12") < names.index("libcublasLt.so.12") < names.index("libcublas.so.12")
    assert names.index("libcublas.so.12") < names.index("libcudnn.so.9")
    assert "LIB002" not in {f["code"] for f in plan["unresolved"]}
    assert_coherent(plan, "1.20.2", 12, facts.probe.prefix)


def test_hook_none_leaves_the_libraries_to_ld_library_path() -> None:
    plan = _plan(load_facts("e120"), PlanOptions(hook="none"))
    assert not plan["actions"]
    assert any(n.startswith("libraries need to be made findable but --hook none") for n in plan["notes"])
    assert "LIB002" in {f["code"] for f in plan["unresolved"]}


def test_conda_hook_puts_the_wheel_folders_on_ld_library_path() -> None:
    facts = load_facts("e120")
    plan = _plan(facts, PlanOptions(hook="conda"))
    paths = [a["details"]["path"] for a in plan["actions"] if a["kind"] == "write-file"]
    assert [os.path.basename(os.path.dirname(p)) for p in paths] == ["activate.d", "deactivate.d"]
    assert all(p.startswith(facts.probe.prefix + "/etc/conda/") for p in paths), paths


# --- one fact changed ----------------------------------------------------------------------------------------------

def _replace_resolution(install: OrtInstall, soname: str, path: str, via: str) -> OrtInstall:
    providers = []
    for provider in install.providers:
        resolutions = tuple(dataclasses.replace(r, path=path, via=via) if r.name == soname else r
                            for r in provider.resolutions)
        providers.append(dataclasses.replace(provider, resolutions=resolutions))
    return dataclasses.replace(install, providers=tuple(providers))


def _cuda_provider(facts: Facts) -> ProviderLoad:
    install = gpu_install(facts)
    assert install is not None
    [provider] = [p for p in install.providers if p.provider == "cuda"]
    return provider


def test_a_library_resolved_from_another_cuda_major_is_lib008_and_the_hook_loads_the_own_major() -> None:
    """libcurand.so.10 is the soname of both CUDA 12's and CUDA 13's cuRAND: found on LD_LIBRARY_PATH in the CUDA 13
    toolkit, it is the wrong one for a CUDA 12 build (it needs libcudart.so.13)."""
    facts = load_facts("e120")
    toolkit_copy = f"{TOOLKIT_13}/libcurand.so.10"
    changed_install = _replace_resolution(facts.ort[0], "libcurand.so.10", toolkit_copy, VIA_LD_LIBRARY_PATH)
    facts = dataclasses.replace(
        facts, ort=(changed_install, *facts.ort[1:]),
        libraries=(*facts.libraries, LibCopy(toolkit_copy, "curand", "libcurand.so.10", 10, "10", "CUDA toolkit",
                                             False, 13)),
        findable={**facts.findable, "libcurand.so.10": toolkit_copy})
    assert {r.name: r.path for r in _cuda_provider(facts).resolutions}["libcurand.so.10"] == toolkit_copy
    findings = diagnose(facts, MATRIX)
    other_major = _one(findings, FindingCode.LIB_OTHER_CUDA)
    assert other_major.severity is Severity.ERROR
    assert dict(other_major.data) == {"sonames": ["libcurand.so.10"], "cuda_major": 12}
    # The rest are still not on the path; libcurand is no longer among them (the loader finds a copy).
    not_on_path = cast("NotOnPathData", _one(findings, FindingCode.LIB_NOT_ON_PATH).data)
    assert "libcurand.so.10" not in not_on_path["libraries"]

    plan = _plan(facts)
    assert requirements(plan) == [] and _uninstalled(plan) == []  # the CUDA 12 copy is installed: hook it
    hooked = hook_libraries(plan)
    assert "nvidia/curand/lib/libcurand.so.10" in hooked  # the preload hook names them relative to site-packages
    assert not [p for p in hooked if p.startswith(TOOLKIT_13)], hooked
    assert all("LIB008" in a["fixes"] for a in plan["actions"])
    assert "LIB008" not in {f["code"] for f in plan["unresolved"]}


def test_a_missing_soname_link_inside_the_environment_is_lib005_and_planned_as_a_link() -> None:
    """A versioned libcublas.so.12.4.5.8 with SONAME libcublas.so.12 and no libcublas.so.12 next to it: the loader
    asks for the SONAME and finds nothing."""
    facts = load_facts("e120")
    folder = os.path.join(facts.probe.purelib, "nvidia", "cublas-without-link", "lib")
    assert not os.path.lexists(folder)  # the check also looks on disk: a folder that cannot hold the link
    versioned = os.path.join(folder, "libcublas.so.12.4.5.8")
    libraries = tuple(dataclasses.replace(c, path=versioned, version="12.4.5.8") if c.name == "libcublas.so.12" else c
                      for c in facts.libraries)
    facts = dataclasses.replace(facts, libraries=libraries)
    findings = diagnose(facts, MATRIX)
    missing_link = _one(findings, FindingCode.SONAME_LINK_MISSING)
    assert missing_link.severity is Severity.ERROR  # inside the environment: ortfix can and must fix it
    assert soname_link(missing_link) == {"directory": folder, "link": "libcublas.so.12",
                                         "target": "libcublas.so.12.4.5.8", "inside_env": True}

    plan = _plan(facts)
    [link] = [a for a in plan["actions"] if a["kind"] == "symlink"]
    assert link["details"] == {"path": os.path.join(folder, "libcublas.so.12"), "target": "libcublas.so.12.4.5.8"}
    assert list(link["fixes"]) == ["LIB005"]
    # The hook loads cuBLAS from that folder (by the file or the new link: either registers the SONAME).
    in_site = os.path.relpath(folder, facts.probe.purelib)
    assert [p for p in hook_libraries(plan) if os.path.dirname(p) == in_site], hook_libraries(plan)
    assert "LIB005" not in {f["code"] for f in plan["unresolved"]}


def test_a_missing_soname_link_outside_the_environment_is_only_a_warning_and_left_alone() -> None:
    facts = load_facts("e120")
    outside = "/opt/ortfix-test-no-such-folder/libcudart.so.13.0.48"
    assert not os.path.lexists(os.path.dirname(outside))
    facts = dataclasses.replace(facts, libraries=(*facts.libraries, LibCopy(
        outside, "cudart", "libcudart.so.13", 13, "13.0.48", "CUDA toolkit", False, 13)))
    missing_link = _one(diagnose(facts, MATRIX), FindingCode.SONAME_LINK_MISSING)
    assert missing_link.severity is Severity.WARNING
    assert not [a for a in _plan(facts)["actions"] if a["kind"] == "symlink"]  # never a change outside


def test_a_driver_too_old_for_the_build_is_drv002_and_the_plan_moves_to_an_older_cuda_major() -> None:
    """R470 runs CUDA 11 but not CUDA 12 (which needs >= 525.60.13): onnxruntime-gpu 1.20.2 (CUDA 12) cannot run."""
    facts = load_facts("e120")
    facts = dataclasses.replace(facts, driver=overridden_driver("470.57.02", None, facts.driver))
    findings = diagnose(facts, MATRIX)
    too_old = _one(findings, FindingCode.DRIVER_TOO_OLD)
    assert too_old.severity is Severity.ERROR
    assert dict(too_old.data) == {"cuda_major": 12, "driver": "470.57.02"}
    assert FindingCode.NO_DRIVER not in {f.code for f in findings}

    plan = _plan(facts, PlanOptions(driver_version="470.57.02"))
    assert plan["target"]["cuda_major"] == 11
    assert "onnxruntime-gpu" in _uninstalled(plan)
    assert f"onnxruntime-gpu=={plan['target']['version']}" in requirements(plan)
    # The CUDA 12 wheels stay where they are (another folder than the CUDA 11 ones), the new ones are CUDA 11's.
    assert all(requirement_name(r) in WHEELS[11] for r in requirements(plan) if r.startswith("nvidia-"))
    assert "DRV002" not in {f["code"] for f in plan["unresolved"]}
    assert_coherent(plan, "1.20.2", 12, facts.probe.prefix)


# --- the finding type ---------------------------------------------------------------------------------------------

def test_problems_leave_out_only_info() -> None:
    findings = [Finding(FindingCode.UNKNOWN_VERSION, Severity.INFO, "s", (), "f"),
                Finding(FindingCode.LIB_SHADOWED, Severity.WARNING, "s", (), "f",
                        {"soname": "libcudart.so.12", "loaded": "/a", "own": ["/b"]}),
                Finding(FindingCode.NO_DRIVER, Severity.ERROR, "s", (), "f")]
    assert [f.code for f in problems(findings)] == [FindingCode.LIB_SHADOWED, FindingCode.NO_DRIVER]


def test_a_payload_is_read_only_as_its_code_shape() -> None:
    no_driver = Finding(FindingCode.NO_DRIVER, Severity.ERROR, "s", (), "f")
    with pytest.raises(ValueError, match="DRV001"):
        removal(no_driver)
    assert finding_json(no_driver)["data"] == {}
