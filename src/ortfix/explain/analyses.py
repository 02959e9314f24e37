"""What a message, the compatibility matrix and, when given, this machine's facts add to an error pattern's general
explanation: the analyses an errors.yaml row may name (`analysis`). compat.schemas.Analysis is the one list of their
names; analysis_function gives each its function, and mypy checks that no name is left without one.

pip-version: the version pip was asked for against the versions it offered and the wheels each release has (and this
environment's Python, platform and glibc); numpy-abi / numpy-dtype: which way NumPy and a module disagree; gpu-count:
the device ids that exist here; driver: the driver here against the CUDA the installed build was made with.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from packaging.version import InvalidVersion, Version

from ortfix.compat.load import load_matrix
from ortfix.compat.platforms import wheel_platform
from ortfix.compat.schemas import Analysis
from ortfix.errors import OrtfixError

if TYPE_CHECKING:
    from ortfix.check.facts import Facts
    from ortfix.compat.matrix import Matrix
    from ortfix.compat.model import OrtBuild

# Every analysis name, in the order compat.schemas.Analysis lists them.
ANALYSES: tuple[str, ...] = tuple(Analysis)

_GPU_PACKAGE = "onnxruntime-gpu"
# The first onnxruntime release built against NumPy 2 (which also runs on NumPy 1.x): microsoft/onnxruntime#21063,
# closed with "onnxruntime>=1.19.0 ... is compatible with numpy>=2.0.0". compat/errors.yaml cites the sources.
_FIRST_NUMPY2_BUILD = "1.19.0"
# sizeof(PyArray_Descr) on 64-bit platforms: NumPy 1.x's struct (ndarraytypes.h), NumPy 2's (NumPy's C-API docs).
_DTYPE_SIZE_NUMPY1 = 96
_DTYPE_SIZE_NUMPY2 = 88


class MatrixOnDemand:
    """The matrix an analysis reads: the one given, else the default compat folder's, read on first use; None when
    it cannot be read (the analysis then says less, it does not fail)."""

    def __init__(self, matrix: Matrix | None) -> None:
        self._matrix = matrix
        self._tried = matrix is not None

    def get(self) -> Matrix | None:
        if not self._tried:
            self._tried = True
            try:
                self._matrix = load_matrix()
            except OrtfixError:
                self._matrix = None
        return self._matrix


@dataclass(frozen=True)
class AnalysisContext:
    text: str  # the whole input
    groups: Mapping[str, str]  # the named groups of this pattern's match
    matrix: MatrixOnDemand
    facts: Facts | None  # the target environment's, when `check` ran


def _version(text: str | None) -> Version | None:
    """`text` as a version; None when it is empty or not one."""
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def _v(text: str) -> Version:
    """A version the matrix, an installed distribution or a constant holds; 0 when it is none."""
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def _tag_minor(tag: str) -> int:
    digits = tag[3:].rstrip("t")  # cp312 -> 12, cp313t -> 13
    return int(digits) if digits.isdigit() else 0


def _python_of(tag: str) -> str:
    return f"{tag[2]}.{tag[3:]}" if len(tag) > 3 else tag


def _tags_text(tags: Sequence[str]) -> str:
    ordered = sorted(set(tags), key=_tag_minor)
    minors = [_tag_minor(t) for t in ordered]
    if len(ordered) > 2 and minors == list(range(minors[0], minors[0] + len(minors))):
        return f"{ordered[0]}-{ordered[-1]}"
    return ", ".join(ordered)


def _platform(facts: Facts) -> str | None:
    """The wheel platform of the target as the matrix names it (linux_x86_64, win_amd64); None for macOS."""
    return wheel_platform(facts.probe.system, facts.probe.machine)


def _gpu_rows(matrix: Matrix, version: str) -> list[OrtBuild]:
    return [b for b in matrix.builds_for(version) if b.package == _GPU_PACKAGE]


def _installs_here(build: OrtBuild, facts: Facts) -> bool:
    """A default-index build with a wheel for the target's Python and platform (as far as the matrix says)."""
    return (build.index == "default" and build.package == _GPU_PACKAGE
            and build.installs_for(facts.probe.python_tag, facts.probe.python_version, _platform(facts)))


