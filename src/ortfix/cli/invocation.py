"""The command line, read once, before click: what the entry point needs to know before (or without) click parsing
it. The probe's early start (speed/prefetch.py: which command, which --python), the click-free `check`
(cli/fastcheck.py: its options, when the command line is a plain one) and how an error ends the command
(cli/output.py: the command whose error envelope --json prints) all read this one value. click still parses the
command line for real: help, usage errors and every other command are its own.

Kept free of dataclasses, typing and click: it is on the path of every replayed `check`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (2 ms) on the path of a replayed `check`
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ortfix.cli.output import Command

# The commands whose probe starts before the command line is parsed (speed/prefetch.py).
PREFETCHED = ("check", "plan")
_SUBCOMMANDS = {"history": ("show", "prune"), "matrix": ("show", "validate")}
# The plain forms of `check` the click-free path takes: flags, and options with one value, each at most once.
_CHECK_FLAGS = {"--json": "as_json", "--fresh": "fresh", "--verbose": "verbose", "-v": "verbose"}
_CHECK_VALUED = {"--python": "python", "--driver": "driver_version", "--compute-capability": "compute_capability",
                 "--with": "with_"}


class Invocation:
    """One command line (without the program name), read once."""

    __slots__ = ("argv", "check", "command", "debug", "json", "lang", "prefetch")

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = tuple(argv)
        self.lang, bare = _lang_option(self.argv)  # `--lang X` (ortfix/i18n.py), before or after the command
        self.debug = bare[:1] == ("--debug",)  # `ortfix --debug CMD`: the traceback of an unexpected error
        self.json = "--json" in bare
        words = [a for a in bare if not a.startswith("-")]
        name = words[0] if words else None
        if name in _SUBCOMMANDS:
            sub = next((w for w in words[1:] if w in _SUBCOMMANDS[name]), None)  # after options' values too
            name = f"{name} {sub}" if sub else name
        self.command = name  # as --json's envelope names it ("history show"); None when no word names one
        self.prefetch = _prefetch_target(bare)
        self.check = parse_check(bare)
        if self.check is not None:
            self.check["lang"] = self.lang  # check's saved output is per language (fastcheck.check_command)

    def json_command(self) -> Command | None:
        """The command whose error envelope is printed on standard output: only under --json, and only for a
        command that has one."""
        if not self.json or self.command is None:
            return None
        from ortfix.cli.output import Command

        try:
            return Command(self.command)
        except ValueError:
            return None


def _lang_option(argv: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """The value of `--lang X` / `--lang=X`, before the command's name (the group's option) or after it (every
    command's: cli/helptext.py), the last one given, up to a `--` that ends the options; and the command line without
    it."""
    lang: str | None = None
    out: list[str] = []
    rest = list(argv)
    while rest:
        if rest[0] == "--":
            break
        if rest[0] == "--lang" and len(rest) > 1:
            lang, rest = rest[1], rest[2:]
        elif rest[0].startswith("--lang="):
            lang, rest = rest[0].split("=", 1)[1], rest[1:]
        else:
            out.append(rest.pop(0))
    return lang, (*out, *rest)


def _prefetch_target(argv: Sequence[str]) -> tuple[str | None] | None:
    """(--python value,) for a command whose probe may start before parsing; None to leave it to the command (a
    command line this reading cannot follow, help)."""
    if not argv or argv[0] not in PREFETCHED:
        return None
    value = None
    rest = argv[1:]
    for i, arg in enumerate(rest):
        if arg == "--python":
            if i + 1 >= len(rest):
                return None
            value = rest[i + 1]
        elif arg.startswith("--python="):
            value = arg.split("=", 1)[1]
        elif arg in ("-h", "--help"):
            return None
    return (value,)


def parse_check(argv: Sequence[str]) -> dict[str, Any] | None:
    """The keyword arguments of the click-free `check` for a plain `check` command line, or None to leave it to
    click (help, a typo, a repeated option, another command)."""
    if not argv or argv[0] != "check":
        return None
    opts: dict[str, Any] = {"python": None, "as_json": False, "driver_version": None, "compute_capability": None,
                            "fresh": False, "verbose": False, "with_": ()}
    seen: set[str] = set()
    i = 1
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        value: str | None = None
        if arg in _CHECK_FLAGS:
            key = _CHECK_FLAGS[arg]
        elif name in _CHECK_VALUED and eq:
            key, value = _CHECK_VALUED[name], inline
        elif arg in _CHECK_VALUED and i + 1 < len(argv):
            key, value = _CHECK_VALUED[arg], argv[i + 1]
            i += 1
        else:
            return None
        if key in seen or (value is not None and (not value or value.startswith("-"))):
            return None
        seen.add(key)
        opts[key] = True if value is None else (value,) if key == "with_" else value
        i += 1
    return opts
