"""The Windows user's display (UI) language, for the language ortfix speaks when no LANG-like variable is set
(ortfix/i18n.py): GetUserDefaultUILanguage's language id, named as a locale (`zh_CN`) by the standard library's
`locale.windows_locale` table. The host's language, not the target's: ortfix's own output."""

from __future__ import annotations

import sys


def ui_language() -> str | None:
    """The Windows user's UI language as a locale name (`zh_CN`, `en_US`); None elsewhere or when it cannot be read."""
    if sys.platform != "win32":
        return None
    import ctypes

    try:
        langid = int(ctypes.windll.kernel32.GetUserDefaultUILanguage())
    except (AttributeError, OSError, ValueError):
        return None
    return locale_name(langid)


def locale_name(langid: int) -> str | None:
    """A Windows LANGID/LCID (0x0804) as a locale name (zh_CN); None for one the table does not know."""
    import locale  # the table, read only on this path

    return locale.windows_locale.get(langid)
