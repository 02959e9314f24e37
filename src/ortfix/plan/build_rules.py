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
from ortfix.i18n import N_, Joined, Msg
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
    cause: Msg
    closest: Msg
    keep: str | Msg = ""  # the other --cuda that keeps the version, when --cuda ruled it out


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
        closest = (Msg(N_("the newest build that runs here is {package} {version} (CUDA {cuda})"),
                       package=GPU_PACKAGE, version=str(newest[0]), cuda=newest[1].cuda_major)
                   if newest else Msg(N_("no {package} build runs here"), package=GPU_PACKAGE))
        remaining = list(wanted)
        for rule in self.rules:
            kept = [c for c in remaining if rule.admits(c[1])]
            if not kept:
                return self._explain(rule.name, label, remaining, everything, usable, closest)
            remaining = kept
        return NotRunning("", Msg(N_("no {package} {version} build runs here"), package=GPU_PACKAGE, version=label),
                          closest)  # not reached: wanted all ran

    def _explain(self, rule: str, label: str, remaining: Sequence[Candidate], everything: Sequence[Candidate],
                 usable: Sequence[Candidate], closest: Msg) -> NotRunning:
        probe, name = self.facts.probe, f"{GPU_PACKAGE} {label}".strip()
        if rule == "published" and not remaining:
            known = max((v for v, b in everything if b.index != "withdrawn"), default=None)
            return NotRunning(rule, Msg(N_("no {name} build is published (ortfix's matrix, data {data}{newest})"),
                                        name=name, data=self.matrix.data_version,
                                        newest=Msg(N_(", knows {version} as the newest"), version=str(known))
                                        if known else ""), closest)
        if rule == "published":
            return NotRunning(rule, Msg(N_("{name} is no longer published (withdrawn from the package index)"),
                                        name=name), closest)
        if rule == "python":
            tags = sorted({t for _, b in remaining for t in b.python_tags}, key=lambda t: (len(t), t))
            return NotRunning(rule, Msg(N_("{name} has no wheel for Python {python} on {platform}{tags}"), name=name,
                                        python=probe.python_version, platform=self.platform,
                                        tags=Msg(N_(" (its wheels are for {tags})"), tags=", ".join(tags))
                                        if tags else ""), closest)
        if rule == "cuda":
            asked = self.options.cuda_major
            others = [c for c in remaining if all(r.admits(c[1]) for r in self.rules if r.name != "cuda")]
            keep: str | Msg = ((Msg(N_("--cuda {majors} keeps {version}"), majors=_majors(others), version=label)
                                if label else Msg(N_("--cuda {majors} instead"), majors=_majors(others)))
                               if others else "")
            instead: list[str | Msg] = [keep] if keep else []
            if usable:
                instead.append(Msg(N_("--ort-version {version} is the newest with CUDA {cuda}"),
                                   version=str(max(usable, key=lambda c: c[0])[0]), cuda=str(asked)))
            cause = Msg(N_("{name} has no CUDA {cuda} build (asked for with --cuda {cuda}; there are builds for CUDA "
                           "{majors})"), name=name, cuda=str(asked), majors=_majors(remaining))
            return NotRunning(rule, cause, Joined("; ", instead) if instead
                              else Msg(N_("no CUDA {cuda} build runs here"), cuda=str(asked)), keep)
        if rule == "driver":
            rows = [row for _, b in remaining if (row := self.matrix.cuda_major(b.cuda_major)) is not None]
            needs = sorted({str(row.driver_min.get("linux")) for row in rows})
            return NotRunning(rule, Msg(N_("{name} is built for CUDA {majors}, which needs an NVIDIA driver >= "
                                           "{needs} (the driver is {driver})"), name=name, majors=_majors(remaining),
                                        needs=" or ".join(needs), driver=str(self.facts.driver.version)),
                              closest)
        cc = min((g.compute_capability for g in self.facts.driver.gpus if g.compute_capability), key=Version)
        need = min(n for _, b in remaining if (n := self._cc_needed(b)) is not None)
        return NotRunning(rule, Msg(N_("the GPU (compute capability {cc}) is older than {name} supports (it needs "
                                       ">= {need})"), cc=str(cc), name=name, need=str(need)), closest)
