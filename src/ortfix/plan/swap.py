"""The plan's first stage: whether it installs the target build in place of the installed one (the swap), the build
every later action then serves, and the distributions to uninstall for it: what the package findings ask, the
damaged installs (plan/repairs.py) and the installed GPU build when another build replaces it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ortfix.check.codes import FindingCode as Code
from ortfix.check.codes import Severity
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import REMOVE_CODES, Finding, removal
from ortfix.check.requires import Consumer
from ortfix.plan.choose_build import installed_build, needs_swap
from ortfix.plan.model import ChosenBuild, PlanOptions
from ortfix.plan.repairs import Repairs, find_repairs


@dataclass(frozen=True)
class Swap:
    target: ChosenBuild | None  # the build every action serves: the installed one where it is kept
    swap: bool  # the target build is installed in place of the installed one
    share: bool  # installed to share a CUDA-using neighbour's CUDA/cuDNN majors (torch)
    arch_error: bool  # the installed build has no kernels for this GPU (GPU001 as an error)
    repairs: Repairs
    remove: tuple[str, ...]  # the distributions to uninstall, in order


def choose_swap(facts: Facts, by_code: Mapping[str, Sequence[Finding]], options: PlanOptions,
                installed: OrtInstall | None, target: ChosenBuild | None, consumers: Sequence[Consumer], *,
                alternative: bool) -> Swap:
    """The swap for `target` (an `alternative` to the first choice is always installed in place of the installed
    build), and what it uninstalls."""
    codes = codes_of(by_code)
    asked = asked_to_remove(by_code)
    repairs = find_repairs(facts, by_code, target, asked)
    arch_error = any(f.severity is Severity.ERROR for f in by_code.get(Code.GPU_ARCH, []))
    share = bool(consumers) and target is not None and installed is not None and any(
        target.cuda_major == c.cuda_major and c.cudnn_major in (None, target.cudnn_major)
        and (installed.cuda_major, installed.cudnn_major) != (target.cuda_major, target.cudnn_major)
        for c in consumers[:1])
    swap = alternative or share or needs_swap(codes, installed, target, options, reinstall_ort=repairs.reinstall_ort,
                                              arch_error=arch_error)
    if not swap and installed is not None:
        # The plan keeps the installed build: that is the target, and every action serves it.
        target = installed_build(installed) or target
    remove = [*asked, *(r for r in repairs.remove if r not in asked)]
    if swap and installed is not None and installed.package and target is not None:
        gpu_dist = next((d for d in facts.ort_distributions if d.normalized == installed.package), None)
        # Another version, or the same version built for another CUDA major (from a separate feed): pip would take
        # the installed one as satisfying `==version`, so it is uninstalled first.
        other_build = gpu_dist is not None and (gpu_dist.installed_version != target.version
                                                or installed.cuda_major != target.cuda_major)
        if gpu_dist and other_build and gpu_dist.name not in remove:
            remove.append(gpu_dist.name)
    return Swap(target, swap, share, arch_error, repairs, tuple(remove))


def codes_of(by_code: Mapping[str, Sequence[Finding]]) -> set[Code]:
    """The codes of the findings, grouped by code in `by_code`."""
    return {f.code for found in by_code.values() for f in found}


def asked_to_remove(by_code: Mapping[str, Sequence[Finding]]) -> list[str]:
    """What the package findings ask to uninstall, each once, in the order of REMOVE_CODES."""
    asked: list[str] = []
    for code in REMOVE_CODES:
        for f in by_code.get(code, []):
            asked += [r for r in removal(f)["remove"] if r not in asked]
    return asked
