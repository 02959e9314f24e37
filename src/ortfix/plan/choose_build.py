"""Which ONNX Runtime GPU build the plan ends up with: the one asked for, else the installed version's, else the
newest that this Python, platform, driver and GPU can run (`choose_build`); whether the installed build is swapped
for it (`needs_swap`), and the installed build as a choice when it stays (`installed_build`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from packaging.version import InvalidVersion, Version

from ortfix.check.codes import FindingCode as Code
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.packages import CPU_PACKAGE, GPU_PACKAGE, first_version
from ortfix.check.requires import Consumer
from ortfix.compat.matrix import Matrix
from ortfix.compat.model import OrtBuild
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.plan.build_rules import BuildRules
from ortfix.plan.model import ChosenBuild, PlanOptions


def installed_build(installed: OrtInstall) -> ChosenBuild | None:
    if not (installed.package and installed.version and installed.cuda_major):
        return None
    index = installed.builds[0].index if installed.builds else "installed"
    return ChosenBuild(package=installed.package, version=installed.version, cuda_major=installed.cuda_major,
                       cudnn_major=installed.cudnn_major, index=index, reasons=())


def needs_swap(codes: set[Code], installed: OrtInstall | None, target: ChosenBuild | None, options: PlanOptions,
               *, reinstall_ort: bool = False, arch_error: bool = False) -> bool:
    if target is None:
        return False
    if reinstall_ort or codes & {Code.NO_ORT, Code.CPU_ONLY, Code.CPU_AND_GPU, Code.PROVIDER_MISSING,
                                 Code.DRIVER_TOO_OLD, Code.ORT_ORPHANED}:
        return True
    if installed is None:
        return bool(codes & {Code.VARIANT_CONFLICT})
    if Code.ZLIBWAPI_MISSING in codes and installed.cudnn_major == 8 and (target.cudnn_major or 0) >= 9:
        return True  # WIN002's remedy: a build for cuDNN 9, which does not load zlibwapi.dll (cudnn9_first)
    if arch_error and (installed.version != target.version or installed.cuda_major != target.cuda_major):
        return True  # the GPU is older than anything the installed build runs on: another build is the fix
    if options.ort_version and installed.version:
        try:
            if Version(options.ort_version) != Version(installed.version):
                return True
        except InvalidVersion:
            return True  # the installed version cannot be read (a damaged install): install the one asked for
    return bool(options.cuda_major and installed.cuda_major != options.cuda_major)


def cudnn9_first(codes: set[Code], ranked: Sequence[ChosenBuild], options: PlanOptions) -> list[ChosenBuild]:
    """WIN002 (cuDNN 8.3-8.9 for Windows without the zlibwapi.dll no wheel ships): the builds for cuDNN 9, which does
    not load it, ranked before the cuDNN 8 ones (the remedy WIN002, explain and verify give), unless the user chose
    the build (--ort-version, --cuda). Without a cuDNN 9 build this machine runs, the ranking stays."""
    if Code.ZLIBWAPI_MISSING not in codes or options.ort_version or options.cuda_major:
        return list(ranked)
    newer = [b for b in ranked if (b.cudnn_major or 0) >= 9]
    why = N_("{package} {version}: cuDNN 8.3-8.9 for Windows load zlibwapi.dll, which no pip wheel ships (WIN002); "
             "this build is for cuDNN 9, which does not")
    return [*(dataclasses.replace(b, reasons=(*b.reasons, Msg(why, package=b.package, version=b.version)))
              for b in newer),
            *(b for b in ranked if b not in newer)]


def cudnn9_out_of_reach(codes: set[Code], target: ChosenBuild | None, options: PlanOptions,
                        matrix: Matrix) -> Msg | None:
    """The note for WIN002 when the plan stays on cuDNN 8 without the user's choice: no build for cuDNN 9 runs here,
    and the driver that the oldest CUDA major of such a Windows build needs."""
    if (Code.ZLIBWAPI_MISSING not in codes or options.ort_version or options.cuda_major
            or (target is not None and (target.cudnn_major or 0) >= 9)):
        return None
    majors = sorted({b.cuda_major for b in matrix.builds if b.package == GPU_PACKAGE and (b.cudnn_major or 0) >= 9
                     and b.index == "default" and "win_amd64" in b.platforms})
    row = matrix.cuda_major(majors[0]) if majors else None
    driver = row.driver_min.get("windows") if row else None
    if row is None or driver is None:
        return None
    return Msg(N_("WIN002 stays: no onnxruntime-gpu build for cuDNN 9 runs here; the oldest (CUDA {cuda}) needs an "
                  "NVIDIA driver >= {driver}: update the driver, then `ortfix plan` again (or find a zlibwapi.dll)"),
               cuda=row.major, driver=driver)


def _current_version(facts: Facts, installed: OrtInstall | None) -> str | None:
    """The ORT version installed now, as far as a damaged install still tells it: the GPU build's
    build_and_package_info.py, then the METADATA (or .dist-info name) of onnxruntime-gpu, then of onnxruntime, then
    any `onnxruntime` folder's build info. Only a valid version counts; None when nothing says one."""
    candidates = [installed.version if installed else None]
    for name in (GPU_PACKAGE, CPU_PACKAGE):
        candidates += [d.installed_version for d in facts.ort_distributions if d.normalized == name]
    candidates += [o.version for o in facts.ort]
    return first_version(candidates)


def choose_build(facts: Facts, matrix: Matrix, options: PlanOptions,
                 installed: OrtInstall | None, consumers: Sequence[Consumer] = ()) -> ChosenBuild | None:
    """The GPU build to end up with (the first of `ranked_builds`)."""
    ranked = ranked_builds(facts, matrix, options, installed, consumers)
    return ranked[0] if ranked else None


