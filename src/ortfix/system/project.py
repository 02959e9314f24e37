"""The project an environment belongs to: the folder holding its `.venv` (or `venv`), the tool that manages it (uv,
poetry, pdm, or plain requirements files) and every line of its project files that names an ONNX Runtime
distribution. A fix made only in the environment is undone by that tool's next sync (or `pip install -r`), so check
says so (PRJ001) and `apply --project` changes the project through its own tool.

Only the environment's parent folder is looked at (`<project>/.venv`, as uv, poetry's in-project venvs and pdm make
them): a project elsewhere (poetry's central venvs) is not detected. Files are read as untrusted text, at most
`READ_LIMIT` bytes each; TOML with the standard library's tomllib (tomli before Python 3.11 where installed, else a
line scan of table headers and quoted requirement strings), and a file that does not parse is reported, not
trusted."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from functools import cache

from ortfix.i18n import N_, Msg
from ortfix.record import frozen
from ortfix.system import listing
from ortfix.system.host import HOST
from ortfix.system.resolved import realpath

READ_LIMIT = 8 << 20
LOCK_FILES = {"uv.lock": "uv", "poetry.lock": "poetry", "pdm.lock": "pdm"}
TOOLS = tuple(LOCK_FILES.values())  # the project managers ortfix runs for apply --project
PYPROJECT = "pyproject.toml"


@cache
def requirement_file() -> re.Pattern[str]:
    return re.compile(r"^(requirements|constraints)[\w.-]*\.(txt|in)$")


# Every name project_of reads (one pattern: the listing is recorded by what it matched, system/listing.py).
PROJECT_FILE = re.compile(listing.PROJECT_FILES)
# The distributions that are ONNX Runtime builds (the CPU package first).
CPU_PACKAGE = "onnxruntime"


@cache
def ort_name() -> re.Pattern[str]:
    return re.compile(r"^onnxruntime(-[a-z0-9-]+)?$|^ort-nightly(-[a-z0-9-]+)?$")


@cache
def _req_name() -> re.Pattern[str]:
    return re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@cache
def _lock_name() -> re.Pattern[str]:
    return re.compile(r'^name\s*=\s*"([^"]+)"\s*$')


@cache
def _name_separators() -> re.Pattern[str]:
    return re.compile(r"[-_.]+")

TomlTable = Mapping[str, object]
TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` for mypy only: every check imports this module (speed/__init__.py)
    from typing import Union

    TomlValue = Union[str, int, float, bool, list[object], TomlTable]


@frozen
class Mention:
    """One line of a project file that names an ORT distribution."""

    file: str  # its name in the project folder
    line: int  # 1-based
    text: str  # the line as written (untrusted: shown through safetext)
    name: str  # the distribution named, canonical
    section: str  # "dependencies", "optional:NAME", "group:NAME", "poetry:GROUP", "requirements", "lock"


@frozen
class Project:
    folder: str  # absolute
    manager: str  # uv | poetry | pdm | requirements | pyproject (a pyproject.toml no known tool manages)
    files: tuple[str, ...]  # the project files present (names in `folder`)
    mentions: tuple[Mention, ...]
    problems: tuple[str, ...] = ()  # files that could not be read or parsed
    hashes: tuple[tuple[str, str], ...] = ()  # (name, sha256 of its bytes) of each file read

    def sha256(self, name: str) -> str:
        """The sha256 of the project file `name` as it was read ("" when it is not there)."""
        return dict(self.hashes).get(name, "")

    def declared(self) -> list[Mention]:
        """The mentions that declare a dependency (not lock entries)."""
        return [m for m in self.mentions if m.section != "lock"]


def project_of(prefix: str) -> Project | None:
    """The project whose folder holds the environment at `prefix`, or None when that folder has no project file."""
    folder = os.path.dirname(realpath(prefix))
    try:
        names = listing.names_matching(folder, PROJECT_FILE)
    except OSError:
        return None
    files = tuple(n for n in names if os.path.isfile(os.path.join(folder, n)))
    if not files:
        return None
    import hashlib  # here: every check asks, most environments have no project, and hashlib costs 2-3 ms

    mentions: list[Mention] = []
    problems: list[str] = []
    pyproject: TomlTable = {}
    hashes: list[tuple[str, str]] = []
    for name in files:
        try:
            data = _read(os.path.join(folder, name))
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{name}: {exc}")
            continue
        hashes.append((name, hashlib.sha256(data).hexdigest()))
        if name == PYPROJECT:
            try:
                pyproject = _parse_toml(text)
            except ValueError as exc:  # tomllib.TOMLDecodeError
                problems.append(f"{name}: {exc}")
                continue
            mentions += pyproject_mentions(name, text, pyproject)
        elif name in LOCK_FILES:
            mentions += lock_mentions(name, text)
        else:
            mentions += requirement_mentions(name, text)
    return Project(folder, manager_of(files, pyproject), files, tuple(mentions), tuple(problems), tuple(hashes))


def canonicalize_name(name: str) -> str:
    """A distribution name as PEP 503 compares it (packaging.utils.canonicalize_name, whose module pulls in
    packaging.tags and logging: 20 ms on the path of every `check`)."""
    return _name_separators().sub("-", name).lower()


def _parse_toml(text: str) -> TomlTable:
    """tomllib (imported only when a project has a pyproject.toml), tomli before 3.11, else the line scan."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the Python ortfix's CI runs is 3.11
        try:
            import tomli as tomllib
        except ImportError:  # no TOML parser: _scan_toml reads what it needs line by line
            return _scan_toml(text)
    return tomllib.loads(text)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read(READ_LIMIT + 1)
    if len(data) > READ_LIMIT:
        raise OSError(f"larger than {READ_LIMIT} bytes")
    return data


