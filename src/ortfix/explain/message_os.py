"""Which OS a pasted message came from, so that an explanation's wording follows it: a Linux log line gets the
loader path (LD_LIBRARY_PATH, `lib/` folders), a Windows one DLLs and PATH. Read from the text alone (explain may run
on another machine than the one that printed the message): Windows paths (`C:\\...`), DLL names and WinError numbers
against shared objects (`.so`, `.so.N`), ELF tools and POSIX paths of the build machine (`/onnxruntime_src/`)."""

from __future__ import annotations

import re
from typing import Literal

MessageOs = Literal["linux", "windows"]

_WINDOWS = re.compile(r"\b[A-Za-z]:\\|\.dll\b|\[WinError \d+\]|LoadLibrary|\bError code 12[67]\b", re.IGNORECASE)
_LINUX = re.compile(r"\blib[\w+-]+\.so\b|\.so\.\d|/onnxruntime_src/|\bldconfig|(?:^|[\s'\"(])/(?:usr|home|opt|lib|root)"
                    r"/|manylinux_\d|\blinux_(?:x86_64|aarch64)\b", re.IGNORECASE)


def message_os(text: str) -> MessageOs | None:
    """"windows" or "linux" when the text shows only that OS's marks; None when it shows neither or both."""
    windows, linux = bool(_WINDOWS.search(text)), bool(_LINUX.search(text))
    if windows == linux:
        return None
    return "windows" if windows else "linux"
