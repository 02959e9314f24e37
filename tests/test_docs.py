"""Docs that cannot drift: every command has help and is in README.md and in the top-level help; every finding code,
exit code and JSON schema in the code is in README.md and the other way round; README's layout names every module of
the package and nothing that is not there; docs/architecture.md names every package."""

from __future__ import annotations

import re

import click
import pytest

from clitools import REPO
from ortfix.check.codes import FindingCode
from ortfix.cli.app import main
from ortfix.errors import ExitCode

README = (REPO / "README.md").read_text(encoding="utf-8")
PACKAGE = REPO / "src" / "ortfix"


def _section(text: str, heading: str) -> str:
    """The text under `heading` up to the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n") + len(heading) + 1
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", text[start:], re.M)]
    return text[start:start + ends[0]] if ends else text[start:]


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix}{name}"
        found.append((path, command))
        if isinstance(command, click.Group):
            found += _commands(command, path + " ")
    return found


COMMANDS = _commands(main)


def _readme_commands() -> set[str]:
    """The commands README's examples tell a user to type: `ortfix NAME [SUB]` at the start of a line in a code
    block (a word after NAME counts as SUB when NAME has subcommands)."""
    groups = {path for path, command in COMMANDS if isinstance(command, click.Group)}
    shown = set()
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", README, re.M | re.S):
        for first, second in re.findall(r"^ortfix ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", block, re.M):
            shown.add(f"{first} {second}" if first in groups and second else first)
    return shown


def test_every_command_readme_shows_exists() -> None:
    """README → CLI (test_every_command_has_help_and_is_in_readme checks CLI → README): a command README shows
    that the CLI does not have (renamed, removed, misspelt) fails here."""
    shown = _readme_commands()
    names = {path for path, _ in COMMANDS}
    assert len(shown) >= len(main.commands), sorted(shown)  # the code blocks were found at all
    assert shown <= names, f"README shows commands the CLI does not have: {sorted(shown - names)}"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_command_has_help_and_is_in_readme(path: str, command: click.Command) -> None:
    assert (command.help or "").strip(), f"`ortfix {path}` has no help"
    assert f"ortfix {path}" in README, f"README.md does not mention `ortfix {path}`"


def test_top_level_help_lists_every_command() -> None:
    listed = set(re.findall(r"^\s*ortfix (\w+)", main.help or "", re.M))
    assert listed == set(main.commands), sorted(set(main.commands) ^ listed)


def test_finding_codes_and_readme_agree() -> None:
    table = _section(README, "### Findings")
    documented = set(re.findall(r"^\| ([A-Z]+\d{3}) \|", table, re.M))
    assert documented == {c.value for c in FindingCode}, sorted(documented ^ {c.value for c in FindingCode})


def test_exit_codes_and_readme_agree() -> None:
    table = _section(README, "### Exit codes (all commands)")
    documented = {int(c) for c in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert documented == {int(c) for c in ExitCode}, sorted(documented ^ {int(c) for c in ExitCode})


def _modules() -> set[str]:
    return {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
            if "__pycache__" not in p.parts and p.name != "__init__.py"}


def test_readme_layout_names_every_module_and_only_those() -> None:
    layout = _section(README, "### Layout")
    named = {n for n in re.findall(r"`((?:[a-z_]+/)*[a-z0-9_]+\.py)`", layout)
             if not n.startswith(("tests/", "scripts/", "ansible/"))}  # files outside the package it also names
    modules = _modules()
    assert not modules - named, f"modules README's layout does not name: {sorted(modules - named)}"
    assert not named - modules, f"README's layout names modules that do not exist: {sorted(named - modules)}"


def test_architecture_names_every_package() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    missing = {p for p in packages if f"`{p}/`" not in text}
    assert not missing, f"docs/architecture.md does not describe: {sorted(missing)}"


# A repository path named in the package's source: docs/…, compat/…, scripts/…, tests/…, ansible/…, or the
# outside-the-repository ../shared/… (which never exists for a reader of the repository).
_REPO_PATH = re.compile(r"(?<![\w./\\-])(?:\.\./)?((?:docs|compat|scripts|tests|ansible|shared)/[\w./*{},-]*[\w*])")


def _named_paths(text: str) -> list[str]:
    return [m.group(0) for m in _REPO_PATH.finditer(text)]


def _exists(named: str) -> bool:
    """`named` (a glob allowed) is in the repository: from its root, or from the package's folder (`compat/load.py`
    is the module ortfix.compat.load)."""
    if named.startswith("../"):
        return False
    return any(any(base.glob(named)) for base in (REPO, PACKAGE))


def test_every_repository_path_the_code_names_exists() -> None:
    named = {(str(path.relative_to(REPO)), n) for path in sorted(PACKAGE.rglob("*.py"))
             for n in _named_paths(path.read_text(encoding="utf-8"))}
    assert len(named) > 10, sorted(named)  # the pattern finds them at all
    missing = sorted(f"{where}: {n}" for where, n in named if not _exists(n))
    assert not missing, f"paths named in src/ that are not in the repository: {missing}"


def test_the_path_check_catches_what_is_not_in_the_repository() -> None:
    text = "see ../shared/facts/windows.md and docs/no-such-page.md, not docs/architecture.md or compat/*.yaml"
    assert [n for n in _named_paths(text) if not _exists(n)] == ["../shared/facts/windows.md", "docs/no-such-page.md"]
