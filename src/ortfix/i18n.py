"""The language of what ortfix prints for people: standard-library gettext catalogs under `ortfix/locale/`.

The English source strings are the catalog keys: code marks a string with `_()` (translated now) or `N_()` (only
marked: translated later, where it is printed) and `Msg` keeps a marked template with its values, English for data
(`str(msg)`, the `--json` documents) and translated for people (`msg.text()`). Only text printed for people is ever
translated: `--json` documents, exit codes, finding codes, files ortfix writes, commands and options stay English.

The language, first that applies (gettext's own order, GNU's rule for LANGUAGE):
  --lang (the `ortfix` group's option), then ORTFIX_LANG, then LANGUAGE (a `:` list, e.g. `zh_CN:en`) unless the
  locale is C/POSIX, then LC_ALL, LC_MESSAGES, LANG (`zh_CN.UTF-8`: codeset and `@modifier` are ignored); on Windows,
  when none of these is set, the user's UI language (system/windows/uilang.py). `C`, `POSIX`, `en*` and a language
  without a catalog mean English (in a list, the first with a catalog wins). `zh`, `zh_SG` and `zh_Hans` mean zh_CN;
  Traditional Chinese (`zh_TW`, `zh_HK`, `zh_MO`, `zh_Hant`) stays English until a catalog for it exists.
A missing or unreadable catalog (a corrupt .mo) means English; a translation whose placeholders do not fit its
English source is not used. Nothing here ever fails a command.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: choose.py imports this before the probe starts

if TYPE_CHECKING:
    import gettext
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

DOMAIN = "ortfix"
LOCALE_DIR: str | os.PathLike[str] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "locale")
ENV_OVERRIDE = "ORTFIX_LANG"
# Language names that mean a catalog of another name.
_ALIASES = {"zh": "zh_CN", "zh_SG": "zh_CN", "zh_Hans": "zh_CN", "zh_Hans_CN": "zh_CN", "zh_Hans_SG": "zh_CN"}


class _English:
    """English, the messages as they are: what gettext.NullTranslations answers, without importing gettext (it
    cost every English `check` 6M instructions, its `locale` and a pattern compiled at import)."""

    def gettext(self, message: str) -> str:
        return message

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return singular if n == 1 else plural


_current: gettext.GNUTranslations | _English | None = None
_chosen: str = "en"


def normalize(name: str) -> str:
    """`zh_CN.UTF-8`, `zh-cn@x`, `zh_Hans` → a catalog name (zh_CN); `C`/`POSIX`/`en_US` → en."""
    base = name.strip().split(".", 1)[0].split("@", 1)[0].replace("-", "_")
    parts = base.split("_")
    if not parts[0]:
        return ""
    lang = parts[0].lower()
    rest = [p.upper() if len(p) == 2 else p.title() for p in parts[1:] if p]
    full = "_".join([lang, *rest])
    if base in ("C", "POSIX") or lang == "en":
        return "en"
    return _ALIASES.get(full, full)


def _candidates(environ: Mapping[str, str], override: str | None) -> list[str]:
    """The language names to try, in order (module docstring)."""
    for value in (override, environ.get(ENV_OVERRIDE)):
        if value:
            return value.split(":")
    locale_name = next((environ[v] for v in ("LC_ALL", "LC_MESSAGES", "LANG") if environ.get(v)), "")
    if locale_name.split(".", 1)[0] in ("C", "POSIX"):
        return ["C"]  # GNU gettext: LANGUAGE is ignored when the locale is C
    if environ.get("LANGUAGE"):
        return environ["LANGUAGE"].split(":")
    if locale_name:
        return [locale_name]
    from ortfix.system.windows.uilang import ui_language  # only when no variable names a language

    ui = ui_language()
    return [ui] if ui else []


def choose(environ: Mapping[str, str], override: str | None = None) -> str:
    """The catalog name ortfix speaks for these variables and `--lang`: the first candidate with a catalog, "en"
    when English comes first or none has one."""
    for candidate in _candidates(environ, override):
        name = normalize(candidate)
        if name == "en":
            return "en"
        if not name.replace("_", "").isalnum():  # a catalog name, never a path: `../x` looks nowhere
            continue
        for tried in (name, name.split("_", 1)[0]):
            if os.path.isfile(os.path.join(LOCALE_DIR, tried, "LC_MESSAGES", f"{DOMAIN}.mo")):
                return tried
    return "en"


def _load(name: str) -> gettext.GNUTranslations | _English:
    if name == "en":
        return _English()
    import gettext  # only for a catalog: the replayed `check` never prints a translated line, English none
    import struct

    try:
        with open(os.path.join(LOCALE_DIR, name, "LC_MESSAGES", f"{DOMAIN}.mo"), "rb") as fp:
            return gettext.GNUTranslations(fp)
    except (OSError, ValueError, LookupError, struct.error, IndexError):  # what a broken .mo raises
        return _English()  # a broken catalog: English, never a failed command


def set_language(override: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Choose the language (module docstring) and load its catalog; the catalog name chosen ("en" for English,
    also when its catalog could not be read)."""
    return _use(choose(os.environ if environ is None else environ, override))


