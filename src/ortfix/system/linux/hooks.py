"""The files ortfix writes to make libraries findable, rendered as pure functions of their inputs (so `plan` can
show them byte for byte and `apply` writes exactly that), and readers that recognise them again for `check`.

- conda: `etc/conda/activate.d/ortfix-cuda-libs.sh` prepends the environment's library folders to LD_LIBRARY_PATH
  ahead of any system copy and remembers exactly what it put there; `deactivate.d/ortfix-cuda-libs.sh` takes that
  back out of the value as it is then (conda runs deactivate.d scripts after it has exported its own new PATH, so a
  value saved at activation would undo conda's change, and anything set since), "unset" included.
  Folders inside the prefix are written relative to "${CONDA_PREFIX}", so spaces, quotes and `$` in the prefix are
  never re-parsed by the shell.
- venv (and processes that never run `activate`: Jupyter kernels, systemd units, cron, IDEs): a `.pth` file imports a
  tiny module at start-up that only registers an import hook; when `onnxruntime` is first imported it loads the needed
  libraries by absolute path (RTLD_GLOBAL), so ORT's later `dlopen` finds them already in the process.

A path that could break a hook file is refused by the render functions with an OrtfixError, before anything is
written (so `plan` and `apply` both stop with one line): a control character (a newline would end a comment line of
the shell hook and start a command) anywhere, and, for the shell hooks, a path that is not valid UTF-8. Every other
character (spaces, quotes, `$`, backticks, backslashes) is quoted: single quotes in the shell hooks, `repr` in the
preload module, which is why that one can also carry paths that are not valid UTF-8.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import cache

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system.hooks import PLAIN_PATH, check_hook_path, on_onnxruntime_import, sh_prepend, sh_take_back
from ortfix.system.pathform import form

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path

CONDA_HOOK_NAME = "ortfix-cuda-libs.sh"
PRELOAD_MODULE = "_ortfix_preload.py"
PRELOAD_PTH = "_ortfix_preload.pth"
_MARKER = "# Written by ortfix."


def conda_hook_paths(prefix: str) -> tuple[Path, Path]:
    from pathlib import Path  # imported here: check asks conda_hook_files (no pathlib on check's path)

    activate, deactivate = conda_hook_files(prefix)
    return Path(activate), Path(deactivate)


def conda_hook_files(prefix: str) -> tuple[str, str]:
    """conda_hook_paths' paths as str (as str(Path) writes them): what `check` asks."""
    return (form(os.path.join(prefix, "etc", "conda", "activate.d", CONDA_HOOK_NAME)),
            form(os.path.join(prefix, "etc", "conda", "deactivate.d", CONDA_HOOK_NAME)))



@cache
def _loader_special() -> re.Pattern[str]:
    return re.compile(r"[:;]|\$\{?(?:ORIGIN|LIB|PLATFORM)\b")


def _check_conda_paths(dirs: Sequence[str], prefix: str) -> None:
    """The folders go onto LD_LIBRARY_PATH, which the loader splits at ':' and ';' and in which it expands $ORIGIN,
    $LIB and $PLATFORM: a path with any of them would add other folders (relative ones: the current directory's)."""
    for path, what in ((prefix, N_("the environment's path")), *((d, N_("the library folder")) for d in dirs)):
        check_hook_path(path, what, shell=True)
        special = _loader_special().search(path)
        if special:
            raise OrtfixError(Msg(N_("{what} {path} contains {special}, which the loader reads in LD_LIBRARY_PATH as "
                                     "a separator or a variable; ortfix cannot put it there safely"),
                                  what=Msg(what), path=repr(path), special=repr(special.group(0))),
                              hint=PLAIN_PATH)


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _sh_dir(directory: str, prefix: str) -> str:
    prefix = prefix.rstrip("/")
    if directory == prefix or directory.startswith(prefix + "/"):
        rest = directory[len(prefix):]
        return '"${CONDA_PREFIX}"' + (_sh_quote(rest) if rest else "")
    return _sh_quote(directory)


def active_conda_hook(prefix: str, env_kind: str) -> Path | None:
    """The activate.d hook `conda activate` sources in this environment, when it is a conda one that has it."""
    if env_kind != "conda":
        return None
    activate, _ = conda_hook_paths(prefix)
    return activate if activate.exists() else None


def render_conda_activate(dirs: Sequence[str], prefix: str) -> str:
    """The activate.d hook; an OrtfixError for a prefix or folder that cannot be written into it safely."""
    _check_conda_paths(dirs, prefix)
    parts = ":".join("${_ortfix_" + str(i) + "}" for i in range(len(dirs)))
    assigns = "\n".join(f"_ortfix_{i}={_sh_dir(d, prefix)}" for i, d in enumerate(dirs))
    unsets = " ".join(f"_ortfix_{i}" for i in range(len(dirs)))
    listing = "\n".join(f"# ortfix-dir: {d}" for d in dirs)
    return f"""{_MARKER} Puts this environment's CUDA/cuDNN libraries ahead of any system copy.
# Undo: `ortfix rollback`, or delete this file and deactivate.d/{CONDA_HOOK_NAME}.
{listing}
{sh_prepend("LD_LIBRARY_PATH", assigns, parts, unsets, prefix)}"""  # i18n: english (a hook file's text)


def render_conda_deactivate(prefix: str) -> str:
    """The deactivate.d hook; an OrtfixError for a prefix that cannot be written into it safely."""
    _check_conda_paths((), prefix)
    return f"""{_MARKER} Takes out of LD_LIBRARY_PATH what activate.d/{CONDA_HOOK_NAME} put there.
{sh_take_back("LD_LIBRARY_PATH", prefix)}"""


