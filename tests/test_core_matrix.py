"""The pure core — diagnose and plan — over the whole matrix, from facts recorded in real environments
(tests/data/facts/, see factsdata.py): every layout by no driver and driver bands of each CUDA major by every
onnxruntime-gpu version the matrix knows (and none asked for). Fast: no venv, no subprocess.

Every plan is coherent (plantools.assert_coherent: one target, every action serves it, one CUDA major, nothing
outside the environment); a version that cannot run under a driver is refused with one OrtfixError, and only then.
What each recorded environment holds is written here by hand, from how it was built (tests/data/facts/README.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import yaml
from packaging.version import Version

from factsdata import load_facts, recorded
from ortfix.check.diagnose import diagnose
from ortfix.check.facts import Facts
from ortfix.compat.load import load_matrix
from ortfix.errors import OrtfixError
from ortfix.plan.make import make_plan
from ortfix.plan.model import PlanOptions
from ortfix.system.driver import overridden_driver
from plantools import REPO, assert_coherent

# Recorded environment → the GPU build `import onnxruntime` gets there (version, CUDA major), None for none.
INSTALLED: dict[str, tuple[str, int] | None] = {
    "sweep-1.15.1": ("1.15.1", 11), "sweep-1.18.1": ("1.18.1", 11), "sweep-1.19.2": ("1.19.2", 12),
    "sweep-1.20.2": ("1.20.2", 12), "sweep-1.22.0": ("1.22.0", 12), "sweep-1.26.0": ("1.26.0", 12),
    "sweep-1.27.0": ("1.27.0", 13), "sweep-1.31.1": ("1.31.1", 13),
    "e120": ("1.20.2", 12),  # + the CUDA 12 NVIDIA wheels, not findable
    "e131": ("1.31.1", 13),  # onnxruntime-gpu[cuda,cudnn] 1.31.1: the CUDA 13 wheels, not findable
    "layered": ("1.22.0", 12),  # GPU build in a --system-site-packages venv; the CPU package in its base
    "reverse": None,  # the CPU package in the venv, the GPU build in its base (behind it on sys.path)
    "cpu": None,  # onnxruntime 1.22.0
    "empty": None,  # nothing installed
}
DRIVERS = (None, "470.57.02", "525.60.13", "550.54.14", "575.51.03", "580.65.06")

MATRIX = load_matrix()
_CUDA = {row["major"]: row for row in yaml.safe_load((REPO / "compat" / "cuda.yaml").read_text())["cuda"]}
_ORT = yaml.safe_load((REPO / "compat" / "ort.yaml").read_text())["releases"]
VERSIONS = sorted({v for row in _ORT if row["package"] == "onnxruntime-gpu" and row["index"] != "withdrawn"
                   for v in row["versions"]}, key=Version)


def _driver_runs(driver: str | None, major: int) -> bool:
    if driver is None:
        return True
    need = _CUDA[major]["driver_min"]["linux"]
    as_tuple = [int(p) for p in need.split(".")]
    have = [int(p) for p in driver.split(".")]
    return have[:len(as_tuple)] >= as_tuple


def _runs_on(driver: str | None, capability: str | None, major: int) -> bool:
    """The driver runs the CUDA major, and the GPU is not older than the major supports."""
    floor = _CUDA[major]["compute_capability"]["min"]
    return _driver_runs(driver, major) and (capability is None or Version(capability) >= Version(floor))


def _runs_somewhere(version: str, driver: str | None, capability: str | None) -> bool:
    """Whether the matrix has a cp311 build of `version` that the driver and GPU run (by hand, from the YAML: not
    through ortfix's matrix queries)."""
    for row in _ORT:
        if row["package"] != "onnxruntime-gpu" or row["index"] == "withdrawn" or version not in row["versions"]:
            continue
        if row.get("python_tags") and "cp311" not in row["python_tags"]:
            continue
        archs = [Version(a) for a in row.get("compute_capabilities", ())]
        if capability is not None and archs and Version(capability) < min(archs):
            continue
        if _runs_on(driver, capability, row["cuda_major"]):
            return True
    return False


def test_every_environment_is_recorded() -> None:
    assert sorted(INSTALLED) == recorded()


def _cases() -> Iterator[tuple[str, str | None, str | None]]:
    for name in INSTALLED:
        for driver in DRIVERS:
            yield name, driver, None
        yield name, "580.65.06", "7.0"  # a Volta GPU under an R580 driver: CUDA 13 (sm_75 and newer) cannot run


def _with_driver(facts: Facts, driver: str | None, capability: str | None) -> Facts:
    if driver is None:
        return facts
    return dataclasses.replace(facts, driver=overridden_driver(driver, capability, facts.driver))


@pytest.mark.parametrize(("name", "driver", "capability"), list(_cases()))
def test_plans_are_coherent_over_the_matrix(name: str, driver: str | None, capability: str | None) -> None:
    facts = _with_driver(load_facts(name), driver, capability)
    assert facts.probe.python_tag == "cp311"
    installed = INSTALLED[name]
    findings = diagnose(facts, MATRIX)
    prefix = facts.probe.prefix
    for version in (None, *VERSIONS):
        options = PlanOptions(ort_version=version, driver_version=driver, compute_capability=capability)
        try:
            plan = make_plan(facts, findings, MATRIX, options).to_json()
        except OrtfixError as exc:
            assert version is not None and not _runs_somewhere(version, driver, capability), (version,
                                                                                            exc.one_line())
            continue
        assert version is None or _runs_somewhere(version, driver, capability)
        if plan["target"] is None:  # nothing to install runs here (a driver too old for every build)
            assert installed is None or not _driver_runs(driver, installed[1]), plan
            continue
        if version is not None:
            assert plan["target"]["version"] == version
        if installed is not None and version is None and _runs_on(driver, capability, installed[1]):
            # keep what is installed while the driver runs it
            assert (plan["target"]["version"], plan["target"]["cuda_major"]) == installed, plan["target"]
        assert_coherent(plan, installed[0] if installed else None, installed[1] if installed else None, prefix)
        if driver is not None:
            assert _runs_on(driver, capability, plan["target"]["cuda_major"]), (driver, capability, plan["target"])


def test_no_driver_and_nothing_installed_names_the_driver_it_needs() -> None:
    plan = make_plan(load_facts("empty"), diagnose(load_facts("empty"), MATRIX), MATRIX, PlanOptions()).to_json()
    assert plan["target"]["cuda_major"] == 12
    assert any("needs an NVIDIA driver >= 525.60.13" in n for n in plan["notes"]), plan["notes"]


def test_layered_environments_change_nothing_outside() -> None:
    for name in ("layered", "reverse"):
        facts = load_facts(name)
        codes = {f.code for f in diagnose(facts, MATRIX)}
        assert "ORT003" not in codes, (name, codes)
        plan = make_plan(facts, diagnose(facts, MATRIX), MATRIX, PlanOptions()).to_json()
        uninstalled = [a["details"]["location"] for a in plan["actions"] if a["kind"] == "pip-uninstall"]
        assert all(loc.startswith(facts.probe.prefix) for loc in uninstalled), (name, uninstalled)
    reverse = make_plan(load_facts("reverse"), diagnose(load_facts("reverse"), MATRIX), MATRIX,
                        PlanOptions()).to_json()
    assert [a["details"]["distribution"] for a in reverse["actions"] if a["kind"] == "pip-uninstall"] == [
        "onnxruntime"]
