"""What the damaged-install findings (ORT007, LIB007) ask of a plan: the distributions to uninstall, the NVIDIA
wheels to reinstall at their installed version, and whether the chosen ORT build must be installed in their place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from ortfix.check.codes import FindingCode as Code
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding, damage
from ortfix.plan.model import ChosenBuild


@dataclass(frozen=True)
class Repairs:
    """What the damaged-install findings ask of the plan."""

    remove: Mapping[str, tuple[str, ...]]  # distribution → the codes its uninstall fixes (ORT007, LIB007)
    requirements: Mapping[str, str]  # canonical NVIDIA distribution → name==installed version, to reinstall it
    reinstall_ort: bool  # a damaged ORT build is uninstalled: the target build must be installed in its place

    def installed_by(self, installs_target: bool, codes: set[Code]) -> set[Code]:
        """The codes a pip-install fixes: LIB007 by the pinned reinstalls, ORT007/ORT008 by the target build."""
        out = {Code.LIB_DAMAGED} if self.requirements else set()
        if installs_target and any(Code.ORT_DAMAGED in codes for codes in self.remove.values()):
            out.add(Code.ORT_DAMAGED)
        if installs_target and Code.ORT_ORPHANED in codes:  # the target build is installed over the leftover folder
            out.add(Code.ORT_ORPHANED)
        return out


def find_repairs(facts: Facts, by_code: Mapping[str, Sequence[Finding]], target: ChosenBuild | None,
                 asked: Sequence[str]) -> Repairs:
    """A damaged distribution with a RECORD is uninstalled (what is left of it is moved aside) and installed again:
    an NVIDIA wheel at exactly its installed version, an ORT build as the target build (there is none to install
    when no build runs here: then it is left as it is, and reported). One without a RECORD cannot be uninstalled
    exactly, and reinstalling over it would be a no-op for pip (its METADATA says it is installed): left unresolved.

    Uninstalling an ORT build removes every file its RECORD lists, those another build in the same folder lists too
    (onnxruntime/__init__.py...): that build would be left damaged (ORT007), so it is reinstalled as well."""
    remove: dict[str, tuple[str, ...]] = {}
    requirements: dict[str, str] = {}
    reinstall_ort = False
    for f in by_code.get(Code.ORT_DAMAGED, []):
        damaged = damage(f)
        if target is not None and damaged["remove"]:
            reinstall_ort = True
            for name in damaged["remove"]:
                remove[name] = (*remove.get(name, ()), Code.ORT_DAMAGED)
    for f in by_code.get(Code.LIB_DAMAGED, []):
        damaged = damage(f)
        requirement = damaged.get("requirement")
        if damaged["remove"] and requirement:
            for name in damaged["remove"]:
                remove[name] = (*remove.get(name, ()), Code.LIB_DAMAGED)
            requirements[canonicalize_name(damaged["distribution"])] = requirement
    if target is not None:
        for name in _sharing_files(facts, {*remove, *asked}):
            remove.setdefault(name, ())
            reinstall_ort = True
    return Repairs(remove, requirements, reinstall_ort)


def _sharing_files(facts: Facts, removed: set[str]) -> list[str]:
    """The ORT distributions that stay but share files with one that is uninstalled, in the same folder."""
    gone = [d for d in facts.ort_distributions if d.name in removed]
    out = []
    for dist in facts.ort_distributions:
        if dist.name in removed:
            continue
        own = {path for path, _, _ in dist.files if not path.endswith(".pyc")}
        if any(other.location == dist.location and own.intersection(p for p, _, _ in other.files) for other in gone):
            out.append(dist.name)
    return out
