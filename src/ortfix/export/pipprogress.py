"""`pip download` run with its progress shown while it downloads (a wheelhouse is gigabytes: minutes on a slow
link). On a terminal (`DownloadProgress.terminal`), pip's own progress bars: pip runs with `--progress-bar on` and
FORCE_COLOR (its output is a pipe), and what it writes is passed on as it comes, every control escaped except line
ends, carriage returns and the cursor and colour sequences a progress bar redraws itself with. Elsewhere (a log, CI),
one line per file pip starts to download, with the files and bytes downloaded so far, read from pip's own lines
("Downloading NAME (283.2 MB)", "Using cached NAME (18 kB)"); and a closing line with the total.

pip's standard error (its warnings and errors) is kept for the failure message, and shown as it comes."""

from __future__ import annotations

import codecs
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ortfix import subproc
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg, tr
from ortfix.safetext import visible

# What pip logs as it starts a file (its size as pip formats it: 123 bytes, 18 kB, 283.2 MB, 1.2 GB).
_STARTED = re.compile(r"^\s*(?:Downloading|Using cached) (\S+) \(([0-9.]+) (bytes|kB|MB|GB)\)\s*$")
_UNIT = {"bytes": 1, "kB": 1000, "MB": 1000**2, "GB": 1000**3}
# Kept on a terminal: line ends, carriage returns, and CSI cursor/erase/colour sequences (a progress bar's redraw).
_KEPT = re.compile(r"\x1b\[[0-9;?]{0,16}[ABCDGKJhlm]|\r\n|\r|\n")
_UNFINISHED = re.compile(r"\x1b(?:\[[0-9;?]{0,16})?$")  # a sequence cut at the end of a chunk


@dataclass
class DownloadProgress:
    """Where progress goes: `line` takes ortfix's own lines; `terminal` (None off a terminal) takes pip's output with
    its progress bars, as it comes. Off a terminal, the files and bytes counted so far (over every download of a
    wheelhouse) and the size of the one in flight."""

    line: Callable[[str], None]
    terminal: Callable[[str], None] | None = None
    files: int = 0
    size: int = 0
    current: int | None = field(default=None)

    def finish_current(self) -> None:
        if self.current is not None:
            self.files, self.size, self.current = self.files + 1, self.size + self.current, None


def size_text(n: int) -> str:
    for unit, scale in (("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return tr("{n} bytes", n=n)


def tally_line(files: int, size: int) -> str:
    """How far a download is, for the terminal."""
    if files == 1:
        return tr("downloaded {files} file, {size}", files=files, size=size_text(size))
    return tr("downloaded {files} files, {size}", files=files, size=size_text(size))


def terminal_text(text: str) -> str:
    """`text` for a terminal: every control escaped but line ends, carriage returns and the CSI sequences a progress
    bar redraws with."""
    out, pos = [], 0
    for m in _KEPT.finditer(text):
        out += [visible(text[pos:m.start()]), m.group()]
        pos = m.end()
    return "".join([*out, visible(text[pos:])])


def _feed(progress: DownloadProgress, line: str) -> None:
    """Count the file pip was downloading as done when it starts the next, and say so."""
    m = _STARTED.match(line)
    if m is None:
        return
    progress.finish_current()
    progress.current = int(float(m.group(2)) * _UNIT[m.group(3)])
    name = m.group(1).split("#")[0].split("?")[0].rsplit("/", 1)[-1]  # a find-links URL: its file name only
    progress.line(tr("{tally}; now {name} ({size})", tally=tally_line(progress.files, progress.size), name=name,
                     size=f"{m.group(2)} {m.group(3)}"))


def _read_chunks(proc: subprocess.Popen[str], show: Callable[[str], None]) -> None:
    """pip's standard output as it comes (not line by line: a progress bar redraws its line without ending it)."""
    assert proc.stdout is not None
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    held = ""
    while chunk := os.read(proc.stdout.fileno(), 65536):
        text = held + decoder.decode(chunk)
        cut = _UNFINISHED.search(text)
        held, text = (text[cut.start():], text[:cut.start()]) if cut else ("", text)
        show(text)
    show(held + decoder.decode(b"", final=True))


def _read_lines(stream: IO[str] | None, feed: Callable[[str], None]) -> None:
    assert stream is not None
    for line in iter(stream.readline, ""):
        feed(line.rstrip("\n"))


def run_download(argv: Sequence[str], python: str, progress: DownloadProgress | None,
                 timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """Run the `pip download` argv (given without --quiet or --progress-bar): its exit code and standard error
    (with standard output too when nobody is shown progress)."""
    if progress is None:
        return subproc.run([*argv, "--quiet"], target_python=python, timeout=timeout)
    terminal = progress.terminal
    env = (subproc.child_env(FORCE_COLOR="1", COLUMNS=str(shutil.get_terminal_size().columns))
           if terminal is not None else None)
    proc = subproc.start([*argv, "--progress-bar", "on" if terminal else "off"], target_python=python, env=env)
    errors: list[str] = []

    def error_line(line: str) -> None:
        errors.append(line)
        progress.line(f"pip: {line}")

    out = (threading.Thread(target=_read_chunks, args=(proc, lambda t: terminal(terminal_text(t))), daemon=True)
           if terminal is not None else
           threading.Thread(target=_read_lines, args=(proc.stdout, lambda line: _feed(progress, line)), daemon=True))
    threads = [out, threading.Thread(target=_read_lines, args=(proc.stderr, error_line), daemon=True)]
    for t in threads:
        t.start()
    try:
        rc = proc.wait(timeout=subproc.child_timeout(timeout))
    except subprocess.TimeoutExpired as exc:
        subproc.terminate_group(proc, timeout=5, close_pipes=False)
        raise OrtfixError(Msg(N_("pip download did not finish in {seconds} s"), seconds=f"{timeout:.0f}"),
                          hint=Msg(N_("check your network; a slow link may need a nearer index or mirror"))) from exc
    except BaseException:
        subproc.terminate_group(proc, timeout=5, close_pipes=False)  # the readers are still reading
        raise
    for t in threads:
        t.join(timeout=5)
    subproc.close_child_pipes(proc)
    progress.finish_current()
    return subprocess.CompletedProcess(list(argv), rc, "", "\n".join(errors))


def folder_tally(folder: Path) -> tuple[int, int]:
    """(files, bytes) in `folder`."""
    files = [p for p in folder.iterdir() if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)