def _use(name: str) -> str:
    """Load catalog `name` and put it in use; the name in use ("en" also when its catalog could not be read)."""
    global _current, _chosen
    _current = _load(name)
    _chosen = "en" if isinstance(_current, _English) else name
    return _chosen


def language() -> str:
    """The catalog in use ("en": none)."""
    _translations()
    return _chosen


def _translations() -> gettext.GNUTranslations | _English:
    if _current is None:
        set_language()
    assert _current is not None
    return _current


def _(message: str) -> str:
    """`message` (an English catalog key) in the language chosen; itself when there is no translation."""
    return _translations().gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    return _translations().ngettext(singular, plural, n)


def N_(message: str) -> str:
    """Mark a string for the catalog without translating it: it is translated where it is printed."""
    return message


class Msg:
    """A marked English template (`N_`) with its `{name}` values: `str()` is English (data, `--json`), `text()` the
    language chosen. A value that is a Msg is translated with it. A translation whose placeholders do not fit the
    values falls back to English."""

    __slots__ = ("args", "template")

    def __init__(self, template: str, **args: str | int | Msg) -> None:
        self.template = template
        self.args = args

    def __str__(self) -> str:
        return self.template.format(**{k: str(v) for k, v in self.args.items()})

    def __repr__(self) -> str:
        return f"Msg({self.template!r}, {self.args!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Msg) and (self.template, self.args) == (other.template, other.args)

    def __hash__(self) -> int:
        return hash(self.template)

    def text(self) -> str:
        values = {k: v.text() if isinstance(v, Msg) else str(v) for k, v in self.args.items()}
        for template in (_(self.template), self.template):
            try:
                return template.format(**values)
            except (KeyError, IndexError, ValueError):
                continue  # a translation (or text) whose fields do not fit: the English, else the text as it is
        return self.template


class Joined(Msg):
    """Values joined by a separator (a list of wheels, of GPUs), each translated with the sentence around it. The
    separator is a marked string (`N_(", ")`: the enumeration comma in zh_CN, `N_("; ")`: the full-width
    semicolon), English in `str()`, translated in `text()`; an empty one joins as it is."""

    __slots__ = ("items",)

    def __init__(self, separator: str, items: Sequence[str | int | Msg]) -> None:
        super().__init__(separator)
        self.items = tuple(items)

    def __str__(self) -> str:
        return self.template.join(str(i) for i in self.items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Joined) and (self.template, self.items) == (other.template, other.items)

    def __hash__(self) -> int:
        return hash(self.items)

    def text(self) -> str:
        separator = _(self.template) if self.template else ""  # gettext("") is the catalog's header
        return separator.join(i.text() if isinstance(i, Msg) else str(i) for i in self.items)


def tr(template: str, **values: str | int | Msg) -> str:
    """`template` (a marked English string) translated and filled in; English when the translation does not fit."""
    return Msg(template, **values).text()


def text(message: str | Msg) -> str:
    """A Msg translated, a plain string as a catalog key ("" stays "": gettext's key for the catalog's header)."""
    return message.text() if isinstance(message, Msg) else _(message) if message else message


def display_width(value: str) -> int:
    """The columns `value` takes on a terminal: East Asian Wide and Fullwidth characters (Chinese) take two,
    combining marks none, the rest one."""
    if value.isascii():  # one column each (no ASCII character is wide or combining): no `unicodedata` to load
        return len(value)
    import unicodedata  # here: only a padded table with text beyond ASCII needs it

    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1
               for c in value)


def pad(value: str, width: int, *, right: bool = False) -> str:
    """`value` padded with spaces to `width` terminal columns (display_width): `f"{value:<width}"` (`right`:
    `f"{value:>width}"`) for any language."""
    fill = " " * max(0, width - display_width(value))
    return fill + value if right else value + fill


def named_language(override: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The catalog `--lang` (`override`) or ORTFIX_LANG names, "en" when neither is given: the locale variables are
    not asked. The language of the comments of the files `export` writes: a file keeps English unless asked."""
    env = os.environ if environ is None else environ
    if not (override or env.get(ENV_OVERRIDE)):
        return "en"
    return choose({ENV_OVERRIDE: env.get(ENV_OVERRIDE, "")}, override)


def rendered_in(name: str, render: Callable[[], T]) -> T:
    """`render()` with catalog `name` ("en": English) in use, the language chosen before in use again after: the
    comments of an exported file are in the language named for it (named_language), whatever the terminal's."""
    global _current, _chosen
    saved = (_translations(), _chosen)
    _use(name)
    try:
        return render()
    finally:
        _current, _chosen = saved
