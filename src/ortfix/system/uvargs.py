"""The user's pip configuration (`pipconfig.PipConfig`) as options for `uv pip install`, or why it cannot be: and
where uv is.

Translated: index-url → `--index-url`, extra-index-url → `--extra-index-url` (a URL with credentials: `UV_INDEX_URL`,
`UV_EXTRA_INDEX_URL` in uv's environment instead, never its command line), find-links → `--find-links`, no-index →
`--no-index`, trusted-host → `--allow-insecure-host`, cert → `SSL_CERT_FILE` (uv's CA bundle variable),
default-timeout/timeout → `UV_HTTP_TIMEOUT`. Always added:
- `--no-config`: uv's own uv.toml/pyproject settings would otherwise add to or change what pip's configuration says;
  the `UV_*` variables that change resolution are removed from uv's environment for the same reason (`uv_environ`);
- `--index-strategy unsafe-best-match`: pip takes the best version across all its indexes and find-links folders,
  uv by default stops at the first index that has the name;
- `--link-mode hardlink`: uv's default on Linux, said explicitly so that neither `UV_LINK_MODE` nor a uv.toml can
  make it `symlink` (the environment's files would then be links into uv's cache: a `uv cache clean` would break the
  environment, and a rollback would move links, not files). Like pip's unlink-then-write, uv puts a *new* file at a
  path that existed (checked with uv 0.13.9: a hard link saved aside beforehand keeps the old content), so what the
  transaction saved aside by hard link is never written through. The file the install wrote is the environment's
  link: its inode, size and mtime are what the transaction records, they stay the same whatever happens to uv's
  cache, and a rollback renames that link away and deletes it, leaving the cache's copy alone. It also spares a
  second copy of every unpacked file (1.9 GB for the CUDA 12 swap).
`UV_COMPILE_BYTECODE` is left as the user set it: the bytecode uv compiles for the files it installs is the install's
own (transaction/actions/attribution.py).
Refused (auto then uses pip, and the plan says why): every other key that changes what gets installed or how it is
fetched (proxy, client-cert, require-hashes, constraint, pre, only-binary, user, target, prefix...), and any key this
module does not know; keys that change only pip's own output or bookkeeping are ignored (`IGNORED`); a value that
starts with `-` (pip takes it as a value, uv's parser would not: `--find-links -x` is an error there); a find-links
folder that is an ortfix wheelhouse (its manifest's hashes are checked against pip's report, and uv reports none); a
find-links URL with credentials (uv would only take it on its command line).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache

from ortfix.i18n import N_, Joined, Msg
from ortfix.record import field, frozen
from ortfix.system.pipconfig import PipConfig
from ortfix.system.project import find_tool
from ortfix.system.wheelmanifest import is_wheelhouse, link_folder

# Keys that change nothing about what is installed from where: pip's output, its cache, its own checks.
IGNORED = frozenset({
    "disable-pip-version-check", "retries", "resume-retries", "progress-bar", "no-color", "quiet", "verbose", "log",
    "log-file", "local-log", "no-input", "root-user-action", "cache-dir", "no-cache-dir", "compile", "no-compile",
    "warn-script-location", "no-warn-script-location", "no-warn-conflicts", "python-version-warning",
    "no-python-version-warning", "require-virtualenv", "isolated", "keyring-provider", "exists-action",
})
_TIMEOUT = ("default-timeout", "timeout")
# uv's variables that change what is resolved or from where; uv runs without them (pip's configuration rules).


@cache
def _uv_meaning() -> re.Pattern[str]:
    return re.compile(r"^UV_(INDEX.*|DEFAULT_INDEX|EXTRA_INDEX_URL|FIND_LINKS|NO_INDEX|INSECURE_HOST|CONFIG_FILE|"
                      r"NO_CONFIG|PRERELEASE|CONSTRAINT|OVERRIDE|EXCLUDE_NEWER|NO_BINARY.*|NO_BUILD.*|ONLY_BINARY|"
                      r"REQUIRE_HASHES|RESOLUTION|LINK_MODE|KEYRING_PROVIDER|OFFLINE|TORCH_BACKEND|SYSTEM_PYTHON|"
                      r"PYTHON|BREAK_SYSTEM_PACKAGES)$")


@cache
def _auth() -> re.Pattern[str]:
    return re.compile(r"(?<=://)([^/@\s]+)@")


# Where an index URL with credentials goes: uv's environment, never its command line (/proc/PID/cmdline is readable
# by every local user; /proc/PID/environ only by the owner).
_URL_VARIABLES = ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL")


@frozen
class UvOptions:
    """What to add to `uv pip install --python X`, and the variables uv runs with."""

    options: tuple[str, ...]  # never holds credentials: an index URL with them is passed in `environ`
    environ: Mapping[str, str] = field(default_factory=dict)  # may hold credentials: never printed as is

    @property
    def shown(self) -> tuple[str, ...]:
        """The options as they may be printed and journaled, then the index URLs passed in the environment as
        `NAME=value` (credentials redacted)."""
        return (*(redact(o) for o in self.options),
                *(f"{k}={redact(v)}" for k, v in self.environ.items() if k in _URL_VARIABLES))


def redact(text: str) -> str:
    """`https://user:secret@host/` → `https://user:****@host/`; a lone token → `****`."""
    return _auth().sub(lambda m: (m.group(1).split(":", 1)[0] + ":****@") if ":" in m.group(1) else "****@", text)


def translate(config: PipConfig) -> UvOptions | Msg:
    """The uv options with the same meaning as `config`, or one line saying which key uv cannot honour the same way."""
    refused = sorted(k for k in config.other if k not in IGNORED and k not in _TIMEOUT and k != "cert")
    if refused:
        return Msg(N_("your pip configuration sets {keys}, which uv cannot honour the same way"),
                   keys=Joined(N_(", "), refused))
    values = [("index-url", config.index_url or ""), *(("extra-index-url", u) for u in config.extra_index_urls),
              *(("find-links", f) for f in config.find_links), *(("trusted-host", h) for h in config.trusted_hosts)]
    dashed = next(((k, v) for k, v in values if v.startswith("-")), None)
    if dashed is not None:
        return Msg(N_("your pip configuration's {key} {value} starts with '-', which uv would not take as a value"),
                   key=dashed[0], value=repr(redact(dashed[1])))
    house = next((f for f in config.find_links if (d := link_folder(f)) is not None and is_wheelhouse(d)), None)
    if house is not None:
        return Msg(N_("your pip configuration's find-links {folder} is an ortfix wheelhouse, whose manifest's hashes "
                      "ortfix checks in pip's report (uv reports none)"), folder=repr(house))
    secret = next((link for link in config.find_links if _auth().search(link)), None)
    if secret is not None:
        return Msg(N_("your pip configuration's find-links {link} holds credentials, which uv could only be given on "
                      "its command line"), link=repr(redact(secret)))
    options = ["--no-config", "--link-mode", "hardlink", "--index-strategy", "unsafe-best-match"]
    environ: dict[str, str] = {}
    if config.no_index:
        options.append("--no-index")
    else:
        options += _index_urls(config, environ)
    for link in config.find_links:
        options += ["--find-links", link]
    for host in config.trusted_hosts:
        options += ["--allow-insecure-host", host]
    if config.other.get("cert"):
        environ["SSL_CERT_FILE"] = config.other["cert"]
    timeout = next((config.other[k] for k in _TIMEOUT if config.other.get(k)), None)
    if timeout is not None:
        environ["UV_HTTP_TIMEOUT"] = timeout.strip()
    return UvOptions(tuple(options), environ)


def _index_urls(config: PipConfig, environ: dict[str, str]) -> list[str]:
    """The index options; an index URL with credentials (`user:password@`) goes into `environ` instead, as uv reads
    it there (`UV_INDEX_URL`; `UV_EXTRA_INDEX_URL`, a space-separated list, for all extra ones at once)."""
    options: list[str] = []
    if config.index_url and _auth().search(config.index_url):
        environ["UV_INDEX_URL"] = config.index_url
    elif config.index_url:
        options += ["--index-url", config.index_url]
    if any(_auth().search(u) for u in config.extra_index_urls):
        environ["UV_EXTRA_INDEX_URL"] = " ".join(config.extra_index_urls)
    else:
        for url in config.extra_index_urls:
            options += ["--extra-index-url", url]
    return options


def uv_environ(base: Mapping[str, str], options: UvOptions) -> dict[str, str]:
    """`base` without uv's own variables that change the meaning, plus the translated ones."""
    return {**{k: v for k, v in base.items() if not _uv_meaning().match(k)}, **options.environ}


def find_uv() -> str | None:
    """uv on PATH, else the one next to ortfix's own interpreter (a pipx or venv install of ortfix that has uv)."""
    return find_tool("uv")
