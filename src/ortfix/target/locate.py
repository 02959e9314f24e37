"""Where a transaction command's environment is, without a full probe: a venv or conda layout around bin/python
says it (the Python version from pyvenv.cfg or conda-meta); else the interpreter is asked. Rollback must work
quickly, offline, and with a half-broken environment."""

from __future__ import annotations

import os
from pathlib import Path

from ortfix import subproc
from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.target.choose import TargetDescription, choose_target, is_own_prefix

# Asked with -S (none of the environment's code runs), so the venv is found as site.py finds it: a pyvenv.cfg beside
# the interpreter or one folder up makes the folder above the interpreter's the prefix.
_ASK = """import os, sys
exe = os.path.dirname(os.path.abspath(sys.executable))
venv = any(os.path.isfile(os.path.join(d, "pyvenv.cfg")) for d in (exe, os.path.dirname(exe)))
print(os.path.dirname(exe) if venv else sys.prefix)
print(sys.version.split()[0])
print(int(venv or sys.prefix != sys.base_prefix))"""  # i18n: english (a program the target runs)


def locate_environment(python: str | None) -> TargetDescription:
    """The target and its prefix without running a full probe: a venv or conda layout around bin/python says it
    (the Python version from pyvenv.cfg or conda-meta, when they say it); else the interpreter is asked (rollback
    must work quickly, offline, and with a half-broken environment)."""
    chosen = choose_target(python)
    exe = chosen.python
    env_dir = exe.parent.parent
    if exe.parent.name == "bin" and (env_dir / "pyvenv.cfg").is_file():
        return TargetDescription(str(exe), _venv_version(env_dir / "pyvenv.cfg"), "venv", str(env_dir),
                                 chosen.chosen_by, is_own_prefix(str(env_dir)))
    if exe.parent.name == "bin" and (env_dir / "conda-meta").is_dir():
        return TargetDescription(str(exe), _conda_version(env_dir / "conda-meta"), "conda", str(env_dir),
                                 chosen.chosen_by, is_own_prefix(str(env_dir)))
    proc = subproc.run([str(exe), "-S", "-c", _ASK], target_python=exe, timeout=30)
    answer = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or len(answer) < 3:
        raise OrtfixError(Msg(N_("cannot ask {python} for its prefix: {error}"), python=str(exe),
                              error=proc.stderr.strip() or Msg(N_("no output"))),
                          hint=Msg(N_("give the environment folder with --python")))
    prefix, version, venv = answer[-3:]
    kind = "venv" if venv == "1" else "conda" if os.path.isdir(os.path.join(prefix, "conda-meta")) else "system"
    return TargetDescription(str(exe), version, kind, prefix, chosen.chosen_by, is_own_prefix(prefix))


def _venv_version(cfg: Path) -> str | None:
    """`version = 3.11.7` (venv) or `version_info = 3.11.7` (uv, virtualenv) in pyvenv.cfg."""
    try:
        text = cfg.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip() in ("version", "version_info"):
            return value.strip()[:32] or None
    return None


def _conda_version(meta: Path) -> str | None:
    """The version in conda-meta's `python-3.11.7-<build>.json` file name."""
    try:
        names = [name for name in os.listdir(meta) if name.startswith("python-3") and name.endswith(".json")]
    except OSError:
        return None
    return names[0].split("-")[1] if len(names) == 1 else None


def externally_managed(prefix: str, python_version: str) -> bool:
    """PEP 668: the interpreter's stdlib folder holds EXTERNALLY-MANAGED (pip then refuses without
    --break-system-packages)."""
    short = ".".join(python_version.split(".")[:2])
    return any(os.path.isfile(os.path.join(prefix, lib, f"python{short}", "EXTERNALLY-MANAGED"))
               for lib in ("lib", "lib64"))
