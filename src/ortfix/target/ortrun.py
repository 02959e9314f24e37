"""Host side of `_ortrun.py`: run onnxruntime inside the target interpreter, in a fresh process started as the user
starts it, and turn whatever happens to that process into data.

The child reports each stage as one marker line the moment it finishes; this side reads them as they come (so a
long `tune` shows progress), and keeps them when the child dies: a signal (onnxruntime's CUDA provider dies of
SIGSEGV without a driver), an exit without the final stage, a timeout. Nothing the child does can crash ortfix.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ortfix import subproc
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.target.launch import launch

SOURCE = Path(__file__).with_name("_ortrun.py")
MARK = "ORTFIX-RUN:"
CUDA_EP = "CUDAExecutionProvider"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Lines of onnxruntime's own logging (and of its Python fallback) that say why a provider did not start.
_INTERESTING = re.compile(r"\[E:onnxruntime|\[W:onnxruntime|EP Error|Failed to load library|CUDA failure|"
                          r"CUDA error|cudaError|cannot open shared object file|Falling back|"
                          r"LoadLibrary failed|which is missing|Could not locate|Could not load library")

# "2025-11-23 07:11:54.786951380 [E:onnxruntime:Default, provider_bridge_ort.cc:2195 TryGetProviderInfo_CUDA] "
_LOG_PREFIX = re.compile(r"^\S+ \S+ \[([EWIV]):onnxruntime:[^\]]*\] ")
# "/onnxruntime_src/.../provider_bridge_ort.cc:1778 onnxruntime::Provider& ...::Get() [ONNXRuntimeError] : 1 : FAIL : "
_ORT_ERROR = re.compile(r"^\S+:\d+ .*?\[ONNXRuntimeError\] : \d+ : \w+ : ")
# cuDNN 8 on Windows, when a DLL it loads on demand (a sub-library, or zlibwapi.dll for 8.3-8.9) is not found, prints
# this and ends the whole process with exit code 9 (measured: docs/windows-dlls.md).
_CUDNN8_LOCATE = re.compile(r"Could not locate (?P<dll>[\w.+-]+\.dll)\.\s*Please make sure it is in your library path",
                            re.IGNORECASE)
CUDNN8_EXIT_CODE = 9


@dataclass(frozen=True)
class RunOutcome:
    argv: tuple[str, ...]  # as shown to users (the script itself elided)
    stages: tuple[Mapping[str, Any], ...]  # every marker document, in order
    returncode: int | None  # None: killed by ortfix after the timeout
    timed_out: bool
    log: tuple[str, ...]  # every other line of output, colour codes removed
    timeout: float

    def stage(self, name: str) -> Mapping[str, Any] | None:
        found = [s for s in self.stages if s.get("stage") == name]
        return found[-1] if found else None

    def all(self, name: str) -> list[Mapping[str, Any]]:
        return [s for s in self.stages if s.get("stage") == name]

    @property
    def finished(self) -> bool:
        return self.stage("done") is not None

    @property
    def signal(self) -> int | None:
        return -self.returncode if self.returncode is not None and self.returncode < 0 else None

    @property
    def last_stage(self) -> str | None:
        names = [str(s.get("stage")) for s in self.stages if s.get("stage") not in ("progress", "done")]
        return names[-1] if names else None

    def death(self) -> Msg:
        """How the process ended, in words, when it did not finish (English in str(), translated by .text())."""
        if self.timed_out:
            return Msg(N_("did not finish within {seconds} s and was killed"), seconds=f"{self.timeout:.0f}")
        if self.signal is not None:
            return Msg(N_("was killed by signal {number} ({name})"), number=self.signal,
                       name=signal_name(self.signal))
        dll = cudnn8_exit(self.log, self.returncode)
        if dll is not None:
            return Msg(N_("exited with status {code}: {why}"), code=str(self.returncode), why=cudnn8_verdict(dll))
        tail = next((line for line in reversed(self.log) if line.strip()), "")
        if tail:
            return Msg(N_("exited with status {code}: {why}"), code=str(self.returncode), why=tail)
        return Msg(N_("exited with status {code}"), code=str(self.returncode))

    @property
    def evidence(self) -> list[str]:
        """onnxruntime's own messages about providers, without their log prefixes, deduplicated, in order."""
        out: list[str] = []
        for line in self.log:
            text = line.strip()
            if not text or not _INTERESTING.search(text):
                continue
            text = _ORT_ERROR.sub("", _LOG_PREFIX.sub("", text))
            if text not in out:
                out.append(text)
        return out


def cudnn8_exit(log: Sequence[str], returncode: int | None) -> str | None:
    """The DLL cuDNN 8 could not locate when it ended the process (exit code 9 after "Could not locate X.dll. Please
    make sure it is in your library path!"), else None."""
    if returncode != CUDNN8_EXIT_CODE:
        return None
    for line in reversed(log):
        m = _CUDNN8_LOCATE.search(line)
        if m:
            return m.group("dll")
    return None


