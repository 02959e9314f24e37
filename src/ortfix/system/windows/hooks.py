"""The files ortfix writes on Windows to make the NVIDIA DLLs findable, rendered as pure functions of their inputs (so
`plan` shows them byte for byte and `apply` writes exactly that), and readers that recognise them again for `check`.

ONNX Runtime loads its CUDA provider by full path with LOAD_WITH_ALTERED_SEARCH_PATH: the provider's imports are
searched in its folder, System32, the Windows folder, the current folder, then PATH; cuDNN loads its sub-libraries by
bare name (the same order without the provider's folder). `os.add_dll_directory` reaches neither. So on Windows the
fix is PATH (see docs/windows-dlls.md):

- venv and plain installs: a `.pth` line imports a tiny module at start-up that only registers an import hook; when
  `onnxruntime` is first imported it puts the NVIDIA `bin` folders first on `os.environ["PATH"]` (once: an entry that
  is already there, in any case or with a trailing backslash, is moved, never duplicated).
- conda: `etc\\conda\\activate.d\\ortfix-cuda-dlls.{bat,ps1,sh}` (cmd's `@CALL`, PowerShell's dot-source, bash's `.`)
  prepend the folders to PATH and save the previous value in a variable named after the prefix; the deactivate.d
  scripts put it back exactly, "unset" included.

A folder is refused with one OrtfixError line, before anything is written, when it cannot be written safely: a
control character, `;` (PATH's separator), `"` (not a Windows file name character; it would end cmd's quoting), for
the cmd script `%` and `!` (expanded by cmd even inside quotes), for the PowerShell script the typographic single
quotes PowerShell also closes strings with, for the bash script `:` after the drive (PATH's separator there). The
cmd and PowerShell scripts spell folders inside the environment as `%CONDA_PREFIX%\\...` / `$Env:CONDA_PREFIX + '...'`
(conda sets it before it runs them): cmd reads a .bat in the console's code page and Windows PowerShell a BOM-less
.ps1 in the ANSI one, so a prefix under `C:\\Users\\José` must not be spelled out; the checks above apply to the part
they spell out, which must also be ASCII.
Everything else (`&`, `^`, `(`, `)`, `'`, `$`, backticks, spaces) is quoted: inside `set "..."` for cmd, single
quotes for PowerShell (`'` doubled) and bash (`'\\''`), `repr` in the Python module. What cmd cannot protect is the
user's own PATH when it holds a `"` (conda's own activation breaks on it the same way).
"""

from __future__ import annotations

import ast
import ntpath
import re
from collections.abc import Sequence
from pathlib import Path

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg
from ortfix.system.hooks import PLAIN_PATH, check_hook_path, hook_var, on_onnxruntime_import, sh_prepend, sh_take_back
from ortfix.system.windows.userpath import entry_key

PATH_HOOK_MODULE = "_ortfix_dllpath.py"
PATH_HOOK_PTH = "_ortfix_dllpath.pth"
CONDA_HOOK_STEM = "ortfix-cuda-dlls"
CONDA_SHELLS = ("bat", "ps1", "sh")
_MARKER = "Written by ortfix."
_HINT = PLAIN_PATH


