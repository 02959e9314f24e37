"""What every confined file access shares, on POSIX (linux/confine.py) and on Windows (windows/confine.py): the error a
path leading outside the environment raises, the check that turns a relative path into its components, reading back a
regular file, and whether a file ortfix reads back has a trusted owner.

Relative paths use "/" between components. On Windows "\\" separates them too, and a component holding ":" (a drive,
an alternate data stream), ending in "." or " " (which Windows strips, so two spellings would name one file), or
naming a device (`NUL`, `CON.txt`: Windows opens the device) is refused.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing

if TYPE_CHECKING:
    from ortfix.i18n import Msg


class ConfinementError(OrtfixError):
    """A path that would lead outside the environment (or through a link inside it): refused, nothing done."""

    def __init__(self, message: str | Msg) -> None:
        super().__init__(message, hint=Msg(N_("ortfix only changes files inside the target environment, never "
                                              "through a symbolic link or a junction; nothing was changed by this "
                                              "operation")))


def by_folder(rels: Iterable[str]) -> dict[tuple[str, ...], list[tuple[str, str]]]:
    """The entries grouped by the folder holding them: {folder components: [(rel, name)]}."""
    out: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for rel in rels:
        parts = rel_parts(rel)
        out.setdefault(tuple(parts[:-1]), []).append((rel, parts[-1]))
    return out


# How the name of a file being written starts, before it is renamed into place. On Windows not with a dot: wine marks a
# file whose name starts with one hidden, the mark survives the rename, and CPython's site.py skips a hidden .pth file
# (3.11.8+, gh-113659), so the PATH hook's .pth was written and never run.
TEMP_NAME_START = "~" if sys.platform == "win32" else "."

_DEVICES = frozenset({"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", *(f"COM{i}" for i in range(1, 10)),
                      *(f"LPT{i}" for i in range(1, 10))})


def _bad_windows_part(part: str) -> bool:
    """A drive or a stream (":"), a name Windows would strip ("x." is "x"), or a device (`NUL`, `con.txt`)."""
    return ":" in part or part.endswith((".", " ")) or part.split(".")[0].rstrip(" ").upper() in _DEVICES


def rel_parts(rel: str) -> list[str]:
    """The components of a relative path below the root, or ConfinementError (`..`, absolute, NUL, empty)."""
    text = rel.replace("\\", "/") if sys.platform == "win32" else rel
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or "\0" in rel or text.startswith("/"):
        raise ConfinementError(Msg(N_("{path} is not a path inside the environment"), path=repr(rel)))
    if sys.platform == "win32" and any(_bad_windows_part(p) for p in parts):
        raise ConfinementError(Msg(N_("{path} is not a plain path inside the environment (a drive, a stream, a "
                                      "device, or a name ending in a dot or a space)"), path=repr(rel)))
    return parts


def check_rel(rel: str) -> str:
    """`rel` if it is a plain relative path (no `..`, not absolute, no NUL), else ConfinementError; "/"-joined."""
    return "/".join(rel_parts(rel))


@dataclass(frozen=True)
class Kept:
    """An entry `move_many` left where it was: vetoed (`why`), or its destination exists (`why` None)."""

    src: str
    dst: str
    why: str | None


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def owner_name(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def require_trusted_owner(uid: int, env_owner: int, where: str, *, hint: str | Msg) -> None:
    """A file ortfix reads back (a journal, a plan) is trusted only when it is owned by the user running ortfix or by
    the environment's owner, as git trusts only repositories of their owner; OrtfixError otherwise.

    Windows has no uids (os.stat gives 0 for every file): a file's owner is a SID in its security descriptor, which
    the standard library cannot read. There the check is skipped, and what stands in for it is the folder's ACL: the
    journal lives inside the environment, which only those allowed to change the environment can write to."""
    if sys.platform == "win32":
        return
    if uid not in (os.geteuid(), env_owner):
        raise OrtfixError(Msg(N_("{file} is owned by {owner}, neither you nor the environment's owner "
                                 "({env_owner})"), file=where, owner=owner_name(uid),
                              env_owner=owner_name(env_owner)), hint=hint)


def read_regular(fd: int, where: str, limit: int) -> tuple[bytes, os.stat_result]:
    """All of an open regular file (at most `limit` bytes, else OrtfixError) and its stat; closes `fd`."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OrtfixError(Msg(N_("{file} is not a regular file"), file=where))
        chunks = []
        total = 0
        while chunk := os.read(fd, 1 << 20):
            total += len(chunk)
            if total > limit:
                break
            chunks.append(chunk)
        if st.st_size > limit or total > limit:
            raise OrtfixError(Msg(N_("{file} is larger than {size} MiB: not an ortfix file"), file=where,
                                  size=limit >> 20))
        return b"".join(chunks), st
    finally:
        os.close(fd)