def _newest(matrix: Matrix, keep: Callable[[OrtBuild], bool]) -> Version | None:
    versions = [_v(v) for b in matrix.builds if keep(b) for v in b.versions]
    return max(versions, default=None)


def _oldest(matrix: Matrix, keep: Callable[[OrtBuild], bool]) -> Version | None:
    versions = [_v(v) for b in matrix.builds if keep(b) for v in b.versions]
    return min(versions, default=None)


_ASKED = re.compile(r"===?\s*v?(?P<version>\d+(?:\.\d+)*)(?![\w.*+])")
_SKIPPED_FOR_PYTHON = re.compile(r"(?P<version>\d+(?:\.\d+)*)\s+Requires-Python\s+(?P<spec>[^;\n]+)")
_IGNORED_HEADER = "Ignored the following versions that require a different python version:"


def _pip_version(ctx: AnalysisContext) -> list[str]:
    """pip could not find onnxruntime-gpu==X: X against the versions pip offered, the builds the matrix knows of X
    (their index, Python tags, platforms) and, with facts, this environment's Python, platform and glibc."""
    out: list[str] = []
    m = _ASKED.search(ctx.groups.get("requirement", ""))
    asked = _version(m.group("version")) if m else None
    offered_text = ctx.groups.get("offered")
    offered: list[Version] | None = None
    if offered_text is not None:
        offered = sorted({v for v in (_version(p.strip()) for p in offered_text.split(",")) if v is not None})
        if not offered:
            out.append("pip found no onnxruntime-gpu release at all with a file that installs here "
                       "('from versions: none').")
        elif asked is not None and asked in offered:
            out.append(f"{asked} is in pip's list, so a file of it installs here; another requirement or a "
                       "constraint of the same install rules it out.")
            return out
        elif asked is not None:
            out.append(f"pip's list runs from {offered[0]} to {offered[-1]} ({len(offered)} versions) "
                       f"but lacks the asked {asked}.")
    if asked is not None:
        skipped = _skipped_for_python(ctx.text)
        if str(asked) in skipped:
            out.append(f"pip skipped {asked} because it requires Python {skipped[str(asked)]}.")
    matrix = ctx.matrix.get()
    if matrix is None:
        return out
    if asked is None:
        if ctx.facts is not None:
            out += _pip_any_version_here(matrix, ctx.facts, offered)
        return out
    rows = _gpu_rows(matrix, str(asked))
    if not rows:
        out.append(f"ortfix's compatibility matrix knows no onnxruntime-gpu {asked}: check the version number.")
        return out
    default = [b for b in rows if b.index == "default"]
    alternate = [b for b in rows if b.index == "alternate"]
    if not default and not alternate:
        oldest = _oldest(matrix, lambda b: b.package == _GPU_PACKAGE and b.index == "default")
        out.append(f"onnxruntime-gpu {asked} is no longer published on the default index"
                   + (f" (its oldest onnxruntime-gpu is {oldest})." if oldest else "."))
        return out
    if alternate:
        alt = " and ".join(f"CUDA {c}" for c in sorted({b.cuda_major for b in alternate}))
        if default:
            base = " and ".join(f"CUDA {c}" for c in sorted({b.cuda_major for b in default}))
            out.append(f"On the default index {asked} is the {base} build; its {alt} build lives on a separate "
                       "feed, configured in your pip configuration (an extra index).")
        else:
            out.append(f"{asked} exists only as a {alt} build on a separate feed, configured in your pip "
                       "configuration (an extra index); the default index does not have it.")
    if not default:
        return out
    tags = sorted({t for b in default for t in b.python_tags}, key=_tag_minor)
    platforms = sorted({p for b in default for p in b.platforms})
    requires = sorted({b.requires_python for b in default if b.requires_python})
    if tags or platforms:
        out.append(f"On the default index {asked} has wheels"
                   + (f" for {_tags_text(tags)}" if tags else "")
                   + (f" (Requires-Python {', '.join(requires)})" if requires else "")
                   + (f" on {', '.join(platforms)}" if platforms else "") + ".")
    if ctx.facts is None:
        if offered:
            out += _pip_python_from_offered(matrix, asked, tags, offered)
        return out
    out += _pip_asked_here(matrix, ctx.facts, str(asked), default, tags, platforms, offered)
    return out


