"""The pip configuration reader (system/pipconfig.py) against real pip as the oracle: the same files, sections and
variables given to pip's own `install` option parser in a real venv, which must come out with the same index,
extra indexes, find-links, no-index and trusted hosts; and the translation to uv (system/uvargs.py)."""

from __future__ import annotations

import configparser
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ortfix.errors import OrtfixError
from ortfix.i18n import Msg
from ortfix.system.pipconfig import PipConfig, _read_file, normalize, read_pip_config, simple_sections
from ortfix.system.uvargs import UvOptions, redact, translate, uv_environ
from wintools import to_windows, win_python

# pip's own parse of `pip install`'s options, with no command-line arguments: what its configuration gives.
ORACLE = """
import json
from pip._internal.commands import create_command
from pip._internal.models.index import PyPI
options, _ = create_command("install").parse_args([])
print(json.dumps({"index_url": None if options.index_url == PyPI.simple_url else options.index_url,
                  "extra_index_urls": options.extra_index_urls, "find_links": options.find_links,
                  "no_index": bool(options.no_index), "trusted_hosts": options.trusted_hosts}))
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real venv with pip: its prefix is where pip looks for the site configuration file."""
    path = tmp_path_factory.mktemp("pipconfig") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True)
    return path


def isolated(tmp: Path, **extra: str) -> dict[str, str]:
    """An environment with none of this machine's pip settings (its PIP_* variables, its user files)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(tmp / "xdg-home"), "XDG_CONFIG_DIRS": str(tmp / "xdg-none"),
                **extra})
    return env


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def pip_says(venv: Path, env: dict[str, str]) -> dict[str, object]:
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", ORACLE], env=env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def ours(venv: Path, env: dict[str, str]) -> dict[str, object]:
    c = read_pip_config(str(venv), env, windows=False)
    return {"index_url": c.index_url, "extra_index_urls": list(c.extra_index_urls), "find_links": list(c.find_links),
            "no_index": c.no_index, "trusted_hosts": list(c.trusted_hosts)}


@pytest.mark.slow
def test_every_file_kind_in_pips_order_sections_and_variables(venv: Path, tmp_path: Path) -> None:
    # global: two XDG config dirs, the later one overrides; user: legacy ~/.pip then XDG_CONFIG_HOME; site: the
    # venv's own pip.conf; then [install] over [global], and PIP_* over both. Underscores and multi-line lists.
    dirs = [tmp_path / "xdg-a", tmp_path / "xdg-b"]
    write(dirs[0] / "pip" / "pip.conf", "[global]\nindex-url = http://a.invalid/simple\nfind_links = /fa\n")
    write(dirs[1] / "pip" / "pip.conf", "[global]\nindex-url = http://b.invalid/simple\n")
    env = isolated(tmp_path, XDG_CONFIG_DIRS=os.pathsep.join(map(str, dirs)))
    write(Path(env["HOME"]) / ".pip" / "pip.conf", "[global]\ntrusted-host = legacy.invalid\nfind-links = /legacy\n")
    write(tmp_path / "xdg-home" / "pip" / "pip.conf",
          "[global]\nfind-links = /user1 /user2\n[install]\nextra-index-url =\n    http://x.invalid/simple\n"
          "    http://y.invalid/simple\n")
    site = write(venv / "pip.conf", "[global]\ntrusted-host = s1.invalid\n  s2.invalid\n[install]\nno-index = off\n")
    try:
        expected = pip_says(venv, env)
        assert expected["find_links"] == ["/user1", "/user2"]  # the oracle saw the files (not an empty config)
        assert ours(venv, env) == expected
        env.update(PIP_NO_INDEX="yes", PIP_EXTRA_INDEX_URL="http://e.invalid/simple", PIP_TRUSTED_HOST="t.invalid")
        expected = pip_says(venv, env)
        assert expected["no_index"] is True
        assert ours(venv, env) == expected
    finally:
        site.unlink()


@pytest.mark.slow
def test_config_file_variable_replaces_user_files_and_devnull_reads_none(venv: Path, tmp_path: Path) -> None:
    env = isolated(tmp_path)
    write(tmp_path / "xdg-home" / "pip" / "pip.conf", "[global]\nfind-links = /user\nindex-url = http://u.invalid/s\n")
    own = write(tmp_path / "own.conf", "[install]\nno-index = true\nfind-links = /own\n")
    env["PIP_CONFIG_FILE"] = str(own)
    site = write(venv / "pip.conf", "[install]\nfind-links = /site\n[global]\ntrusted-host = site.invalid\n")
    try:
        expected = pip_says(venv, env)
        assert expected["find_links"] == ["/own"] and expected["index_url"] is None  # the file overrides the site's
        assert expected["trusted_hosts"] == ["site.invalid"]
        assert ours(venv, env) == expected
    finally:
        site.unlink()
    env.pop("PIP_CONFIG_FILE")
    assert ours(venv, env) == pip_says(venv, env)  # the user file again
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_FIND_LINKS"] = "/from-env"
    expected = pip_says(venv, env)
    assert expected["find_links"] == ["/from-env"] and expected["no_index"] is False
    assert ours(venv, env) == expected
    assert read_pip_config(str(venv), env, windows=False).files == ()


WINDOWS_ORACLE = ORACLE + """
import os, sys
from pip._internal.configuration import OVERRIDE_ORDER, Configuration
from ortfix.system.pipconfig import config_files, read_pip_config