def manager_of(files: tuple[str, ...], pyproject: TomlTable) -> str:
    """Which tool manages the project: its lock file says, else its pyproject's [tool.*] table, else requirements."""
    for lock, manager in LOCK_FILES.items():
        if lock in files:
            return manager
    tool = pyproject.get("tool")
    if isinstance(tool, Mapping):
        for manager in ("poetry", "pdm", "uv"):
            if manager in tool:
                return manager
    if any(requirement_file().match(n) for n in files):
        return "requirements"
    return "pyproject"


def is_ort(name: str) -> bool:
    return bool(ort_name().match(canonicalize_name(name)))


def requirement_name(text: str) -> str | None:
    """The distribution a requirement string (PEP 508) names, canonical; None for an option line or a path."""
    stripped = text.strip()
    if not stripped or stripped.startswith(("-", "#", ".", "/")) or "://" in stripped.split(";")[0].split("@")[0]:
        return None
    match = _req_name().match(stripped)
    return canonicalize_name(match.group(1)) if match else None


def requirement_mentions(name: str, text: str) -> list[Mention]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        dist = requirement_name(line.split(" #", 1)[0])
        if dist is not None and is_ort(dist):
            found.append(Mention(name, number, line, dist, "requirements"))
    return found


def lock_mentions(name: str, text: str) -> list[Mention]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        match = _lock_name().match(line.strip())
        if match and is_ort(match.group(1)):
            found.append(Mention(name, number, line, canonicalize_name(match.group(1)), "lock"))
    return found


def pyproject_mentions(name: str, text: str, doc: TomlTable) -> list[Mention]:
    """Every ORT dependency pyproject.toml declares, with the first line that names it."""
    lines = text.splitlines()
    found: list[Mention] = []
    for section, dist in _declared(doc):
        number = _line_naming(lines, dist, _header_line(lines, section))
        found.append(Mention(name, number, lines[number - 1] if number else "", dist, section))
    return found


