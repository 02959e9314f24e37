"""What the installed distributions require of each other (their `Requires-Dist`, markers evaluated for the target
interpreter, as `pip check` reads them: no extra is taken as asked for), and the installed consumers of NVIDIA
wheels (torch, jax, cupy, tensorflow, paddle...) with the CUDA and cuDNN majors those wheels give them.

The probe reports every requirement on ONNX Runtime, NVIDIA or TensorRT wheels (the only distributions a plan
changes); what it reports is package data, so a requirement that does not parse is skipped, never trusted."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ortfix.check.facts import Facts
from ortfix.compat.matrix import Matrix


@dataclass(frozen=True)
class Need:
    """One installed distribution's requirement on another, in force on this interpreter."""

    dependant: str  # normalized name of the distribution that requires
    dependant_version: str
    name: str  # normalized name of the distribution required
    specifier: str  # "==8.9.2.26", "" for any version
    text: str  # the requirement as written (escaped by the probe), markers left out

    @property
    def who(self) -> str:
        return f"{self.dependant} {self.dependant_version}"

    def allows(self, version: str) -> bool:
        try:
            return SpecifierSet(self.specifier).contains(Version(version), prereleases=True)
        except (InvalidSpecifier, InvalidVersion):
            return False


def marker_environment(facts: Facts) -> dict[str, str]:
    """PEP 508 marker values of the target interpreter: what its probe measured, else (a probe report of an older
    ortfix) the values derived from its platform and version."""
    measured = dict(facts.probe.markers)
    version = facts.probe.python_version
    derived = {"python_version": ".".join(version.split(".")[:2]), "python_full_version": version,
               "implementation_version": version,
               "sys_platform": facts.platform.sys_platform, "platform_system": facts.probe.system,
               "platform_machine": facts.probe.machine,
               "os_name": facts.platform.os_name,
               "implementation_name": "cpython", "platform_python_implementation": "CPython",
               "platform_release": "", "platform_version": ""}
    return {**derived, **measured, "extra": ""}


def applies(requirement: Requirement, environment: Mapping[str, str]) -> bool:
    """Whether a requirement is in force here (its marker, if any, holds; one ortfix cannot judge counts)."""
    try:
        return requirement.marker is None or requirement.marker.evaluate(dict(environment))
    except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker):
        return True


def installed_needs(facts: Facts) -> list[Need]:
    """Every requirement in force among the installed distributions the probe reports (those the plan may change,
    torch, and every distribution that requires one of those)."""
    environment = marker_environment(facts)
    sources: list[tuple[str, str, Iterable[str]]] = [
        (d.normalized, d.version, d.requires) for d in facts.probe.distributions]
    sources += [(canonicalize_name(d.name), d.version, d.requires) for d in facts.probe.dependents]
    out: list[Need] = []
    for who, version, requires in sources:
        for text in requires:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if applies(req, environment):
                out.append(Need(who, version, canonicalize_name(req.name), str(req.specifier),
                                f"{req.name}{req.specifier}"))
    return out


@dataclass(frozen=True)
class Consumer:
    """An installed distribution that uses CUDA through NVIDIA wheels (or, for torch, libraries of its own)."""

    name: str
    version: str
    cuda_major: int
    cudnn_major: int | None

    def majors(self) -> str:
        return f"CUDA {self.cuda_major}" + (f" and cuDNN {self.cudnn_major}" if self.cudnn_major else "")


_ORT = re.compile(r"onnxruntime|ort-nightly")


def nvidia_consumers(facts: Facts, matrix: Matrix, needs: Iterable[Need] | None = None) -> list[Consumer]:
    """torch first (its CUDA from torch/version.py, its cuDNN from its requirement or bundled libcudnn), then every
    other installed distribution that requires NVIDIA wheels the matrix knows, with the CUDA major of those wheels
    and the cuDNN major of its nvidia-cudnn requirement. ONNX Runtime builds and NVIDIA wheels themselves are not
    consumers."""
    from ortfix.check.torch_compat import torch_cudnn_major

    out: list[Consumer] = []
    torch = facts.probe.torch
    if torch is not None and torch.cuda:
        with contextlib.suppress(ValueError):
            out.append(Consumer("torch", torch.version or "", int(torch.cuda.split(".")[0]),
                                torch_cudnn_major(facts)))
    wheel_major = {w.distribution: major for major, w in matrix.nvidia_wheels}
    by_dependant: dict[tuple[str, str], list[Need]] = {}
    for need in needs if needs is not None else installed_needs(facts):
        if need.dependant == "torch" or need.dependant.startswith("nvidia-") or _ORT.match(need.dependant):
            continue
        if need.name in wheel_major:
            by_dependant.setdefault((need.dependant, need.dependant_version), []).append(need)
    for (name, version), found in by_dependant.items():
        majors = sorted({wheel_major[n.name] for n in found})
        if len(majors) != 1:
            continue  # wheels of two CUDA majors: nothing to share
        out.append(Consumer(name, version, majors[0], cudnn_major_of(found)))
    return out


def cudnn_major_of(needs: Iterable[Need]) -> int | None:
    """The cuDNN major an nvidia-cudnn requirement pins (its first version), None when it names none."""
    for need in needs:
        if not need.name.startswith("nvidia-cudnn"):
            continue
        for spec in SpecifierSet(need.specifier):
            try:
                return Version(spec.version.rstrip(".*")).major
            except InvalidVersion:
                continue
    return None
