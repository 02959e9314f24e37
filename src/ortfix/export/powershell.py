"""The plan as a PowerShell script and its undo script: the same steps as the sh scripts (shell.py), in
PowerShell's terms. Every path and argument is a single-quoted string (a quote doubled; PowerShell also reads the
typographic single quotes as quotes, so those are doubled too), hook files are written from base64 byte for byte
(no line-ending or encoding conversion), the steps program (snippets.py) from a literal here-string, and every native
command's exit code is checked. The Windows user PATH change (`--hook user-path`) adds and removes exactly the
plan's entries in HKCU\\Environment."""

from __future__ import annotations

import base64
import ntpath
import posixpath
from collections.abc import Iterable

from ortfix.errors import OrtfixError
from ortfix.export.model import ExportInput, comment, plain
from ortfix.export.snippets import STEPS_PY
from ortfix.i18n import N_, Msg, text, tr
from ortfix.plan.kinds import ActionKind

_QUOTES = "'\u2018\u2019\u201a\u201b"


def ps_quote(text: str) -> str:
    """A single-quoted PowerShell string: nothing in it is expanded; a value with a control in it is refused
    (model.plain)."""
    return "'" + "".join(ch * 2 if ch in _QUOTES else ch for ch in plain(text)) + "'"


def _array(items: Iterable[str]) -> str:
    return "@(" + ", ".join(ps_quote(i) for i in items) + ")"


def _preamble(inp: ExportInput, what: str) -> list[str]:
    sep = "\\" if "\\" in inp.prefix else "/"
    work = f"{inp.prefix.rstrip(sep)}{sep}.ortfix{sep}export-{inp.plan.fingerprint}"
    if "@'" in STEPS_PY or "'@" in STEPS_PY:
        raise OrtfixError("internal: the steps program cannot be a PowerShell here-string")  # i18n: english
    return [
        *(comment(line) for line in inp.header(what)),
        "Set-StrictMode -Version 3.0",
        "$ErrorActionPreference = 'Stop'",
        f"$Python = {ps_quote(inp.python)}",
        f"$Prefix = {ps_quote(inp.prefix)}",
        f"$Work = {ps_quote(work)}",
        "$Stash = Join-Path $Work 'stash'",
        "function Fail([string]$Message) { [Console]::Error.WriteLine(\"ortfix export: $Message\"); exit 2 }",
        "function Invoke-Checked { & $Python @args; if ($LASTEXITCODE -ne 0) { Fail \"step failed: $args\" } }",
        "if (-not (Test-Path -LiteralPath $Python -PathType Leaf)) { Fail \"$Python is not there (this script was "
        "made for $Prefix)\" }",  # i18n: english
        "& $Python -I -B -c 'import os, sys; sys.exit(os.path.realpath(sys.prefix) != os.path.realpath(sys.argv[1]))'"
        " $Prefix",
        "if ($LASTEXITCODE -ne 0) { Fail \"$Python is not the interpreter of $Prefix (this script was made for "
        "it)\" }",  # i18n: english
    ]


def _steps_file() -> list[str]:
    return ["New-Item -ItemType Directory -Force -Path $Work | Out-Null",
            "$Steps = Join-Path $Work 'steps.py'",
            "$StepsText = @'", *STEPS_PY.rstrip("\n").split("\n"), "'@",
            "[System.IO.File]::WriteAllText($Steps, $StepsText + \"`n\", (New-Object System.Text.UTF8Encoding $false))"]


def _user_path(entries: list[str], add: bool) -> list[str]:
    lines = [f"$Entries = {_array(entries)}",
             "$Key = [Microsoft.Win32.Registry]::CurrentUser.OpenSubKey('Environment', $true)",
             "$Old = [string]$Key.GetValue('Path', '', "
             "[Microsoft.Win32.RegistryValueOptions]::DoNotExpandEnvironmentNames)",
             "$Kind = if ($Old) { $Key.GetValueKind('Path') } else { "
             "[Microsoft.Win32.RegistryValueKind]::ExpandString }"]
    if add:
        lines.append("$New = (@($Entries) + @($Old -split ';' | Where-Object { $_ -and ($Entries -notcontains $_) }))"
                     " -join ';'")
    else:
        lines.append("$New = (@($Old -split ';' | Where-Object { $_ -and ($Entries -notcontains $_) })) -join ';'")
    return [*lines, "$Key.SetValue('Path', $New, $Kind)", "$Key.Close()"]


