"""The user's pip configuration, read the way pip itself reads it for `pip install` (pip's
`_internal/configuration.py` and `cli/parser.py`), so that another installer (uv) can be given the same meaning.

Files, each overriding the ones before it:
1. global: every `$XDG_CONFIG_DIRS` folder's `pip/pip.conf` (default `/etc/xdg`), then `/etc/pip.conf`
   (Windows: `C:\\ProgramData\\pip\\pip.ini`);
2. user, unless `PIP_CONFIG_FILE` names a file that exists: `~/.pip/pip.conf` (legacy; Windows `~\\pip\\pip.ini`),
   then `$XDG_CONFIG_HOME/pip/pip.conf` (Windows `%APPDATA%\\pip\\pip.ini`);
3. site: `<prefix>/pip.conf` (`pip.ini`) of the environment pip runs in: the target's;
4. `PIP_CONFIG_FILE`; `PIP_CONFIG_FILE=os.devnull` means no file at all. (pip loads it first but merges kind by
   kind in this order, its OVERRIDE_ORDER: the file overrides the site's.)
Then the sections: `[global]`, overridden by `[install]`, overridden by the `PIP_*` environment variables. Names are
compared lower-case with `_` as `-`; list options (find-links, extra-index-url, trusted-host) split on whitespace;
booleans are pip's spellings (yes/no, true/false, on/off, 1/0, y/n, t/f).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.record import field, frozen

_TRUE = ("y", "yes", "t", "true", "on", "1")
_FALSE = ("n", "no", "f", "false", "off", "0")
# What pip ignores in the environment (pip's ENV_NAMES_IGNORED) or never looks up as an option.
_ENV_IGNORED = ("version", "help", "config-file")
# What the typed fields hold; every other key that reached `pip install` is in `PipConfig.other`.
TYPED_KEYS = ("index-url", "extra-index-url", "find-links", "no-index", "trusted-host")
# Settings that send pip's install somewhere other than the environment: an installer run refuses them (`user` it
# overrides on the command line, `--no-user`).
REDIRECTING = ("target", "prefix", "root")


@frozen
class PipConfig:
    """What `pip install` in the target environment would take from its configuration."""

    index_url: str | None = None  # None: pip's default index
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    trusted_hosts: tuple[str, ...] = ()
    other: Mapping[str, str] = field(default_factory=dict)  # every other key → its raw value (last one wins)
    files: tuple[str, ...] = ()  # the files that were read, in order
    sources: Mapping[str, str] = field(default_factory=dict)  # key → where its value came from (a file, a variable)

    def redirect(self) -> str | None:
        """One line naming a setting that would make `pip install` write outside the environment (`target`,
        `prefix`, `root`) and where it is set; None when there is none. (`user` is overridden with `--no-user`.)"""
        for key in REDIRECTING:
            value = self.other.get(key, "").strip()
            if value:
                return (f"your pip configuration sets {key} = {value!r} ({self.sources.get(key, 'pip configuration')})"
                        ": pip would install there, outside the environment")
        return None

    def user_install(self) -> str | None:
        """Where `user` is set to true (pip would install into the user's site-packages), else None."""
        value = self.other.get("user", "").strip().lower()
        return self.sources.get("user", "pip configuration") if value in _TRUE else None


def normalize(name: str) -> str:
    """A configuration key as pip compares it."""
    name = name.lower().replace("_", "-")
    return name[2:] if name.startswith("--") else name


def config_files(prefix: str, environ: Mapping[str, str], *, windows: bool) -> list[str]:
    """The files pip reads, in pip's order (later ones override earlier ones); missing ones are skipped later."""
    basename = "pip.ini" if windows else "pip.conf"
    env_file = environ.get("PIP_CONFIG_FILE")
    if env_file is not None and env_file == (os.devnull if not windows else "nul"):
        return []
    home = environ.get("USERPROFILE" if windows else "HOME") or os.path.expanduser("~")
    files: list[str] = []
    if windows:
        program_data = environ.get("PROGRAMDATA", "C:\\ProgramData")
        files.append(os.path.join(program_data, "pip", basename))
    else:
        dirs = [d for d in environ.get("XDG_CONFIG_DIRS", "").split(os.pathsep) if d] or ["/etc/xdg"]
        files += [os.path.join(d, "pip", basename) for d in dirs]
        files.append(os.path.join("/etc", basename))
    if not (env_file and os.path.exists(env_file)):
        files.append(os.path.join(home, "pip" if windows else ".pip", basename))
        if windows:
            user_dir = environ.get("APPDATA") or os.path.join(home, "AppData", "Roaming")
        else:
            user_dir = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files.append(os.path.join(user_dir, "pip", basename))
    files.append(os.path.join(prefix, basename))
    if env_file:
        files.append(env_file)
    return files


def _read_file(path: str) -> dict[str, dict[str, str]]:
    """Each section's options (names normalized) as pip's RawConfigParser reads them; OrtfixError where it would
    fail. A file of the plain form (`simple_sections`) is read without `configparser` (8.5M instructions to import:
    a fresh `check` reads pip's files on every machine that has one), any other by `configparser` itself; either
    way the file is read once."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(path, exc) from exc
    sections = simple_sections(text)
    if sections is None:
        sections = _parsed(path, text)
    return {name: {normalize(k): v for k, v in options.items()} for name, options in sections.items()}


def simple_sections(text: str) -> dict[str, dict[str, str]] | None:
    """The sections of a configuration file's `text` (newlines as read in text mode) and their options (names
    lower-cased, as RawConfigParser's optionxform), exactly as RawConfigParser reads them, where every line is
    blank, a comment (`#`, `;`), a section header `[name]` (not DEFAULT, not repeated) or, in a
    section and not indented, `name = value` or `name: value` (a name not repeated in its section); None for any
    other file (a continuation line, a DEFAULT section, anything configparser would refuse): configparser reads
    those. tests/test_pipconfig.py compares the two over generated files."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":  # configparser skips it; no value goes on past it here
            continue
        if line[0].isspace():  # a continuation line, or one indented as if it were
            return None
        if stripped[0] == "[":
            name = stripped[1:-1]
            if stripped[-1] != "]" or not name or name == "DEFAULT" or name in sections:
                return None
            current = sections[name] = {}
            continue
        delimiter = min((i for i in (stripped.find("="), stripped.find(":")) if i >= 0), default=-1)
        key = stripped[:delimiter].rstrip().lower()
        if current is None or delimiter < 0 or not key or key in current:
            return None
        current[key] = stripped[delimiter + 1:].strip()
    return sections


def _parsed(path: str, text: str) -> dict[str, dict[str, str]]:
    """The sections of `text` (the file `path`) and their options, as RawConfigParser reads them."""
    import configparser  # here: only for a file simple_sections does not read

    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text, path)
    except configparser.Error as exc:
        raise _unreadable(path, exc) from exc
    return {s: dict(parser.items(s)) for s in parser.sections()}


