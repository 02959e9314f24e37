"""The plan as a POSIX sh script and its undo script, for machines where ortfix does not run at fix time.

The do-script runs the plan's steps in order with the target's own interpreter (`"$PYTHON" -m pip`), after checking
that `$PYTHON` is the interpreter of the environment it was made for (its `sys.prefix`). pip installs exactly the
pinned set (`--no-deps`: the pins are pip's whole dry-run resolution), so a dependency pip would otherwise upgrade on
the day is never replaced unstashed. What it uninstalls, what pip would replace and any hook file it overwrites are
moved aside into a stash folder (`<prefix>/.ortfix/export-<plan fingerprint>/stash`, by the standard-library program
of snippets.py), hook files are written byte for byte (a heredoc with a quoted delimiter, or printf of a
single-quoted string), links made with `ln -s`. The undo script removes what
was installed (by RECORD) and written (with its cached bytecode), then moves the stash back: the environment is byte
identical again. Both refuse to run twice in a row. Each step marks itself begun (`$WORK/step-N`) once what it
replaces is stashed, and the undo script undoes only the steps begun: after a do-script that failed half-way it puts
back exactly what was moved."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from ortfix.errors import OrtfixError
from ortfix.export.model import ExportInput, comment, plain
from ortfix.export.snippets import STEPS_PY
from ortfix.i18n import N_, Msg, text, tr
from ortfix.plan.kinds import ActionKind


def sh_quote(text: str) -> str:
    """A single-quoted sh word: nothing in it is expanded; a value with a control in it is refused (model.plain)."""
    return _quoted(plain(text))


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _words(items: Iterable[str]) -> str:
    return " ".join(sh_quote(i) for i in items)


def _heredoc(text: str, n: int) -> tuple[str, str] | None:
    """(delimiter, body) for text a quoted heredoc reproduces byte for byte, else None."""
    if not text.endswith("\n"):
        return None
    delimiter = f"ORTFIX_EOF_{n}"
    while delimiter in text.splitlines():
        delimiter += "_"
    return delimiter, text


def _write_file(path: str, content: str, mode: int, n: int) -> list[str]:
    for line in content.split("\n"):  # ortfix's own hook text, its lines each checked as any value is
        plain(line)
    doc = _heredoc(content, n)
    if doc is None:
        lines = [f"printf '%s' {_quoted(content)} > {sh_quote(path)}"]
    else:
        delimiter, body = doc
        lines = [f"cat > {sh_quote(path)} <<'{delimiter}'", body.rstrip("\n"), delimiter]
    return [*lines, f"chmod {mode:o} {sh_quote(path)}"]


def _preamble(inp: ExportInput, what: str) -> list[str]:
    work = f"{inp.prefix.rstrip('/')}/.ortfix/export-{inp.plan.fingerprint}"
    return [
        "#!/bin/sh",
        *(comment(line) for line in inp.header(what)),
        "set -eu",
        f"PYTHON={sh_quote(inp.python)}",
        f"PREFIX={sh_quote(inp.prefix)}",
        f"WORK={sh_quote(work)}",
        'STASH="$WORK/stash"',
        'fail() { printf \'%s\\n\' "$0: $*" >&2; exit 2; }',
        '[ -x "$PYTHON" ] || fail "$PYTHON is not there (this script was made for $PREFIX)"',  # i18n: english
        '"$PYTHON" -I -B -c \'import os, sys; sys.exit(os.path.realpath(sys.prefix) != os.path.realpath(sys.argv[1]))\''
        ' "$PREFIX" || fail "$PYTHON is not the interpreter of $PREFIX (this script was made for it)"',  # i18n: english
    ]


def _steps_file() -> list[str]:
    return ['mkdir -p "$WORK"', "cat > \"$WORK/steps.py\" <<'ORTFIX_STEPS_PY'", STEPS_PY.rstrip("\n"),
            "ORTFIX_STEPS_PY", 'steps() { "$PYTHON" -I -B "$WORK/steps.py" "$@"; }']


def render_sh(inp: ExportInput) -> tuple[str, str]:
    """(do-script, undo script); an OrtfixError for a Windows target (its script is the ps1 one)."""
    if re.match(r"^[A-Za-z]:[\\/]|^\\\\", inp.prefix):
        raise OrtfixError(Msg(N_("{prefix} is a Windows environment: a sh script cannot fix it"), prefix=inp.prefix),
                          hint=Msg(N_("export ps1 instead")))
    do = [*_preamble(inp, N_("Fix script")),
          comment(tr("Undo: the undo script exported with it (ortfix export sh -o FILE writes FILE and its "
                     ".undo.sh).")),
          '[ ! -e "$STASH" ] || fail "already run: $STASH exists (run the undo script first)"',
          *_steps_file(), 'mkdir -p "$STASH"']
    undo = [*_preamble(inp, N_("Undo script")),
            '[ -d "$STASH" ] || fail "nothing to undo: $STASH is not there (the fix script has not '
            'run)"',  # i18n: english
            *_steps_file()]
    undo_steps: list[tuple[int, str]] = []  # (step, its undo): run only when the fix script got to that step

    def reached(n: int) -> str:
        """Marks step n begun (after its stash, before its change): the undo script undoes only such steps."""
        return f': > "$WORK/step-{n}"'

    for n, action in enumerate(inp.plan.actions, 1):
        do += ["", comment(f"{n}. {text(action.summary)}"),
               *(comment(tr("   fixes {reason}", reason=r)) for r in inp.reason_lines(action) if action.fixes)]
        d = action.details
        if action.kind == ActionKind.PIP_UNINSTALL:
            do.append(f"steps stash-dists \"$STASH\" {sh_quote(str(d['dist_info']))}")
        elif action.kind == ActionKind.PIP_INSTALL:
            names = [p.name for p in inp.pins]
            if names:
                # --no-deps: exactly the pins (pip's dry run, the whole set): pip replaces nothing the stash lacks
                do += [f"steps stash-named \"$STASH\" {_words(names)}", reached(n),
                       "\"$PYTHON\" -m pip install --disable-pip-version-check --no-deps "
                       + _words(p.spec for p in inp.pins)]
                undo_steps.append((n, f"steps discard-named \"$WORK\" {_words(names)}"))
        elif action.kind == ActionKind.WRITE_FILE:
            path, mode = str(d["path"]), d["mode"]
            if not isinstance(mode, int):  # the plan's own (a saved one was checked field by field)
                raise TypeError(f"write-file mode {mode!r} is not a number")  # i18n: english
            do += [f"steps stash-files \"$STASH\" {sh_quote(path)}", reached(n),
                   f"mkdir -p {sh_quote(posixpath.dirname(path))}",
                   *_write_file(path, str(d["content"]), mode, n)]
            undo_steps.append((n, f"steps discard-files \"$WORK\" {sh_quote(path)}"))
        elif action.kind == ActionKind.SYMLINK:
            path = str(d["path"])
            do += [reached(n), f"ln -s {sh_quote(str(d['target']))} {sh_quote(path)}"]
            undo_steps.append((n, f"rm -f {sh_quote(path)}"))
        else:
            raise OrtfixError(Msg(N_("a shell script cannot make the plan's {kind} change ({summary})"),
                                  kind=str(action.kind), summary=action.summary),
                              hint=Msg(N_("export ps1 for a Windows target, or apply the plan with ortfix there")))
    do += ["", 'echo "done; the undo script puts everything back"']
    # Hook files first: the interpreter the later steps start must not import a half-removed hook.
    for n, step in sorted(undo_steps, key=lambda s: not s[1].startswith("steps discard-files")):
        undo += [f'if [ -e "$WORK/step-{n}" ]; then', f"    {step}", "fi"]
    undo += ['steps restore "$STASH"', 'rm -rf "$WORK"', 'rmdir "$PREFIX/.ortfix" 2>/dev/null || true',
             'echo "undone"']
    return "\n".join(do) + "\n", "\n".join(undo) + "\n"
