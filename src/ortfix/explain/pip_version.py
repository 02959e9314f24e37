"""The `pip-version` analysis: pip could not find onnxruntime-gpu==X. It sets X against the versions pip offered,
the builds the compatibility matrix knows of X (their index, Python tags, platforms) and, with this machine's facts,
the target's Python, platform and glibc."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ortfix.check.packages import GPU_PACKAGE
from ortfix.compat.platforms import wheel_platform
from ortfix.explain.context import AnalysisContext, version_or_none, version_or_zero
from ortfix.i18n import N_, Joined, Msg

if TYPE_CHECKING:
    from packaging.version import Version

    from ortfix.check.facts import Facts
    from ortfix.compat.matrix import Matrix
    from ortfix.compat.model import OrtBuild


def _tag_minor(tag: str) -> int:
    digits = tag[3:].rstrip("t")  # cp312 -> 12, cp313t -> 13
    return int(digits) if digits.isdigit() else 0


def _python_of(tag: str) -> str:
    return f"{tag[2]}.{tag[3:]}" if len(tag) > 3 else tag


def _tags_text(tags: Sequence[str]) -> str | Msg:
    ordered = sorted(set(tags), key=_tag_minor)
    minors = [_tag_minor(t) for t in ordered]
    if len(ordered) > 2 and minors == list(range(minors[0], minors[0] + len(minors))):
        return f"{ordered[0]}-{ordered[-1]}"
    return Joined(N_(", "), ordered)


def _platform(facts: Facts) -> str | None:
    """The wheel platform of the target as the matrix names it (linux_x86_64, win_amd64); None for macOS."""
    return wheel_platform(facts.probe.system, facts.probe.machine)


def _gpu_rows(matrix: Matrix, version: str) -> list[OrtBuild]:
    return [b for b in matrix.builds_for(version) if b.package == GPU_PACKAGE]


def _installs_here(build: OrtBuild, facts: Facts) -> bool:
    """A default-index build with a wheel for the target's Python and platform (as far as the matrix says)."""
    return (build.index == "default" and build.package == GPU_PACKAGE
            and build.installs_for(facts.probe.python_tag, facts.probe.python_version, _platform(facts)))


def _newest(matrix: Matrix, keep: Callable[[OrtBuild], bool]) -> Version | None:
    versions = [version_or_zero(v) for b in matrix.builds if keep(b) for v in b.versions]
    return max(versions, default=None)


def _oldest(matrix: Matrix, keep: Callable[[OrtBuild], bool]) -> Version | None:
    versions = [version_or_zero(v) for b in matrix.builds if keep(b) for v in b.versions]
    return min(versions, default=None)


_ASKED = re.compile(r"===?\s*v?(?P<version>\d+(?:\.\d+)*)(?![\w.*+])")
_SKIPPED_FOR_PYTHON = re.compile(r"(?P<version>\d+(?:\.\d+)*)\s+Requires-Python\s+(?P<spec>[^;\n]+)")
_IGNORED_HEADER = "Ignored the following versions that require a different python version:"  # i18n: english (pip's)