c = read_pip_config(sys.prefix, os.environ, windows=True)
by_kind = dict(Configuration(False).iter_config_files())  # pip loads these, then merges them kind by kind:
print(json.dumps({"pip_files": [p for kind in OVERRIDE_ORDER for p in by_kind.get(kind, [])],
                  "files": config_files(sys.prefix, os.environ, windows=True),
                  "ours": {"index_url": c.index_url, "extra_index_urls": list(c.extra_index_urls),
                           "find_links": list(c.find_links), "no_index": c.no_index,
                           "trusted_hosts": list(c.trusted_hosts)}}))
"""


@pytest.mark.slow
def test_windows_files_and_options_as_pip_reads_them_under_wine(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # pip's own file list and option parse on a real Windows CPython (pip from the wheel ensurepip bundles).
    import ensurepip

    for name in [k for k in os.environ if k.startswith("PIP_")]:  # none of this machine's settings
        monkeypatch.delenv(name)

    [pip_wheel] = (Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl")
    conf = write(tmp_path / "pip.ini", "[global]\nindex-url = http://g.invalid/simple\n[install]\n"
                                       "find-links = C:\\wheels\n  D:\\more\nno-index = on\n")
    env = {"PIP_CONFIG_FILE": to_windows(conf), "PIP_TRUSTED_HOST": "t.invalid"}
    proc = win_python().run("-c", WINDOWS_ORACLE, env=env, pythonpath=[pip_wheel])
    assert proc.returncode == 0, proc.stderr[-2000:]
    pip_line, ours_line = proc.stdout.strip().splitlines()[-2:]
    expected, got = json.loads(pip_line), json.loads(ours_line)
    assert expected["find_links"] == ["C:\\wheels", "D:\\more"] and expected["no_index"] is True
    assert got["ours"] == expected
    # pip's order, the user files left out as pip leaves them out when PIP_CONFIG_FILE names a file
    assert got["files"] == got["pip_files"] and got["files"][-1] == to_windows(conf)


def test_other_keys_and_bad_values(tmp_path: Path) -> None:
    conf = write(tmp_path / "p.conf", "[global]\nPre = yes\nno_binary = :all:\n")
    env = isolated(tmp_path, PIP_CONFIG_FILE=str(conf))
    env["PIP_DEFAULT_TIMEOUT"] = "60"
    config = read_pip_config(str(tmp_path), env, windows=False)
    # (this machine's /etc/pip.conf may add its own keys: the global file is not ours to hide)
    assert {k: config.other.get(k) for k in ("pre", "no-binary", "default-timeout")} == {
        "pre": "yes", "no-binary": ":all:", "default-timeout": "60"}
    write(tmp_path / "p.conf", "[global]\nno-index = maybe\n")
    with pytest.raises(OrtfixError, match="not a valid value for no-index"):
        read_pip_config(str(tmp_path), env, windows=False)
    write(tmp_path / "p.conf", "no section here\n")
    with pytest.raises(OrtfixError, match="could not be read"):
        read_pip_config(str(tmp_path), env, windows=False)


def test_translation_to_uv() -> None:
    config = PipConfig(index_url="https://me:s3cret@idx.invalid/simple", extra_index_urls=("https://x.invalid/s",),
                       find_links=("/wh",), trusted_hosts=("idx.invalid",),
                       other={"cert": "/ca.pem", "default-timeout": "60", "disable-pip-version-check": "1"})
    uv = translate(config)
    assert isinstance(uv, UvOptions)
    opts = list(uv.options)
    for flag, value in (("--extra-index-url", "https://x.invalid/s"), ("--find-links", "/wh"),
                        ("--allow-insecure-host", "idx.invalid"), ("--index-strategy", "unsafe-best-match"),
                        ("--link-mode", "hardlink")):
        assert opts[opts.index(flag) + 1] == value
    assert "--no-config" in opts and "--no-index" not in opts
    # an index URL with credentials never goes on uv's command line (any local user reads /proc/PID/cmdline)
    assert "--index-url" not in opts and "s3cret" not in " ".join(opts)
    assert uv.environ["UV_INDEX_URL"] == "https://me:s3cret@idx.invalid/simple"
    assert "s3cret" not in " ".join(uv.shown) and "UV_INDEX_URL=https://me:****@idx.invalid/simple" in uv.shown
    assert redact("https://tok@h.invalid/") == "https://****@h.invalid/"
    env = uv_environ({"UV_INDEX_URL": "http://other.invalid", "UV_CACHE_DIR": "/c", "PATH": "/bin"}, uv)
    assert env == {"UV_CACHE_DIR": "/c", "PATH": "/bin", "SSL_CERT_FILE": "/ca.pem", "UV_HTTP_TIMEOUT": "60",
                   "UV_INDEX_URL": "https://me:s3cret@idx.invalid/simple"}
    extra = translate(PipConfig(extra_index_urls=("https://a.invalid/s", "https://u:pw@b.invalid/s")))
    assert isinstance(extra, UvOptions) and "--extra-index-url" not in extra.options
    assert extra.environ["UV_EXTRA_INDEX_URL"] == "https://a.invalid/s https://u:pw@b.invalid/s"
    assert isinstance(translate(PipConfig(no_index=True, find_links=("https://u:pw@h.invalid/links/",))), Msg)
    offline = translate(PipConfig(index_url="http://i.invalid", no_index=True, find_links=("/wh",)))
    assert isinstance(offline, UvOptions) and "--no-index" in offline.options and "--index-url" not in offline.options
    refused = translate(PipConfig(other={"proxy": "http://p.invalid:3128", "quiet": "1"}))
    assert str(refused) == "your pip configuration sets proxy, which uv cannot honour the same way"
    assert isinstance(translate(PipConfig(other={"frobnicate": "1"})), Msg)  # unknown keys are not guessed at
    # pip takes a value starting with '-' as a value; uv's parser would not (`--find-links -x`: an error, or an option)
    dashed = translate(PipConfig(no_index=True, find_links=("/wh", "-wh")))
    assert isinstance(dashed, Msg) and "find-links '-wh' starts with '-'" in str(dashed)
    assert isinstance(translate(PipConfig(trusted_hosts=("--no-index",))), Msg)


# ---------------------------------------------------------------------------------------------------------------------
# reading a file without configparser (pipconfig.simple_sections): exactly what RawConfigParser reads, or nothing
# ---------------------------------------------------------------------------------------------------------------------

_HEADERS = ["[global]", "[install]", "[Global]", "[ global ]", "[global] x", "[global]]", "[]", "[", "[a]b]",
            "[DEFAULT]", "[default]", "[[x]", "[global", "global]", "[in=stall]", "[#x]", "[\u00e9t\u00e9]"]
_KEYS = ["index-url", "Index_URL", "extra-index-url", "find_links", "no-index", "trusted-host", "user", "target", "a",
         "A", "a b", "", " ", "#k", ";k", "[k", "k]", "\u00e9", "k\x0bk", "k\u2028k", "k\u00a0"]
_DELIMITERS = ["=", ":", " = ", " : ", "=:", ":=", "\t=\t", " =", "= ", "==", ""]
_VALUES = ["", "x", "https://example.invalid/simple", "a b  c", " x ", "x # not a comment", "x ; y", "= x", ": x",
           "[x]", "yes", "\u00e9", "x\x0c", "\x1cx", "x\u2028", "\u3000x", "x\x85", "'quoted'", "%(x)s"]
_SPACES = ["", " ", "\t", "  ", "\x0b", "\x0c", "\x1c", "\u00a0", "\u2028", "\u3000", "\x85"]
_OTHER = ["", "# comment", "; comment", "  # indented comment", "\t; x", "   ", "\t", "no delimiter", "  continued",
          "\tcontinued = x", " [global]", "\ufeff[global]", "=x", ":x"]


def _line(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.2:
        return rng.choice(_HEADERS)
    if kind < 0.75:
        return (rng.choice(_SPACES) if rng.random() < 0.15 else "") + rng.choice(_KEYS) + rng.choice(_DELIMITERS) + \
            rng.choice(_VALUES) + (rng.choice(_SPACES) if rng.random() < 0.2 else "")
    return rng.choice(_OTHER)


def _generated(rng: random.Random) -> str:
    """A configuration file's text: mostly a header then options (each kind of line, hostile ones too)."""
    lines = [rng.choice(["[global]", "[install]"])] if rng.random() < 0.9 else []
    lines += [_line(rng) for _ in range(rng.randrange(0, 9))]
    return rng.choice(["\n", "\r\n", "\r"]).join(lines) + rng.choice(["", "\n", "\r\n", "\n\n"])


