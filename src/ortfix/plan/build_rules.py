"""The rules an onnxruntime-gpu build must pass to be planned here, in the order they are asked (`BuildRules`): still
published, a wheel for this Python and platform, the CUDA major asked for with --cuda, a driver that runs its CUDA
major, a GPU it has kernels for. When no build of a version passes, `why_not` names the ONE rule that left nothing,
and the closest build that would work."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from packaging.version import Version

from ortfix.check.facts import Facts
from ortfix.check.packages import GPU_PACKAGE
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import OrtBuild
from ortfix.plan.model import PlanOptions

Candidate = tuple[Version, OrtBuild]


@dataclass(frozen=True)
class Rule:
    name: str  # "published", "python", "cuda", "driver", "gpu"
    admits: Callable[[OrtBuild], bool]


@dataclass(frozen=True)
class NotRunning:
    """Why no build of a version runs here: the rule's one line, and what would work instead (may be empty)."""

    rule: str
    cause: str
    closest: str
    keep: str = ""  # the other --cuda that keeps the version, when --cuda ruled it out


def _majors(builds: Sequence[Candidate]) -> str:
    return " or ".join(str(m) for m in sorted({b.cuda_major for _, b in builds}))


class BuildRules:
    def __init__(self, facts: Facts, matrix: Matrix, options: PlanOptions) -> None:
        self.facts, self.matrix, self.options = facts, matrix, options
        probe = facts.probe
        self.platform = "win_amd64" if probe.windows is not None else f"linux_{probe.machine}"
        self.rules = (
            Rule("published", lambda b: b.index != "withdrawn"),
            Rule("python", lambda b: b.installs_for(probe.python_tag, probe.python_version, self.platform)),
            Rule("cuda", lambda b: not options.cuda_major or b.cuda_major == options.cuda_major),
            Rule("driver", self._driver_runs),
            Rule("gpu", lambda b: self._cc_needed(b) is None),
        )

    def runs_here(self, build: OrtBuild) -> bool:
        return all(rule.admits(build) for rule in self.rules)

    def _driver_runs(self, build: OrtBuild) -> bool:
        driver = self.facts.driver.version
        return not driver or self.matrix.driver_supports_major(driver, build.cuda_major) is not False

    def _cc_needed(self, build: OrtBuild) -> Version | None:
        """The compute capability the build needs, when a GPU here is older than that; else None."""
        cuda = self.matrix.cuda_major(build.cuda_major)
        if cuda is None:
            return None
        need = Version(cuda.cc_min)
        if build.compute_capabilities:
            need = max(need, min(Version(a) for a in build.compute_capabilities))
        older = [g for g in self.facts.driver.gpus if g.compute_capability and Version(g.compute_capability) < need]
        return need if older else None

    def why_not(self, label: str, wanted: Sequence[Candidate], everything: Sequence[Candidate]) -> NotRunning:
        """`wanted`: the builds of `label` (a version, a minor, or "" for all) the matrix knows; `everything`: every
        GPU build it knows."""
        usable = [c for c in everything if self.runs_here(c[1])]
        newest = max(usable, key=lambda c: c[0]) if usable else None
        closest = (f"the newest build that runs here is {GPU_PACKAGE} {newest[0]} (CUDA {newest[1].cuda_major})"
                   if newest else f"no {GPU_PACKAGE} build runs here")
        remaining = list(wanted)
        for rule in self.rules:
            kept = [c for c in remaining if rule.admits(c[1])]
            if not kept:
                return self._explain(rule.name, label, remaining, everything, usable, closest)
            remaining = kept
        return NotRunning("", f"no {GPU_PACKAGE} {label} build runs here", closest)  # not reached: wanted all ran

    def _explain(self, rule: str, label: str, remaining: Sequence[Candidate], everything: Sequence[Candidate],
                 usable: Sequence[Candidate], closest: str) -> NotRunning:
        probe, name = self.facts.probe, f"{GPU_PACKAGE} {label}".strip()
        if rule == "published" and not remaining:
            known = max((v for v, b in everything if b.index != "withdrawn"), default=None)
            return NotRunning(rule, f"no {name} build is published (ortfix's matrix, data {self.matrix.data_version}"
                              + (f", knows {known} as the newest)" if known else ")"), closest)
        if rule == "published":
            return NotRunning(rule, f"{name} is no longer published (withdrawn from the package index)", closest)
        if rule == "python":
            tags = sorted({t for _, b in remaining for t in b.python_tags}, key=lambda t: (len(t), t))
            return NotRunning(rule, f"{name} has no wheel for Python {probe.python_version} on {self.platform}"
                              + (f" (its wheels are for {', '.join(tags)})" if tags else ""), closest)
        if rule == "cuda":
            asked = self.options.cuda_major
            others = [c for c in remaining if all(r.admits(c[1]) for r in self.rules if r.name != "cuda")]
            keep = f"--cuda {_majors(others)} " + (f"keeps {label}" if label else "instead") if others else ""
            instead = [keep] if keep else []
            if usable:
                instead.append(f"--ort-version {max(usable, key=lambda c: c[0])[0]} is the newest with CUDA {asked}")
            cause = f"{name} has no CUDA {asked} build (asked for with --cuda {asked}; there are builds for CUDA " \
                    f"{_majors(remaining)})"
            return NotRunning(rule, cause, "; ".join(instead) or f"no CUDA {asked} build runs here", keep)
        if rule == "driver":
            rows = [row for _, b in remaining if (row := self.matrix.cuda_major(b.cuda_major)) is not None]
            needs = sorted({str(row.driver_min.get("linux")) for row in rows})
            return NotRunning(rule, f"{name} is built for CUDA {_majors(remaining)}, which needs an NVIDIA driver >= "
                              f"{' or '.join(needs)} (the driver is {self.facts.driver.version})", closest)
        cc = min((g.compute_capability for g in self.facts.driver.gpus if g.compute_capability), key=Version)
        need = min(n for _, b in remaining if (n := self._cc_needed(b)) is not None)
        return NotRunning(rule, f"the GPU (compute capability {cc}) is older than {name} supports (it needs >= "
                          f"{need})", closest)