def _skipped_for_python(text: str) -> dict[str, str]:
    """The versions pip's 'Ignored the following versions that require a different python version' line lists."""
    at = text.find(_IGNORED_HEADER)
    if at < 0:
        return {}
    block = text[at + len(_IGNORED_HEADER): at + len(_IGNORED_HEADER) + 4000]
    block = block.split("Could not find a version", 1)[0]
    return {m.group("version"): m.group("spec").strip() for m in _SKIPPED_FOR_PYTHON.finditer(block)}


def _pip_python_from_offered(matrix: Matrix, asked: Version, tags: Sequence[str],
                             offered: Sequence[Version]) -> list[str]:
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
        return [f"Every version pip offered that ortfix knows has a {likely[0]} wheel, which {asked} lacks: "
                f"this is most likely CPython {_python_of(likely[0])}."]
    if likely:
        return [f"Every version pip offered that ortfix knows has wheels for {_tags_text(likely)}, which {asked} "
                "lacks: this Python is most likely one of those."]
    return [f"{asked} has wheels for the Python versions the offered releases have in common "
            f"({_tags_text(sorted(common, key=_tag_minor))}), so the Python version is not what rules it out: "
            "its platform or manylinux (glibc) tag, or an index that lacks it, does."]


def _pip_asked_here(matrix: Matrix, facts: Facts, asked: str, default: Sequence[OrtBuild], tags: Sequence[str],
                    platforms: Sequence[str], offered: Sequence[Version] | None) -> list[str]:
    """With facts: which of this environment's Python, platform and glibc rules the asked version out."""
    probe = facts.probe
    tag = probe.python_tag
    python = ".".join(probe.python_version.split(".")[:2])
    platform = _platform(facts)
    out: list[str] = []
    ruled_out = False
    if tags and tag not in tags:
        ruled_out = True
        newest = _newest(matrix, lambda b: _installs_here(b, facts))
        out.append(f"This environment runs CPython {python} ({tag}), for which {asked} has no wheel; "
                   + (f"the newest onnxruntime-gpu with a {tag} wheel for {platform} is {newest}."
                      if newest else f"no onnxruntime-gpu release ortfix knows has a {tag} wheel for "
                                     f"{platform or probe.system}."))
    elif not all(b.admits_python(probe.python_version) for b in default):
        ruled_out = True
        out.append(f"This environment runs Python {probe.python_version}, which {asked}'s Requires-Python excludes.")
    if platform is None:
        ruled_out = True
        out.append(f"This machine is {probe.system} {probe.machine}: onnxruntime-gpu publishes no wheels for it "
                   + ("(there is no CUDA on macOS)." if probe.system == "Darwin" else "(none in ortfix's matrix)."))
    elif platforms and platform not in platforms:
        ruled_out = True
        first = _oldest(matrix, lambda b: b.index == "default" and b.package == _GPU_PACKAGE
                        and platform in b.platforms)
        out.append(f"This machine is {platform}; {asked} has no wheel for it"
                   + (f" (the first onnxruntime-gpu with a {platform} wheel is {first})." if first
                      else " (no onnxruntime-gpu release ortfix knows has one)."))
    if not ruled_out and (offered is None or _v(asked) not in offered):
        remains = (f"the wheel's manylinux tag against this machine's glibc ({probe.glibc or 'unknown'}; "
                   "manylinux_2_28 needs glibc 2.28 or later), or " if probe.system == "Linux" else "")
        out.append(f"This environment's Python ({tag}) and platform ({platform}) have {asked} wheels, so what "
                   f"remains is {remains}an index (a mirror in your pip configuration) that lacks {asked}.")
    return out


