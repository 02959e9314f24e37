"""The CUDA libraries the build's CUDA provider needs, as the loader would find them (LIB001-LIB006, LIB008), and
whether the binary's needs agree with the matrix (MTX001, MTX002): missing, installed but not findable, only another
major present, shadowed by a copy outside the environment (on Windows not when the two carry the same FileVersion:
the same DLL twice), resolved to another CUDA major's copy, a missing SONAME
link, and LD_LIBRARY_PATH folders that cannot be read."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts, OrtInstall, ProviderLoad
from ortfix.check.findings import Finding
from ortfix.compat.matrix import Matrix
from ortfix.i18n import N_, Msg
from ortfix.system.inventory import LibCopy, parse_lib_name
from ortfix.system.loader import VIA_LOADED
from ortfix.system.resolved import realpath

_UNKNOWN = Msg(N_("unknown"))  # a version no file says


def matrix_agreement_findings(gpu: OrtInstall, *, sonames: bool = True) -> list[Finding]:
    provider = next((p for p in gpu.providers if p.provider == "cuda"), None)
    if not gpu.builds:
        return [Finding(
            FindingCode.UNKNOWN_VERSION, Severity.INFO,
            Msg(N_("{build} {version} is not in ortfix's compatibility matrix; its requirements were read from the "
                   "binary itself"), build=gpu.package or "onnxruntime", version=str(gpu.version)),
            (f"{provider.library}: NEEDED {', '.join(provider.needed)}" if provider else gpu.dir.capi,),
            N_("none needed; update ortfix for a matrix that knows this release"), {})]
    if provider is None or provider.error or not sonames:  # the matrix's needed lists are Linux SONAMEs
        return []
    build = gpu.builds[0]
    actual = {n for n in provider.needed if parse_lib_name(n)}
    expected = set(build.cuda_needed)
    if actual != expected:
        return [Finding(
            FindingCode.MATRIX_DISAGREES, Severity.INFO,
            Msg(N_("the installed {library} needs different libraries than the matrix says for {version}; the binary "
                   "wins"), library=os.path.basename(provider.library), version=str(gpu.version)),
            (Msg(N_("binary: {libraries}"), libraries=", ".join(sorted(actual))),
             Msg(N_("matrix: {libraries} ({source})"), libraries=", ".join(sorted(expected)), source=build.source)),
            N_("none needed"), {})]
    return []



def library_findings(facts: Facts, gpu: OrtInstall, provider: ProviderLoad) -> list[Finding]:
    out: list[Finding] = []
    key = facts.loader.key
    plat = facts.platform
    by_soname: dict[str, list[LibCopy]] = {}
    for copy in facts.libraries:
        if copy.soname:
            by_soname.setdefault(key(copy.soname), []).append(copy)
    driver_libraries = {key(n) for n in facts.loader.driver_libraries}
    missing_entirely: list[str] = []
    not_on_path: list[tuple[str, list[LibCopy]]] = []
    wrong_major: list[tuple[str, list[LibCopy]]] = []
    # Windows: found by a process started after a new login (the user Path in the registry has its folder, as
    # `--hook user-path` leaves it), though not by one started from this shell: WIN004 says so, as a warning.
    at_login = {key(d.name) for d in (facts.windows.login_differs if facts.windows else ()) if d.now is None
                and d.at_login}
    for res in provider.missing:
        if key(res.name) in driver_libraries:
            continue  # part of the driver, not of any wheel: DRV001 covers it
        copies = by_soname.get(key(res.name), [])
        if copies and key(res.name) in at_login:
            continue
        if copies:
            not_on_path.append((res.name, copies))
            continue
        family = plat.parse_library_name(res.name)
        others = [c for c in facts.libraries if family and c.family == family[0] and c.soname
                  and key(c.soname) != key(res.name)]
        if others:
            wrong_major.append((res.name, others))
        else:
            missing_entirely.append(res.name)
    if not_on_path:
        names = ", ".join(n for n, _ in not_on_path)
        evidence = tuple(Msg(N_("{library}: not found by the loader; present at {paths}"), library=n,
                             paths=", ".join(c.path for c in cs)) for n, cs in not_on_path)
        out.append(Finding(
            FindingCode.LIB_NOT_ON_PATH, Severity.ERROR,
            Msg(N_("{n} needed library is installed but not on the loader's path: {names}") if len(not_on_path) == 1
                else N_("{n} needed libraries are installed but not on the loader's path: {names}"),
                n=len(not_on_path), names=names),
            (*evidence, _search_summary(facts)),
            plat.findable_advice,
            {"libraries": {n: [c.path for c in cs] for n, cs in not_on_path}}))
    if missing_entirely:
        evidence = tuple(Msg(N_("{library}: no copy anywhere ortfix looked"), library=n) for n in missing_entirely)
        out.append(Finding(
            FindingCode.LIB_MISSING, Severity.ERROR,
            Msg(N_("{n} needed library is missing: {names}") if len(missing_entirely) == 1
                else N_("{n} needed libraries are missing: {names}"),
                n=len(missing_entirely), names=", ".join(missing_entirely)),
            (*evidence, _search_summary(facts)),
            N_("install the NVIDIA wheels that ship them and make them findable"),
            {"sonames": missing_entirely}))
    for name, others in wrong_major:
        majors = sorted({c.major for c in others if c.major is not None})
        out.append(Finding(
            FindingCode.LIB_WRONG_MAJOR, Severity.ERROR,
            Msg(N_("{library} is needed but only major version(s) {majors} of it are present"), library=name,
                majors=", ".join(map(str, majors))),
            tuple(f"{c.path} ({c.origin}{', ' + c.version if c.version else ''})" for c in others),
            Msg(N_("install the major that {package} {version} needs ({library}); the other major cannot stand in"),
                package=str(gpu.package), version=str(gpu.version), library=name),
            {"soname": name, "present": [c.path for c in others]}))
    out += _other_cuda_major(facts, gpu, provider)
    out += _shadowed(facts, provider, by_soname)
    return out


def _shadowed(facts: Facts, provider: ProviderLoad, by_soname: Mapping[str, Sequence[LibCopy]]) -> list[Finding]:
    """LIB004: a library the loader takes from outside the environment although the environment has its own copy
    (`by_soname`: the copies by the loader's key of their soname)."""
    key, plat = facts.loader.key, facts.platform
    out: list[Finding] = []
    seen: set[str] = set()
    for res in provider.resolutions:
        if res.path is None or res.name in seen or res.via == VIA_LOADED:
            continue
        seen.add(res.name)
        if res.via not in plat.shadow_vias:
            continue
        if plat.inside(res.path, facts.probe.prefix):
            continue
        own = [c for c in by_soname.get(key(res.name), []) if c.inside_env and
               os.path.normcase(realpath(c.path)) != os.path.normcase(realpath(res.path))]
        if not own or not plat.parse_library_name(res.name):
            continue
        loaded_version = next((c.version for c in facts.libraries if os.path.normcase(c.path) ==
                               os.path.normcase(res.path)), None) or _file_version(res.path)
        if plat.versions_identify_copies and loaded_version and all(c.version == loaded_version for c in own):
            continue  # the same FileVersion (torch\\lib's copy of the toolkit's DLL): identical, nothing to fix
        out.append(Finding(
            FindingCode.LIB_SHADOWED, Severity.WARNING,
            Msg(N_("{library} loads from {path} ({via}) instead of this environment's own copy"), library=res.name,
                path=res.path, via=res.via),
            (Msg(N_("loaded: {path} (version {version})"), path=res.path, version=loaded_version or _UNKNOWN),
             *(Msg(N_("environment's copy: {path} (version {version})"), path=c.path, version=c.version or _UNKNOWN)
               for c in own)),
            plat.shadow_advice,
            {"soname": res.name, "loaded": res.path, "own": [c.path for c in own]}))
    return out


def _other_cuda_major(facts: Facts, gpu: OrtInstall, provider: ProviderLoad) -> list[Finding]:
    """Libraries that resolve to a copy built for another CUDA major than the build's: the process would map two
    CUDA runtimes (a libcurand.so.10 of CUDA 13 NEEDs libcudart.so.13), or cuDNN would dlopen another cuBLAS."""
    if gpu.cuda_major is None:
        return []
    wrong: dict[str, tuple[str, int]] = {}
    driver_libraries = {facts.loader.key(n) for n in facts.loader.driver_libraries}
    for res in provider.resolutions:
        if res.path is None or res.name in wrong or facts.loader.key(res.name) in driver_libraries:
            continue
        major = facts.cuda_major_at(res.path)
        if major is not None and major != gpu.cuda_major:
            wrong[res.name] = (res.path, major)
    if not wrong:
        return []
    return [Finding(
        FindingCode.LIB_OTHER_CUDA, Severity.ERROR,
        Msg(N_("{n} library resolves to copies built for another CUDA major than {package} {version} (CUDA "
               "{cuda}): {names}") if len(wrong) == 1 else
            N_("{n} libraries resolve to copies built for another CUDA major than {package} {version} (CUDA "
               "{cuda}): {names}"), n=len(wrong), package=str(gpu.package), version=str(gpu.version),
            cuda=gpu.cuda_major, names=", ".join(wrong)),
        tuple(f"{name}: {path} (CUDA {major})" for name, (path, major) in wrong.items()),
        Msg(N_("install the CUDA {cuda} wheels that ship them and load those first; a process must not mix CUDA "
               "majors"), cuda=gpu.cuda_major),
        {"sonames": list(wrong), "cuda_major": gpu.cuda_major})]


def _file_version(path: str) -> str | None:
    parsed = parse_lib_name(os.path.basename(realpath(path)))
    return ".".join(map(str, parsed[1])) if parsed and parsed[1] else None


def _search_summary(facts: Facts) -> str | Msg:
    loader = facts.loader
    return facts.platform.search_summary(loader.ld_library_path, loader.cache, loader.default_dirs)


def soname_link_findings(facts: Facts) -> list[Finding]:
    """A versioned file whose SONAME has no file next to it: the loader asks for the SONAME and finds nothing."""
    out = []
    present = {(c.directory, c.name) for c in facts.libraries}
    for copy in facts.libraries:
        if not copy.soname or copy.name == copy.soname:
            continue
        if (copy.directory, copy.soname) in present or os.path.lexists(os.path.join(copy.directory, copy.soname)):
            continue
        out.append(Finding(
            FindingCode.SONAME_LINK_MISSING, Severity.ERROR if copy.inside_env else Severity.WARNING,
            Msg(N_("{path} has SONAME {soname}, but no {soname} link exists next to it"), path=copy.path,
                soname=copy.soname),
            (Msg(N_("{folder}: has {name}, lacks {soname}"), folder=copy.directory, name=copy.name,
                 soname=copy.soname),),
            Msg(N_("create the link {soname} -> {name} in that folder"), soname=copy.soname, name=copy.name),
            {"directory": copy.directory, "link": copy.soname, "target": copy.name,
             "inside_env": copy.inside_env}))
    return out



def partial_cudnn_findings(facts: Facts, matrix: Matrix, provider: ProviderLoad | None) -> list[Finding]:
    """LIB009: a libcudnn.so.N without the sub-libraries every cuDNN N wheel ships beside it (the matrix's SONAMEs).
    cuDNN loads them itself, by SONAME, the first time an operation needs one; a process that got this libcudnn
    (or its libcudnn_graph) aborts: "Unable to load any of {libcudnn_ops.so.9.1.0, ...}". An error when the provider
    would load cuDNN from this copy, else a warning: every other program that finds it first is at risk."""
    expected: dict[int, set[str]] = {}
    for row in matrix.cudnn:
        expected.setdefault(row.major, set()).update(row.wheel.sonames)
    present: dict[str, set[str]] = {}
    for c in facts.libraries:
        present.setdefault(c.directory, set()).add(c.name)
    resolved = {realpath(r.path) for r in (provider.resolutions if provider else ()) if r.path}
    out = []
    for copy in facts.libraries:
        if copy.family != "cudnn" or copy.name != copy.soname or copy.major not in expected:
            continue
        missing = sorted(expected[copy.major] - present.get(copy.directory, set()))
        if not missing:
            continue
        used = realpath(copy.path) in resolved
        out.append(Finding(
            FindingCode.LIB_PARTIAL_COPY, Severity.ERROR if used else Severity.WARNING,
            Msg(N_("{path} (cuDNN {version}, {origin}) is a partial copy: {n} of its sub-libraries are missing "
                   "beside it"), path=copy.path, version=copy.version or str(copy.major), origin=copy.origin,
                n=len(missing)),
            (Msg(N_("{folder}: has {names}"), folder=copy.directory,
                 names=", ".join(sorted(n for n in present[copy.directory] if "cudnn" in n))),
             Msg(N_("missing: {names}"), names=", ".join(missing)),
             *((N_("the CUDA provider would load cuDNN from this copy"),) if used else ())),
            N_("remove the partial copy (or its folder from LD_LIBRARY_PATH), or complete it; `ortfix plan` makes "
               "this environment load its own whole cuDNN first") if not copy.inside_env else
            N_("reinstall the environment's cuDNN wheel: `ortfix plan` shows how"),
            {"directory": copy.directory, "soname": copy.name, "version": copy.version, "missing": missing,
             "inside_env": copy.inside_env}))
    return out


def unreadable_dir_findings(facts: Facts) -> list[Finding]:
    if not facts.loader.unreadable:
        return []
    return [Finding(
        FindingCode.UNREADABLE_DIR, Severity.WARNING,
        Msg(N_("LD_LIBRARY_PATH has folder(s) this user cannot read: {folders}"),
            folders=", ".join(facts.loader.unreadable)),
        tuple(Msg(N_("{folder}: permission denied"), folder=d) for d in facts.loader.unreadable),
        N_("fix the folder's permissions or drop it from LD_LIBRARY_PATH; the loader cannot list it"), {})]