def _declared(doc: TomlTable) -> list[tuple[str, str]]:
    """(section, canonical name) of every ORT distribution declared: [project] dependencies and
    optional-dependencies, [dependency-groups], [tool.poetry] dependencies and groups, [tool.pdm] dev-dependencies."""
    out: list[tuple[str, str]] = []
    project = _table(doc, "project")
    out += [("dependencies", n) for n in _names(project.get("dependencies"))]
    for extra, reqs in _table(project, "optional-dependencies").items():
        out += [(f"optional:{extra}", n) for n in _names(reqs)]
    for group, reqs in _table(doc, "dependency-groups").items():
        out += [(f"group:{group}", n) for n in _names(reqs)]
    tool = _table(doc, "tool")
    poetry = _table(tool, "poetry")
    out += [("poetry:main", canonicalize_name(n)) for n in _table(poetry, "dependencies") if is_ort(n)]
    out += [("poetry:dev", canonicalize_name(n)) for n in _table(poetry, "dev-dependencies") if is_ort(n)]
    for group, table in _table(poetry, "group").items():
        deps = _table(table, "dependencies") if isinstance(table, Mapping) else {}
        out += [(f"poetry:{group}", canonicalize_name(n)) for n in deps if is_ort(n)]
    for group, reqs in _table(_table(tool, "pdm"), "dev-dependencies").items():
        out += [(f"group:{group}", n) for n in _names(reqs)]
    return out