def _pip_any_version_here(matrix: Matrix, facts: Facts, offered: Sequence[Version] | None) -> list[str]:
    """No version asked: whether any onnxruntime-gpu release has a wheel for this Python and platform."""
    probe = facts.probe
    platform = _platform(facts)
    python = ".".join(probe.python_version.split(".")[:2])
    if platform is None:
        return [f"This machine is {probe.system} {probe.machine}: onnxruntime-gpu publishes no wheels for it"
                + (" (there is no CUDA on macOS)." if probe.system == "Darwin" else ".")]
    newest = _newest(matrix, lambda b: _installs_here(b, facts))
    if newest is None:
        any_platform = _newest(matrix, lambda b: b.index == "default" and b.package == _GPU_PACKAGE
                               and platform in b.platforms)
        if any_platform is None:
            return [f"No onnxruntime-gpu release ortfix knows has a wheel for {platform}."]
        return [f"No onnxruntime-gpu release ortfix knows has a wheel for CPython {python} ({probe.python_tag}) on "
                f"{platform}: use an interpreter a release supports (a new venv)."]
    if offered is not None and not offered:
        return [f"onnxruntime-gpu {newest} has a wheel for CPython {python} on {platform}, yet pip found none: its "
                f"manylinux tag may need a newer glibc than this machine's ({probe.glibc or 'unknown'}), or the "
                "index in your pip configuration (a mirror) lacks the package."]
    return [f"The newest onnxruntime-gpu with a wheel for CPython {python} on {platform} is {newest}."]


_ORT_TRACEBACK = re.compile(r"onnxruntime[\\/]+capi|onnxruntime_pybind11_state")


def _numpy_abi(ctx: AnalysisContext) -> list[str]:
    """A module and NumPy disagree: which NumPy the message names, whether the traceback runs through onnxruntime,
    and (with facts) which onnxruntime release is installed and whether it was built against NumPy 2."""
    out: list[str] = []
    g = ctx.groups
    if "numpy" in g:
        out.append(f"The NumPy in use is {g['numpy']}; the module was built against NumPy 1.x.")
    if "built" in g and "running" in g:
        built, running = int(g["built"], 16), int(g["running"], 16)
        kind = g.get("kind", "API")
        if built > running:
            out.append(f"The module was built against NumPy C-{kind} version 0x{g['built']}, the installed NumPy "
                       f"has 0x{g['running']}: NumPy is older than the one the module was built with.")
        elif built < running:
            out.append(f"The module was built against NumPy C-{kind} version 0x{g['built']}, the installed NumPy "
                       f"has 0x{g['running']}: the module predates this NumPy.")
    if _ORT_TRACEBACK.search(ctx.text):
        out.append("The traceback runs through onnxruntime's own native module (onnxruntime_pybind11_state), so "
                   "the installed onnxruntime is the module at odds with NumPy.")
    if ctx.facts is not None:
        out += _ort_numpy_here(ctx.facts)
    return out


def _ort_numpy_here(facts: Facts) -> list[str]:
    dists = [d for d in facts.ort_distributions if d.installed_version]
    if not dists:
        return ["No onnxruntime distribution is installed in this environment, so the module is another package."]
    out = []
    for d in dists:
        v = _v(d.installed_version or "0")
        if v < _v(_FIRST_NUMPY2_BUILD):
            out.append(f"This environment has {d.name} {v}, built against NumPy 1.x: it needs `numpy<2`, or "
                       f"{d.name} {_FIRST_NUMPY2_BUILD} or later.")
        else:
            out.append(f"This environment has {d.name} {v}; releases from {_FIRST_NUMPY2_BUILD} on are built "
                       "against NumPy 2 and run with NumPy 1.x and 2.x, so unless this build came from another feed, "
                       "the module at odds with NumPy is another package (the traceback's last import names it).")
    return out


