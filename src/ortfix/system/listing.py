"""The names in a folder that match a pattern: the one listing whose answer `check`'s replay (speed/fsrecord.py)
records as the names it returned, not as the folder's modification time.

A venv's parent folder is read for project files (system/project.py). That folder is often a busy one (/tmp, the
home folder): every file created or removed there changes its modification time, which would invalidate every
replayed check. Only the names that match matter, so only they are recorded. Callers use it as
`listing.names_matching(...)` (an attribute lookup at call time), which is what lets fsrecord watch it."""

from __future__ import annotations

import os
import re

# Every name system/project.py's project_of reads.
PROJECT_FILES = r"(pyproject\.toml|uv\.lock|poetry\.lock|pdm\.lock|(requirements|constraints)[\w.-]*\.(txt|in))\Z"
# The only patterns a replay compiles. It reads the pattern back from a saved file, which is untrusted: a pattern of
# that file's choosing could fail to parse, or never finish matching. A listing by any other pattern is not replayed.
WATCHED = frozenset({PROJECT_FILES})


def names_matching(folder: str, pattern: re.Pattern[str]) -> list[str]:
    """The sorted names of `folder`'s entries that `pattern` matches (OSError when it cannot be listed)."""
    return sorted(filter(pattern.match, os.listdir(folder)))  # filter: no Python frame per name (/tmp: thousands)
