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
from typing import Any

import click

from ortfix.i18n import N_, _, display_width

# click's own words, translated where they are printed (HelpFormatter, format_options, _help_option).
CLICK_WORDS = (N_("Usage: "), N_("Options"), N_("Commands"), N_("Positional arguments"),
               N_("Show this message and exit."), N_("Show the version and exit."))
LANG_HELP = N_("The language of the text printed for people (zh_CN, en); also ORTFIX_LANG, else LANGUAGE, LC_ALL, "
               "LC_MESSAGES, LANG. --json documents and files ortfix writes stay English.")
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


class HelpFormatter(click.HelpFormatter):
    """click's formatter, with its fixed words (`Usage:`, section headings) translated."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, args, _("Usage: ") if prefix is None else prefix)

    def section(self, name: str) -> Any:
        return super().section(_(name))


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
