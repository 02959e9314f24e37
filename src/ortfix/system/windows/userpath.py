"""The user PATH on Windows: the value `Path` of `HKCU\\Environment`, read and written with `winreg` (never `setx`,
which truncates at 1024 characters and writes the expanded value), then announced to running programs with
`SendMessageTimeoutW(HWND_BROADCAST, WM_SETTINGCHANGE, 0, "Environment", SMTO_ABORTIFHUNG, 5000)`.

Only processes started afterwards see the change (Explorer and the shells it starts, once it handled the broadcast).
A new process's PATH is the machine Path (`HKLM\\...\\Session Manager\\Environment`) followed by the user Path, so a
same-named DLL on the machine Path wins whatever ortfix does here. ortfix adds its folders at the **front** of the user
Path: ahead of every other user entry (an older CUDA toolkit or a program folder a user installation added holding
another cublas64_12.dll), which is the most a user-level change can do; `check` reports what the machine Path shadows.

Editing rules: the value is read raw (REG_SZ or REG_EXPAND_SZ) and written back with the same type, so `%VAR%` entries
stay unexpanded; an entry already there (case-insensitively, a trailing backslash ignored) is not added again; a value
that would exceed 32,767 characters (Windows' limit for one environment variable, raw or expanded) is refused with
one line. Removing takes out exactly the entries given (the first exact occurrence of each) and keeps every other
character of the value, in order, empty entries included. The pure functions (`added_value`, `removed_value`) run
anywhere; reading, writing and broadcasting only on Windows.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.strenum import StrEnum

REGISTRY_KEY = "HKCU\\Environment"
MACHINE_KEY = "SYSTEM\\CurrentControlSet\\Control\\Session Manager\\Environment"  # under HKEY_LOCAL_MACHINE
VALUE_NAME = "Path"
MAX_VALUE = 32_767  # characters of one environment variable, the terminating NUL included
_REG_SZ = 1  # winreg.REG_SZ
_REG_EXPAND_SZ = 2  # winreg.REG_EXPAND_SZ
_HWND_BROADCAST = 0xFFFF
_WM_SETTINGCHANGE = 0x001A
_SMTO_ABORTIFHUNG = 0x0002


class ValueType(StrEnum):
    """The registry types a user Path may have (what ortfix keeps when it writes the value back)."""

    REG_SZ = "REG_SZ"
    REG_EXPAND_SZ = "REG_EXPAND_SZ"


@dataclass(frozen=True)
class UserPath:
    """The value as stored: `value` None when `HKCU\\Environment` has no `Path`."""

    value: str | None
    type: ValueType

    @property
    def entries(self) -> list[str]:
        return split_entries(self.value)


def split_entries(value: str | None) -> list[str]:
    """The entries of a Path value, empty ones included (so joining them gives the value back)."""
    return value.split(";") if value else []


def entry_key(entry: str) -> str:
    """How Windows compares two PATH entries: case-insensitively, a trailing backslash ignored."""
    return entry.rstrip("\\/").casefold()


def same_entry(a: str, b: str) -> bool:
    """Whether Windows treats two PATH entries as one folder (`entry_key`)."""
    return entry_key(a) == entry_key(b)


def check_length(value: str, expanded: str | None = None) -> None:
    """Refuse a Path value longer than one environment variable can be (raw, or once %VAR% entries are expanded)."""
    for text, template in ((value, N_("the user PATH would be {count} characters long, over Windows' limit of "
                                      "{limit}")),
                           (expanded, N_("the user PATH would be {count} characters expanded long, over Windows' "
                                         "limit of {limit}"))):
        if text is not None and len(text) >= MAX_VALUE:
            raise OrtfixError(Msg(template, count=len(text), limit=MAX_VALUE - 1),
                              hint=Msg(N_("remove entries you no longer need from the user PATH (System properties, "
                                          "Environment Variables), or use the PATH hook (--hook preload)")))


def added_value(value: str | None, folders: Sequence[str]) -> tuple[str | None, list[str]]:
    """(the new value, the folders actually added): `folders` at the front, in order, but for those already in the
    value; the value unchanged (and nothing added) when all are there."""
    present = split_entries(value)
    added: list[str] = []
    for folder in folders:
        if not any(same_entry(folder, e) for e in (*present, *added)):
            added.append(folder)
    if not added:
        return value, []
    return ";".join(added) + (";" + value if value else ""), added


def removed_value(value: str | None, folders: Sequence[str]) -> tuple[str | None, list[str]]:
    """(the value without the first exact occurrence of each folder, the folders found and removed); every other
    entry stays as it is, in order."""
    entries = split_entries(value)
    removed: list[str] = []
    for folder in folders:
        if folder in entries:
            entries.remove(folder)
            removed.append(folder)
    if not removed:
        return value, []
    return ";".join(entries), removed


if sys.platform == "win32":
    import ctypes
    import winreg
    from ctypes import wintypes

    def _read(root: int, subkey: str, where: str) -> UserPath:
        try:
            with winreg.OpenKey(root, subkey, 0, winreg.KEY_READ) as key:
                raw, kind = winreg.QueryValueEx(key, VALUE_NAME)
        except FileNotFoundError:
            return UserPath(None, ValueType.REG_EXPAND_SZ)  # what Windows itself creates
        except OSError as exc:
            raise OrtfixError(Msg(N_("cannot read {value}: {error}"), value=f"{where}\\{VALUE_NAME}",
                                  error=str(exc.strerror or exc))) from exc
        if kind not in (_REG_SZ, _REG_EXPAND_SZ) or not isinstance(raw, str):
            raise OrtfixError(Msg(N_("{value} is of registry type {kind}, not REG_SZ or REG_EXPAND_SZ; ortfix does not "
                                     "change it"), value=f"{where}\\{VALUE_NAME}", kind=str(kind)),
                              hint=Msg(N_("fix the value in Environment Variables, or use the PATH hook (--hook "
                                          "preload)")))
        return UserPath(raw, ValueType.REG_SZ if kind == _REG_SZ else ValueType.REG_EXPAND_SZ)

    def read_user_path() -> UserPath:
        """The user Path as stored; an OrtfixError for a value of another type than REG_SZ/REG_EXPAND_SZ."""
        return _read(winreg.HKEY_CURRENT_USER, "Environment", REGISTRY_KEY)

    def read_machine_path() -> UserPath:
        """The machine Path as stored (HKLM), read the same way."""
        return _read(winreg.HKEY_LOCAL_MACHINE, MACHINE_KEY, "HKLM\\" + MACHINE_KEY)

    def new_login_path() -> str:
        """PATH as a process started now by a new login gets it: the machine Path, then the user Path, each with
        its %VAR% entries expanded (what `check` judges a user PATH change by; this process's PATH is older)."""
        parts = [expanded(p.value) for p in (read_machine_path(), read_user_path()) if p.value]
        return ";".join(parts)

    def expanded(value: str) -> str:
        return winreg.ExpandEnvironmentStrings(value)

    def write_user_path(value: str | None, value_type: ValueType) -> None:
        """Write the value with its type (None: delete it)."""
        try:
            with winreg.CreateKeyEx(winreg.HKEY_CURRENT_USER, "Environment", 0,
                                    winreg.KEY_SET_VALUE | winreg.KEY_READ) as key:
                if value is None:
                    with contextlib.suppress(FileNotFoundError):
                        winreg.DeleteValue(key, VALUE_NAME)
                else:
                    kind = _REG_SZ if value_type is ValueType.REG_SZ else _REG_EXPAND_SZ
                    winreg.SetValueEx(key, VALUE_NAME, 0, kind, value)
        except OSError as exc:
            raise OrtfixError(Msg(N_("cannot write {value}: {error}"), value=f"{REGISTRY_KEY}\\{VALUE_NAME}",
                                  error=str(exc.strerror or exc))) from exc

    def broadcast_environment_change() -> bool:
        """Tell running programs (Explorer) that the environment changed; False when some window did not answer
        within 5 s (the change is stored all the same)."""
        send = ctypes.WinDLL("user32", use_last_error=True).SendMessageTimeoutW
        send.argtypes = (wintypes.HWND, wintypes.UINT, wintypes.WPARAM, wintypes.LPCWSTR, wintypes.UINT,
                         wintypes.UINT, ctypes.POINTER(ctypes.c_size_t))
        send.restype = ctypes.c_ssize_t
        result = ctypes.c_size_t(0)
        return bool(send(_HWND_BROADCAST, _WM_SETTINGCHANGE, 0, "Environment", _SMTO_ABORTIFHUNG, 5000,
                         ctypes.byref(result)))
else:
    def _not_windows() -> OrtfixError:
        return OrtfixError(Msg(N_("this step changes the Windows user PATH ({value}); this is {platform}"),
                               value=f"{REGISTRY_KEY}\\{VALUE_NAME}", platform=sys.platform),
                           hint=Msg(N_("plans are per platform: make and apply the plan on the Windows machine")))

    def read_user_path() -> UserPath:
        """Off Windows there is no user PATH: the one-line error a Windows plan's step gets there."""
        raise _not_windows()

    def read_machine_path() -> UserPath:
        raise _not_windows()

    def new_login_path() -> str:
        raise _not_windows()

    def expanded(value: str) -> str:
        raise _not_windows()

    def write_user_path(value: str | None, value_type: ValueType) -> None:
        raise _not_windows()

    def broadcast_environment_change() -> bool:
        raise _not_windows()
