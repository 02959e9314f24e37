"""The files ortfix writes to make libraries findable, rendered as pure functions of their inputs (so `plan` can
show them byte for byte and `apply` writes exactly that), and readers that recognise them again for `check`.

- conda: `etc/conda/activate.d/ortfix-cuda-libs.sh` prepends the environment's library folders to LD_LIBRARY_PATH
  ahead of any system copy; `deactivate.d/ortfix-cuda-libs.sh` restores the previous value exactly, "unset" included.
  Folders inside the prefix are written relative to "${CONDA_PREFIX}", so spaces, quotes and `$` in the prefix are
  never re-parsed by the shell.
- venv (and processes that never run `activate`: Jupyter kernels, systemd units, cron, IDEs): a `.pth` file imports a
  tiny module at start-up that only registers an import hook; when `onnxruntime` is first imported it loads the needed
  libraries by absolute path (RTLD_GLOBAL), so ORT's later `dlopen` finds them already in the process.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

CONDA_HOOK_NAME = "ortfix-cuda-libs.sh"
PRELOAD_MODULE = "_ortfix_preload.py"
PRELOAD_PTH = "_ortfix_preload.pth"
_MARKER = "# Written by ortfix."


def conda_hook_paths(prefix: str) -> tuple[Path, Path]:
    base = Path(prefix) / "etc" / "conda"
    return base / "activate.d" / CONDA_HOOK_NAME, base / "deactivate.d" / CONDA_HOOK_NAME


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


def _saved_name(prefix: str) -> str:
    """The variable an environment's hook keeps the previous LD_LIBRARY_PATH in: one per environment, so that stacked
    activations (`conda activate --stack`) of two hooked environments each restore their own."""
    return "ORTFIX_OLD_LD_LIBRARY_PATH_" + hashlib.sha256(prefix.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def render_conda_activate(dirs: Sequence[str], prefix: str) -> str:
    parts = ":".join("${_ortfix_" + str(i) + "}" for i in range(len(dirs)))
    assigns = "\n".join(f"_ortfix_{i}={_sh_dir(d, prefix)}" for i, d in enumerate(dirs))
    unsets = " ".join(f"_ortfix_{i}" for i in range(len(dirs)))
    listing = "\n".join(f"# ortfix-dir: {d}" for d in dirs)
    saved = _saved_name(prefix)
    return f"""{_MARKER} Puts this environment's CUDA/cuDNN libraries ahead of any system copy.
# Undo: `ortfix rollback`, or delete this file and deactivate.d/{CONDA_HOOK_NAME}.
{listing}
if [ -n "${{LD_LIBRARY_PATH+x}}" ]; then
    export {saved}="${{LD_LIBRARY_PATH}}"
else
    export {saved}_UNSET=1
fi
{assigns}
export LD_LIBRARY_PATH="{parts}${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}"
unset {unsets}
"""


def render_conda_deactivate(prefix: str) -> str:
    saved = _saved_name(prefix)
    return f"""{_MARKER} Restores LD_LIBRARY_PATH exactly as it was before activate.d/{CONDA_HOOK_NAME} ran.
if [ -n "${{{saved}_UNSET+x}}" ]; then
    unset LD_LIBRARY_PATH
    unset {saved}_UNSET
elif [ -n "${{{saved}+x}}" ]; then
    export LD_LIBRARY_PATH="${{{saved}}}"
    unset {saved}
fi
"""


def read_conda_hook(prefix: str) -> list[str] | None:
    """The folders an installed ortfix activate.d hook prepends, or None when there is no such hook."""
    activate, _ = conda_hook_paths(prefix)
    try:
        text = activate.read_text(encoding="utf-8")
    except OSError:
        return None
    if not text.startswith(_MARKER):
        return None
    return re.findall(r"^# ortfix-dir: (.*)$", text, re.M)


def preload_paths(site_packages: str) -> tuple[Path, Path]:
    return Path(site_packages) / PRELOAD_MODULE, Path(site_packages) / PRELOAD_PTH


def render_preload_pth() -> str:
    # A .pth line that starts with "import" is executed by site.py at every start-up: keep it to one cheap import.
    return "import _ortfix_preload\n"


def render_preload_module(libraries: Sequence[str], site_packages: str) -> str:
    """The hook module. Paths inside site-packages are stored relative to it, so a moved venv keeps working."""
    entries = []
    for lib in libraries:
        rel = os.path.relpath(lib, site_packages)
        entries.append(rel if not rel.startswith("..") else lib)
    return f'''"""{_MARKER[2:]} Loads the CUDA/cuDNN libraries onnxruntime needs, by absolute path, just before
onnxruntime is first imported; until then it costs one import. Undo: `ortfix rollback`, or delete this file and
{PRELOAD_PTH}. Set ORTFIX_PRELOAD_DEBUG=1 to see what it loads."""
import sys

LIBRARIES = {entries!r}


def _load():
    import ctypes
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    debug = os.environ.get("ORTFIX_PRELOAD_DEBUG")
    for entry in LIBRARIES:
        path = os.path.join(here, entry)
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            if debug:
                sys.stderr.write("ortfix preload: loaded %s\\n" % path)
        except OSError as exc:
            if debug:
                sys.stderr.write("ortfix preload: %s\\n" % exc)


class _OrtfixPreload(object):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "onnxruntime":
            try:
                sys.meta_path.remove(cls)
            except ValueError:
                pass
            _load()
        return None


if "onnxruntime" in sys.modules:
    _load()
else:
    sys.meta_path.insert(0, _OrtfixPreload)
'''


def read_preload_hook(site_packages: str) -> list[str] | None:
    """Absolute paths an installed ortfix preload hook loads, or None when there is no hook."""
    module, pth = preload_paths(site_packages)
    try:
        text = module.read_text(encoding="utf-8")
    except OSError:
        return None
    if _MARKER[2:] not in text or not pth.exists():
        return None
    m = re.search(r"^LIBRARIES = (\[.*\])$", text, re.M)
    if not m:
        return None
    try:
        entries = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return None
    return [os.path.normpath(os.path.join(site_packages, e)) for e in entries if isinstance(e, str)]