def _unique(dirs: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for d in dirs:
        if entry_key(d) not in seen:
            seen.add(entry_key(d))
            out.append(d)
    return out


def check_path_folder(folder: str, what: str = N_("the DLL folder")) -> None:
    """Refuse a folder that cannot be a PATH entry: a control character, ';' (PATH's separator), '"', a relative
    path (it would be searched from whatever the current folder is)."""
    check_hook_path(folder, what, shell=False)
    for ch in (";", '"'):
        if ch in folder:
            raise OrtfixError(Msg(N_("{what} {path} contains {char}, which cannot stand in a PATH entry; ortfix "
                                     "cannot put it on PATH safely"), what=Msg(what), path=repr(folder),
                                  char=repr(ch)), hint=_HINT)
    if not folder or not ntpath.isabs(folder):
        raise OrtfixError(Msg(N_("{what} {path} is not an absolute path"), what=Msg(what), path=repr(folder)),
                          hint=Msg(N_("ortfix puts only absolute folders on PATH")))


def _path_folders(dirs: Sequence[str], hook: str) -> list[str]:
    """`dirs` without duplicates, each one a folder that can stand in PATH; at least one, or OrtfixError."""
    folders = _unique(dirs)
    if not folders:
        raise OrtfixError(Msg(N_("{hook} needs at least one folder"), hook=hook))
    for d in folders:
        check_path_folder(d)
    return folders


def _refuse(folder: str, chars: str, where: str, what: str = N_("the DLL folder")) -> None:
    for ch in chars:
        if ch in folder:
            raise OrtfixError(Msg(N_("{what} {path} contains {char}, which {shell} would expand or end a quote "
                                     "with; ortfix cannot write a safe hook there"), what=Msg(what), path=repr(folder),
                                  char=repr(ch), shell=where), hint=_HINT)


# ---------------------------------------------------------------------------------------------------------------------
# the PATH hook (venv and plain installs)
# ---------------------------------------------------------------------------------------------------------------------


def path_hook_paths(site_packages: str) -> tuple[Path, Path]:
    """(module, .pth) of the PATH hook in a site-packages folder."""
    return Path(site_packages) / PATH_HOOK_MODULE, Path(site_packages) / PATH_HOOK_PTH


def render_path_hook_pth() -> str:
    """The .pth line: as the Linux preload hook's (`hooks.render_preload_pth`), it never raises at start-up, even
    with the module deleted, and says why it did nothing only when ORTFIX_PRELOAD_DEBUG is set."""
    name = PATH_HOOK_MODULE[:-3]
    on_failure = (f"sys.modules[{name!r}] = type(sys)({name!r})\n"
                  "import os\n"
                  "if os.environ.get('ORTFIX_PRELOAD_DEBUG'): sys.stderr.write('ortfix: the PATH hook is "
                  f"not active (%s: %s); delete {PATH_HOOK_PTH} from site-packages, or run ortfix rollback\\n' "
                  "% (type(e).__name__, e))")  # i18n: english (a hook file's text)
    guarded = f"try:import {name}\nexcept Exception as e:exec({on_failure!r})"
    return f"import sys; exec({guarded!r})\n"


def render_path_hook_module(dirs: Sequence[str], site_packages: str) -> str:
    """The hook module: the folders are stored exactly (absolute, `repr`-quoted), in order, without duplicates. It
    never raises, neither at start-up nor when onnxruntime is imported."""
    check_hook_path(site_packages, N_("the site-packages folder"), shell=False)
    folders = _path_folders(dirs, "the PATH hook")
    return f'''"""{_MARKER} Puts the folders of the CUDA/cuDNN DLLs onnxruntime needs first on PATH, just before
onnxruntime is first imported (ORT loads its CUDA provider with LOAD_WITH_ALTERED_SEARCH_PATH, which searches PATH);
until then it costs one import. Undo: `ortfix rollback`, or delete this file and {PATH_HOOK_PTH}.
Set ORTFIX_PRELOAD_DEBUG=1 to see what it does."""
import sys

FOLDERS = {folders!r}


def _debug(message):
    try:
        import os

        if os.environ.get("ORTFIX_PRELOAD_DEBUG"):
            sys.stderr.write("ortfix PATH hook: %s\\n" % message)
    except Exception:
        pass


def _key(entry):
    return entry.rstrip("\\\\/").lower()


def _prepend():
    try:
        import os

        old = os.environ.get("PATH")
        ours = set(_key(f) for f in FOLDERS)
        rest = [e for e in (old.split(";") if old else []) if _key(e) not in ours]
        new = ";".join(FOLDERS + rest)
        if new != old:
            os.environ["PATH"] = new
        _debug("PATH starts with %s" % ";".join(FOLDERS))
    except Exception as exc:
        _debug("PATH not changed: %s: %s" % (type(exc).__name__, exc))
{on_onnxruntime_import('_OrtfixDllPath', '_prepend')}'''  # i18n: english (a hook file's text)


def read_path_hook(site_packages: str) -> list[str] | None:
    """The folders an installed ortfix PATH hook prepends, or None when there is none: both files must be exactly
    what ortfix writes for those folders (a file edited by hand is not ortfix's hook any more)."""
    module, pth = path_hook_paths(site_packages)
    try:
        text = module.read_text(encoding="utf-8")
        line = pth.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    m = re.search(r"^FOLDERS = (\[.*\])$", text, re.M)
    if not m or line != render_path_hook_pth():
        return None
    try:
        folders = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
        return None
    try:
        if render_path_hook_module(folders, site_packages) != text:
            return None
    except OrtfixError:
        return None
    return folders


# ---------------------------------------------------------------------------------------------------------------------
# conda's activate.d / deactivate.d scripts
# ---------------------------------------------------------------------------------------------------------------------


def conda_windows_hook_paths(prefix: str) -> tuple[Path, ...]:
    """activate.d's .bat, .ps1, .sh, then deactivate.d's .bat, .ps1, .sh."""
    base = Path(prefix) / "etc" / "conda"
    return tuple(base / phase / f"{CONDA_HOOK_STEM}.{shell}" for phase in ("activate.d", "deactivate.d")
                 for shell in CONDA_SHELLS)


def _in_prefix(folder: str, prefix: str) -> str | None:
    """The rest of a folder inside the prefix (starting with a backslash), or None for a folder outside it."""
    base = prefix.rstrip("\\/")
    if folder[:len(base)].casefold() == base.casefold() and folder[len(base):len(base) + 1] in ("\\", "/"):
        return folder[len(base):]
    return None


def _literal(folder: str, prefix: str) -> str:
    """What the cmd and PowerShell scripts spell out of a folder: the part after the prefix (which they take from
    CONDA_PREFIX), or all of it for a folder outside the environment."""
    rest = _in_prefix(folder, prefix)
    return folder if rest is None else rest


def _conda_folders(dirs: Sequence[str], prefix: str) -> list[str]:
    check_hook_path(prefix, N_("the environment's path"), shell=True)
    folders = _path_folders(dirs, "the conda hook")
    for d in folders:
        check_hook_path(d, N_("the DLL folder"), shell=True)
        literal = _literal(d, prefix)
        _refuse(literal, "%!", "cmd")
        _refuse(literal, "\u2018\u2019\u201a\u201b", "PowerShell")
        if not literal.isascii():
            # cmd reads a .bat in the console's code page and Windows PowerShell a BOM-less .ps1 in the ANSI one
            raise OrtfixError(Msg(N_("the DLL folder {path} is outside the environment and not ASCII; cmd and "
                                     "PowerShell would misread it in a script"), path=repr(d)), hint=_HINT)
        if ":" in _posix(d)[1:]:
            raise OrtfixError(Msg(N_("the DLL folder {path} contains ':', PATH's separator in bash; ortfix cannot "
                                     "write a safe hook there"), path=repr(d)), hint=_HINT)
    return folders


def _bat_folder(folder: str, prefix: str) -> str:
    rest = _in_prefix(folder, prefix)
    return folder if rest is None else "%CONDA_PREFIX%" + rest


def _ps_folder(folder: str, prefix: str) -> str:
    rest = _in_prefix(folder, prefix)
    return _ps_quote(folder) if rest is None else "($Env:CONDA_PREFIX + " + _ps_quote(rest) + ")"


def _posix(folder: str) -> str:
    """A Windows folder as conda's bash on Windows (MSYS2, Git Bash) writes PATH entries: `C:\\x\\y` → `/c/x/y`; a
    path without a drive only has its backslashes turned."""
    drive, rest = ntpath.splitdrive(folder)
    rest = rest.replace("\\", "/")
    if len(drive) == 2 and drive[1] == ":":
        return "/" + drive[0].lower() + rest
    return drive.replace("\\", "/") + rest


def _ps_quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def render_conda_windows_activate(dirs: Sequence[str], prefix: str) -> tuple[str, str, str]:
    """(.bat, .ps1, .sh) for activate.d: the folders first on PATH, and what was put there remembered (the .sh and
    .ps1 in a variable; the .bat needs none: its deactivate script compares entries); an OrtfixError for a folder that
    cannot be written into them safely."""
    folders = _conda_folders(dirs, prefix)
    added, unset = hook_var("ADDED", "PATH", prefix), hook_var("UNSET", "PATH", prefix)
    joined = ";".join(_bat_folder(f, prefix) for f in folders)
    bat = f"""@REM {_MARKER} Puts this environment's CUDA/cuDNN DLL folders first on PATH.
@REM Undo: `ortfix rollback`, or delete this file and the other {CONDA_HOOK_STEM} scripts.
@set "PATH={joined};%PATH%"
"""  # i18n: english (a hook file's text)
    ps_list = ", ".join(_ps_folder(f, prefix) for f in folders)
    ps1 = f"""# {_MARKER} Puts this environment's CUDA/cuDNN DLL folders first on PATH.
# Undo: `ortfix rollback`, or delete this file and the other {CONDA_HOOK_STEM} scripts.
if (Test-Path Env:PATH) {{
    Remove-Item Env:{unset} -ErrorAction SilentlyContinue
}} else {{
    $Env:{unset} = '1'
}}
$Env:{added} = (@({ps_list}) -join ';')
$Env:PATH = ((@($Env:{added}) + @($Env:PATH | Where-Object {{ $_ }})) -join ';')
"""  # i18n: english (a hook file's text)
    assigns = "\n".join(f"_ortfix_{i}={_sh_quote(_posix(f))}" for i, f in enumerate(folders))
    parts = ":".join("${_ortfix_" + str(i) + "}" for i in range(len(folders)))
    unsets = " ".join(f"_ortfix_{i}" for i in range(len(folders)))
    sh = f"""# {_MARKER} Puts this environment's CUDA/cuDNN DLL folders first on PATH.
# Undo: `ortfix rollback`, or delete this file and the other {CONDA_HOOK_STEM} scripts.
{sh_prepend("PATH", assigns, parts, unsets, prefix)}"""  # i18n: english (a hook file's text)
    return bat, ps1, sh


def _bat_take_back(folders: Sequence[str], prefix: str) -> str:
    """cmd lines that remove the activate script's folders from the front of PATH as it is now, entry by entry
    (`for /f` takes one `;`-separated entry at a time; `if /i` compares, as Windows compares paths), and only when
    every one of them is there in that order. cmd has no safe substring search for a value that may hold `=`, `^` or
    `&`, and the folders are always at the front: conda keeps them there when it exports its own new PATH before
    running deactivate.d scripts (conda/activate.py, `_Activator._yield_commands`)."""
    lines = ['@set "_ortfix_rest=%PATH%"', '@set "_ortfix_ok=1"']
    for folder in folders:
        lines += ['@set "_ortfix_head="',
                  '@for /f "tokens=1,* delims=; eol=|" %%a in ("%_ortfix_rest%") do (set "_ortfix_head=%%a"'
                  ' & set "_ortfix_rest=%%b")',
                  f'@if /i not "%_ortfix_head%"=="{_bat_folder(folder, prefix)}" set "_ortfix_ok="']
    lines += ['@if defined _ortfix_ok set "PATH=%_ortfix_rest%"',
              '@set "_ortfix_rest="', '@set "_ortfix_head="', '@set "_ortfix_ok="']
    return "\n".join(lines) + "\n"


def render_conda_windows_deactivate(dirs: Sequence[str], prefix: str) -> tuple[str, str, str]:
    """(.bat, .ps1, .sh) for deactivate.d: what the activate.d scripts put first on PATH taken out of PATH as it is
    then, never a saved value put back (see hooks.sh_take_back for conda's order)."""
    folders = _conda_folders(dirs, prefix)
    added, unset = hook_var("ADDED", "PATH", prefix), hook_var("UNSET", "PATH", prefix)
    bat = f"""@REM {_MARKER} Takes out of PATH the folders activate.d\\{CONDA_HOOK_STEM}.bat put first on it.
{_bat_take_back(folders, prefix)}"""  # i18n: english (a hook file's text)
    ps1 = f"""# {_MARKER} Takes out of PATH what activate.d\\{CONDA_HOOK_STEM}.ps1 put there.
if (Test-Path Env:{added}) {{
    $ortfixPath = ';' + [string]$Env:PATH + ';'
    $ortfixAt = $ortfixPath.IndexOf(';' + $Env:{added} + ';', [StringComparison]::OrdinalIgnoreCase)
    if ($ortfixAt -ge 0) {{
        $ortfixPath = $ortfixPath.Substring(0, $ortfixAt) + $ortfixPath.Substring($ortfixAt + $Env:{added}.Length + 1)
        $ortfixPath = if ($ortfixPath.Length -gt 2) {{ $ortfixPath.Substring(1, $ortfixPath.Length - 2) }} else {{ '' }}
        if ($ortfixPath -eq '' -and (Test-Path Env:{unset})) {{
            Remove-Item Env:PATH -ErrorAction SilentlyContinue
        }} else {{
            $Env:PATH = $ortfixPath
        }}
    }}
    Remove-Item Env:{added}
    Remove-Item Env:{unset} -ErrorAction SilentlyContinue
}}
"""  # i18n: english (a hook file's text)
    sh = f"""# {_MARKER} Takes out of PATH what activate.d/{CONDA_HOOK_STEM}.sh put there.
{sh_take_back("PATH", prefix)}"""
    return bat, ps1, sh


def render_conda_windows_hooks(dirs: Sequence[str], prefix: str) -> tuple[str, ...]:
    """The six scripts, in the order of `conda_windows_hook_paths`."""
    return (*render_conda_windows_activate(dirs, prefix), *render_conda_windows_deactivate(dirs, prefix))


def read_conda_windows_hook(prefix: str) -> list[str] | None:
    """The folders installed ortfix conda scripts prepend, or None when there are none: the six files must be
    exactly what ortfix writes for those folders."""
    paths = conda_windows_hook_paths(prefix)
    try:
        texts = [p.read_text(encoding="utf-8") for p in paths]
    except (OSError, ValueError):
        return None
    m = re.search(r'^@set "PATH=(.*);%PATH%"$', texts[0], re.M)
    if not m:
        return None
    base = prefix.rstrip("\\/")
    folders = [base + f[len("%CONDA_PREFIX%"):] if f.startswith("%CONDA_PREFIX%\\") else f
               for f in m.group(1).split(";")]
    try:
        if list(render_conda_windows_hooks(folders, prefix)) != texts:
            return None
    except OrtfixError:
        return None
    return folders
