"""cuDNN's own proof that its copy is whole: a fresh process of the target (started as the user starts it, after
`import onnxruntime`, so an ortfix preload hook has acted) loads libcudnn by SONAME, as the CUDA provider does, and
calls cuDNN's version checks (cuDNN 9: `cudnnGraphVersionCheck`, `cudnnOpsVersionCheck`, `cudnnCnnVersionCheck`,
`cudnnAdvVersionCheck`; cuDNN 8: the `*InferVersionCheck`/`*TrainVersionCheck` family). Each makes libcudnn load one
sub-library by SONAME and compare its version with its own; no GPU is needed. A sub-library cuDNN cannot load makes
it print "Unable to load any of {...}" and call abort(): hence a process of its own, separate from the library load
check, which reports each call before and after it is made, so a process that dies says which call killed it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ortfix import subproc
from ortfix.i18n import N_, Msg
from ortfix.safetext import visible
from ortfix.system.inventory import parse_lib_name
from ortfix.target.launch import launch

_MARK = "ORTFIX-CUDNN:"
# verify level 1's verdict and fix when the checks fail
CUDNN_VERDICT = Msg(N_("cuDNN's own version check fails in a fresh process: its copy is not whole or mixes versions"))
CUDNN_FIX = Msg(N_("`ortfix plan` shows the change that loads the environment's whole cuDNN"))
# cuDNN major → its version checks, in the order cuDNN's own sub-libraries depend on each other.
VERSION_CHECKS = {
    9: ("cudnnGraphVersionCheck", "cudnnOpsVersionCheck", "cudnnCnnVersionCheck", "cudnnAdvVersionCheck"),
    8: ("cudnnOpsInferVersionCheck", "cudnnOpsTrainVersionCheck", "cudnnCnnInferVersionCheck",
        "cudnnCnnTrainVersionCheck", "cudnnAdvInferVersionCheck", "cudnnAdvTrainVersionCheck"),
}

# Runs inside the target (any Python 3): standard library only; one line per event, flushed, so that what was
# said before an abort() arrives.
_SCRIPT = r"""
import ctypes, json, os, sys
def say(doc):
    sys.stdout.write(%(mark)r + json.dumps(doc) + "\n")
    sys.stdout.flush()
try:
    import onnxruntime
except BaseException:
    pass
lib = None
errors = []
for name in [%(soname)r] + [os.path.join(d, %(soname)r) for d in json.loads(%(folders)r)]:
    try:
        lib = ctypes.CDLL(name)
        break
    except OSError as exc:
        errors.append(str(exc))
if lib is None:
    say({"load": "; ".join(errors)})
    sys.exit(0)
try:
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    lib.cudnnGetErrorString.restype = ctypes.c_char_p
except AttributeError:
    say({"load": None, "version": None, "not_cudnn": True})
    sys.exit(0)
say({"load": None, "version": int(lib.cudnnGetVersion())})
for fn in json.loads(%(functions)r):
    try:
        call = getattr(lib, fn)
    except AttributeError:
        say({"call": fn, "absent": True})
        continue
    say({"call": fn})
    status = int(call())
    text = lib.cudnnGetErrorString(status)
    say({"call": fn, "status": status, "text": text.decode("ascii", "replace") if text else None})
mapped = []
with open("/proc/self/maps") as maps:
    for line in maps:
        fields = line.split(None, 5)
        if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith("libcudnn"):
            path = fields[5].strip()
            if path not in mapped:
                mapped.append(path)
