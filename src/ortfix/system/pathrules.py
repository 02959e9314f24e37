"""Whether a path lies in a folder (the environment, most often), by the target OS's path rules: the one answer to
"is this file inside the environment" that check, plan and apply ask.

`within` compares text: on Windows without case and with "/" and "\\" alike (`ntpath.normcase`), on Linux byte for
byte; trailing separators and "." and ".." components are normalised away; a sibling whose name only starts with the
folder's (`/env2` beside `/env`) is not in it. `within_resolved` follows symbolic links first (on the machine ortfix
runs on), so a link inside the environment to a file outside it is outside, and an environment reached through a
linked folder still holds its own files: what the loader and pip see.
"""

from __future__ import annotations

import os
import posixpath


def within(path: str, folder: str, *, windows: bool, strict: bool = False) -> bool:
    """Whether `path` is `folder` or lies under it, compared as text by the target's rules (`windows`: Windows'
    rules); `strict`: the folder itself is not in it."""
    if windows:
        import ntpath  # here: a Linux target's check does not import it (its failed imports of nt and _winapi)

        path, folder, sep = ntpath.normcase(ntpath.normpath(path)), ntpath.normcase(ntpath.normpath(folder)), "\\"
    else:
        path, folder, sep = posixpath.normpath(path), posixpath.normpath(folder), "/"
    if path == folder:
        return not strict
    return path.startswith(folder.rstrip(sep) + sep)  # the root ("/", "C:\\") keeps its separator


def within_resolved(path: str, folder: str, *, windows: bool) -> bool:
    """`within`, symbolic links in both resolved first (os.path.realpath)."""
    return within(os.path.realpath(path), os.path.realpath(folder), windows=windows)