def _table(doc: object, key: str) -> TomlTable:
    value = doc.get(key) if isinstance(doc, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _names(reqs: object) -> list[str]:
    if not isinstance(reqs, list):
        return []
    names = (requirement_name(r) for r in reqs if isinstance(r, str))
    return [n for n in names if n is not None and is_ort(n)]


_SECTION_HEADERS = {"dependencies": "project", "optional": "project.optional-dependencies",
                    "group": "dependency-groups", "poetry": "tool.poetry.dependencies"}


def _header_line(lines: list[str], section: str) -> int:
    """The index of the line opening the table that holds `section` (0 when it is not found)."""
    kind, _, group = section.partition(":")
    table = _SECTION_HEADERS.get(kind, "")
    if kind == "poetry" and group not in ("main", ""):
        table = "tool.poetry.dev-dependencies" if group == "dev" else f"tool.poetry.group.{group}.dependencies"
    for i, line in enumerate(lines):
        header = _header().match(line)
        if header and header.group(1).replace('"', "") == table:
            return i
    return 0


def _line_naming(lines: list[str], dist: str, start: int = 0) -> int:
    """The first line from `start` on that names `dist` as a whole name (else the first anywhere; 0 when none does:
    a name spelt with other separators)."""
    pattern = re.compile(r"(?<![\w.-])" + r"[-_.]".join(re.escape(p) for p in dist.split("-")) + r"(?![\w.-])",
                         re.IGNORECASE)
    found = [i for i, line in enumerate(lines, 1) if pattern.search(line)]
    return next((i for i in found if i > start), found[0] if found else 0)


@cache
def _header() -> re.Pattern[str]:
    return re.compile(r"^\s*\[+\s*([A-Za-z0-9_.\"-]+?)\s*\]+\s*(#.*)?$")


@cache
def _quoted() -> re.Pattern[str]:
    return re.compile(r"[\"']([^\"']+)[\"']")


def _scan_toml(text: str) -> TomlTable:
    """Without a TOML parser (Python < 3.11 without tomli): the tables a pyproject.toml opens and, in each, the
    quoted requirement strings (array items) and bare keys, as a document of the same shape as tomllib's for what
    _declared and manager_of read. Enough to name the ORT dependencies and the tool; never used to write."""
    doc: dict[str, object] = {}
    here: dict[str, object] = doc
    key = ""
    for line in text.splitlines():
        header = _header().match(line)
        if header:
            here = doc
            for part in header.group(1).replace('"', "").split("."):
                nxt = here.setdefault(part, {})
                here = nxt if isinstance(nxt, dict) else {}
            key = ""
            continue
        head, eq, rest = line.partition("=")
        if eq and re.match(r"^\s*[A-Za-z0-9_.\"-]+\s*$", head):
            key = head.strip().strip('"')
            here[key] = [] if rest.strip().startswith("[") else rest.strip()
            line = rest
        target = here.get(key)
        if isinstance(target, list):
            target += _quoted().findall(line)
    return doc


def sync_command(project: Project) -> str:
    """The command that makes the environment what the project says again (and so undoes a fix made only there)."""
    if project.manager == "uv":
        return "uv sync"
    if project.manager == "poetry":
        return "poetry sync (or poetry install)"
    if project.manager == "pdm":
        return "pdm sync"
    files = [m.file for m in project.declared() if m.section == "requirements"] or ["requirements.txt"]
    if project.manager == "pyproject":
        return "pip install ."
    return f"pip install -r {files[0]}"


def cpu_mentions(project: Project) -> list[Mention]:
    """The lines that name the CPU package, declarations before lock entries: what brings it back at the next
    sync."""
    return sorted((m for m in project.mentions if m.name == CPU_PACKAGE), key=lambda m: m.section == "lock")


@cache
def section_pattern() -> re.Pattern[str]:
    return re.compile(r"^(dependencies|(optional|group|poetry):[A-Za-z0-9][A-Za-z0-9._-]{0,99})$")


def section_options(manager: str, section: str) -> list[str]:
    """The options that make `manager`'s add/remove act on `section` (checked by section_pattern)."""
    kind, _, name = section.partition(":")
    if manager == "uv":
        return {"optional": ["--optional", name], "group": ["--group", name]}.get(kind, [])
    if manager == "poetry":
        return ["--group", name] if kind == "group" or (kind == "poetry" and name != "main") else []
    if manager == "pdm":
        return {"optional": ["--group", name], "group": ["--dev", "--group", name]}.get(kind, [])
    return []


def tool_commands(manager: str, section: str, remove: list[str], add: list[str]) -> list[list[str]]:
    """The project tool's commands, program name first: remove the names, then add the requirements, changing the
    project's files and lock only (the environment is changed by ortfix's own transaction)."""
    where = section_options(manager, section)
    if manager == "uv":
        return [["uv", "remove", "--no-sync", *where, *remove], ["uv", "add", "--no-sync", *where, *add]]
    if manager == "poetry":
        return [["poetry", "remove", "--lock", *where, *remove], ["poetry", "add", "--lock", *where, *add]]
    if manager == "pdm":
        return [["pdm", "remove", "--no-sync", *where, *remove], ["pdm", "add", "--no-sync", *where, *add]]
    raise ValueError(f"no commands for {manager}")


def lock_file(manager: str) -> str:
    """The lock file the tool `manager` writes."""
    return next(lock for lock, tool in LOCK_FILES.items() if tool == manager)


def tool_refusal(manager: str, section: str) -> Msg | None:
    """Why `manager`'s add/remove cannot act on `section` (None when they can): poetry's remove has no option for an
    extra."""
    if manager == "poetry" and section.startswith("optional:"):
        return Msg(N_("onnxruntime is in the extra {extra}, which `poetry remove` cannot name: change it by hand"),
                   extra=repr(section.partition(":")[2]))
    return None


def find_tool(name: str) -> str | None:
    """The program `name` (uv, poetry, pdm) on PATH, else the one next to ortfix's own interpreter (a pipx or venv
    install of ortfix that has it); never one named in a file."""
    found = HOST.which(name)
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), f"{name}.exe" if os.name == "nt" else name)
    return beside if os.path.isfile(beside) and os.access(beside, os.X_OK) else None


def replaced_line(old: str, requirement: str) -> str | None:
    """`old` (a requirements line naming the CPU package) with its requirement replaced by `requirement`, keeping
    its indentation, environment marker and comment; None for a line continued on the next (hash-checked lines)."""
    if old.rstrip().endswith("\\") or " --" in old:
        return None
    body = old.lstrip()
    indent = old[:len(old) - len(body)]
    cut = min((i for i in (body.find(";"), body.find(" #")) if i >= 0), default=len(body))
    while cut and body[cut - 1] in " \t":
        cut -= 1
    return f"{indent}{requirement}{body[cut:]}"