def _unreadable(path: str, exc: Exception) -> OrtfixError:
    return OrtfixError(Msg(N_("pip's configuration file {file} could not be read: {error}"), file=str(path),
                           error=str(exc).splitlines()[0]),
                       hint=Msg(N_("pip itself would refuse it too; fix or remove it")))


def boolean(key: str, value: str) -> bool:
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise OrtfixError(Msg(N_("pip configuration: {value} is not a valid value for {key}"), value=repr(value), key=key),
                      hint=Msg(N_("pip takes yes/no, true/false, on/off or 1/0")))


def read_pip_config(prefix: str, environ: Mapping[str, str], *, windows: bool = os.name == "nt") -> PipConfig:
    """The pip configuration `pip install` run in the environment at `prefix` with `environ` would use.
    OrtfixError when a file cannot be read or a value is not what pip accepts (pip would fail as well)."""
    global_: dict[str, str] = {}
    install: dict[str, str] = {}
    read: list[str] = []
    where: dict[str, str] = {}  # key → "[section] in file", the last one that set it
    install_where: dict[str, str] = {}
    for path in config_files(prefix, environ, windows=windows):
        if not os.path.isfile(path):
            continue
        sections = _read_file(path)
        read.append(path)
        global_.update(sections.get("global", {}))
        install.update(sections.get("install", {}))
        where.update(dict.fromkeys(sections.get("global", {}), f"[global] in {path}"))
        install_where.update(dict.fromkeys(sections.get("install", {}), f"[install] in {path}"))
    env_vars = {normalize(k[4:]): (v, k) for k, v in environ.items() if k.startswith("PIP_")}
    env_vars = {k: pair for k, pair in env_vars.items() if k not in _ENV_IGNORED}
    merged = {**global_, **install, **{k: v for k, (v, _name) in env_vars.items()}}
    where.update(install_where)
    where.update({k: f"the environment variable {name}" for k, (_v, name) in env_vars.items()})
    index_url = merged.get("index-url")
    return PipConfig(
        index_url=index_url.strip() if index_url and index_url.strip() else None,
        extra_index_urls=tuple(merged.get("extra-index-url", "").split()),
        find_links=tuple(merged.get("find-links", "").split()),
        no_index=boolean("no-index", merged["no-index"]) if "no-index" in merged else False,
        trusted_hosts=tuple(merged.get("trusted-host", "").split()),
        other={k: v for k, v in sorted(merged.items()) if k not in TYPED_KEYS},
        files=tuple(read),
        sources={k: where[k] for k in merged if k in where},
    )
