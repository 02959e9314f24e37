"""The plan as a Dockerfile fragment: `RUN pip uninstall -y` of what the plan removes, `RUN pip install
--no-cache-dir` of the exact pins, and `ENV LD_LIBRARY_PATH=` with the folders the plan's hook would make findable
(libdirs.py), so every process of the image finds the libraries without a hook. The paths are the target's: the
image's environment must be at the same path (a comment says so). A folder with a ':' is refused: LD_LIBRARY_PATH
cannot name it."""

from __future__ import annotations

from ortfix.errors import OrtfixError
from ortfix.export.libdirs import library_folders
from ortfix.export.model import ExportInput, comment, plain
from ortfix.export.shell import sh_quote
from ortfix.plan.kinds import ActionKind


def _env_value(text: str) -> str:
    """A folder inside a double-quoted Dockerfile ENV value: `\\`, `"` and `$` escaped."""
    return plain(text).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")


def render_dockerfile(inp: ExportInput) -> str:
    lines = [comment(line) for line in inp.header("Dockerfile fragment")]
    lines.append(comment(f"`pip` must be the pip of {inp.prefix} in the image (e.g. its bin folder first on PATH), "
                         "and the paths below are as in that environment: export from an environment at the image's "
                         "path."))
    for action in inp.actions(ActionKind.PIP_UNINSTALL):
        lines += [comment(r) for r in inp.reason_lines(action)]
        lines.append(f"RUN pip uninstall -y {sh_quote(str(action.details['distribution']))}")
    installs = inp.actions(ActionKind.PIP_INSTALL)
    if inp.pins:
        lines += [comment(r) for r in dict.fromkeys(r for a in installs for r in inp.reason_lines(a))]
        lines.append(comment("For pip's hash-checking mode, COPY the file of `ortfix export requirements` and install "
                             "it with -r instead."))
        lines.append("RUN pip install --no-cache-dir " + " ".join(sh_quote(p.spec) for p in inp.pins))
    folders = library_folders(inp.plan)
    colon = next((f for f in folders if ":" in f), None)
    if colon is not None:
        raise OrtfixError(f"{colon} has a ':' in its path: LD_LIBRARY_PATH cannot name it (':' separates entries)",
                          hint="move the environment to a path without ':', or export sh to keep the plan's hook")
    if folders:
        hooks = [a for a in inp.plan.actions if a.kind == ActionKind.WRITE_FILE]
        lines += [comment(r) for r in dict.fromkeys(r for a in hooks if a.fixes for r in inp.reason_lines(a))]
        lines.append(comment("The libraries' folders, instead of the plan's hook files: every process of the image "
                             "finds them."))
        value = ":".join(_env_value(f) for f in folders)
        lines.append(f'ENV LD_LIBRARY_PATH="{value}${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}"')
    for action in inp.plan.actions:
        if action.kind == ActionKind.SYMLINK:
            lines.append(f"RUN ln -s {sh_quote(str(action.details['target']))} {sh_quote(str(action.details['path']))}")
    return "\n".join(lines) + "\n"
