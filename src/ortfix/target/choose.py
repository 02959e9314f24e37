"""Which interpreter to inspect, and starting the probe inside it. Kept light (no dataclasses, no JSON, no typing,
no `subprocess` until a probe is started here): a replayed `check` imports it while its probe, started first of all
(speed/early.py), runs."""

from __future__ import annotations

import os
import sys

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system import pathform
from ortfix.system.host import HOST
from ortfix.target import probecmd
from ortfix.target.places import INTERPRETER_PLACES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping
    from pathlib import Path

PROBE_SOURCE = probecmd.PROBE_SOURCE
# How long the probe may take (it needs about 20 ms; a slow network file system, far more): then it is killed,
# with everything it started (subproc.finish). ORTFIX_CHILD_TIMEOUT lowers it for tests.
PROBE_TIMEOUT = 60.0

# How the target was chosen, in the order resolve_target tries them (printed on every command's first line).
BY_OPTION = "--python"
BY_VIRTUAL_ENV = "VIRTUAL_ENV"
BY_CONDA_PREFIX = "CONDA_PREFIX"
# A project's `.venv` (uv's rule, which poetry and pdm follow with in-project venvs): the nearest folder at or above
# the working folder that holds a `.venv` with an interpreter and one of these project files. Chosen before PATH,
# as `uv run` and `uv sync` do without activation.
PROJECT_FILES = ("pyproject.toml", "uv.lock", "poetry.lock", "pdm.lock")
PROJECT_VENV = ".venv"
# The names looked up on PATH when nothing names an environment, in this order, as `uv` does: python3 anywhere on
# PATH first, then python. Windows has no python3.exe worth running (the Store's alias opens the Store).
PATH_NAMES = HOST.python_names
# Chosen by the user (the command line, an activated environment), as opposed to found on PATH: only those may be
# ortfix's own environment for `plan` and `apply` (see commands.refuse_own_environment).
EXPLICIT = (BY_OPTION, BY_VIRTUAL_ENV, BY_CONDA_PREFIX)


class Chosen:
    """The interpreter a command works on, and how it was chosen: `--python`, `VIRTUAL_ENV`, `CONDA_PREFIX` or
    `python3 on PATH` (`python on PATH`). `interpreter`: its path as str(`python`) writes it (what a replayed check
    uses: no pathlib on its way)."""

    __slots__ = ("chosen_by", "interpreter")

    def __init__(self, python: str | os.PathLike[str], chosen_by: str) -> None:
        self.interpreter = pathform.form(python)
        self.chosen_by = chosen_by

    @property
    def python(self) -> Path:
        from pathlib import Path

        return Path(self.interpreter)

    def __repr__(self) -> str:
        return f"Chosen({self.interpreter!r}, {self.chosen_by!r})"


class TargetDescription:
    """What every command says first about the environment it works on: `target /v/bin/python (Python 3.11.7, venv
    at /v), from --python`. `own`: the environment ortfix itself runs in."""

    __slots__ = ("chosen_by", "environment", "own", "prefix", "python", "python_version")

    def __init__(self, python: str, python_version: str | None, environment: str, prefix: str, chosen_by: str,
                 own: bool) -> None:
        self.python = python
        self.python_version = python_version
        self.environment = environment  # venv | conda | system
        self.prefix = prefix
        self.chosen_by = chosen_by
        self.own = own

    def line(self) -> str:
        return str(self.line_msg())

    def line_msg(self) -> Msg:
        """The line every command that looks at a target starts with, as a marked message (ortfix/i18n.py)."""
        version = Msg(N_("Python {version}, "), version=self.python_version) if self.python_version else ""
        own = Msg(N_("; ortfix's own environment")) if self.own else ""
        return Msg(N_("target {python} ({version}{environment} at {prefix}), from {chosen_by}{own}"),
                   python=str(self.python), version=version, environment=self.environment, prefix=str(self.prefix),
                   chosen_by=chosen_by_msg(self.chosen_by), own=own)

    def to_json(self) -> dict[str, object]:
        return {"python": self.python, "python_version": self.python_version, "environment": self.environment,
                "prefix": self.prefix, "chosen_by": self.chosen_by, "ortfix_own_environment": self.own}