def _configparser_sections(text: str) -> dict[str, dict[str, str]] | str:
    """What RawConfigParser (pip's reader) reads from a file of `text`, or its error's class."""
    parser = configparser.RawConfigParser()
    try:
        parser.read_file(io.StringIO(text, newline=None), "pip.conf")
    except configparser.Error as exc:
        return type(exc).__name__
    return {s: dict(parser.items(s)) for s in parser.sections()}


def test_plain_files_are_read_exactly_as_configparser_reads_them() -> None:
    """Differential: over generated files, normal and hostile (continuation lines, DEFAULT, repeated sections and
    names, no header, no delimiter, empty names, Unicode whitespace and line separators inside lines, a BOM, every
    newline), a file simple_sections reads comes out as RawConfigParser reads it, and every file RawConfigParser
    refuses is left to it."""
    rng = random.Random(22)
    taken = 0
    for _ in range(4000):
        text = _generated(rng)
        expected = _configparser_sections(text)
        read_as = io.StringIO(text, newline=None).read()  # newlines as a file opened in text mode gives them
        got = simple_sections(read_as)
        if got is not None:
            taken += 1
            assert got == expected, (text, got, expected)
    assert taken > 800  # the plain form is common enough for the comparison to mean something


@pytest.mark.parametrize("data", [b"[global]\nindex-url = https://a.invalid/simple\n",
                                  b"[global]\r\nextra-index-url = a\r\n  b\r\n", b"\xef\xbb\xbf[global]\nx = 1\n",
                                  b"[global]\nx = \xff\n", b"[global]\nx = 1\n[global]\n", b"x = 1\n",
                                  b"[DEFAULT]\nuser = yes\n[install]\nx = 1\n", b"[global]\nx = 1\nX = 2\n"],
                         ids=["plain", "continued", "bom", "not-utf8", "repeated", "no-header", "default", "twice"])
def test_a_file_reads_as_configparser_reads_it(tmp_path: Path, data: bytes) -> None:
    """The whole reading of one file, the plain form or not: the same sections, or the same one-line error."""
    path = tmp_path / "pip.conf"
    path.write_bytes(data)
    parser = configparser.RawConfigParser()
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f, str(path))
        expected: object = {s: {normalize(k): v for k, v in parser.items(s)} for s in parser.sections()}
    except (UnicodeDecodeError, configparser.Error) as exc:
        expected = str(exc).splitlines()[0]
    try:
        got: object = _read_file(str(path))
    except OrtfixError as exc:
        got = exc.one_line()
        assert isinstance(expected, str) and expected in got, (got, expected)
    else:
        assert got == expected
