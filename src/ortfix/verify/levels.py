"""`ortfix verify`: does the GPU path really work in the target environment? Three levels, each with its own verdict,
each run out of process (a provider that crashes becomes a verdict, never a crash of ortfix):

1. loader: every library the CUDA provider (and the TensorRT provider, when TensorRT is installed) needs loads in a
   fresh process of the target interpreter, started as the user starts it (`verify.check_loadable`);
2. provider: a session created with CUDAExecutionProvider really gets it (`session.get_providers()`, not
   `get_available_providers()`, which lists what the build contains, not what starts);
3. numbers: a small model (shipped with ortfix, or `--model FILE`) runs on CUDA and matches the CPU within tolerance.

A level that cannot run on this machine (no NVIDIA driver: the provider cannot start) says so and why; it is not a
failure, but it is not a pass either (exit status 3).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from ortfix.check.addons import tensorrt_wanted
from ortfix.check.facts import Facts, OrtInstall, ProviderLoad
from ortfix.check.windows_remedies import (
    MSVC_REMEDY,
    MSVC_WHY,
    ZLIBWAPI_DLL,
    ZLIBWAPI_REMEDY,
)
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system.driver import DriverFacts
from ortfix.system.inventory import parse_lib_name
from ortfix.target.ortrun import CUDA_EP, RunOutcome, cudnn8_exit, one_line, run_in_target, shapes_text
from ortfix.verify.cudnncheck import CUDNN_FIX, CUDNN_VERDICT
from ortfix.verify.loadcheck import LibLoad, LoadCheck, check_loadable, requester_runpath_dirs
from ortfix.verify.winloadcheck import (
    PROVIDER_DLL,
    check_loadable_windows,
    first_missing,
    is_driver_dll,
    msvc_verdict,
    windows_child_env,
)

BUILTIN_MODEL = Path(__file__).with_name("models") / "verify_conv.onnx"
BUILTIN_SHAPES = {"x": [2, 3, 17, 23]}  # odd sizes: no kernel gets an easy case
_DRIVER_LIB = re.compile(r"\blibcuda\.so(?:\.1)?\b|\blibnvidia-[\w.-]+\.so")
# Level 3 passes when max|cuda - cpu| <= ATOL + RTOL * max|cpu| for every float output. CUDA may use TF32 for
# convolutions and matrix products (ORT's default since 1.18): about 1e-3 relative.
ATOL = 1e-4
RTOL = 1e-2


class Status(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    NOT_RUN = "not-run"  # could not run on this machine; the reason says why


@dataclass(frozen=True)
class Level:
    number: int
    name: str  # loader | provider | numbers
    status: Status
    verdict: str | Msg  # a Msg: English in --json (str), translated on the screen (i18n.text)
    evidence: tuple[str | Msg, ...] = ()
    fix: str | Msg | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    load_check: LoadCheck | None = None  # level 1: the fresh process's own report (apply's verification shows it)


def no_gpu_reason(driver: DriverFacts) -> Msg | None:
    """Why no CUDA provider can start on this machine, or None when a driver is there."""
    if driver.overridden:
        return None
    if not driver.present:
        return Msg(N_("no NVIDIA driver"))
    if driver.reboot_needed:
        return Msg(N_("the NVIDIA driver needs a reboot (kernel module {kernel}, user space {userspace})"),
                   kernel=str(driver.kernel_module), userspace=str(driver.userspace))
    return None


def driver_summary(driver: DriverFacts) -> str | Msg:
    if not driver.present:
        return Msg(N_("none ({why})"), why=driver.source) if driver.source else Msg(N_("none"))
    gpus = ", ".join(g.name for g in driver.gpus)
    return f"{driver.version}" + (f", {gpus}" if gpus else "")


def _provider(install: OrtInstall, name: str) -> ProviderLoad | None:
    return next((p for p in install.providers if p.provider == name), None)


def provider_sonames(provider: ProviderLoad) -> list[str]:
    """The CUDA/cuDNN/TensorRT libraries a provider maps, directly, transitively and lazily (the driver's
    libcuda.so.1 aside: it comes with the driver, not with the environment)."""
    out: list[str] = []
    for r in provider.resolutions:
        parsed = parse_lib_name(r.name)
        if parsed and parsed[0] != "cuda":
            out.append(r.name)
    return list(dict.fromkeys(out))


def _lib_error(soname: str, error: str | Msg | None) -> str | Msg:
    text = error or Msg(N_("not loaded"))
    return text if str(text).startswith(soname + ":") else Msg("{soname}: {error}", soname=soname, error=text)


_TO_GPU = N_("`ortfix plan` shows the switch to onnxruntime-gpu")
_MAKES_THEM_LOAD = N_("`ortfix plan` shows the change that makes them load")
_NEEDS_LIBCUDA = N_("{name}: not loaded: it needs the NVIDIA driver's libcuda.so.1, absent here")
_IMPORT_FAILED = N_("import onnxruntime failed in a fresh process of {python}")
_CUDNN8_BIN = N_("put cuDNN 8's complete bin folder on PATH: `ortfix plan` shows how")


def _no_provider(facts: Facts, python: str, install: OrtInstall | None, cuda: ProviderLoad | None) -> Level | None:
    """Level 1's verdict when there is no CUDA provider to load: no onnxruntime, a CPU-only build, an unreadable
    provider library; None when there is one."""
    if install is None:
        return Level(1, "loader", Status.FAIL, Msg(N_("onnxruntime is not installed in {python}"), python=python),
                     fix=Msg(N_("`ortfix plan` shows what to install")))
    if cuda is None:
        label = Msg("{package} {version}", package=install.package or "onnxruntime",
                    version=install.version or Msg(N_("(unknown version)")))
        return Level(1, "loader", Status.FAIL,
                     Msg(N_("{label} has no CUDA provider (no {file} in {folder}): it is a CPU-only build"),
                         label=label, file=facts.platform.provider_libraries["cuda"], folder=str(install.dir.capi)),
                     fix=Msg(_TO_GPU))
    if cuda.error:
        return Level(1, "loader", Status.FAIL, Msg(N_("cannot read {path}: {error}"), path=cuda.library,
                                                   error=cuda.error))
    return None


def level_loader(facts: Facts, python: str, *, conda_hook: Path | None) -> Level:
    install = facts.active_ort
    cuda = _provider(install, "cuda") if install is not None else None
    refused = _no_provider(facts, python, install, cuda)
    if refused is not None or install is None or cuda is None:
        assert refused is not None
        return refused
    if facts.platform.is_windows:
        return _level_loader_windows(facts, python, install, cuda)
    cuda_names = provider_sonames(cuda)
    trt = _provider(install, "tensorrt")
    trt_names = provider_sonames(trt) if trt and not trt.error and tensorrt_wanted(facts, False) else []
    resolutions = [*cuda.resolutions, *(trt.resolutions if trt_names and trt else ())]
    # One rule for every release: a library that NEEDs the driver's libcuda.so.1 (cuDNN 9's runtime-compiled
    # engines, directly NEEDed by the 1.20 provider, loaded by the preload hook for others) cannot load on a machine
    # without the driver; it is not loaded there, and said so.
    no_driver = no_gpu_reason(facts.driver) is not None
    skipped = [n for n in dict.fromkeys((*cuda.needs_driver, *(trt.needs_driver if trt_names and trt else ())))
               if no_driver and n in (*cuda_names, *trt_names)]
    check = check_loadable(python, [n for n in (*cuda_names, *trt_names) if n not in skipped],
                           prefix=facts.probe.prefix, conda_hook=conda_hook,
                           requester_dirs=requester_runpath_dirs(resolutions), cuda_major=install.cuda_major)
    errors = {lib.soname: lib.error for lib in check.libraries if lib.error}
    data: dict[str, Any] = {"check": check.to_json(), "cuda": cuda_names, "tensorrt": trt_names,
                            "tensorrt_checked": bool(trt_names)}
    notes: list[str | Msg] = []
    if skipped:
        data["need_driver"] = {n: "needs the NVIDIA driver's libcuda.so.1" for n in skipped}  # i18n: english (data)
        notes += [Msg(_NEEDS_LIBCUDA, name=n) for n in skipped]
    via = [x.soname for x in check.libraries if x.via_requester and x.error is None]
    if via:
        notes.append(Msg(N_("{names}: found through the RUNPATH of the library that loads them (as cuDNN loads its "
                            "sub-libraries), not by a bare dlopen"), names=", ".join(via)))
    if trt is not None and not trt_names:
        notes.append(Msg(N_("TensorRT provider: TensorRT is not installed (optional), not checked")))
    if check.process_error:
        return Level(1, "loader", Status.FAIL, check.process_error, tuple(check.failures), data=data, load_check=check)
    if not check.imported:
        return Level(1, "loader", Status.FAIL, Msg(_IMPORT_FAILED, python=python),
                     (f"import onnxruntime: {check.import_error}",), data=data, load_check=check)
    # Libraries that need the driver's own libcuda.so.1 (cuDNN's runtime-compiled engines do) cannot load on a
    # machine without a driver: that says nothing about the environment, and the provider cannot start here anyway.
    driver_only = {n: str(e) for n, e in errors.items() if _DRIVER_LIB.search(str(e or ""))}
    if driver_only and no_driver:  # what the simulation did not foresee (a library it resolved elsewhere)
        for name in driver_only:
            errors.pop(name)
        data["need_driver"] = {**data.get("need_driver", {}), **driver_only}
        notes += [Msg(_NEEDS_LIBCUDA, name=n) for n in driver_only]
    if check.mixed_majors:
        return Level(1, "loader", Status.FAIL, check.mixed_majors, tuple(check.failures),
                     fix=Msg(N_("`ortfix plan` shows the change that leaves one CUDA major")), data=data,
                     load_check=check)
    cuda_bad = [n for n in cuda_names if n in errors]
    trt_bad = [n for n in trt_names if n in errors]
    if cuda_bad or trt_bad:
        bad = cuda_bad or trt_bad
        whose = "CUDA" if cuda_bad else "TensorRT"
        more: str | Msg = (Msg(N_(" (and {n} more of {total})"), n=len(bad) - 1,
                               total=len(cuda_names if cuda_bad else trt_names)) if len(bad) > 1 else "")
        return Level(1, "loader", Status.FAIL,
                     Msg(N_("{name} cannot be loaded{more}: the {provider} provider cannot start"), name=bad[0],
                         more=more, provider=whose),
                     tuple(_lib_error(n, errors[n]) for n in (*cuda_bad, *trt_bad)),
                     fix=Msg(_MAKES_THEM_LOAD), data=data, load_check=check)
    if check.cudnn is not None and not check.cudnn.ok:
        return Level(1, "loader", Status.FAIL, CUDNN_VERDICT, check.cudnn.evidence, fix=CUDNN_FIX, data=data,
                     load_check=check)
    notes += [check.cudnn.note] if check.cudnn else []
    trt_part: str | Msg = (Msg(N_(" (and the {n} of the TensorRT provider)"), n=len(trt_names)) if trt_names
                           else "")
    return Level(1, "loader", Status.PASS,
                 Msg(N_("the {n} libraries the CUDA provider needs load in a fresh process{tensorrt}"),
                     n=len(cuda_names) - len(data.get("need_driver", ())), tensorrt=trt_part),
                 tuple(notes), data=data, load_check=check)


def _level_loader_windows(facts: Facts, python: str, install: OrtInstall, cuda: ProviderLoad) -> Level:
    """Level 1 on Windows (verify/winloadcheck.py): the provider loaded as onnxruntime loads it, the libraries loaded
    later by bare name as cuDNN and onnxruntime load them, then the C++ runtime the process got."""
    by_name = list(cuda.by_name)
    no_driver = no_gpu_reason(facts.driver) is not None
    skipped = [n for n in by_name if no_driver and (is_driver_dll(n) or n in cuda.needs_driver)]
    check = replace(check_loadable_windows(python, cuda.library, [n for n in by_name if n not in skipped],
                                           prefix=facts.probe.prefix, cuda_major=install.cuda_major,
                                           env=windows_child_env(facts)),
                    driver_absent=no_driver)
    data: dict[str, object] = {"check": check.to_json(), "cuda": [cuda.library, *by_name], "tensorrt": [],
                            "tensorrt_checked": False}
    notes: list[str | Msg] = [Msg(N_("{name}: not loaded: it needs the NVIDIA driver, absent here"), name=n)
                              for n in skipped]
    if check.process_error:
        fix: str | Msg | None = None
        if check.cudnn8_missing:
            fix = (ZLIBWAPI_REMEDY if check.cudnn8_missing.lower() == ZLIBWAPI_DLL else Msg(_CUDNN8_BIN))
        return Level(1, "loader", Status.FAIL, check.process_error, tuple(check.failures), fix=fix, data=data,
                     load_check=check)
    if not check.imported:
        return Level(1, "loader", Status.FAIL, Msg(_IMPORT_FAILED, python=python),
                     (f"import onnxruntime: {check.import_error}",), data=data, load_check=check)
    def shown(lib: LibLoad) -> str:  # the provider by its name: notes are keyed by what precedes their first ':'
        return PROVIDER_DLL if lib.soname == cuda.library else lib.soname

    errors = {lib.soname: lib.error for lib in check.libraries if lib.error and not check.excused(lib)}
    need_driver: dict[str, str] = {n: "needs the NVIDIA driver" for n in skipped}
    for lib in check.libraries:
        if lib.error and check.excused(lib):  # every other import loaded; the rest comes with the driver
            dlls = ", ".join(lib.driver_missing)
            need_driver[shown(lib)] = f"imports the NVIDIA driver's {dlls}"
            notes.append(Msg(N_("{name}: not loaded: it imports the NVIDIA driver's {dlls}, absent here; its other "
                                "imports all load"), name=shown(lib), dlls=dlls))
    if need_driver:
        data["need_driver"] = need_driver
    if errors:
        bad = next(lib for lib in check.libraries if lib.soname in errors)
        culprit = first_missing(bad)
        name = shown(bad)
        more: str | Msg = Msg(N_(" (and {n} more)"), n=len(errors) - 1) if len(errors) > 1 else ""
        why: str | Msg = (Msg(N_(": it needs {name}, which is not found"), name=culprit)
                          if culprit and culprit.lower() != name.lower() else "")
        return Level(1, "loader", Status.FAIL,
                     Msg(N_("{name} cannot be loaded{why}{more}: the CUDA provider cannot start"), name=name, why=why,
                         more=more),
                     tuple(_lib_error(n, e) for n, e in errors.items()),
                     fix=Msg(_MAKES_THEM_LOAD), data=data, load_check=check)
    runtime = msvc_verdict(install, check)
    if runtime is not None:
        return Level(1, "loader", Status.FAIL, runtime, (MSVC_WHY,), fix=MSVC_REMEDY, data=data, load_check=check)
    by_name_loaded = sum(1 for lib in check.libraries if lib.soname != cuda.library and lib.error is None)
    head: str | Msg = (Msg(N_("{dll}'s imports but the driver's"), dll=PROVIDER_DLL) if PROVIDER_DLL in need_driver
                       else PROVIDER_DLL)
    return Level(1, "loader", Status.PASS,
                 Msg(N_("{head} and the {n} libraries loaded by name load in a fresh process, as onnxruntime loads "
                        "them"), head=head, n=by_name_loaded), tuple(notes), data=data, load_check=check)


def session_levels(facts: Facts, python: str, model: Path, shapes: Mapping[str, Sequence[int]] | None,
                    loader: Level, *, user_model: bool, conda_hook: Path | None,
                    timeout: float) -> tuple[Level, Level]:
    install = facts.active_ort
    if install is None:
        why = Msg(N_("onnxruntime is not installed (level 1)"))
        return Level(2, "provider", Status.NOT_RUN, why), Level(3, "numbers", Status.NOT_RUN, why)
    args = {"mode": "verify", "model": str(model), "shapes": dict(shapes) if shapes else None}
    env = None
    if facts.platform.is_windows:  # a Windows child: no POSIX conda hook, the PATH a new process gets
        conda_hook = None  # a POSIX shell's hook; on Windows the process starts plainly (its PATH as the user's)
        env = windows_child_env(facts)
    outcome = run_in_target(python, args, prefix=facts.probe.prefix, conda_hook=conda_hook, timeout=timeout, env=env)
    provider = _provider_level(facts, outcome, loader, user_model=user_model, model=model)
    return provider, _numbers_level(outcome, provider)


def _skip_numbers(provider: Level) -> Level:
    if provider.status is Status.NOT_RUN:
        return Level(3, "numbers", Status.NOT_RUN, Msg(N_("could not run here: it needs the CUDA provider (level 2)")))
    return Level(3, "numbers", Status.NOT_RUN,
                 Msg(N_("skipped: the session did not get the CUDA provider (level 2)")))


def _provider_level(facts: Facts, run: RunOutcome, loader: Level, *, user_model: bool, model: Path) -> Level:
    data: dict[str, object] = {"argv": list(run.argv), "returncode": run.returncode, "signal": run.signal,
                            "timed_out": run.timed_out, "stages": [dict(s) for s in run.stages],
                            "log": list(run.evidence)}
    imported = run.stage("import")
    if imported is None:
        return Level(2, "provider", Status.FAIL,
                     Msg(N_("the check process {death} before importing onnxruntime"), death=run.death()),
                     tuple(run.log[-5:]), data=data)
    if imported.get("error"):
        return Level(2, "provider", Status.FAIL,
                     Msg(N_("import onnxruntime failed: {error}"), error=str(imported["error"])), data=data)
    available = list(imported.get("available") or [])
    data["available"] = available
    loaded = run.stage("model")
    if loaded is None:
        return Level(2, "provider", Status.FAIL,
                     Msg(N_("the check process {death} while loading the model on the CPU"), death=run.death()),
                     tuple(run.evidence), data=data)
    if loaded.get("error"):
        if user_model:
            raise OrtfixError(Msg(N_("--model {model}: onnxruntime {version} cannot load it: {error}"),
                                  model=str(model), version=str(imported.get("version")),
                                  error=one_line(str(loaded["error"]))))
        return Level(2, "provider", Status.FAIL,
                     Msg(N_("onnxruntime cannot load ortfix's model: {error}"), error=str(loaded["error"])), data=data)
    if CUDA_EP not in available:
        return Level(2, "provider", Status.FAIL,
                     Msg(N_("{provider} is not in this onnxruntime build (available: {available})"), provider=CUDA_EP,
                         available=", ".join(available)),
                     fix=Msg(_TO_GPU), data=data)
    stage = run.stage("provider")
    reason = no_gpu_reason(facts.driver)
    libs = Msg(N_("libraries complete") if loader.status is Status.PASS else N_("libraries incomplete (level 1)"))
    if stage is None or stage.get("error") or CUDA_EP not in (stage.get("providers") or []):
        what: Msg
        if stage is None:
            what = Msg(N_("creating a session with {provider}: the process {death}"), provider=CUDA_EP,
                       death=run.death())
        elif stage.get("error"):
            what = Msg(N_("creating a session with {provider} failed: {error}"), provider=CUDA_EP,
                       error=str(stage["error"]))
        else:
            what = Msg(N_("the session fell back to {providers}"), providers=str(stage.get("providers")))
        data["providers"] = stage.get("providers") if stage else None
        cudnn8 = cudnn8_exit(run.log, run.returncode) if stage is None else None
        if cudnn8 is not None:  # the environment's fault, driver or not
            return Level(2, "provider", Status.FAIL, what, tuple(run.evidence),
                         fix=(ZLIBWAPI_REMEDY if cudnn8.lower() == ZLIBWAPI_DLL else Msg(_CUDNN8_BIN)), data=data)
        if reason:
            return Level(2, "provider", Status.NOT_RUN,
                         Msg(N_("{libraries}; {reason}, so the provider cannot start here ({what})"), libraries=libs,
                             reason=reason, what=what),
                         tuple(run.evidence), data=data)
        fix = Msg(N_("`ortfix plan` shows the change that makes the libraries load") if loader.status is not Status.PASS
                  else N_("`ortfix check` and `ortfix explain` on the messages above say why"))
        return Level(2, "provider", Status.FAIL, what, tuple(run.evidence), fix=fix, data=data)
    data["providers"] = stage.get("providers")
    return Level(2, "provider", Status.PASS, f"session.get_providers() = {stage.get('providers')}", data=data)


def _numbers_level(run: RunOutcome, provider: Level) -> Level:
    if provider.status is not Status.PASS:
        return _skip_numbers(provider)
    numbers = run.stage("numbers")
    if numbers is None:
        return Level(3, "numbers", Status.FAIL,
                     Msg(N_("running the model on CUDA: the process {death}"), death=run.death()), tuple(run.evidence))
    if numbers.get("error"):
        return Level(3, "numbers", Status.FAIL, Msg(N_("running the model failed: {error}"),
                                                    error=str(numbers["error"])), tuple(run.evidence))
    evidence: list[str | Msg] = []
    bad: list[str | Msg] = []
    worst = 0.0
    for out in numbers.get("outputs") or []:
        name = out.get("name")
        if out.get("shape") != out.get("cuda_shape"):
            bad.append(Msg(N_("{name}: shape {cuda} on CUDA, {cpu} on the CPU"), name=str(name),
                           cuda=str(out.get("cuda_shape")), cpu=str(out.get("shape"))))
            continue
        if "max_abs_diff" in out:
            diff, ref = float(out["max_abs_diff"]), float(out["max_abs_ref"])
            tol = ATOL + RTOL * ref
            worst = max(worst, diff)
            line = Msg(N_("{name} {shape}: max |cuda - cpu| = {diff} (tolerance {tolerance})"), name=str(name),
                       shape=str(out.get("shape")), diff=f"{diff:.3g}", tolerance=f"{tol:.3g}")
            evidence.append(line)
            if not diff <= tol or not out.get("finite", True):
                bad.append(line)
        elif not out.get("equal", True):
            bad.append(Msg(N_("{name}: the CUDA result differs from the CPU's"), name=str(name)))
    data = {"shapes": numbers.get("shapes"), "outputs": numbers.get("outputs"), "atol": ATOL, "rtol": RTOL}
    if bad:
        return Level(3, "numbers", Status.FAIL,
                     Msg(N_("the CUDA output differs from the CPU's: {first}"), first=bad[0]), tuple(bad), data=data)
    return Level(3, "numbers", Status.PASS,
                 Msg(N_("the outputs on CUDA match the CPU's (max |difference| {worst}) for inputs {shapes}"),
                     worst=f"{worst:.3g}", shapes=shapes_text(numbers.get("shapes") or {})), tuple(evidence), data=data)
