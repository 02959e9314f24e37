"""How the probe is started: its command line (`python -S -c BOOTSTRAP`), its environment, and the checks on the
copy of its source in ortfix's cache folder that the bootstrap imports. Only `os`, `stat` and system/pathform (which
imports nothing more): speed/early.py starts the probe with these before ortfix imports anything else;
target/choose.py starts it with the same ones otherwise."""

from __future__ import annotations

import os
import stat

from ortfix.system.pathform import form

PROBE_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_probe.py")


# The environment variable that carries the probe's source to the bootstrap, for its fallback (probe_argv).
SOURCE_VAR = "ORTFIX_PROBE_SOURCE"

_HASH_KEY = 0x6F7274  # module_name()'s: any fixed number gives the same name in every process
_source: list[str] = []  # probe_source()'s answer, once read: speed/early.py, then target/choose.py ask for it


def probe_source() -> str:
    """The probe's source without its comment lines: Windows gives a new process a command line of at most 32,767
    characters (CreateProcessW), the source's quotes escaped, and the whole file came within 200 characters of that
    (a longer python.exe path, or a few more lines of probe, and the probe would start truncated). The probe has no
    string with a line that starts with `#` (tests/test_probe_script.py checks that the code is the same). Read once
    per process."""
    if not _source:
        with open(PROBE_SOURCE, encoding="utf-8") as f:
            lines = f.read().splitlines(keepends=True)
        # `"#" not in line` first: most lines have none, and it is C's test alone (a third of the time it took).
        _source.append("".join([line for line in lines if "#" not in line or not line.lstrip().startswith("#")]))
    return _source[0]


def probe_env() -> dict[str, str]:
    """The user's environment as it is (LD_LIBRARY_PATH, PYTHONPATH...): the probe must see what their Python sees;
    and the probe's source in SOURCE_VAR, for the bootstrap's fallback (probe_argv). The probe reports only the
    variables it names (ENV_VARS), so the one added here is not part of its report."""
    env = dict(os.environ)
    env["PYTHONIOENCODING"] = "utf-8"
    env[SOURCE_VAR] = probe_source()
    return env


def module_name(source: str) -> str:
    """The name of the probe's module in the cache folder: one per version of its source. Its hash is the one the
    import system keeps for checked bytecode (SipHash, built in): hashlib's OpenSSL cost 3 ms before the probe could
    start, zlib's library 1.1M instructions. Two sources with one name would only share a file: holds() compares
    the text."""
    import _imp

    return f"ortfix_probe_{_imp.source_hash(_HASH_KEY, source.encode('utf-8')).hex()}"


def cached_module(base: str, source: str) -> tuple[str, str]:
    """(folder, module name) of the copy of `source` in the cache folder `base`: where target/choose.py writes it,
    speed/early.py starts the probe from it, and speed/prefetch.py expects the probe started early to import it."""
    return form(os.path.join(base, "probe")), module_name(source)


def only_mine(folder: str) -> bool:
    """`folder` and its `__pycache__` (where the target keeps the probe's bytecode), if there is one, are folders of
    this user's that nobody else can write to: code the target runs is taken only from such a folder. Raises
    OSError when `folder` cannot be looked at."""
    for path in (folder, os.path.join(folder, "__pycache__")):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if path == folder:
                raise
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return False
    return True


def holds(folder: str, name: str, source: str) -> bool:
    """The module file `name` in `folder` is a file with exactly `source` in it."""
    path = os.path.join(folder, f"{name}.py")
    try:
        if not os.path.isfile(path):
            return False
        with open(path, encoding="utf-8") as f:
            return f.read() == source
    except (OSError, UnicodeDecodeError):
        return False


def probe_argv(python: str, source: str, module: tuple[str, str] | None) -> list[str]:
    """How the probe is started: `python -S -c BOOTSTRAP`. Without `site`, none of the environment's code runs (its
    `.pth` import lines, sitecustomize): the probe works out the sys.path that `site` would make by reading the
    `.pth` files as text. Not -I or -E: PYTHONPATH and the user site must count as they do for the user.

    Compiling the probe's source is a third of its run time, so the bootstrap imports it from `module` (folder,
    module name: ortfix's cache folder, where the target interpreter keeps its bytecode); the source itself is the
    fallback (`module` None: no usable cache folder; or an interpreter that cannot import from it, such as a Windows
    one under wine: the bootstrap then runs the source probe_env() passes in SOURCE_VAR). The bootstrap does not
    carry the source itself: the target decodes its command line character by character with the locale's decoder,
    copies it several times and parses it whole, a string literal of 26,000 characters included; that was 6.7M of
    the probe's 36.6M instructions after the interpreter's start. The environment's variables are decoded only when
    read."""
    if module is None:
        return [python, "-S", "-c", source]
    return [python, "-S", "-c", _PROBE_BOOTSTRAP.format(folder=ascii(module[0]), name=module[1],
                                                         variable=ascii(SOURCE_VAR))]


# The current folder `python -c` puts first on sys.path goes before anything is imported (the probe's own first
# statement does the same); bytecode is written for the probe's module only, in ortfix's cache folder.
_PROBE_BOOTSTRAP = """import sys
first = sys.path.pop(0) if sys.path[:1] in ([""], ["."]) else None
sys.path.insert(0, {folder})
write_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, False
try:
    import {name} as probe
except Exception:
    probe = None
sys.dont_write_bytecode = write_bytecode
del sys.path[0]
if probe is not None:
    probe.main()
    probe.end()
else:
    import os
    if first is not None:
        sys.path.insert(0, first)
    exec(compile(os.environ[{variable}], "<string>", "exec"), {{"__name__": "__main__"}})
"""  # i18n: english (a program the target runs)
