#!/bin/sh
# Install ortfix for this user: finds a Python 3.9+ (ORTFIX_INSTALL_PYTHON, else python3, else python) and runs
# bootstrap.py, which lies beside this file and holds all the logic, with every argument given here.
#   sh install.sh [--find-links DIR --no-index] [--python TARGET] [--yes] [--uninstall] ...   (--help: all options)
# Exit codes: bootstrap.py's (see its --help); 3 when no Python 3.9+ is found.
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd) || exit 2
bootstrap="$here/bootstrap.py"
if [ ! -f "$bootstrap" ]; then
    echo "ortfix-install: error: $bootstrap is missing: run install.sh from ortfix's scripts folder (a checkout or the sdist)" >&2
    exit 2
fi
found=""
for candidate in ${ORTFIX_INSTALL_PYTHON:+"$ORTFIX_INSTALL_PYTHON"} python3 python; do
    if command -v "$candidate" >/dev/null 2>&1; then
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 9))' >/dev/null 2>&1; then
            exec "$candidate" "$bootstrap" "$@"
        fi
        [ -n "$found" ] || found=$candidate
    fi
done
if [ -n "$found" ]; then
    version=$("$found" -c 'import sys; print(".".join(map(str, sys.version_info[:3])))' 2>/dev/null)
    echo "ortfix-install: error: $found is Python ${version:-of unknown version}; ortfix needs Python 3.9 or newer: install one, or name it with ORTFIX_INSTALL_PYTHON=/path/to/python3" >&2
    exit 3
fi
echo "ortfix-install: error: no Python found (python3, python on PATH): install Python 3.9 or newer (Debian/Ubuntu: apt install python3 python3-venv), or name one with ORTFIX_INSTALL_PYTHON=/path/to/python3" >&2
exit 3