def pip_version(ctx: AnalysisContext) -> list[Msg]:
    """pip could not find onnxruntime-gpu==X: X against the versions pip offered, the builds the matrix knows of X
    (their index, Python tags, platforms) and, with facts, this environment's Python, platform and glibc."""
    out: list[Msg] = []
    m = _ASKED.search(ctx.groups.get("requirement", ""))
    asked = version_or_none(m.group("version")) if m else None
    offered_text = ctx.groups.get("offered")
    offered: list[Version] | None = None
    if offered_text is not None:
        offered = sorted({v for v in (version_or_none(p.strip()) for p in offered_text.split(",")) if v is not None})
        if not offered:
            out.append(Msg(N_("pip found no onnxruntime-gpu release at all with a file that installs here "
                              "('from versions: none').")))
        elif asked is not None and asked in offered:
            out.append(Msg(N_("{asked} is in pip's list, so a file of it installs here; another requirement or a "
                              "constraint of the same install rules it out."), asked=str(asked)))
            return out
        elif asked is not None:
            out.append(Msg(N_("pip's list runs from {first} to {last} ({count} versions) but lacks the asked "
                              "{asked}."), first=str(offered[0]), last=str(offered[-1]), count=len(offered),
                           asked=str(asked)))
    if asked is not None:
        skipped = _skipped_for_python(ctx.text)
        if str(asked) in skipped:
            out.append(Msg(N_("pip skipped {asked} because it requires Python {spec}."), asked=str(asked),
                           spec=skipped[str(asked)]))
    matrix = ctx.matrix.get()
    if matrix is None:
        return out
    if asked is None:
        if ctx.facts is not None:
            out += _pip_any_version_here(matrix, ctx.facts, offered)
        return out
    rows = _gpu_rows(matrix, str(asked))
    if not rows:
        out.append(Msg(N_("ortfix's compatibility matrix knows no onnxruntime-gpu {asked}: check the version number."),
                       asked=str(asked)))
        return out
    default = [b for b in rows if b.index == "default"]
    alternate = [b for b in rows if b.index == "alternate"]
    if not default and not alternate:
        oldest = _oldest(matrix, lambda b: b.package == GPU_PACKAGE and b.index == "default")
        out.append(Msg(N_("onnxruntime-gpu {asked} is no longer published on the default index (its oldest "
                          "onnxruntime-gpu is {oldest}).") if oldest else
                       N_("onnxruntime-gpu {asked} is no longer published on the default index."),
                       asked=str(asked), oldest=str(oldest)))
        return out
    if alternate:
        alt = _cuda_majors({b.cuda_major for b in alternate})
        if default:
            out.append(Msg(N_("On the default index {asked} is the {base} build; its {alt} build lives on a separate "
                              "feed, configured in your pip configuration (an extra index)."), asked=str(asked),
                           base=_cuda_majors({b.cuda_major for b in default}), alt=alt))
        else:
            out.append(Msg(N_("{asked} exists only as a {alt} build on a separate feed, configured in your pip "
                              "configuration (an extra index); the default index does not have it."),
                           asked=str(asked), alt=alt))
    if not default:
        return out
    tags = sorted({t for b in default for t in b.python_tags}, key=_tag_minor)
    platforms = sorted({p for b in default for p in b.platforms})
    requires = sorted({b.requires_python for b in default if b.requires_python})
    if tags or platforms:
        parts = ([Msg(N_(" for {tags}"), tags=_tags_text(tags))] if tags else []) + (
            [Msg(N_(" (Requires-Python {spec})"), spec=", ".join(requires))] if requires else []) + (
            [Msg(N_(" on {platforms}"), platforms=Joined(N_(", "), platforms))] if platforms else [])
        out.append(Msg(N_("On the default index {asked} has wheels{parts}."), asked=str(asked),
                       parts=Joined("", parts)))
    if ctx.facts is None:
        if offered:
            out += _pip_python_from_offered(matrix, asked, tags, offered)
        return out
    out += _pip_asked_here(matrix, ctx.facts, str(asked), default, tags, platforms, offered)
    return out


def _cuda_majors(majors: set[int]) -> Msg:
    """"CUDA 11 and CUDA 12"."""
    names = [f"CUDA {c}" for c in sorted(majors)]
    return Msg(N_("{first} and {second}"), first=names[0], second=names[1]) if len(names) == 2 else Msg(
        "{names}", names=" and ".join(names))


def _skipped_for_python(text: str) -> dict[str, str]:
    """The versions pip's 'Ignored the following versions that require a different python version' line lists."""
    at = text.find(_IGNORED_HEADER)
    if at < 0:
        return {}
    block = text[at + len(_IGNORED_HEADER): at + len(_IGNORED_HEADER) + 4000]
    block = block.split("Could not find a version", 1)[0]
    return {m.group("version"): m.group("spec").strip() for m in _SKIPPED_FOR_PYTHON.finditer(block)}


def _pip_python_from_offered(matrix: Matrix, asked: Version, tags: Sequence[str],
                             offered: Sequence[Version]) -> list[Msg]:
    """Without facts: the Python tags every offered version has a wheel for, against the asked version's tags."""
    common: set[str] | None = None
    for v in offered:
        known = {t for b in _gpu_rows(matrix, str(v)) if b.index == "default" for t in b.python_tags}
        if known:
            common = known if common is None else common & known
    if not common or not tags:
        return []
    likely = sorted(common - set(tags), key=_tag_minor)
    if len(likely) == 1:
        return [Msg(N_("Every version pip offered that ortfix knows has a {tag} wheel, which {asked} lacks: this is "
                       "most likely CPython {python}."), tag=likely[0], asked=str(asked),
                    python=_python_of(likely[0]))]
    if likely:
        return [Msg(N_("Every version pip offered that ortfix knows has wheels for {tags}, which {asked} lacks: this "
                       "Python is most likely one of those."), tags=_tags_text(likely), asked=str(asked))]
    return [Msg(N_("{asked} has wheels for the Python versions the offered releases have in common ({tags}), so the "
                   "Python version is not what rules it out: its platform or manylinux (glibc) tag, or an index "
                   "that lacks it, does."), asked=str(asked), tags=_tags_text(sorted(common, key=_tag_minor)))]


