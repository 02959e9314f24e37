"""Reuse what an identical earlier `ortfix check` printed, for as long as nothing it depends on has changed.

A check depends on: ortfix itself (its version and the files of its package), the command line, the environment
variables, working directory and user ortfix runs with, the probe's report from inside the target interpreter, and
everything the check looked at on the file system. The probe runs every time (it reads the target's live state) and
its report must match byte for byte; every file system observation of the earlier run is made again and must answer
the same (fsrecord.py). Anything else (another report, a changed file, an entry added to or removed from a folder
the loader searches, another driver version in /sys) and the check runs in full.

Racy timestamps: a file changed twice within one tick of the file system's clock keeps its mtime. So a result is
saved only when everything it depends on is at least RACY_MARGIN_NS old; a just-installed environment is checked in
full until it has settled.

Only `check` uses this: `plan`, `apply` and `verify` always look afresh. `check --fresh`, ORTFIX_NO_CACHE=1 or
Python < 3.11 bypass it. Kept free of dataclasses, typing and click: a replay is the fastest path ortfix has.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence

from ortfix import __version__
from ortfix.cachedir import cache_folder, digest, write_json
from ortfix.speed import fsrecord, prefetch
from ortfix.target.choose import choose_target

SCHEMA = 1
RACY_MARGIN_NS = 2_000_000_000
MAX_ENTRIES = 64
# Variables that differ between two shells without changing anything ortfix or the target sees.
_ENV_NOISE = frozenset({"_", "OLDPWD", "PWD", "SHLVL"})
# File system answers a check depends on through a child process (the recorder sees only ortfix's own calls). The
# probe's report is compared as a whole and ld.so's search list is keyed by ld.so's identity (recorded by os.stat).
_SEEN_BY_SUBPROCESSES = (("list", "/proc/driver/nvidia/gpus"),)

class SavedCheck:
    """The cache slot of one check command line: `replay` answers from it, `record` fills it."""

    __slots__ = ("file", "key", "target")

    def __init__(self, target: str, file: str, key: str) -> None:
        self.target = target
        self.file = file
        self.key = key

    def replay(self) -> tuple[str, int] | None:
        """(output, exit code) of the earlier identical check, if everything it depended on still holds."""
        try:
            with open(self.file, encoding="utf-8") as f:
                entry = json.loads(f.read())
            if entry.get("schema") != SCHEMA or entry.get("key") != self.key:
                return None
            output, exit_code, report = entry["output"], entry["exit_code"], entry["probe"]
            observations = entry["observations"]
        except (OSError, ValueError, KeyError, AttributeError):
            return None
        if not isinstance(output, str) or not isinstance(exit_code, int) or not isinstance(observations, list):
            return None
        # The file system first: it needs no waiting, and when it has changed the probe is left to the full check.
        if not fsrecord.still_true(observations):
            return None
        probe = prefetch.finished(self.target)
        if probe.returncode != 0 or probe.stdout != report:
            return None
        _used(self.file)
        return output, exit_code

    def record(self, check: Callable[[], tuple[str, int, str]]) -> tuple[str, int]:
        """Run `check` (returning output, exit code and the probe's report) while recording what it looks at; keep
        the result when it can be validated by looking again; (output, exit code)."""
        # Deferred: the replay path (above) must not import the loader. Its in-process cache of folder listings
        # would answer without an os.listdir for the recorder to see: emptied, every folder is listed while recording.
        from ortfix.system.loader import forget_listings

        forget_listings()
        started_ns = time.time_ns()
        with fsrecord.recording(ignored=[os.path.dirname(os.path.dirname(self.file))]) as recorder:
            output, exit_code, report = check()
            # What the check learnt from programs it ran, which the recorder cannot watch: the GPU query's answer
            # (NVML in a child interpreter) changes with the GPUs present, which the kernel lists here.
            for op, path in _SEEN_BY_SUBPROCESSES:
                recorder.note(op, path)
        observations = recorder.observations
        # Something it depends on that changed just now may change again within the same clock tick, unseen.
        settled = fsrecord.newest_change_ns(observations) <= started_ns - RACY_MARGIN_NS
        if report and settled and not recorder.unrepeatable:
            entry = {"schema": SCHEMA, "key": self.key, "exit_code": exit_code, "output": output, "probe": report,
                     "observations": observations}
            if write_json(self.file, entry):
                _prune(os.path.dirname(self.file))
        return output, exit_code


def saved_check(python: str | None, options: Sequence[str | bool | None]) -> SavedCheck | None:
    """The cache slot for `check` with this --python and these options; None where the cache is off."""
    base = cache_folder()
    if base is None or not fsrecord.supported():
        return None
    # How the target was chosen is part of the key: check prints it first (`check` finding a venv's python3 on PATH
    # and `check --python VENV` look at the same interpreter but say different things).
    chosen = choose_target(python)
    key = _key(chosen.interpreter, [*options, chosen.chosen_by])
    return SavedCheck(chosen.interpreter, os.path.join(base, "checks", f"{key[:32]}.json"), key)


def _key(target: str, options: Sequence[str | bool | None]) -> str:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # ortfix/, with its subpackages
    code = []
    folders = [""]
    while folders:
        folder = folders.pop()
        with os.scandir(os.path.join(package, folder)) as entries:
            for entry in entries:
                name = os.path.join(folder, entry.name)
                if entry.name.endswith(".py"):
                    st = entry.stat()
                    code.append((name, st.st_size, st.st_mtime_ns, st.st_ino))
                elif entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                    folders.append(name)
    material = [
        SCHEMA, __version__, sys.executable, sorted(code), target, list(options),
        sorted((k, v) for k, v in os.environ.items() if k not in _ENV_NOISE),
        os.getcwd(), os.getuid(), os.getgid(), sorted(os.getgroups()),
    ]
    return digest(json.dumps(material).encode("ascii"))


def _used(file: str) -> None:
    """Date the entry `file` now: it was just replayed. _prune keeps the entries used last; by the time they were
    written alone, the check replayed most often (never written again) was the first one dropped as soon as
    MAX_ENTRIES other checks had been saved after it (other environments, other command lines, other users of a
    shared cache folder), and it ran in full the next time."""
    try:  # noqa: SIM105 (no contextlib on the path of a replayed check)
        os.utime(file, follow_symlinks=False)  # the entry itself, never what a link put in its place points to
    except (OSError, NotImplementedError):
        pass


def _prune(folder: str) -> None:
    """Keep the MAX_ENTRIES results used last (saved or replayed; one per command line, environment and target)."""
    dated = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".json"):  # as Path.glob("*.json") (which matches hidden names too)
                    try:  # noqa: SIM105 (no contextlib on the path of a replayed check)
                        dated.append((entry.stat().st_mtime_ns, entry.path))
                    except OSError:
                        pass
    except OSError:
        return
    for _mtime, old in sorted(dated, reverse=True)[MAX_ENTRIES:]:
        try:  # noqa: SIM105 (no contextlib on the path of a replayed check)
            os.unlink(old)
        except OSError:
            pass
