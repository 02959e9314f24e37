"""The one standard-library Python program the exported scripts run with the target's own interpreter
(`python -I -B steps.py COMMAND ...`), so that their undo is exact: what the do-script uninstalls or overwrites is
moved aside into a stash folder (a distribution by its RECORD, its .dist-info and cached bytecode, as ortfix's own
pip-uninstall step does), and the undo script discards what was installed or written the same way, then moves the
stash back. Every path is confined to the running interpreter's `sys.prefix`, and of a RECORD only the rows in the
distribution's own install locations are moved (never the interpreter or `pyvenv.cfg`): transaction/ownfiles.py's
rule, generated into the program from the same constants (`RULE_PY`).

Commands: `stash-files DEST PATH...`, `stash-dists DEST DIST_INFO...`, `stash-named DEST NAME...` (the installed
distributions of those names), `restore STASH` (moves everything back, then removes STASH), `discard-files WORK
PATH...`, `discard-named WORK NAME...` (moved into a temporary folder in WORK, then deleted)."""

from __future__ import annotations

from ortfix.transaction.ownfiles import RULE_PY

_PROGRAM = r'''"""ortfix export: moves files aside and back, confined to this interpreter's environment."""
import csv
import os
import re
import shutil
import sys
import sysconfig
import tempfile

PREFIX = os.path.realpath(sys.prefix)
# ORTFIX_RULE


def rel(path):
    full = os.path.abspath(path)
    full = os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))
    if os.path.commonpath([PREFIX, full]) != PREFIX or full == PREFIX:
        sys.exit("ortfix export: %s is outside %s; nothing more was done" % (path, PREFIX))
    return os.path.relpath(full, PREFIX)


def cached(path):
    if not path.endswith(".py"):
        return []
    folder = os.path.join(os.path.dirname(path), "__pycache__")
    stem = os.path.basename(path)[:-3] + "."
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, n) for n in sorted(names) if n.startswith(stem) and n.endswith(".pyc")]


def install_locations():
    """(the site folders, the scripts folder), below the prefix."""
    paths = sysconfig.get_paths()
    inside = lambda key: os.path.relpath(os.path.realpath(paths[key]), PREFIX)
    return [inside("purelib"), inside("platlib")], inside("scripts")


def dist_files(dist_info):
    location = os.path.dirname(os.path.abspath(dist_info))
    sites, scripts = install_locations()
    paths = []
    with open(os.path.join(dist_info, "RECORD"), newline="", encoding="utf-8") as f:
        for row in csv.reader(f):
            if row and row[0]:
                path = os.path.normpath(os.path.join(location, row[0]))
                if own_file(rel(path), sites, scripts):
                    paths.append(path)
                elif os.path.lexists(path):
                    print("ortfix export: %s stays: its RECORD lists it, but it is not in the distribution's "
                          "install locations" % ascii(path), file=sys.stderr)
    for folder, _dirs, files in os.walk(dist_info):
        paths += [os.path.join(folder, n) for n in files]
    for p in list(paths):
        paths += cached(p)
    return list(dict.fromkeys(p for p in paths if os.path.lexists(p)))


def site_dirs():
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(paths[k] for k in ("purelib", "platlib")))


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def named(names):
    wanted = set(canonical(n) for n in names)
    found = []
    for site in site_dirs():
        try:
            entries = sorted(os.listdir(site))
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".dist-info") and canonical(entry[:-10].rsplit("-", 1)[0]) in wanted:
                found.append(os.path.join(site, entry))
    return found


def prune(folders):
    for folder in sorted(set(folders), key=lambda d: -d.count(os.sep)):
        while os.path.realpath(folder) != PREFIX:
            try:
                os.rmdir(folder)
            except OSError:
                break
            folder = os.path.dirname(folder)


def move_aside(dest, paths):
    folders = []
    # every path is checked before the first is moved: one outside the environment stops the step untouched
    planned = [(path, os.path.join(dest, rel(path))) for path in dict.fromkeys(paths)]
    for path, target in planned:
        if not os.path.lexists(path):
            continue  # shared by two distributions (nvidia/__init__.py): moved with the first
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.move(path, target)
        folders.append(os.path.dirname(os.path.abspath(path)))
    prune(folders)


def restore(stash):
    for folder, _dirs, files in os.walk(stash):
        for name in files + [d for d in _dirs if os.path.islink(os.path.join(folder, d))]:
            source = os.path.join(folder, name)
            target = os.path.join(PREFIX, os.path.relpath(source, stash))
            rel(target)
            if os.path.lexists(target):
                sys.exit("ortfix export: %s exists again; its stashed copy stays in %s" % (target, source))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.move(source, target)
    shutil.rmtree(stash)


def files_of(paths):
    out = []
    for p in paths:
        if os.path.lexists(p):
            out.append(p)
        out += cached(p)
    return out


def main(argv):
    command, args = argv[0], argv[1:]
    if command == "restore":
        if os.path.isdir(args[0]):
            restore(args[0])
        return
    dest, args = args[0], args[1:]
    if command.startswith("discard-"):
        dest = tempfile.mkdtemp(prefix="discard-", dir=dest)
    if command in ("stash-files", "discard-files"):
        paths = files_of(args)
    elif command == "stash-dists":
        paths = [p for d in args if os.path.isdir(d) for p in dist_files(d)]
    elif command in ("stash-named", "discard-named"):
        paths = [p for d in named(args) for p in dist_files(d)]
    else:
        sys.exit("ortfix export: unknown step %r" % command)
    move_aside(dest, paths)
    if command.startswith("discard-"):
        shutil.rmtree(dest)


main(sys.argv[1:])
'''  # i18n: english (a program, run by the exported scripts)
STEPS_PY = _PROGRAM.replace("# ORTFIX_RULE\n", RULE_PY)