def _pip_asked_here(matrix: Matrix, facts: Facts, asked: str, default: Sequence[OrtBuild], tags: Sequence[str],
                    platforms: Sequence[str], offered: Sequence[Version] | None) -> list[Msg]:
    """With facts: which of this environment's Python, platform and glibc rules the asked version out."""
    probe = facts.probe
    tag = probe.python_tag
    python = ".".join(probe.python_version.split(".")[:2])
    platform = _platform(facts)
    out: list[Msg] = []
    ruled_out = False
    if tags and tag not in tags:
        ruled_out = True
        newest = _newest(matrix, lambda b: _installs_here(b, facts))
        out.append(Msg(N_("This environment runs CPython {python} ({tag}), for which {asked} has no wheel; the newest "
                          "onnxruntime-gpu with a {tag} wheel for {platform} is {newest}.") if newest else
                       N_("This environment runs CPython {python} ({tag}), for which {asked} has no wheel; no "
                          "onnxruntime-gpu release ortfix knows has a {tag} wheel for {platform}."),
                       python=python, tag=tag, asked=asked, newest=str(newest),
                       platform=(platform if newest else platform or probe.system) or "None"))
    elif not all(b.admits_python(probe.python_version) for b in default):
        ruled_out = True
        out.append(Msg(N_("This environment runs Python {version}, which {asked}'s Requires-Python excludes."),
                       version=probe.python_version, asked=asked))
    if platform is None:
        ruled_out = True
        out.append(Msg(N_("This machine is {system} {machine}: onnxruntime-gpu publishes no wheels for it (there is "
                          "no CUDA on macOS).") if probe.system == "Darwin" else
                       N_("This machine is {system} {machine}: onnxruntime-gpu publishes no wheels for it (none in "
                          "ortfix's matrix)."), system=probe.system, machine=probe.machine))
    elif platforms and platform not in platforms:
        ruled_out = True
        first = _oldest(matrix, lambda b: b.index == "default" and b.package == GPU_PACKAGE
                        and platform in b.platforms)
        out.append(Msg(N_("This machine is {platform}; {asked} has no wheel for it (the first onnxruntime-gpu with a "
                          "{platform} wheel is {first}).") if first else
                       N_("This machine is {platform}; {asked} has no wheel for it (no onnxruntime-gpu release ortfix "
                          "knows has one)."), platform=platform, asked=asked, first=str(first)))
    if not ruled_out and (offered is None or version_or_zero(asked) not in offered):
        out.append(Msg(N_("This environment's Python ({tag}) and platform ({platform}) have {asked} wheels, so what "
                          "remains is the wheel's manylinux tag against this machine's glibc ({glibc}; "
                          "manylinux_2_28 needs glibc 2.28 or later), or an index (a mirror in your pip "
                          "configuration) that lacks {asked}.") if probe.system == "Linux" else
                       N_("This environment's Python ({tag}) and platform ({platform}) have {asked} wheels, so what "
                          "remains is an index (a mirror in your pip configuration) that lacks {asked}."),
                       tag=tag, platform=str(platform), asked=asked, glibc=_glibc(facts)))
    return out


def _glibc(facts: Facts) -> str | Msg:
    return facts.probe.glibc or Msg(N_("unknown"))


def _pip_any_version_here(matrix: Matrix, facts: Facts, offered: Sequence[Version] | None) -> list[Msg]:
    """No version asked: whether any onnxruntime-gpu release has a wheel for this Python and platform."""
    probe = facts.probe
    platform = _platform(facts)
    python = ".".join(probe.python_version.split(".")[:2])
    if platform is None:
        return [Msg(N_("This machine is {system} {machine}: onnxruntime-gpu publishes no wheels for it (there is no "
                       "CUDA on macOS).") if probe.system == "Darwin" else
                    N_("This machine is {system} {machine}: onnxruntime-gpu publishes no wheels for it."),
                    system=probe.system, machine=probe.machine)]
    newest = _newest(matrix, lambda b: _installs_here(b, facts))
    if newest is None:
        any_platform = _newest(matrix, lambda b: b.index == "default" and b.package == GPU_PACKAGE
                               and platform in b.platforms)
        if any_platform is None:
            return [Msg(N_("No onnxruntime-gpu release ortfix knows has a wheel for {platform}."), platform=platform)]
        return [Msg(N_("No onnxruntime-gpu release ortfix knows has a wheel for CPython {python} ({tag}) on "
                       "{platform}: use an interpreter a release supports (a new venv)."), python=python,
                    tag=probe.python_tag, platform=platform)]
    if offered is not None and not offered:
        return [Msg(N_("onnxruntime-gpu {newest} has a wheel for CPython {python} on {platform}, yet pip found none: "
                       "its manylinux tag may need a newer glibc than this machine's ({glibc}), or the index in your "
                       "pip configuration (a mirror) lacks the package."), newest=str(newest), python=python,
                    platform=platform, glibc=_glibc(facts))]
    return [Msg(N_("The newest onnxruntime-gpu with a wheel for CPython {python} on {platform} is {newest}."),
                python=python, platform=platform, newest=str(newest))]