def read_conda_hook(prefix: str) -> list[str] | None:
    """The folders an installed ortfix activate.d hook prepends, or None when there is no such hook."""
    activate, _ = conda_hook_files(prefix)
    try:
        text = _read_text(activate)
    except OSError:
        return None
    if not text.startswith(_MARKER):
        return None
    return conda_hook_dirs(text)


def conda_hook_dirs(text: str) -> list[str]:
    """The folders an activate.d hook of ortfix's rendering prepends (its `# ortfix-dir:` lines), in order."""
    return re.findall(r"^# ortfix-dir: (.*)$", text, re.M)


def preload_paths(site_packages: str) -> tuple[Path, Path]:
    from pathlib import Path  # imported here: check asks preload_files (no pathlib on check's path)

    module, pth = preload_files(site_packages)
    return Path(module), Path(pth)


def preload_files(site_packages: str) -> tuple[str, str]:
    """preload_paths' paths as str (as str(Path) writes them): what `check` asks."""
    return form(os.path.join(site_packages, PRELOAD_MODULE)), form(os.path.join(site_packages, PRELOAD_PTH))


def _read_text(path: str) -> str:
    """pathlib's Path(path).read_text(encoding="utf-8")."""
    with open(path, encoding="utf-8") as file:
        return file.read()


def render_preload_pth() -> str:
    """The .pth line. site.py executes a line that starts with "import" at every start-up of the interpreter and
    prints a traceback when it raises, so the line must not raise, even with the module deleted. A .pth statement
    is one line and a `try` cannot be written on one, hence the `exec` of a one-statement `try` (about 20 µs more
    than a plain import; what to do on failure is compiled only when it fails). It says why it did nothing only when
    ORTFIX_PRELOAD_DEBUG is set. On failure an empty module takes the name, so that the line stays quiet when site.py
    runs it again (Python 3.11 processes a venv's .pth files twice)."""
    on_failure = ("sys.modules['_ortfix_preload'] = type(sys)('_ortfix_preload')\n"
                  "import os\n"
                  "if os.environ.get('ORTFIX_PRELOAD_DEBUG'): sys.stderr.write('ortfix preload: the preload hook is "
                  f"not active (%s: %s); delete {PRELOAD_PTH} from site-packages, or run ortfix rollback\\n' "
                  "% (type(e).__name__, e))")  # i18n: english (a hook file's text)
    guarded = f"try:import _ortfix_preload\nexcept Exception as e:exec({on_failure!r})"
    return f"import sys; exec({guarded!r})\n"


def render_preload_module(libraries: Sequence[str], site_packages: str) -> str:
    """The hook module. Paths inside site-packages are stored relative to it, so a moved venv keeps working. It never
    raises, neither at start-up nor when onnxruntime is imported: a library that does not load is left to ORT's own
    message (ORTFIX_PRELOAD_DEBUG=1 shows why)."""
    check_hook_path(site_packages, N_("the site-packages folder"), shell=False)
    entries = []
    for lib in libraries:
        check_hook_path(lib, N_("the library"), shell=False)
        rel = os.path.relpath(lib, site_packages)
        entries.append(rel if not rel.startswith("..") else lib)
    return f'''"""{_MARKER[2:]} Loads the CUDA/cuDNN libraries onnxruntime needs, by absolute path, just before
onnxruntime is first imported; until then it costs one import. Undo: `ortfix rollback`, or delete this file and
{PRELOAD_PTH}. Set ORTFIX_PRELOAD_DEBUG=1 to see what it loads."""
import sys

LIBRARIES = {entries!r}


def _debug(message):
    try:
        import os

        if os.environ.get("ORTFIX_PRELOAD_DEBUG"):
            sys.stderr.write("ortfix preload: %s\\n" % message)
    except Exception:
        pass


def _load():
    try:
        import ctypes
        import os

        here = os.path.dirname(os.path.abspath(__file__))
    except Exception as exc:
        _debug("cannot load anything: %s: %s" % (type(exc).__name__, exc))
        return
    for entry in LIBRARIES:
        path = os.path.join(here, entry)
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            _debug("loaded %s" % path)
        except Exception as exc:
            _debug(exc)
{on_onnxruntime_import('_OrtfixPreload', '_load')}'''  # i18n: english (a hook file's text)


def read_preload_hook(site_packages: str) -> list[str] | None:
    """Absolute paths an installed ortfix preload hook loads, or None when there is no hook."""
    module, pth = preload_files(site_packages)
    try:
        text = _read_text(module)
    except OSError:
        return None
    if _MARKER[2:] not in text:
        return None
    try:
        # the line ortfix writes now, and the plain `import _ortfix_preload` of earlier versions
        if "import _ortfix_preload" not in _read_text(pth):
            return None
    except (OSError, ValueError):
        return None
    return preload_libraries(text, site_packages)


def preload_libraries(text: str, site_packages: str) -> list[str] | None:
    """The absolute paths a preload module of ortfix's rendering loads (its `LIBRARIES`, relative to its
    site-packages), or None when the text has no readable list."""
    m = re.search(r"^LIBRARIES = (\[.*\])$", text, re.M)
    if not m:
        return None
    try:
        import ast  # here: every check imports this module, and only one with a preload module needs ast (2 ms)

        entries = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return None
    if not isinstance(entries, list):
        return None
    return [os.path.normpath(os.path.join(site_packages, e)) for e in entries if isinstance(e, str)]