def ranked_builds(facts: Facts, matrix: Matrix, options: PlanOptions, installed: OrtInstall | None,
                  consumers: Sequence[Consumer] = ()) -> list[ChosenBuild]:
    """The GPU builds this Python, platform, driver and GPU can run, best first: the one asked for; else, next to an
    installed consumer of NVIDIA wheels (torch...), the release whose CUDA/cuDNN majors are its own, so its libraries
    are shared (the installed version's, if it has such a build); else the installed version's build; else the
    newest. The planner takes the first that breaks no installed distribution. Where nothing the user asked for
    runs, the one rule that ruled it out is named (build_rules.py)."""
    rules = BuildRules(facts, matrix, options)
    current = _current_version(facts, installed)
    consumer = consumers[0] if consumers else None

    def shares(build: OrtBuild) -> bool:
        return consumer is not None and consumer.cuda_major == build.cuda_major and (
            consumer.cudnn_major in (None, build.cudnn_major))

    candidates = [(Version(v), b) for b in matrix.builds if b.package == GPU_PACKAGE for v in b.versions]
    usable = [(v, b) for v, b in candidates if rules.runs_here(b)]
    share = not options.ort_version and any(shares(b) for _, b in usable)
    instead: str | Msg = ""
    keep: str | Msg = ""  # why the version asked for (or installed) is not planned: named once the build is chosen
    kept: set[Version] = set()  # the installed version's release (else its minor's), ranked first unless shared
    if options.ort_version:
        wanted = Version(options.ort_version)
        exact = [(v, b) for v, b in usable if v == wanted]
        if not exact:
            why = rules.why_not(options.ort_version, [c for c in candidates if c[0] == wanted], candidates)
            raise OrtfixError(Msg("--ort-version {version}: {cause}", version=options.ort_version, cause=why.cause),
                              hint=Msg(N_("{closest}; `ortfix matrix show` lists the known builds"),
                                       closest=why.closest))
        usable = exact
    elif current and not share:
        cur = Version(current)
        same = [(v, b) for v, b in usable if v == cur]
        same_minor = [(v, b) for v, b in usable if (v.major, v.minor) == (cur.major, cur.minor)]
        if same:
            kept = {v for v, _ in same}
        elif same_minor:
            why = rules.why_not(current, [c for c in candidates if c[0] == cur], candidates)
            instead = Msg(N_("{cause}: the nearest release of {minor}"), cause=why.cause,
                          minor=f"{cur.major}.{cur.minor}")
            kept = {v for v, _ in same_minor}
        elif usable:
            minor = f"{cur.major}.{cur.minor}"
            why = rules.why_not(minor, [c for c in candidates if (c[0].major, c[0].minor) == (cur.major, cur.minor)],
                                candidates)
            instead = Msg(N_("{cause}: the build this plan picks instead"), cause=why.cause)
            keep = Msg(" ({keep})", keep=why.keep) if why.keep else ""
    if not usable and options.cuda_major:  # the user's --cuda leaves nothing: planning on would only uninstall
        why = rules.why_not("", candidates, candidates)
        raise OrtfixError(Msg("--cuda {cuda}: {cause}", cuda=options.cuda_major, cause=why.cause),
                          hint=Msg(N_("{closest}; `ortfix matrix show` lists the known builds"), closest=why.closest))
    if not usable:
        return []
    driver_known = bool(facts.driver.version)
    cur_version = Version(current) if current and share else None

    def rank(item: tuple[Version, OrtBuild]) -> tuple[int, int, int, int, int, Version]:
        v, b = item
        # No driver to go by: prefer a build that also runs on the long-term driver branch still widely deployed
        # (cuda.yaml's widely_deployed_driver: R535, so a CUDA 12 build over a CUDA 13 one, which needs R580).
        widely = matrix.widely_deployed_driver
        broad = int(not driver_known and widely is not None
                    and matrix.driver_supports_major(widely, b.cuda_major) is True)
        return (int(shares(b)), int(v in kept), int(v == cur_version), int(b.index == "default"), broad, v)

    ordered = sorted(usable, key=rank, reverse=True)
    return [_chosen(v, b, matrix, consumer if shares(b) else None,
                    Msg(N_("{cause}, {package} {version}, is used{keep}"), cause=instead, package=b.package,
                        version=str(v), keep=keep) if instead else None, driver_known) for v, b in ordered]


def _chosen(version: Version, build: OrtBuild, matrix: Matrix, consumer: Consumer | None, instead: Msg | None,
            driver_known: bool) -> ChosenBuild:
    why: list[str | Msg] = [instead] if instead else []
    if consumer is not None:
        why.append(Msg(N_("{name} {version} uses {majors}: {package} {ort_version} is built for them, so {name}'s "
                          "libraries are shared (--ort-version/--cuda choose another build)"),
                       name=consumer.name, version=consumer.version, majors=consumer.majors(), package=build.package,
                       ort_version=str(version)))
    cuda_row = matrix.cuda_major(build.cuda_major)
    if not driver_known and cuda_row is not None:
        why.append(Msg(N_("{package} {version} is built for CUDA {cuda}: the machine it runs on needs an NVIDIA "
                          "driver >= {driver} (no driver is known here; for another machine, plan with --driver "
                          "VERSION)"), package=build.package, version=str(version), cuda=build.cuda_major,
                       driver=str(cuda_row.driver_min.get("linux"))))
    return ChosenBuild(package=build.package, version=str(version), cuda_major=build.cuda_major,
                       cudnn_major=build.cudnn_major, index=build.index, reasons=tuple(why))