_ON_PATH = N_("{name} on PATH")
_PROJECT = N_("the project's {venv} (beside {marker}, as uv finds it)")


def chosen_by_msg(chosen_by: str) -> str | Msg:
    """How the target was chosen (English: the --json documents and plans keep it) as a message to translate."""
    head = _PROJECT.partition("{venv}")[0]
    if chosen_by.startswith(head) and chosen_by.endswith(", as uv finds it)") and " (beside " in chosen_by:
        venv, _, marker = chosen_by[len(head):-len(", as uv finds it)")].rpartition(" (beside ")
        return Msg(_PROJECT, venv=venv, marker=marker)
    if chosen_by.endswith(" on PATH"):
        return Msg(_ON_PATH, name=chosen_by[:-len(" on PATH")])
    return chosen_by


def is_own_prefix(prefix: str) -> bool:
    """`prefix` is the environment ortfix itself runs in (a pipx venv, the venv it was installed into)."""
    try:
        return os.path.samefile(prefix, sys.prefix)
    except OSError:
        return False


def refuse_empty_python(python: str | None) -> str | None:
    """--python '' was given (and would read as "not given" wherever a fallback says `python or ...`): refused."""
    if python is not None and not python:
        raise OrtfixError(Msg(N_("--python '': an empty path")),
                          hint=Msg(N_("give an interpreter or an environment folder, or leave --python out")))
    return python