def _numpy_dtype(ctx: AnalysisContext) -> list[str]:
    """numpy.dtype size changed: which NumPy the module was built against, from the two sizes Cython compared."""
    out: list[str] = []
    expected, got = ctx.groups.get("expected"), ctx.groups.get("got")
    if expected and got:
        sizes = {_DTYPE_SIZE_NUMPY1: "NumPy 1.x", _DTYPE_SIZE_NUMPY2: "NumPy 2.x"}
        built, running = sizes.get(int(expected)), sizes.get(int(got))
        if built and running and built != running:
            out.append(f"Expected {expected}, got {got}: the module was built against {built} and runs under "
                       f"{running}.")
    if ctx.facts is not None:
        old = [d for d in ctx.facts.ort_distributions
               if d.installed_version and _v(d.installed_version) < _v(_FIRST_NUMPY2_BUILD)]
        for d in old:
            out.append(f"This environment also has {d.name} {d.installed_version}, which needs NumPy 1.x: "
                       "`numpy<2` fits both, upgrading it to 1.19 or later lets NumPy 2 stay.")
    return out


def _gpu_count(ctx: AnalysisContext) -> list[str]:
    """Which device ids exist here: the GPUs the driver reports."""
    if ctx.facts is None:
        return []
    driver = ctx.facts.driver
    if not driver.present:
        return ["No NVIDIA driver was found in this environment, so no device_id is valid here."]
    gpus = driver.gpus
    if not gpus:
        return ["The NVIDIA driver here reports no GPU."]
    names = ", ".join(f"{g.index}: {g.name}" for g in gpus)
    return [f"The driver here reports {len(gpus)} GPU{'s' if len(gpus) != 1 else ''} ({names}); valid device_id "
            f"values are 0 to {len(gpus) - 1}, fewer when CUDA_VISIBLE_DEVICES lists fewer."]


def _driver(ctx: AnalysisContext) -> list[str]:
    """The driver here, the CUDA it runs, and the CUDA the installed onnxruntime-gpu was built with."""
    facts = ctx.facts
    if facts is None:
        return []
    driver = facts.driver
    if not driver.present or not driver.version:
        return ["No NVIDIA driver was found in this environment (`ortfix check` reports DRV001)."]
    runs = driver.cuda_version
    if runs is None:
        matrix = ctx.matrix.get()
        highest = matrix.highest_cuda_for_driver(driver.version) if matrix else None
        runs = str(highest) if highest else None
    gpus = len(driver.gpus)
    out = [f"The NVIDIA driver here is {driver.version}" + (f", which runs CUDA up to {runs}" if runs else "")
           + (f", with {gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "") + "."]
    for install in facts.ort:
        built = install.cuda_version or next((b.cuda_build for b in install.builds if b.cuda_build), None)
        if not install.version or install.cuda_major is None:
            continue
        sentence = (f"The installed {install.package or 'onnxruntime'} {install.version} is a CUDA "
                    f"{install.cuda_major} build" + (f" compiled with CUDA {built}" if built else ""))
        b, r = _version(built), _version(runs)
        if b is not None and r is not None and b.release[:2] > r.release[:2]:
            sentence += f", newer than the driver's CUDA {runs}: that is the mismatch"
        out.append(sentence + ".")
    return out


AnalysisFunction = Callable[["AnalysisContext"], list[str]]


def analysis_function(name: Analysis) -> AnalysisFunction:
    """The function of an analysis name (every member of Analysis has one: mypy fails on a member left out)."""
    if name is Analysis.PIP_VERSION:
        return _pip_version
    if name is Analysis.NUMPY_ABI:
        return _numpy_abi
    if name is Analysis.NUMPY_DTYPE:
        return _numpy_dtype
    if name is Analysis.GPU_COUNT:
        return _gpu_count
    if name is Analysis.DRIVER:
        return _driver
    return _unreachable(name)


def _unreachable(name: NoReturn) -> NoReturn:
    raise AssertionError(f"analysis {name!r} has no function")
