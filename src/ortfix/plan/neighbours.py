"""Never break a neighbour: what a plan's package changes take from the other installed distributions.

A plan removes distributions and installs requirements; an installed distribution whose version a requirement
excludes is replaced (pip upgrades or downgrades it). Each removal or replacement is shown with whoever requires it
(`replacements`), and one that leaves a requirement of another installed distribution unmet is a conflict
(`conflicts`): the planner then chooses another build, or refuses (`refusal`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ortfix.check.facts import Facts
from ortfix.check.packages import CPU_PACKAGE, GPU_PACKAGE, OTHER_VARIANTS
from ortfix.check.requires import Need
from ortfix.i18n import N_, Msg
from ortfix.plan.model import PlanOptions
from ortfix.target.probe import Distribution

# ONNX Runtime builds stand in for each other: swapping the CPU package for the GPU one is ortfix's job (ORT006 says
# who asks for the CPU package by name), never a conflict.
ORT_BUILDS = frozenset({CPU_PACKAGE, GPU_PACKAGE, *OTHER_VARIANTS})


@dataclass(frozen=True)
class Replacement:
    """An installed distribution the plan removes (`new` None) or replaces by what `new` admits."""

    dist: Distribution
    new: str | None  # the requirement's specifier ("~=9.0", "==1.31.1"), None: removed and not reinstalled
    needs: tuple[Need, ...]  # what other installed distributions require of it
    broken: tuple[Need, ...]  # those the change leaves unmet

    def line(self) -> Msg:
        """`name old → new (required by X: spec)`."""
        new: str | Msg = f"{self.dist.name}{self.new}" if self.new else Msg(N_("removed"))
        shown = self.broken or self.needs
        by = "; ".join(f"{n.who}: {n.text}" for n in shown)
        return Msg(N_("{name} {version} → {new}{by}"), name=self.dist.name, version=self.dist.version, new=new,
                   by=Msg(N_(" (required by {needs})"), needs=by) if by else "")


def replacements(facts: Facts, removed: Iterable[str], requirements: Sequence[str],
                 needs: Sequence[Need]) -> list[Replacement]:
    """The installed distributions (inside the environment) the plan removes or replaces, each with what others
    require of it and which of those requirements the change breaks."""
    wanted: dict[str, SpecifierSet] = {}
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        wanted[canonicalize_name(req.name)] = req.specifier
    gone = {canonicalize_name(n) for n in removed}
    out: list[Replacement] = []
    for dist in facts.probe.distributions:
        name = dist.normalized
        spec = wanted.get(name)
        if name in gone:
            new = str(spec) if spec is not None else None
        elif spec is not None and dist.installed_version and not spec.contains(dist.installed_version,
                                                                               prereleases=True):
            new = str(spec)
        else:
            continue
        theirs = tuple(n for n in needs if n.name == name and n.dependant != name and n.dependant not in gone)
        if new is None and name in ORT_BUILDS and any(r in ORT_BUILDS for r in wanted):
            broken: tuple[Need, ...] = ()  # another ONNX Runtime build takes its place
        else:
            broken = tuple(n for n in theirs if not _can_meet(n, spec if new is not None else None))
        out.append(Replacement(dist, new, theirs, broken))
    return out


def _can_meet(need: Need, new: SpecifierSet | None) -> bool:
    """Whether some version the new requirement admits also meets `need`: every version either names is tried (the
    planner cannot ask an index; the apply's installer check catches what this misses)."""
    if new is None:
        return False  # removed, nothing installed in its place
    theirs = SpecifierSet(need.specifier)
    if not list(theirs):
        return True
    candidates = [s.version for spec_set in (theirs, new) for s in spec_set if s.operator not in ("!=",)]
    for text in candidates:
        try:
            version = Version(text.rstrip(".*").rstrip("."))
        except InvalidVersion:
            continue
        if theirs.contains(version, prereleases=True) and new.contains(version, prereleases=True):
            return True
    return False


def refusal(broken: Sequence[Replacement], options: PlanOptions, alternatives: Msg) -> Msg:
    """One line: which change breaks whom, and what the user can do."""
    first = broken[0]
    need = first.broken[0]
    asked = " ".join(a for a in (f"--ort-version {options.ort_version}" if options.ort_version else "",
                                 f"--cuda {options.cuda_major}" if options.cuda_major else "") if a)
    what = (Msg(N_("uninstalling {name} {version}"), name=first.dist.name, version=first.dist.version)
            if first.new is None else
            Msg(N_("replacing {name} {version} by {name}{new}"), name=first.dist.name, version=first.dist.version,
                new=str(first.new)))
    more = Msg(N_(" (and {n} more)"), n=len(broken) - 1) if len(broken) > 1 else ""
    which = (Msg(N_("the build asked for ({options})"), options=asked) if asked
             else Msg(N_("every build that runs here")))
    return Msg(N_("{which} would break {who}, which requires {requirement}: {what}{more}; {alternatives}"),
               which=which, who=need.who, requirement=need.text, what=what, more=more, alternatives=alternatives)