def cudnn8_verdict(dll: str) -> Msg:
    """What it means, in one sentence, that cuDNN 8 ended the process because it could not locate `dll`."""
    what = (Msg(N_("zlibwapi.dll (cuDNN 8.3-8.9 load it; no pip wheel ships it)")) if dll.lower() == "zlibwapi.dll"
            else Msg(N_("its sub-library {dll}"), dll=dll))
    return Msg(N_("cuDNN 8 could not load {what}: it printed \"Could not locate {dll}. Please make sure it is in your "
                  "library path!\" and ended the process with exit code {code}"), what=what, dll=dll,
               code=CUDNN8_EXIT_CODE)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def run_in_target(python: str, args: Mapping[str, Any], *, prefix: str, conda_hook: Path | None = None,
                  timeout: float = 300.0, on_stage: Callable[[Mapping[str, Any]], None] | None = None,
                  env: Mapping[str, str] | None = None) -> RunOutcome:
    """Run `_ortrun.py` with `args` in a fresh process of `python`; `on_stage` sees each marker as it arrives.
    `env`: the child's environment when the caller knows better than `launch` how the user starts it (a Windows
    conda environment: PATH as its activate.d scripts leave it)."""
    code = SOURCE.read_text(encoding="utf-8")
    argv, child_env = launch(python, code, [json.dumps(dict(args))], prefix=prefix, conda_hook=conda_hook)
    shown = tuple("<ortfix run script>" if a == code else a for a in argv)
    return stream(argv, dict(env) if env is not None else child_env, target_python=python, timeout=timeout,
                  on_stage=on_stage, shown=shown)


def stream(argv: Sequence[str], env: Mapping[str, str], *, target_python: str | None, timeout: float,
           on_stage: Callable[[Mapping[str, Any]], None] | None = None,
           shown: Sequence[str] | None = None) -> RunOutcome:
    """Run argv, handing each stage line to `on_stage` as it arrives. Both pipes are read by threads and this thread
    waits for the child itself: once it has ended, its output is taken as it is after `PIPE_GRACE` seconds. A
    process the child started can hold the pipes open for ever (under wine, the desktop process that the first
    user32 call of a prefix starts inherits them), and a read or close that waits for it would hang ortfix."""
    proc = subproc.start(argv, target_python=target_python, env=env)
    stages: list[Mapping[str, Any]] = []
    out_lines: list[str] = []
    err_lines: list[str] = []
    failed: list[BaseException] = []  # what `on_stage` raised on the reader thread: raised here once the run ends

    def take(line: str) -> None:
        doc = _stage(line)
        if doc is None:
            out_lines.append(line)
            return
        stages.append(doc)
        if on_stage is not None and not failed:
            try:
                on_stage(doc)
            except Exception as exc:  # the pipe is still drained, or the child would block on a full pipe
                failed.append(exc)

    readers = [threading.Thread(target=_drain, args=(proc.stdout, take), daemon=True),
               threading.Thread(target=_drain, args=(proc.stderr, err_lines.append), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        timed_out = not _wait(proc, timeout)
        if timed_out:
            subproc.terminate_group(proc, timeout=5, close_pipes=False)
    except BaseException:  # Ctrl-C: the child and everything it started go too
        subproc.terminate_group(proc, timeout=5, close_pipes=False)
        raise
    finally:
        held = _join(readers, subproc.child_timeout(PIPE_GRACE))
        if held:  # what the child left running holds its output: it goes, as on a timeout
            subproc.terminate_group(proc, timeout=2, close_pipes=False)
            held = _join(readers, 2.0)
        if not held:  # nobody reads them any more; one still being read stays open (closing it would wait)
            subproc.close_child_pipes(proc)
    if failed:
        raise failed[0]
    log = tuple(_ANSI.sub("", line).rstrip("\n") for line in (*list(out_lines), *list(err_lines)))
    return RunOutcome(tuple(shown or argv), tuple(list(stages)), None if timed_out else proc.returncode,
                      timed_out, log, timeout)


PIPE_GRACE = 10.0  # seconds to finish reading a child's output after it ended


def _stage(line: str) -> Mapping[str, Any] | None:
    """The marker line's document, None for any other line (or a marker that does not parse as an object)."""
    if not line.startswith(MARK):
        return None
    try:
        doc = json.loads(line[len(MARK):])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _drain(pipe: IO[str] | None, sink: Callable[[str], None]) -> None:
    if pipe is None:
        return
    with contextlib.suppress(OSError, ValueError):  # the pipe closed under us: its output ends there
        for line in pipe:
            sink(line)


def _wait(proc: subprocess.Popen[str], timeout: float) -> bool:
    """Wait for the child, at most `timeout` seconds, in short steps so that Ctrl-C is seen on Windows too."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return proc.poll() is not None
        try:
            proc.wait(timeout=min(left, 0.25))
            return True
        except subprocess.TimeoutExpired:
            continue


def _join(threads: Sequence[threading.Thread], grace: float) -> bool:
    """Join every thread within `grace` seconds in all; True when one is still running."""
    deadline = time.monotonic() + grace
    for thread in threads:
        thread.join(timeout=max(deadline - time.monotonic(), 0.0))
    return any(t.is_alive() for t in threads)


def model_file(model: Path, label: str) -> Path:
    """`model` resolved, or a one-line error (`label` names it as the user gave it) when it cannot be read."""
    if not model.exists():
        raise OrtfixError(Msg(N_("{label}: no such file"), label=label),
                          hint=Msg(N_("give the path of an .onnx model")))
    if not model.is_file() or not os.access(model, os.R_OK):
        raise OrtfixError(Msg(N_("{label}: not a readable file"), label=label),
                          hint=Msg(N_("give the path of an .onnx model")))
    return model.resolve()


def shapes_text(shapes: Mapping[str, Sequence[int]], sep: str = ", ") -> str:
    return sep.join(f"{k}={'x'.join(str(d) for d in v)}" for k, v in shapes.items())


def one_line(text: str) -> str:
    """A message from the child (onnxruntime's, often several lines) as one line."""
    return " ".join(text.split())
