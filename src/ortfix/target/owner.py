"""Whose code a child runs: ortfix running as root never starts an environment that another user controls.

A Python environment's code runs in every process that starts its interpreter: its `.pth` files and sitecustomize
(`site`), pip and uv (the interpreter they query and the packages they import), `import onnxruntime` in the load
check and the ORT runs. Run as root (an administrator helping a user, Ansible with `become`), ortfix would hand that
code root: the environment's owner gets root by asking for help (git's `safe.directory` problem).

So `subproc.run`/`subproc.start` call `require_trusted` right before they start a child that runs a target
environment's code (`target_python=`; every call site must say, the type checker sees to it). When ortfix runs as
root, every path that decides what such a child executes must belong to root and be writable by nobody else (a
folder writable by everyone, or by a group other than root's, counts as theirs unless it is sticky, as /tmp is):
the interpreter and each link on the way to the real file, the environment's folder, its pyvenv.cfg and the base
installation it names (`home`), its site-packages folders, and every folder above each of them (whoever can rename
one of those decides what the path names). Anything else is refused in one line (exit 2) that says how to go on:
run ortfix as that user, or, to run the environment's code as root anyway, name it in `ORTFIX_SAFE_ENVS` (folders
separated by os.pathsep; an environment in or below one of them is not checked).

Not run as root, or on Windows, nothing is checked: ortfix then has no more privilege than whoever starts it.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: speed/early.py asks `refusal` before any import
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from ortfix.i18n import Msg

SAFE_ENVS = "ORTFIX_SAFE_ENVS"
# Where an environment keeps what `site` adds to sys.path: <env>/lib*/python3*/{site,dist}-packages (POSIX layouts,
# Debian's dist-packages), <env>/Lib/site-packages (Windows).
_LIB_DIRS = ("lib", "lib64")
_SITE_DIRS = ("site-packages", "dist-packages")
_MAX_LINKS = 40  # as the kernel's ELOOP limit


def require_trusted(python: str | Path) -> None:
    """Refuse (OrtfixError, exit 2) to start code of the environment of `python` when ortfix runs as root and
    someone else controls a path that decides what runs. Called at the moment of launch (subproc)."""
    refused = refusal(python)
    if refused is None:
        return
    from ortfix.errors import OrtfixError
    from ortfix.i18n import N_, Msg
    from ortfix.safetext import visible

    path, who, env_dir = refused
    raise OrtfixError(
        Msg(N_("refusing to run {python} as root: {path} {who}, so whoever that is would get root through the "
               "environment's code (.pth files, pip, onnxruntime)"), python=visible(str(python)),
            path=visible(str(path)), who=who),
        hint=Msg(N_("run ortfix as the environment's owner; or, if you trust it, {variable}={folder}"),
                 variable=SAFE_ENVS, folder=visible(str(env_dir))))


def refusal(python: str | Path) -> tuple[str, Msg, str] | None:
    """Why require_trusted refuses `python`: (the path someone else controls, who that is, the environment's
    folder); None when it does not (ortfix is not root, the environment is root's alone or listed safe). Imports
    nothing (speed/early.py asks before starting the probe ahead of everything else)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    env_dir = environment_folder(python)
    plain: set[str] = set()
    if _listed_safe(env_dir, plain):
        return None
    for path in sorted(_deciding_paths(python, env_dir, plain)):
        who = _controlled_by(path)
        if who is not None:
            return path, who, env_dir
    return None


def environment_folder(python: str | Path) -> str:
    """The folder of the environment `python` belongs to, from its path alone: `<env>` for `<env>/bin/python` (and
    `<env>/Scripts/python.exe`), else the interpreter's own folder (a conda or Windows layout)."""
    folder = os.path.dirname(os.path.abspath(python))
    return os.path.dirname(folder) if os.path.basename(folder) in ("bin", "Scripts") else folder


def _listed_safe(env_dir: str, plain: set[str]) -> bool:
    """The environment is in or below a folder of ORTFIX_SAFE_ENVS (compared by real path)."""
    real = None
    for entry in os.environ.get(SAFE_ENVS, "").split(os.pathsep):
        if not entry.strip():
            continue
        real = _real(env_dir, plain) if real is None else real
        allowed = _real(os.path.expanduser(entry), plain)
        if real == allowed or real.startswith(allowed.rstrip(os.sep) + os.sep):
            return True
    return False


def _deciding_paths(python: str | Path, env_dir: str, plain: set[str]) -> set[str]:
    """Every path whose owner decides what a child of `python` runs, folders above included."""
    wanted: list[str] = []
    envs = [env_dir]
    for hop in _link_chain(os.path.abspath(python)):
        wanted.append(hop)
        envs.append(environment_folder(hop))
    for env in dict.fromkeys(envs):
        cfg = os.path.join(env, "pyvenv.cfg")
        if os.path.lexists(cfg):
            wanted.append(cfg)
            home = _venv_home(cfg)
            if home:
                wanted.append(home)
                envs.append(os.path.dirname(home) if os.path.basename(home) in ("bin", "Scripts") else home)
    for env in dict.fromkeys(envs):
        wanted.append(env)
        wanted.extend(_site_folders(env))
    found: set[str] = set()
    for path in wanted:
        _add_ancestry(path, found, plain)
    return found


def _add_ancestry(path: str, found: set[str], plain: set[str]) -> None:
    """Add `path` and every folder above it, as written and as resolved (a linked folder on the way counts both), to
    `found`, where every folder above a path in it is in it too: a walk up ends at the first folder already there
    (the paths of one environment share most of theirs: 193 steps were 38). `plain`: as _real's."""
    for form in (os.path.abspath(path), _real(path, plain)):
        current = os.path.normpath(form)
        while current not in found:
            found.add(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent


def _site_folders(env: str) -> Iterator[str]:
    """The site-packages folders an environment has, found by listing its lib folders (glob would import re: this
    runs before every probe)."""
    yield os.path.join(env, "Lib", "site-packages")
    for lib in _LIB_DIRS:
        try:
            names = os.listdir(os.path.join(env, lib))
        except OSError:
            continue
        for name in names:
            if name.startswith("python3"):
                for site_dir in _SITE_DIRS:
                    yield os.path.join(env, lib, name, site_dir)


def _link_chain(path: str) -> Iterator[str]:
    """`path`, then each symbolic link's target in turn, up to the file that is not a link."""
    for _ in range(_MAX_LINKS):
        yield path
        try:
            target = os.readlink(path)
        except OSError:  # not a link (or gone): the end of the chain
            return
        path = os.path.normpath(os.path.join(os.path.dirname(path), target))


def _real(path: str, plain: set[str]) -> str:
    """os.path.realpath(path), with one lstat per folder per check rather than one per folder per path: `plain`
    holds the absolute paths seen to be no link, with no link above them (their real path is themselves; filled
    here). A link on the way is followed as realpath follows it (its text read from the folder it is in, whose real
    path is itself), where the text has no ".." part (realpath resolves what comes before a ".." first). A path in
    another form (relative, with "." or ".." parts, "//"), a link whose text has a ".." and a loop (more links than
    the kernel follows) are left to realpath."""
    current = path
    for _ in range(_MAX_LINKS):
        if not _normal(current):
            break
        link = _first_link(current, plain)
        if link is None:
            return current
        try:
            text = os.readlink(link)
        except OSError:  # no longer a link
            break
        if ".." in text.split(os.sep):
            break
        target = os.path.normpath(os.path.join(os.path.dirname(link), text))
        rest = current[len(link):]
        current = target.rstrip(os.sep) + rest if rest else target
    return os.path.realpath(path)


def _normal(path: str) -> bool:
    return os.path.isabs(path) and not path.startswith("//") and os.path.normpath(path) == path


def _first_link(path: str, plain: set[str]) -> str | None:
    """The first folder on the way to `path` (or itself) that is a link; None when there is none, and then all of
    them are in `plain`. A missing one, or one below a file, is no link (as realpath takes it)."""
    unseen = []
    current = path
    while current not in plain:
        parent = os.path.dirname(current)
        if parent == current:
            break
        unseen.append(current)
        current = parent
    for folder in reversed(unseen):
        try:
            st = os.lstat(folder)
        except OSError:
            pass
        else:
            if stat.S_ISLNK(st.st_mode):
                return folder
        plain.add(folder)
    return None


def _ancestry(path: str) -> set[str]:
    """`path` and every folder above it, as written and as resolved (a linked folder on the way counts both)."""
    found: set[str] = set()
    _add_ancestry(path, found, set())
    return found


def only_root_controls(path: str) -> bool:
    """Whether root alone controls `path` and every folder above it (what a child run as root may import from)."""
    return all(_controlled_by(p) is None for p in _ancestry(path))


def _venv_home(cfg: str) -> str | None:
    """pyvenv.cfg's `home` (where the interpreter's base installation is), as site.py and getpath read it."""
    try:
        with open(cfg, encoding="utf-8", errors="replace") as f:
            lines = f.read(65536).splitlines()
    except OSError:
        return None
    for line in lines:
        key, eq, value = line.partition("=")
        if eq and key.strip().lower() == "home" and value.strip():
            return os.path.abspath(value.strip())
    return None


def _controlled_by(path: str) -> Msg | None:
    """Why someone other than root controls `path` ("is owned by uid 1000 (alice)", "is writable by everyone"...),
    None when only root does (or it does not exist)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        from ortfix.i18n import N_, Msg

        return Msg(N_("cannot be checked ({error})"), error=str(exc.strerror or exc))
    if st.st_uid == 0 and (stat.S_ISLNK(st.st_mode) or (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX)):
        return None  # a link's own mode means nothing; in a sticky folder only an entry's owner may rename it
    if st.st_uid == 0 and not st.st_mode & stat.S_IWOTH and not (st.st_mode & stat.S_IWGRP and st.st_gid != 0):
        return None
    from ortfix.i18n import N_, Msg  # only for an answer that refuses: nothing imported on the way to a probe

    if st.st_uid != 0:
        return Msg(N_("is owned by uid {uid}{name}"), uid=st.st_uid, name=_name_of(st.st_uid, "pwd"))
    if st.st_mode & stat.S_IWOTH:
        return Msg(N_("is writable by everyone"))
    return Msg(N_("is writable by group {gid}{name}"), gid=st.st_gid, name=_name_of(st.st_gid, "grp"))


def _name_of(number: int, database: str) -> str:
    """` (alice)`: the user's (or group's) name, when the system has one."""
    try:
        if database == "pwd":
            import pwd

            name = pwd.getpwuid(number).pw_name
        else:
            import grp

            name = grp.getgrgid(number).gr_name
    except (ImportError, KeyError):
        return ""
    return f" ({name})" if name.isprintable() else ""