def resolve_target(python: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """The interpreter choose_target picks."""
    return choose_target(python, environ).python


def resolve_interpreter(python: str | None) -> str:
    """The interpreter choose_target picks, as str(resolve_target(python)) writes it."""
    return choose_target(python).interpreter


def choose_target(python: str | None, environ: Mapping[str, str] | None = None) -> Chosen:
    """--python PATH (an interpreter or an environment folder), else the activated environment (VIRTUAL_ENV, then
    CONDA_PREFIX), else the `.venv` of the project at or above the working folder (find_project_venv), else the
    first `python3` on PATH (then `python`), as a shell finds it; else a usage error.

    Never the interpreter ortfix runs in just because it runs there: for a pipx install that is ortfix's own venv.
    None means --python was not given; an empty string was given, and is refused rather than read as "not given".
    A working folder that no longer exists is refused here, once for every command that works on an environment:
    the probe, the project lookup and the replay key all read it."""
    try:
        os.getcwd()
    except FileNotFoundError:
        raise OrtfixError(Msg(N_("the working folder no longer exists (it was removed or renamed while the shell was "
                                 "in it)")),
                          hint=Msg(N_("cd into an existing folder and run ortfix again"))) from None
    env = os.environ if environ is None else environ
    if python is not None:
        return Chosen(_given(python), BY_OPTION)
    for var in (BY_VIRTUAL_ENV, BY_CONDA_PREFIX):
        prefix = env.get(var)
        if prefix:
            candidate = pathform.form(os.path.join(prefix, "bin", "python"))
            if pathform.exists(candidate):
                return Chosen(candidate, var)
    project = find_project_venv()
    if project is not None:
        return project
    found = _on_path(env.get("PATH"))
    if found is None:
        raise OrtfixError(Msg(N_("no python3 or python on PATH and no activated environment (VIRTUAL_ENV, "
                                 "CONDA_PREFIX)")),
                          hint=Msg(N_("pass --python PATH: the interpreter or the environment folder to work on")))
    path, name = found
    return Chosen(canonical(path), str(Msg(_ON_PATH, name=name)))


def find_project_venv(start: str | os.PathLike[str] | None = None) -> Chosen | None:
    """The interpreter of `<folder>/.venv` for the nearest `folder`, the working folder or one above it, that holds
    both a `.venv` with an interpreter and a project file (PROJECT_FILES), as uv finds a project's environment;
    chosen_by names the folder and the file that made it a project. None when there is none."""
    try:
        folder = pathform.absolute(os.getcwd() if start is None else start)
    except OSError:  # the working folder was removed
        return None
    for candidate in _self_and_parents(folder):
        venv = os.path.join(candidate, PROJECT_VENV)
        try:
            pythons = [p for p in (os.path.join(venv, "bin", "python"), os.path.join(venv, "Scripts", "python.exe"))
                       if pathform.is_file(p)]
            marker = next((name for name in PROJECT_FILES if pathform.is_file(os.path.join(candidate, name))), None)
        except OSError:  # a folder on the way that cannot be searched
            continue
        if pythons and marker is not None:
            return Chosen(pythons[0], str(Msg(_PROJECT, venv=venv, marker=marker)))
    return None


def _self_and_parents(folder: str) -> list[str]:
    """`folder` (absolute, in pathform's form), then each folder above it up to the root (Path's `parents`)."""
    folders = [folder]
    while (above := pathform.parent(folders[-1])) != folders[-1]:
        folders.append(above)
    return folders


def _given(python: str) -> str:
    refuse_empty_python(python)
    path = _expanded(python)
    try:
        if pathform.is_dir(path):
            for candidate in (pathform.form(os.path.join(path, *place)) for place in INTERPRETER_PLACES):
                if pathform.exists(candidate):
                    return pathform.absolute(candidate)
            raise OrtfixError(Msg(N_("--python {python}: a folder with no bin/python in it"), python=python),
                              hint=Msg(N_("give the interpreter's path or an environment folder")))
        if not pathform.exists(path):
            too_long = max_path_error(pathform.absolute(path), N_("cannot be read"))
            raise too_long or OrtfixError(Msg(N_("--python {python}: no such file"), python=python))
    except OSError as exc:  # a name too long, a folder on the way that cannot be searched
        raise OrtfixError(Msg("--python {python}: {error}", python=python, error=str(exc.strerror or exc))) from exc
    return canonical(pathform.absolute(path))


def _expanded(python: str) -> str:
    """--python's value with `~` expanded as Path.expanduser does it (pathlib itself: rare, and its error is the
    message), in pathform's form."""
    if not python.startswith("~"):
        return pathform.form(python)
    from pathlib import Path

    try:
        return str(Path(python).expanduser())
    except RuntimeError as exc:  # ~user/... for a user that does not exist
        raise OrtfixError(Msg("--python {python}: {error}", python=python, error=str(exc)),
                          hint=Msg(N_("give the path without ~, or an existing user's"))) from exc


def find_on_path(path: str | None) -> tuple[Path, str] | None:
    """(the file, the name it was found as) for the first of PATH_NAMES a shell would run from this PATH: each name
    in turn, the folders in order, an empty entry meaning the working directory, skipping what is not an executable
    file (a folder, a broken link, a file without execute permission). PATH unset: the system's default path."""
    found = _on_path(path)
    if found is None:
        return None
    from pathlib import Path

    return Path(found[0]), found[1]


def _on_path(path: str | None) -> tuple[str, str] | None:
    """find_on_path's answer, the file as a str."""
    if path is None:
        try:
            path = os.confstr("CS_PATH") or "/bin:/usr/bin"
        except (AttributeError, ValueError, OSError):  # no confstr (Windows), or no such name
            path = "/bin:/usr/bin"
    folders = path.split(os.pathsep)
    for name in PATH_NAMES:
        for folder in folders:
            candidate = os.path.join(folder or ".", name)
            try:
                if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                    return pathform.form(os.path.abspath(candidate)), name
            except (OSError, ValueError):  # a name too long, a NUL byte
                continue
    return None


def canonical(python: str | os.PathLike[str]) -> str:
    """An environment's interpreter under the one name every way of choosing it leads to: `<env>/bin/python`, where
    `python3` (or `python3.11`) beside it is the same file, in a venv or conda layout. A plan made with `python3 on
    PATH` is then the plan `--python <env>` or VIRTUAL_ENV makes (the interpreter's path is part of the facts a
    saved plan must find again). Elsewhere (a system Python, where `python` may be another interpreter) as it is."""
    python = pathform.form(python)
    if os.path.basename(python) == "python":
        return python
    folder = pathform.parent(python)
    env_dir = pathform.parent(folder)
    same = os.path.join(folder, "python")
    try:
        cfg, meta = os.path.join(env_dir, "pyvenv.cfg"), os.path.join(env_dir, "conda-meta")
        if (pathform.is_file(cfg) or pathform.is_dir(meta)) and os.path.samefile(same, python):
            return same
    except OSError:
        pass
    return python


def probe_source() -> str:
    """The probe's source as it is started (target/probecmd.py)."""
    return probecmd.probe_source()


def probe_argv(python: str | os.PathLike[str]) -> list[str]:
    """How the probe is started in `python` (target/probecmd.probe_argv), importing its copy in ortfix's cache folder
    where there is a usable one."""
    source = probe_source()
    return probecmd.probe_argv(os.fspath(python), source, _cached_probe(source))


def _cached_probe(source: str) -> tuple[str, str] | None:
    """(folder, module name) of the probe's source in ortfix's cache folder, written there if needed; None where
    there is no such folder that only this user can write to. As root, also every folder above it must be root's
    alone (target/owner.only_root_controls): under `sudo -E` the cache folder may sit in another user's HOME, who
    could swap a folder on the way before the target imports from it."""
    from ortfix.cachedir import cache_folder, write_text

    base = cache_folder()
    if base is None or not HOST.has_owners:
        return None
    if HOST.runs_as_root():
        from ortfix.target.owner import only_root_controls

        if not only_root_controls(base):
            return None
    folder, name = probecmd.cached_module(base, source)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)  # as Path.mkdir(parents=True): those above with the default
        if not probecmd.only_mine(folder):
            return None
        if not probecmd.holds(folder, name, source) and not write_text(os.path.join(folder, f"{name}.py"), source):
            return None
    except OSError:
        return None
    return folder, name


