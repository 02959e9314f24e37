"""Which of the files a distribution's RECORD names are the distribution's own, and so may be stashed or removed.

A RECORD is read back from disk: untrusted. Only files that it places under the distribution's own install locations
count: purelib and platlib, the scripts folder (its entry points) and the data folders an install is judged by
(`DATA_FOLDERS` below the prefix: man pages, headers, configuration). In the scripts folder, the interpreter and the
environment's own files never count (`bin/python*`, `Scripts/python*.exe`, `pydoc3`, the activate scripts). Anything
else a RECORD may name (the prefix's top-level files such as `pyvenv.cfg`, the standard library, ortfix's own
`.ortfix`) stays where it is: stashing `pyvenv.cfg` would make the next `<env>/bin/python -m pip` the base
interpreter's pip, installing there.

The transaction applies `is_own_file` (the pip-uninstall stash, what a rollback removes of an install). The exported
scripts' standard-library steps program applies `RULE_PY`, the same rule generated from the same constants."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ortfix.system.host import HOST

# Where wheels put their data files (the "data" scheme is the prefix itself; these are the folders used in practice:
# man pages in share/, headers in include/, configuration in etc/). An install may create them.
DATA_FOLDERS = ("share", "include", "etc")
# The names in the scripts folder that belong to the interpreter or the environment, never to a distribution (matched
# whole, case-insensitively): python, python3.11, python3.11-config, pythonw.exe, python3.dll; pydoc3, idle3, 2to3;
# the activate scripts of venv and virtualenv.
INTERPRETER_FILES = (r"(?:python|pydoc|idle|2to3)[^/]*|activate(?:\.[A-Za-z0-9]+)?|activate_this\.py"
                     r"|deactivate(?:\.[A-Za-z0-9]+)?")
_INTERPRETER = re.compile(INTERPRETER_FILES, re.IGNORECASE)


def _fold(path: str) -> str:
    """A path as this platform compares it: Windows folds case and takes "\\" for "/"."""
    return HOST.fold_path(path)


def is_own_file(rel: str, sites: Iterable[str], scripts: str) -> bool:
    """Whether `rel` (below the prefix, "/"-joined) lies in one of a distribution's install locations: below a site
    folder (`sites`, below the prefix), a data folder, or the scripts folder (`scripts`, below the prefix) and there
    not the interpreter's or the environment's own."""
    rel, scripts = _fold(rel), _fold(scripts)
    for folder in [*(_fold(s) for s in sites), *DATA_FOLDERS]:
        if folder and rel.startswith(folder + "/"):
            return True
    if scripts and rel.startswith(scripts + "/"):
        return not _INTERPRETER.fullmatch(rel[len(scripts) + 1:].split("/")[0])
    return False


# The same rule for the exported steps program (standard library, any Python 3, which imports `os` and `re`).
RULE_PY = f'''
DATA_FOLDERS = {DATA_FOLDERS!r}
INTERPRETER_FILES = re.compile({INTERPRETER_FILES!r}, re.IGNORECASE)


def fold(path):
    return path.replace("\\\\", "/").lower() if os.name == "nt" else path


def own_file(rel, sites, scripts):
    """Whether rel (below the prefix) lies in a distribution's own install locations (ortfix's ownfiles.py)."""
    rel, scripts = fold(rel), fold(scripts)
    for folder in [fold(s) for s in sites] + list(DATA_FOLDERS):
        if folder and rel.startswith(folder + "/"):
            return True
    if scripts and rel.startswith(scripts + "/"):
        return not INTERPRETER_FILES.fullmatch(rel[len(scripts) + 1:].split("/")[0])
    return False
'''  # i18n: english (a program)