say({"mapped": mapped})
"""  # i18n: english (a program the target runs)


@dataclass(frozen=True)
class VersionCall:
    function: str
    status: int | None  # cudnnStatus_t; None: the process ended during the call
    text: str | None  # cudnnGetErrorString(status)


@dataclass(frozen=True)
class CudnnCheck:
    soname: str
    load_error: str | None  # libcudnn itself did not load
    version: int | None  # cudnnGetVersion() of the libcudnn the process loaded (92800: 9.28.0)
    calls: tuple[VersionCall, ...]
    mapped: tuple[str, ...]  # the libcudnn* files the process mapped at the end
    process_error: str | None  # the process ended early: killed by cuDNN's abort(), its message
    not_cudnn: bool = False  # the library loaded but exports no cudnnGetVersion: no checks to run

    @property
    def version_text(self) -> str | None:
        return version_text(self.version) if self.version is not None else None

    @property
    def ok(self) -> bool:
        return (self.load_error is None and self.process_error is None
                and all(c.status == 0 for c in self.calls))

    @property
    def failures(self) -> list[str | Msg]:
        out: list[str | Msg] = [f"{self.soname}: {self.load_error}"] if self.load_error else []
        out += [Msg("{call}: {result}", call=f"cuDNN {self.version_text or ''} {c.function}".replace("  ", " "),
                    result=Msg(N_("the process ended during the call")) if c.status is None
                    else f"{c.status} ({c.text})".replace("  ", " ")) for c in self.calls if c.status != 0]
        if self.process_error:
            out.append(self.process_error)
        return out

    @property
    def evidence(self) -> tuple[str | Msg, ...]:
        return (*self.failures, *(f"mapped: {p}" for p in self.mapped))

    @property
    def note(self) -> Msg:
        """What verify says when the checks pass (or could not run)."""
        if self.not_cudnn:
            return Msg(N_("{soname}: exports no cudnnGetVersion, so cuDNN's version checks were not run"),
                       soname=self.soname)
        return Msg(N_("cuDNN {version}: its version checks pass ({calls})"), version=str(self.version_text),
                   calls=", ".join(c.function for c in self.calls))

    def to_json(self) -> dict[str, object]:
        return {"soname": self.soname, "ok": self.ok, "load_error": self.load_error, "version": self.version,
                "version_text": self.version_text,
                "calls": [{"function": c.function, "status": c.status, "text": c.text} for c in self.calls],
                "mapped": list(self.mapped), "process_error": self.process_error, "not_cudnn": self.not_cudnn}


def version_text(version: int) -> str:
    """cudnnGetVersion()'s number as major.minor.patch: cuDNN 9 counts major*10000 + minor*100 + patch (92800:
    9.28.0), cuDNN 8 major*1000 + minor*100 + patch (8902: 8.9.2)."""
    if version >= 90000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def cudnn_soname(sonames: Sequence[str]) -> str | None:
    """The libcudnn.so.N among `sonames` whose major has version checks, else None."""
    for name in sonames:
        parsed = parse_lib_name(name)
        if parsed and parsed[0] == "cudnn" and parsed[1] and parsed[1][0] in VERSION_CHECKS:
            return name
    return None


def check_cudnn(python: str, soname: str, *, prefix: str, conda_hook: Path | None = None,
                folders: Sequence[str] = (), timeout: float = 120.0) -> CudnnCheck:
    """Run cuDNN's version checks in a fresh process of the target, libcudnn loaded by `soname` (else from
    `folders`: its requester's RUNPATH, as loadcheck.py does for a library found only there)."""
    parsed = parse_lib_name(soname)
    functions = VERSION_CHECKS[parsed[1][0]] if parsed and parsed[1] else ()
    code = _SCRIPT % {"mark": _MARK, "soname": soname, "folders": json.dumps(list(folders)),
                      "functions": json.dumps(list(functions))}
    argv, env = launch(python, code, prefix=prefix, conda_hook=conda_hook)
    proc = subproc.run(argv, target_python=python, env=env, timeout=timeout)
    docs = []
    for line in proc.stdout.splitlines():
        if line.startswith(_MARK):
            try:
                doc = json.loads(line[len(_MARK):])
            except ValueError:
                continue
            if isinstance(doc, dict):
                docs.append(doc)
    return _read(soname, docs, proc.returncode, proc.stderr)


def _read(soname: str, docs: list[dict[str, object]], returncode: int, stderr: str) -> CudnnCheck:
    load_error: str | None = "not reached"
    not_cudnn = False
    version: int | None = None
    calls: dict[str, VersionCall] = {}
    mapped: tuple[str, ...] = ()
    for doc in docs:
        if "load" in doc:
            load_error = str(doc["load"]) if doc["load"] is not None else None
            not_cudnn = doc.get("not_cudnn") is True
            number = doc.get("version")
            version = number if isinstance(number, int) else None
        elif isinstance(doc.get("call"), str) and not doc.get("absent"):
            status = doc.get("status")
            text = doc.get("text")
            calls[str(doc["call"])] = VersionCall(str(doc["call"]), status if isinstance(status, int) else None,
                                                  text if isinstance(text, str) else None)
        elif "mapped" in doc:
            listed = doc["mapped"]
            mapped = tuple(p for p in listed if isinstance(p, str)) if isinstance(listed, list) else ()
    process_error = None
    if returncode != 0 or (not mapped and load_error is None and not not_cudnn):
        why = f"killed by signal {-returncode}" if returncode < 0 else f"exit {returncode}"
        said = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
        process_error = (f"cuDNN's version check process ended early ({why})"
                         + (f": {visible(said[0])}" if said else ""))
    return CudnnCheck(soname, load_error, version, tuple(calls.values()), mapped, process_error, not_cudnn)