def start_probe(python: str | os.PathLike[str]) -> subprocess.Popen[str]:
    """The probe, running in `python` in a session of its own; finish it with `subproc.finish(proc,
    timeout=PROBE_TIMEOUT)`, which kills its whole process group when that time is up."""
    from ortfix import subproc

    python = os.fspath(python)
    try:
        return subproc.start(probe_argv(python), target_python=python, env=probecmd.probe_env())
    except OrtfixError as exc:
        said = exc.message_msg
        if not isinstance(said, Msg) or said.template != subproc.CANNOT_RUN:  # target/owner.py's refusal
            raise
        too_long = max_path_error(str(python), N_("cannot be started"))
        if too_long is not None:
            raise too_long from exc
        raise OrtfixError(Msg(N_("{python} cannot be started ({error})"), python=str(python),
                              error=said.args["reason"]),
                          hint=Msg(N_("is it a Python interpreter? --python names the one to work on"))) from exc


def max_path_error(path: str, what: str) -> OrtfixError | None:
    """On Windows, the error for a path too long for MAX_PATH (None when it is not, or not on Windows)."""
    limit = HOST.max_path
    if limit is None or len(path) < limit or path.startswith("\\\\?\\"):
        return None
    return OrtfixError(Msg(N_("{path} {what}: its path is {n} characters, over Windows' MAX_PATH limit of {limit}"),
                           path=path, what=Msg(what), n=len(path), limit=limit - 1),
                       hint=Msg(N_("use an environment at a shorter path, or enable long paths (LongPathsEnabled=1 "
                                   "under HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem, as Python's installer "
                                   "offers)")))
