"""The plan as a Dockerfile fragment: one `RUN` that uninstalls what the plan removes and installs the exact pins
(`pip uninstall -y … && pip install --no-cache-dir …`: one layer, so the removed wheel is not kept in a lower one),
and `ENV LD_LIBRARY_PATH=` with the folders the plan's hook would make findable (libdirs.py), so every process of the
image finds the libraries without a hook. A kept build (the plan installs only libraries) is pinned too, so the
fragment says which onnxruntime it was made for (export_input adds it).

The paths are the image's: the environment's path in the image (`--prefix-in-image`, validated here; by default the
exporting environment's own) replaces the exporting environment's prefix in every folder and link. A folder outside
that prefix cannot be mapped and is refused, and so is one with a ':' (LD_LIBRARY_PATH cannot name it). Each reason
comment is written once."""

from __future__ import annotations

import posixpath

from ortfix.errors import OrtfixError
from ortfix.export.libdirs import library_folders
from ortfix.export.model import ExportInput, comment, plain
from ortfix.export.shell import sh_quote
from ortfix.i18n import N_, Msg, tr
from ortfix.plan.kinds import ActionKind
from ortfix.plan.model import Action
from ortfix.safetext import escaped, first_control, visible


def _env_value(text: str) -> str:
    """A folder inside a double-quoted Dockerfile ENV value: `\\`, `"` and `$` escaped."""
    return plain(text).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")


_GIVE_PATH = Msg(N_("give the environment's path in the image, e.g. /opt/venv"))


def validate_image_prefix(text: str) -> str:
    """`--prefix-in-image PATH`: absolute (POSIX), no control character, no ':'; normalized (`..`, `//`, a trailing
    `/`)."""
    ch = first_control(text, surrogates=True)
    if ch is not None:
        raise OrtfixError(Msg(N_("--prefix-in-image {path} contains a control character ({char})"),
                              path=visible(text), char=escaped(ch)), hint=_GIVE_PATH)
    if not text.startswith("/"):
        raise OrtfixError(Msg(N_("--prefix-in-image {path} is not an absolute path"), path=text), hint=_GIVE_PATH)
    if ":" in text:
        raise OrtfixError(Msg(N_("--prefix-in-image {path} has a ':': LD_LIBRARY_PATH cannot name folders under it"),
                              path=text),
                          hint=Msg(N_("choose a path without ':' for the environment in the image")))
    return posixpath.normpath(text).replace("//", "/")


def in_image(path: str, prefix: str, image_prefix: str) -> str:
    """`path` (under the exporting environment's `prefix`) as it is in the image; an OrtfixError when it lies
    outside the prefix."""
    root = prefix.rstrip("/") or "/"
    rel = posixpath.relpath(posixpath.normpath(path), root) if path.startswith("/") else ".."
    if rel == ".." or rel.startswith("../"):
        raise OrtfixError(Msg(N_("{path} lies outside the environment {prefix}: it cannot be mapped to the image's "
                                 "{image}"), path=visible(path), prefix=visible(prefix), image=image_prefix),
                          hint=Msg(N_("install what it holds into the environment, or export sh to keep the plan's "
                                      "paths")))
    return image_prefix if rel == "." else posixpath.join(image_prefix, rel)


def render_dockerfile(inp: ExportInput, image_prefix: str | None = None) -> str:
    """The fragment for an image whose environment is at `image_prefix` (default: the exporting one's path)."""
    image = image_prefix or inp.prefix
    lines = [comment(line) for line in inp.header(N_("Dockerfile fragment"))]
    lines.append(comment(tr("for the environment at {image} in the image: `pip` must be its pip (e.g. its bin "
                            "folder first on PATH).", image=image)))
    said: set[str] = set()

    def reasons(actions: list[Action]) -> list[str]:
        out = [r for a in actions for r in inp.reason_lines(a) if r not in said]
        said.update(out)
        return [comment(r) for r in dict.fromkeys(out)]

    uninstalls = inp.actions(ActionKind.PIP_UNINSTALL)
    commands = [f"pip uninstall -y {sh_quote(str(a.details['distribution']))}" for a in uninstalls]
    lines += reasons([*uninstalls, *(inp.actions(ActionKind.PIP_INSTALL) if inp.pins else [])])
    if inp.pins:
        lines.append(comment(tr("For pip's hash-checking mode, COPY the file of `ortfix export requirements` and "
                                "install it with -r instead.")))
        commands.append("pip install --no-cache-dir " + " ".join(sh_quote(p.spec) for p in inp.pins))
    if commands:
        lines.append("RUN " + " && ".join(commands))
    folders = [in_image(f, inp.prefix, image) for f in library_folders(inp.plan)]
    colon = next((f for f in folders if ":" in f), None)
    if colon is not None:
        raise OrtfixError(Msg(N_("{path} has a ':' in its path: LD_LIBRARY_PATH cannot name it (':' separates "
                                 "entries)"), path=colon),
                          hint=Msg(N_("move the environment to a path without ':', or export sh to keep the plan's "
                                      "hook")))
    if folders:
        lines += reasons([a for a in inp.plan.actions if a.kind == ActionKind.WRITE_FILE and a.fixes])
        lines.append(comment(tr("The libraries' folders, instead of the plan's hook files: every process of the "
                                "image finds them.")))
        value = ":".join(_env_value(f) for f in folders)
        lines.append(f'ENV LD_LIBRARY_PATH="{value}${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}"')
    for action in inp.plan.actions:
        if action.kind == ActionKind.SYMLINK:
            target, path = str(action.details["target"]), in_image(str(action.details["path"]), inp.prefix, image)
            target = in_image(target, inp.prefix, image) if target.startswith("/") else target  # else: its folder's
            lines.append(f"RUN ln -s {sh_quote(target)} {sh_quote(path)}")
    return "\n".join(lines) + "\n"
