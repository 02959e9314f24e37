"""`--help` in the user's language: click's classes with the help texts translated when the help is rendered.

The commands' and options' help texts are marked English (`N_()` in cli/app.py and cli/options.py) and stay English
in the objects click builds; they are translated where click renders them (`--help`, the group's list of commands),
after the entry point has chosen the language (`--lang` anywhere on the command line, ORTFIX_LANG, the locale:
cli/invocation.py, i18n.py). click's own words (`Usage:`, the `Options` and `Commands` headings, the help and version
options' help) are translated here too; click's bracketed extras after an option's help (`[default: auto]`) and its
usage-error messages stay as click prints them.

Every command (and group) here also takes `--lang LANG`, so that it may follow the command's name
(`ortfix check --lang zh_CN`); its value is read once, by the entry point, before click runs.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

import click

from ortfix.i18n import N_, _, display_width

# click's own words, translated where they are printed (HelpFormatter, format_options, _help_option).
CLICK_WORDS = (N_("Usage: "), N_("Options"), N_("Commands"), N_("Positional arguments"),
               N_("Show this message and exit."), N_("Show the version and exit."))
LANG_HELP = N_("The language of the text printed for people (zh_CN, en); also ORTFIX_LANG, else LANGUAGE, LC_ALL, "
               "LC_MESSAGES, LANG. --json documents and files ortfix writes stay English (an exported file's "
               "comments follow --lang or ORTFIX_LANG).")
SUB_LANG_HELP = N_("The language of the text printed for people, as `ortfix --lang LANG` (export: also of the "
                   "files' comments).")


def translated(text: str | None) -> str | None:
    """A help text (its marked English) in the language chosen; click's bracketed extras after it (`  [10<=x<=20]`,
    `  [default: auto]`) stay as they are."""
    if not text:
        return text
    body, sep, extra = text.rpartition("  [")
    if sep and body and text.endswith("]"):
        return _(body) + sep + extra
    return _(text)


def _short(text: str, limit: int) -> str:
    """The first sentence of a translated help text's first paragraph (click's short help: `。` ends a Chinese one),
    cut to `limit` terminal columns."""
    first = " ".join(text.partition("\n\n")[0].split())
    head, stop, _rest = first.partition("。")
    first = head + stop
    if display_width(first) <= limit:
        return first
    while first and display_width(first) > limit - 1:
        first = first[:-1]
    return first + "…"


# A wide character (Chinese, full-width punctuation) is a word of its own: a line may break before or after it.
_WIDE = "\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
_TOKENS = re.compile(rf"\s+|[{_WIDE}]|[^\s{_WIDE}]+")
# Full-width punctuation that never starts a line (comma, full stop, closing brackets...): it ends the line before.
_NO_LINE_START = frozenset("\uff0c\u3002\u3001\uff1b\uff1a\uff1f\uff01\uff09\u300d\u300f\u300b\u3009\u3011\u2026")
FULL_WIDTH_COLON = "\uff1a"


def _wide(text: str) -> bool:
    return display_width(text) != len(text)


def wrap(text: str, width: int) -> list[str]:
    """`text` (one paragraph) in lines of at most `width` terminal columns (i18n.display_width), broken at spaces
    and between wide characters, never before closing full-width punctuation: click's wrapping counts characters,
    and a Chinese character takes two columns."""
    lines: list[str] = []
    line = ""
    for token in _TOKENS.findall(text):
        if token.isspace():
            line += " " if line and not line.endswith(" ") else ""
            continue
        if line.strip() and token not in _NO_LINE_START and display_width(line + token) > width:
            lines.append(line.rstrip())
            line = ""
        line += token
    return [*lines, line.rstrip()] if line.strip() else lines


class HelpFormatter(click.HelpFormatter):
    """click's formatter, with its fixed words (`Usage:`, section headings) translated and text that holds wide
    characters wrapped by terminal columns (`wrap`); English text is click's own."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, args, _("Usage: ") if prefix is None else prefix)

    def section(self, name: str) -> Any:
        return super().section(_(name))

    def write_heading(self, heading: str) -> None:
        if not _wide(heading):
            return super().write_heading(heading)
        self.write(f"{'':>{self.current_indent}}{heading}{FULL_WIDTH_COLON}\n")

    def _paragraphs(self, text: str, width: int) -> list[str]:
        """The lines of `text`: paragraphs wrapped, one after a `\\b` line kept as they are (click's rule)."""
        out: list[str] = []
        for paragraph in text.split("\n\n"):
            if paragraph.startswith("\b"):
                out += paragraph.split("\n")[1:]
            else:
                out += wrap(" ".join(paragraph.split()), width)
            out.append("")
        return out[:-1]

    def write_text(self, text: str) -> None:
        if not _wide(text):
            return super().write_text(text)
        indent = " " * self.current_indent
        lines = self._paragraphs(text, max(self.width - self.current_indent, 11))
        self.write("".join(f"{indent}{line}\n" if line else "\n" for line in lines))

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        if not any(_wide(second) for _first, second in rows):
            return super().write_dl(rows, col_max, col_spacing)
        first_col = min(max(len(first) for first, _second in rows), col_max) + col_spacing
        margin = " " * (first_col + self.current_indent)
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + margin)
            lines = self._paragraphs(second, max(self.width - first_col - 2, 10)) or [""]
            self.write(lines[0] + "\n" + "".join(f"{margin}{line}\n" if line else "\n" for line in lines[1:]))


class Context(click.Context):
    formatter_class = HelpFormatter


def _lang_option() -> click.Option:
    return click.Option(["--lang"], metavar="LANG", expose_value=False, help=SUB_LANG_HELP)


class _Translated(click.Command):
    """What commands and groups share: help and options' help translated when rendered, and `--lang`."""

    context_class = Context

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not any(p.name == "lang" for p in self.params):  # the top-level group declares its own
            self.params.append(_lang_option())

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        shown = copy.copy(self)
        shown.help = translated(self.help)
        click.Command.format_help_text(shown, ctx, formatter)

    def get_short_help_str(self, limit: int = 45) -> str:
        text = translated(self.help)
        if self.short_help or text == self.help or not text:
            return super().get_short_help_str(limit)
        return _short(text, limit)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's, with each option's help translated (a copy of the option renders it)."""
        records = []
        for param in self.get_params(ctx):
            if isinstance(param, click.Argument):
                continue
            shown = copy.copy(param)
            shown.help = translated(param.help)
            record = shown.get_help_record(ctx)
            if record is not None:
                records.append(record)
        if records:
            with formatter.section("Options"):
                formatter.write_dl(records)


class Command(_Translated):
    pass


class Group(_Translated, click.Group):
    command_class = Command
    group_class = type  # subgroups are of the group's own class

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _Translated.format_options(self, ctx, formatter)
        self.format_commands(ctx, formatter)


__all__ = ["CLICK_WORDS", "Command", "Group", "translated"]
