"""Gather the facts about one target environment: probe, driver, library copies, and the loader's answer for every
library ORT's GPU providers need in a fresh process of that interpreter. Everything platform-specific is reached
through a `system.platform.Platform`; the probe run and the unfinished-transaction reader come from the caller.

Over ~400 lines: the types of the facts, gathering them and the per-install analysis (which build, which provider
loads what) are read together; the provider simulation and the JSON digest are the candidates to move out."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property

from ortfix.compat.matrix import Matrix
from ortfix.compat.model import OrtBuild
from ortfix.errors import OrtfixError
from ortfix.i18n import N_
from ortfix.record import asdict, field, frozen
from ortfix.system.driver import DriverFacts, overridden_driver
from ortfix.system.inventory import LibCopy, cuda_major_by_name
from ortfix.system.linux.platform import DRIVER_LIBRARIES  # the default of LoaderContext.driver_libraries
from ortfix.system.loader import Resolution
from ortfix.system.pipconfig import PipConfig, read_pip_config
from ortfix.system.platform import MachineLoader, unsupported
from ortfix.system.platforms import host_platform
from ortfix.system.project import Project, find_tool, project_of
from ortfix.system.resolved import realpath
from ortfix.target.probe import Distribution, OrtDir, ProbeFacts, finish_probe, start_probe
from ortfix.target.proberun import stop_probe

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` for mypy only: importing it is no part of a check's work (speed/__init__.py)
    from enum import Enum
    from typing import Protocol

    from ortfix.system.platform_protocols import LibraryReader, Platform, SimulatedProcess
    from ortfix.system.windows.facts import WindowsFacts
    from ortfix.target.proberun import ProbeRun as ProbeRun  # running, or done already

    class UnfinishedTransaction(Protocol):
        """An apply or rollback that died half-way, or whose journal cannot be read or trusted (the transaction
        journal's reader gives these; facts only carries them, so it never imports the transaction layer)."""

        @property
        def id(self) -> str: ...
        @property
        def status(self) -> Enum | None: ...  # running | rolling-back; None: unreadable
        @property
        def created(self) -> str: ...
        @property
        def steps_started(self) -> int: ...
        @property
        def steps_total(self) -> int: ...
        @property
        def folder(self) -> str: ...
        @property
        def error(self) -> str | None: ...

    UnfinishedReader = Callable[[str], Sequence[UnfinishedTransaction]]  # environment prefix → its unfinished ones


ORT_DISTRIBUTION_PREFIXES = ("onnxruntime", "ort-nightly")


@frozen
class ProviderLoad:
    provider: str  # cuda | tensorrt
    library: str
    needed: tuple[str, ...]  # the provider's own DT_NEEDED
    resolutions: tuple[Resolution, ...]  # every library mapped for it, transitively, plus the lazily loaded ones
    error: str | None = None
    # The libraries among them that NEED the driver's own libraries (directly or through another): they cannot load
    # on a machine without the NVIDIA driver, whatever the environment holds.
    needs_driver: tuple[str, ...] = ()
    # The libraries loaded later by bare name: the build's on-demand loads and cuDNN's sub-libraries, named by the
    # build and its cuDNN major alone (not by where this process's PATH let the simulation find cuDNN), and not the
    # libraries those import (they load with them).
    by_name: tuple[str, ...] = ()

    @property
    def missing(self) -> list[Resolution]:
        seen: set[str] = set()
        out = []
        for r in self.resolutions:
            if r.path is None and r.name not in seen:
                seen.add(r.name)
                out.append(r)
        return out


@frozen
class OrtInstall:
    dir: OrtDir
    package: str | None  # the distribution that owns the folder's extension module, else build_and_package_info.py
    version: str | None  # that distribution's version, else build_and_package_info.py's
    cuda_version: str | None  # cuda_version in build_and_package_info.py
    owners: tuple[str, ...]  # distributions whose RECORD lists this folder's extension module
    winner: str | None  # the distribution whose copy of the extension module is the one on disk
    cuda_major: int | None  # from the provider's NEEDED libcudart (the binary), else the build info
    cuda_source: str | None  # where cuda_major was read: binary | build info | matrix
    cudnn_major: int | None
    builds: tuple[OrtBuild, ...]  # matrix rows for this version and CUDA major (empty: unknown to the matrix)
    providers: tuple[ProviderLoad, ...]


@frozen
class LoaderContext:
    ld_library_path: str | None  # as the simulated process sees it
    activation_prepend: tuple[str, ...]  # folders an installed conda hook adds on activation
    preloaded: tuple[str, ...]  # libraries an installed ortfix preload hook loads first
    default_dirs: tuple[str, ...]
    cache: str
    unreadable: tuple[str, ...]
    search_variable: str = "LD_LIBRARY_PATH"  # the variable `ld_library_path` holds (Windows: PATH)
    driver_libraries: tuple[str, ...] = DRIVER_LIBRARIES  # the platform's driver libraries (no wheel ships them)
    fold_case: bool = False  # library names compare case-insensitively (Windows)

    def key(self, name: str) -> str:
        """A library name as the loader compares it."""
        return name.lower() if self.fold_case else name


@frozen
class Facts:
    target: str
    probe: ProbeFacts
    driver: DriverFacts
    libraries: tuple[LibCopy, ...]
    ort: tuple[OrtInstall, ...]
    loader: LoaderContext
    matrix_version: str
    findable: Mapping[str, str | None]  # soname → where a bare dlopen finds it today (every soname the matrix knows)
    # The target's operating system (system/platform.py): what later stages ask instead of forking on the OS by hand.
    platform: Platform = field(compare=False)  # one object per check; two checks' facts compare without it
    hook_files_present: tuple[str, ...] = ()  # the files ortfix's hooks would occupy that exist already
    uv: str | None = None  # `uv` on PATH (or beside ortfix's interpreter): system/uvargs.find_uv
    pip_config: PipConfig | None = None  # the user's pip configuration for this environment; None: unreadable
    interrupted: tuple[UnfinishedTransaction, ...] = ()  # apply/rollback runs that died half-way
    notes: tuple[str, ...] = field(default=())
    windows: WindowsFacts | None = None  # what only a Windows target has (check/windows.py judges it)
    project: Project | None = None  # the project whose folder holds the environment (system/project.py)

    @cached_property
    def _cuda_majors(self) -> dict[str, int | None]:
        return {realpath(c.path): c.cuda_major for c in self.libraries}

    def cuda_major_at(self, path: str) -> int | None:
        """The CUDA major of the library file at `path`: the inventory's answer for that file (inventory.cuda_major_of),
        else what its name says; None when nothing tells."""
        return self._cuda_majors.get(realpath(path), cuda_major_by_name(os.path.basename(path)))

    def parse_library_name(self, name: str) -> tuple[str, tuple[int, ...]] | None:
        """(family, version numbers) of a CUDA/cuDNN/TensorRT library name as the target's platform spells it
        (libcudnn.so.9; Windows: cudnn64_9.dll), else None."""
        return self.platform.parse_library_name(name)

    @property
    def active_ort(self) -> OrtInstall | None:
        """The `onnxruntime` folder a plain `import onnxruntime` gets: the first on the target's sys.path."""
        return self.ort[0] if self.ort else None

    @property
    def ort_distributions(self) -> list[Distribution]:
        return [d for d in self.probe.distributions if d.normalized.startswith(ORT_DISTRIBUTION_PREFIXES)]

    def fingerprint(self) -> str:
        """A hash of what a plan depends on; `apply` refuses a plan whose fingerprint no longer matches."""
        doc: dict[str, object] = {
            "python": self.probe.executable,
            "distributions": sorted((d.normalized, d.version, d.location) for d in self.probe.distributions),
            "ort": [(o.dir.package_dir, sorted(o.dir.files), o.version) for o in self.ort],
            "ld_library_path": self.loader.ld_library_path,
            "hooks": [self.loader.activation_prepend, self.loader.preloaded],
            "driver": self.driver.version,
            "gpus": [g.compute_capability for g in self.driver.gpus],
            "libraries": sorted(c.path for c in self.libraries),
            "matrix": self.matrix_version,
        }
        damaged = sorted((d.dist_info, str(d.has_record), [(p.path, p.actual) for p in d.damaged])
                         for d in self.probe.distributions if d.damaged or d.has_record is False)
        if damaged:  # only then: a healthy environment keeps the fingerprint it always had
            doc["damaged"] = damaged
        if self.project is not None:  # what an `apply --project` plan changes: a file edited since is noticed
            doc["project"] = [self.project.folder, self.project.manager, list(self.project.hashes)]
        import hashlib

        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def gather(
    python: str | os.PathLike[str],
    matrix: Matrix,
    *,
    probe_run: ProbeRun | None = None,
    unfinished: UnfinishedReader | None = None,
    driver_version: str | None = None,
    compute_capability: str | None = None,
    reader: LibraryReader | None = None,
    platform: Platform | None = None,
) -> Facts:
    """The facts about the environment of `python`. `probe_run`: the probe already started for it (else one starts
    now); `unfinished`: what reads the environment's unfinished transactions (None: not looked for); `platform`:
    the machine's (else `platforms.host_platform()`)."""
    plat = platform or host_platform()
    # The probe runs while ortfix reads the loader's set-up and the driver (it may already be running: prefetch).
    proc = probe_run or start_probe(python)
    driver, machine = _host(plat, proc, driver_version, compute_capability)
    probe = finish_probe(proc, python)
    if probe.system != plat.system:
        raise unsupported(probe.system)
    reader = reader or plat.new_reader()
    libraries = tuple(plat.scan_libraries(probe, reader, matrix))

    installed = plat.installed_hooks(probe)
    prepend = installed.search_prepend
    preloaded = installed.preloaded
    variable, sep = plat.search_path_variable, plat.search_path_separator
    ld_path = probe.environ.get(variable)
    notes: list[str] = []
    if prepend and not all(d in (ld_path or "").split(sep) for d in prepend):
        # The hook runs on `conda activate` (Windows: on `import onnxruntime`); judge the environment as after it.
        ld_path = sep.join((*prepend, *([ld_path] if ld_path else [])))
        notes.append(plat.activation_note)

    def fresh_process() -> SimulatedProcess:
        return plat.new_process(probe, ld_path, reader)

    ort = tuple(_analyze_ort(d, probe, matrix, plat, fresh_process, reader, preloaded) for d in probe.ort_dirs)
    findable = _findable(fresh_process(), preloaded, matrix, ort, plat)
    windows = None
    if probe.windows is not None:  # only a Windows target: system/windows/facts.py is not imported for another
        from ortfix.system.windows.facts import windows_facts

        windows = windows_facts(probe, plat, lambda path: plat.new_process(probe, path, reader), ld_path, prepend,
                                reader, (r for o in ort for p in o.providers for r in p.resolutions))
    reader.save()
    return Facts(
        target=os.fspath(python),
        probe=probe,
        driver=driver,
        libraries=libraries,
        ort=ort,
        loader=LoaderContext(
            ld_library_path=ld_path,
            activation_prepend=prepend,
            preloaded=preloaded,
            default_dirs=machine.default_dirs,
            cache=machine.index_source,
            unreadable=tuple(plat.unreadable_dirs(probe.environ.get(variable), probe.cwd)),
            search_variable=variable,
            driver_libraries=plat.driver_libraries,
            fold_case=plat.library_key("A") != "A",
        ),
        matrix_version=matrix.data_version,
        findable=findable,
        platform=plat,
        hook_files_present=installed.files_present,
        uv=find_tool("uv"),  # system/uvargs.find_uv's answer, without importing uv's option translation (plan's)
        pip_config=_pip_config(probe.prefix, notes),
        interrupted=tuple(unfinished(probe.prefix)) if unfinished else (),
        notes=tuple(notes),
        windows=windows,
        project=project_of(probe.prefix),
    )


def _host(plat: Platform, proc: ProbeRun, driver_version: str | None,
          compute_capability: str | None) -> tuple[DriverFacts, MachineLoader]:
    """The driver (as `--driver`/`--compute-capability` override it) and the machine's loader set-up, read while the
    probe `proc` runs; the probe is stopped if reading them fails."""
    try:
        base_driver = plat.detect_driver()
        driver = (overridden_driver(driver_version, compute_capability, base_driver)
                  if driver_version or compute_capability else base_driver)
        return driver, plat.machine_loader()
    except BaseException:
        stop_probe(proc)  # the probe must not outlive a failed check
        raise


def _pip_config(prefix: str, notes: list[str]) -> PipConfig | None:
    try:
        return read_pip_config(prefix, os.environ)
    except OrtfixError as exc:
        notes.append(exc.one_line())
        return None


def _findable(
    loader: SimulatedProcess,
    preloaded: tuple[str, ...],
    matrix: Matrix,
    ort: tuple[OrtInstall, ...],
    plat: Platform,
) -> dict[str, str | None]:
    """Where each library ORT might need resolves today, for a library with no RPATH/RUNPATH of its own (as the
    PyPI ORT builds since 1.19 are): what the planner reuses instead of downloading it again."""
    names: set[str] = set()
    for _major, wheel in matrix.nvidia_wheels:
        names.update(plat.wheel_libraries(wheel))
    for install in ort:
        for provider in install.providers:
            names.update(r.name for r in provider.resolutions)
    for path in preloaded:
        if os.path.exists(path):
            try:
                loader.preload(path)
            except _read_errors(plat):
                pass
    return {name: loader.locate(name).path for name in sorted(names)}


def _owners(ort_dir: OrtDir, probe: ProbeFacts) -> tuple[tuple[str, ...], str | None]:
    pybind = ort_dir.pybind
    if pybind is None:
        return (), None
    rel = os.path.relpath(pybind, ort_dir.location)
    try:
        size = os.path.getsize(pybind)
    except OSError:
        size = None
    owners = []
    by_size = []
    for dist in probe.distributions:
        if dist.location != ort_dir.location or not dist.normalized.startswith(ORT_DISTRIBUTION_PREFIXES):
            continue
        for path, digest, recorded_size in dist.files:
            if os.path.normpath(path) == rel:
                owners.append(dist.name)
                if recorded_size is not None and recorded_size == size:
                    by_size.append((dist.name, digest))
    if len(by_size) == 1:
        return tuple(owners), by_size[0][0]
    if len(by_size) > 1:  # same size: only the hash can tell
        current = _record_hash(pybind)
        for name, digest in by_size:
            if digest == current:
                return tuple(owners), name
    return tuple(owners), owners[0] if len(owners) == 1 else None


def _owning_distribution(ort_dir: OrtDir, probe: ProbeFacts, owners: tuple[str, ...],
                         winner: str | None) -> Distribution | None:
    name = winner or (owners[0] if len(owners) == 1 else None)
    return next((d for d in probe.distributions if d.name == name and d.location == ort_dir.location), None)


def _record_hash(path: str) -> str:
    import base64
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def _analyze_ort(
    ort_dir: OrtDir,
    probe: ProbeFacts,
    matrix: Matrix,
    plat: Platform,
    fresh_process: Callable[[], SimulatedProcess],
    reader: LibraryReader,
    preloaded: tuple[str, ...],
) -> OrtInstall:
    info = ort_dir.build_info
    owners, winner = _owners(ort_dir, probe)
    # Which build this is: the distribution whose RECORD owns the extension module (build_and_package_info.py is
    # missing from many releases: 1.17.1, 1.19.2, 1.20.2 and everything before 1.18), else that file.
    owner = _owning_distribution(ort_dir, probe, owners, winner)
    package = owner.normalized if owner else info.get("package_name")
    version = (owner.installed_version if owner else None) or info.get("__version__")
    cuda_lib = ort_dir.lib(plat.provider_libraries["cuda"])
    needed: tuple[str, ...] = ()
    if cuda_lib:
        try:
            needed = reader.read(cuda_lib).needed
        except _read_errors(plat):
            needed = ()
    # The CUDA and cuDNN majors: what the provider NEEDs, else what _ld_preload.py loads for it (before 1.16), else
    # the build info, else the matrix row of this release.
    # _ld_preload.py is a file in the environment: only bare CUDA/cuDNN sonames from it are used (never a path).
    preload = tuple(n for n in ort_dir.preload_cuda if plat.parse_library_name(n))
    linked = (*needed, *preload)
    cuda_major = _family_major(plat, linked, "cudart")
    cuda_source = "binary" if cuda_major is not None else None
    if cuda_major is None and info.get("cuda_version"):
        try:
            cuda_major = int(info["cuda_version"].split(".")[0])
            cuda_source = N_("build info")  # data (--json); a catalog key where it is shown
        except ValueError:  # a damaged build_and_package_info.py may say anything
            pass
    builds = tuple(b for b in matrix.builds_for(version or "")
                   if b.package == (package or b.package) and (cuda_major is None or b.cuda_major == cuda_major))
    if cuda_major is None and len({b.cuda_major for b in builds}) == 1:
        cuda_major, cuda_source = builds[0].cuda_major, N_("matrix")
    cudnn_major = _family_major(plat, linked, "cudnn")
    if cudnn_major is None and builds:
        cudnn_major = builds[0].cudnn_major
    providers = []
    for provider, lib_name in plat.provider_libraries.items():
        lib = ort_dir.lib(lib_name)
        if lib is None:
            continue
        lazy: tuple[str, ...] = ()
        if provider == "cuda":
            listed = preload or (builds[0].cuda_lazy if builds else ())
            lazy = tuple(n for n in (plat.library_name(s) for s in listed) if n)
        providers.append(simulate_provider(provider, lib, ort_dir, probe, fresh_process, reader, preloaded,
                                           lazy, matrix, cudnn_major, plat))
    return OrtInstall(
        dir=ort_dir,
        package=package,
        version=version,
        cuda_version=info.get("cuda_version"),
        cuda_source=cuda_source,
        owners=owners,
        winner=winner,
        cuda_major=cuda_major,
        cudnn_major=cudnn_major,
        builds=builds,
        providers=tuple(providers),
    )


def _read_errors(plat: Platform) -> tuple[type[Exception], ...]:
    """What reading a library file may raise on this platform: not a library, or not readable."""
    return (*plat.read_errors, OSError)


def _family_major(plat: Platform, names: Sequence[str], family: str) -> int | None:
    """The major version of the first library of `family` among `names` (libcudart.so.12, cudart64_12.dll → 12)."""
    for name in names:
        parsed = plat.parse_library_name(name)
        if parsed and parsed[0] == family and parsed[1]:
            return parsed[1][0]
    return None


def simulate_provider(
    provider: str,
    library: str,
    ort_dir: OrtDir,
    probe: ProbeFacts,
    fresh_process: Callable[[], SimulatedProcess],
    reader: LibraryReader,
    preloaded: tuple[str, ...],
    lazy: tuple[str, ...],
    matrix: Matrix,
    cudnn_major: int | None,
    plat: Platform,
) -> ProviderLoad:
    """A fresh process of the target interpreter: python and its libraries, LD_PRELOAD and ortfix's preload hook,
    ORT's extension module, then the provider by path (as ORT loads it), then what it loads lazily, and cuDNN's
    sub-libraries by bare name."""
    try:
        loader = fresh_process()  # the machine's loader is mapped first
        caller = plat.start_interpreter(loader, probe)
        preload_var = plat.preload_variable
        listed = probe.environ.get(preload_var, "").replace(" ", ":").split(":") if preload_var else []
        for path in (*listed, *preloaded):
            if path and os.path.isabs(path) and os.path.exists(path):
                loader.dlopen(path, caller)
        pybind = ort_dir.pybind
        if pybind:
            plat.load_extension(loader, pybind, caller)
            caller = pybind
        shared = ort_dir.lib(plat.providers_shared_library)
        if shared:
            loader.dlopen(shared, caller)
        report = loader.dlopen(library, caller)
        resolutions = list(report.resolutions[1:])  # [0] is the provider itself, opened by path
        for name in lazy:
            resolutions += loader.dlopen(name, library, lazy=True).resolutions
        subs: tuple[str, ...] = ()
        if cudnn_major is not None:
            row = next((c for c in matrix.cudnn if c.major == cudnn_major), None)
            names = plat.wheel_libraries(row.wheel) if row else ()
            main = next((n for n in names if _family_major(plat, (n,), "cudnn") == cudnn_major), None)
            # cuDNN loads its sub-libraries itself, by bare name, the first time an operation needs them.
            subs = tuple(n for n in names if main and n != main)
            cudnn_path = next((r.path for r in resolutions if main and r.path
                               and plat.library_key(r.name) == plat.library_key(main)), None)
            if cudnn_path:
                for name in subs:
                    resolutions += loader.dlopen(name, cudnn_path, lazy=True).resolutions
        needed = reader.read(library).needed
    except _read_errors(plat) as exc:
        return ProviderLoad(provider, library, (), (), error=str(exc))
    return ProviderLoad(provider, library, needed, tuple(resolutions),
                        needs_driver=_needing_driver(resolutions, reader, plat),
                        by_name=tuple(dict.fromkeys((*lazy, *subs))))


def _needing_driver(resolutions: Sequence[Resolution], reader: LibraryReader, plat: Platform) -> tuple[str, ...]:
    """The resolved libraries whose NEEDED entries lead to a driver library. Read from each file's own NEEDED (a
    library the preload hook mapped first resolves as 'already loaded', without its dependencies listed again)."""
    key = plat.library_key
    driver_libraries = tuple(key(n) for n in plat.driver_libraries)
    where = {key(r.name): r.path for r in resolutions if r.path}
    needs: dict[str, tuple[str, ...]] = {}
    for name, path in where.items():
        try:
            needs[name] = tuple(key(n) for n in reader.read(path).needed)
        except _read_errors(plat):
            needs[name] = ()
    bad = set(driver_libraries)
    grew = True
    while grew:
        grew = False
        for name, deps in needs.items():
            if name not in bad and bad.intersection(deps):
                bad.add(name)
                grew = True
    names = {key(r.name): r.name for r in reversed(resolutions) if r.path}  # the first spelling of each
    return tuple(names[n] for n in where if n in bad and n not in driver_libraries)


def facts_summary(facts: Facts) -> dict[str, object]:
    """A JSON-able digest of the facts for `--json` output."""
    return {
        "target": facts.target,
        "python": {"executable": facts.probe.executable, "version": facts.probe.python_version,
                   "environment": facts.probe.env_kind, "prefix": facts.probe.prefix},
        "os": {"system": facts.probe.system, "machine": facts.probe.machine, "glibc": facts.probe.glibc,
               "wsl": facts.probe.wsl},
        "driver": asdict(facts.driver),
        "distributions": [{"name": d.name, "version": d.version, "location": d.location}
                          for d in facts.probe.distributions],
        "onnxruntime": [
            {
                "dir": o.dir.package_dir,
                "package": o.package,
                "version": o.version,
                "cuda_version": o.cuda_version,
                "cuda_major": o.cuda_major,
                "cuda_source": o.cuda_source,
                "cudnn_major": o.cudnn_major,
                "owners": list(o.owners),
                "in_matrix": bool(o.builds),
                "providers": [
                    {"provider": p.provider, "library": p.library, "error": p.error,
                     "needs_driver": list(p.needs_driver),
                     "libraries": [{"name": r.name, "path": r.path, "via": r.via, "lazy": r.lazy,
                                    "requested_by": r.requested_by} for r in p.resolutions]}
                    for p in o.providers
                ],
            }
            for o in facts.ort
        ],
        "libraries": [asdict(c) for c in facts.libraries],
        "loader": asdict(facts.loader),
        "matrix_version": facts.matrix_version,
        "notes": list(facts.notes),
        **({"windows": facts.windows.to_json()} if facts.windows else {}),
    }