def render_ps1(inp: ExportInput) -> tuple[str, str]:
    """(do-script, undo script)."""
    do = [*_preamble(inp, N_("Fix script")),
          comment(tr("Undo: the undo script exported with it (ortfix export ps1 -o FILE writes FILE and its "
                     ".undo.ps1).")),
          "if (Test-Path -LiteralPath $Stash) { Fail \"already run: $Stash exists (run the undo script first)\" }",
          *_steps_file(), "New-Item -ItemType Directory -Force -Path $Stash | Out-Null"]
    undo = [*_preamble(inp, N_("Undo script")),
            "if (-not (Test-Path -LiteralPath $Stash)) { Fail \"nothing to undo: $Stash is not there (the fix script "
            "has not run)\" }",  # i18n: english
            *_steps_file()]
    undo_first: list[str] = []
    undo_then: list[str] = []

    def reached(n: int) -> str:
        """Marks step n begun (after its stash, before its change): the undo script undoes only such steps."""
        return f"New-Item -ItemType File -Force -Path (Join-Path $Work 'step-{n}') | Out-Null"

    def if_reached(n: int, lines: list[str]) -> list[str]:
        return [f"if (Test-Path -LiteralPath (Join-Path $Work 'step-{n}')) {{", *(f"    {ln}" for ln in lines), "}"]

    for n, action in enumerate(inp.plan.actions, 1):
        do += ["", comment(f"{n}. {text(action.summary)}"),
               *(comment(tr("   fixes {reason}", reason=r)) for r in inp.reason_lines(action) if action.fixes)]
        d = action.details
        if action.kind == ActionKind.PIP_UNINSTALL:
            do.append(f"Invoke-Checked -I -B $Steps stash-dists $Stash {ps_quote(str(d['dist_info']))}")
        elif action.kind == ActionKind.PIP_INSTALL:
            names = " ".join(ps_quote(p.name) for p in inp.pins)
            if names:
                do += [f"Invoke-Checked -I -B $Steps stash-named $Stash {names}", reached(n),
                       "Invoke-Checked -m pip install --disable-pip-version-check --no-deps "
                       + " ".join(ps_quote(p.spec) for p in inp.pins)]
                undo_then += if_reached(n, [f"Invoke-Checked -I -B $Steps discard-named $Work {names}"])
        elif action.kind == ActionKind.WRITE_FILE:
            path = str(d["path"])
            data = base64.b64encode(str(d["content"]).encode("utf-8")).decode("ascii")
            folder = ntpath.dirname(path) if "\\" in path else posixpath.dirname(path)
            do += [f"Invoke-Checked -I -B $Steps stash-files $Stash {ps_quote(path)}", reached(n),
                   f"New-Item -ItemType Directory -Force -Path {ps_quote(folder)} | Out-Null",
                   comment(f"sha256 {d['sha256']}"),
                   f"[System.IO.File]::WriteAllBytes({ps_quote(path)}, [Convert]::FromBase64String('{data}'))"]
            undo_first += if_reached(n, [f"Invoke-Checked -I -B $Steps discard-files $Work {ps_quote(path)}"])
        elif action.kind == ActionKind.SYMLINK:
            path = str(d["path"])
            do += [reached(n), f"New-Item -ItemType SymbolicLink -Path {ps_quote(path)} -Target "
                   f"{ps_quote(str(d['target']))} | Out-Null"]
            undo_first += if_reached(n, [f"Remove-Item -LiteralPath {ps_quote(path)} -Force"])
        elif action.kind == ActionKind.USER_PATH:
            entries = [str(e) for e in action.detail_items("entries")]
            do += [reached(n), *_user_path(entries, add=True)]
            undo_first += if_reached(n, _user_path(entries, add=False))
        else:
            raise OrtfixError(Msg(N_("a PowerShell script cannot make the plan's {kind} change ({summary})"),
                                  kind=str(action.kind), summary=action.summary))
    do += ["", "Write-Output 'done; the undo script puts everything back'"]
    undo += [*undo_first, *undo_then, "Invoke-Checked -I -B $Steps restore $Stash",
             "Remove-Item -LiteralPath $Work -Recurse -Force",
             "$OrtfixDir = Split-Path -Parent $Work",
             "if (-not (Get-ChildItem -LiteralPath $OrtfixDir -Force)) { Remove-Item -LiteralPath $OrtfixDir }",
             "Write-Output 'undone'"]
    return "\r\n".join(do) + "\r\n", "\r\n".join(undo) + "\r\n"
