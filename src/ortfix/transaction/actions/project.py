"""The project-update handler (`apply --project`): the project's files changed through its own tool, so that its next
sync keeps the fix. uv, poetry, pdm: `uv remove --no-sync onnxruntime` then `uv add --no-sync onnxruntime-gpu==X …`
(`poetry remove/add --lock`, `pdm remove/add --no-sync`), in the section that declared onnxruntime, run with the
user's own configuration of the tool found on PATH (or beside ortfix's interpreter) now: the tool rewrites
pyproject.toml and its lock file; the environment is changed by the transaction's own steps. Requirements files: the
onnxruntime line replaced, every other byte kept. Never a hand edit of a lock file.

Before any change the files (pyproject.toml and the lock, or the requirements files) are saved into a sidecar of the
journal; undone by writing each back byte for byte (and removing one the tool created). A file edited again after the
apply (its sha256 is neither the one after the apply nor the one before) is the user's: a rollback leaves it and writes
the version from before the apply beside it, as `NAME.before-ortfix` (created new, never over a file). The project
folder is the environment's parent folder, checked at every use; only project files directly in it are touched."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from packaging.requirements import InvalidRequirement, Requirement

from ortfix import subproc
from ortfix.errors import OrtfixError
from ortfix.fields import BadField, want_dict, want_int, want_list, want_sha, want_str, want_str_list
from ortfix.i18n import N_, Msg, tr
from ortfix.plan.kinds import ActionKind, ProjectUpdateDetails, RequirementEdit
from ortfix.plan.titles import project_title
from ortfix.safetext import first_control, visible
from ortfix.system.confine import EnvRoot
from ortfix.system.project import (
    PYPROJECT,
    TOOLS,
    find_tool,
    lock_file,
    requirement_file,
    section_pattern,
    tool_commands,
    tool_refusal,
)
from ortfix.transaction.actions.base import Handler, StepContext, TargetEnv, problem, test_crash
from ortfix.transaction.journal import Step, sha256_bytes
from ortfix.transaction.undo_notes import Cause, UndoNote

SIDECAR = "project-files"
FILE_LIMIT = 8 << 20
TOOL_TIMEOUT = 600.0
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$")


class ProjectUpdateRecord(TypedDict, total=False):
    saved: dict[str, str]  # name → sha256 before ("" when it was absent)
    sidecar_sha256: str  # of the sidecar holding their bytes
    argv: list[list[str]]  # the tool's commands as run
    after: dict[str, str]  # name → sha256 after the update ("" when absent): a later edit is not overwritten


class ProjectUpdate(Handler[ProjectUpdateDetails, ProjectUpdateRecord]):
    kind = ActionKind.PROJECT_UPDATE
    details_keys = frozenset({"project", "manager", "files", "section", "remove", "add", "edits"})
    record_keys = frozenset({"saved", "sidecar_sha256", "argv", "after"})
    started_keys = frozenset({"saved", "sidecar_sha256"})

    # -- checking untrusted details --------------------------------------------------------------------------------

    def check_details(self, env: TargetEnv, details: Mapping[str, object]) -> None:
        project = want_str(details, "project")
        if os.path.realpath(project) != os.path.dirname(env.prefix):
            raise BadField(Msg(N_("project {project} is not the folder that holds the environment {prefix}"),
                               project=repr(project), prefix=env.prefix))
        manager = want_str(details, "manager", limit=16)
        if manager not in (*TOOLS, "requirements"):
            raise BadField(Msg(N_("manager {manager} is not uv, poetry, pdm or requirements"), manager=repr(manager)))
        files = want_dict(details, "files")
        if not files or len(files) > 16:
            raise BadField(Msg(N_("files names no project file (or too many)")))
        for name, sha in files.items():
            ours = name in (PYPROJECT, lock_file(manager)) if manager in TOOLS else bool(requirement_file().match(name))
            if not ours:
                raise BadField(Msg(N_("{name} is not a project file ortfix changes for {manager}"), name=repr(name),
                                   manager=manager))
            if sha != "":
                want_sha(files, name)
        section = want_str(details, "section", limit=120)
        if not section_pattern().match(section):
            raise BadField(Msg(N_("section {section} is not dependencies, optional:NAME or group:NAME"),
                               section=repr(section)))
        for name in want_str_list(details, "remove", items=4, limit=100):
            if not _NAME.match(name):
                raise BadField(Msg(N_("{name} is not a distribution name"), name=repr(name)))
        for req in want_str_list(details, "add", items=32, limit=300):
            _requirement(req)
        edits = [self._edit(e, files) for e in want_list(details, "edits", limit=64)]
        if manager in TOOLS and (edits or not details["remove"] or not details["add"]):
            raise BadField(Msg(N_("a {manager} update removes and adds distributions and edits no line"),
                               manager=manager))
        if manager in TOOLS and tool_refusal(manager, section):
            raise BadField(Msg(N_("{manager} cannot change the section {section}"), manager=manager,
                               section=repr(section)))
        if manager == "requirements" and (not edits or details["remove"] or details["add"]):
            raise BadField(Msg(N_("a requirements update edits lines and runs no tool")))

    @staticmethod
    def _edit(doc: object, files: Mapping[str, object]) -> RequirementEdit:
        if not isinstance(doc, dict) or set(doc) != {"file", "line", "old", "new"}:
            raise BadField("an edit is not {file, line, old, new}")  # i18n: english (names the fields)
        name = want_str(doc, "file", limit=200)
        if name not in files or not requirement_file().match(name):
            raise BadField(Msg(N_("edit of {name}, which is not a requirements file of this update"), name=repr(name)))
        old, new = want_str(doc, "old", limit=1000), want_str(doc, "new", limit=1000)
        for text in (old, new):
            if first_control(text) is not None or "\n" in text or "\r" in text:
                raise BadField(Msg(N_("edit of {name} holds a control character: {text}"), name=name,
                                   text=visible(text)))
        _requirement(new.split(" #", 1)[0])
        return {"file": name, "line": want_int(doc, "line", low=1, high=1_000_000), "old": old, "new": new}

    # -- the contract ----------------------------------------------------------------------------------------------

    def title(self, step: Step) -> Msg:
        return project_title(want_str(step.details, "manager", limit=16), want_str(step.details, "project"))

    def verify(self, env: TargetEnv, details: ProjectUpdateDetails) -> list[str | Msg]:
        problems: list[str | Msg] = []
        if details["manager"] in TOOLS and not self._tool(env, details["manager"]):
            problems.append(Msg(N_("the plan updates the project with {manager}, which is not installed: no {manager} "
                                   "on PATH or beside ortfix's interpreter (install it, or apply without --project)"),
                                manager=details["manager"]))
        with EnvRoot(details["project"]) as root:
            for name, sha in details["files"].items():
                if (root.sha256(name) or "") != sha:
                    problems.append(Msg(N_("{path} changed since the plan was made"),
                                        path=f"{visible(details['project'])}/{visible(name)}"))
        if not os.access(details["project"], os.W_OK):
            problems.append(Msg(N_("cannot write in {folder}: not writable"), folder=visible(details["project"])))
        return problems

    def describe(self, env: TargetEnv, details: ProjectUpdateDetails) -> list[str | Msg]:
        folder = visible(details["project"])
        lines: list[str | Msg] = [Msg(N_("save {files} of {folder} into the journal"),
                                      files=", ".join(visible(n) for n in details["files"]), folder=folder)]
        for argv in self._argv(env, details):
            lines.append(Msg(N_("in {folder}: {command}"), folder=folder, command=" ".join(visible(a) for a in argv)))
        for e in details["edits"]:
            lines.append(Msg(N_("{path} line {line}: {old} → {new} (every other byte kept)"),
                             path=f"{folder}/{visible(e['file'])}", line=e["line"], old=repr(visible(e["old"])),
                             new=repr(visible(e["new"]))))
        return lines

    @staticmethod
    def _tool(env: TargetEnv, manager: str) -> str | None:
        """The tool's program now: uv as the environment found it, poetry and pdm looked up the same way."""
        return env.uv if manager == "uv" else find_tool(manager)

    def _argv(self, env: TargetEnv, planned: ProjectUpdateDetails) -> list[list[str]]:
        manager = planned["manager"]
        if manager not in TOOLS:
            return []
        commands = tool_commands(manager, planned["section"], list(planned["remove"]), list(planned["add"]))
        return [[self._tool(env, manager) or manager, *argv[1:]] for argv in commands]

    def execute(self, env: TargetEnv, step: Step, ctx: StepContext) -> ProjectUpdateRecord:
        planned = self.typed_details(step.details)
        with EnvRoot(planned["project"]) as root:
            saved: dict[str, str] = {}
            contents: dict[str, str] = {}
            for name in planned["files"]:
                if root.exists(name):
                    data, _ = root.read_bytes(name, limit=FILE_LIMIT)
                    saved[name] = sha256_bytes(data)
                    contents[name] = base64.b64encode(data).decode("ascii")
                else:
                    saved[name] = ""
            sidecar = ctx.write_sidecar(SIDECAR, contents)
            record: ProjectUpdateRecord = {"saved": saved, "sidecar_sha256": sidecar}
            ctx.commit(record)
            if ctx.crash_midway:
                test_crash()
            if planned["manager"] in TOOLS:
                record["argv"] = self._run_tool(env, planned, ctx)
            else:
                for name in sorted({e["file"] for e in planned["edits"]}):
                    self._edit_file(root, name, [e for e in planned["edits"] if e["file"] == name])
            record["after"] = {name: root.sha256(name) or "" for name in planned["files"]}
        return record

    def _run_tool(self, env: TargetEnv, planned: ProjectUpdateDetails, ctx: StepContext) -> list[list[str]]:
        ran = []
        for argv in self._argv(env, planned):
            ctx.echo(tr("updating the project: {command}", command=" ".join(visible(a) for a in argv)))
            # The user's own environment: the project's tool runs with the user's configuration (uv.toml, UV_*,
            # poetry's config.toml and POETRY_*, pdm's config and PDM_*), and its sources in pyproject.toml.
            proc = subproc.run(argv, target_python=env.python, env=dict(os.environ), timeout=TOOL_TIMEOUT,
                               cwd=Path(planned["project"]))
            for line in (proc.stdout + proc.stderr).splitlines()[-20:]:
                ctx.output(line, True)
            ran.append(argv)
            if proc.returncode != 0:
                raise OrtfixError(Msg(N_("{command} … failed (exit {rc}) in {folder}"),
                                      command=" ".join(visible(a) for a in argv[:3]), rc=proc.returncode,
                                      folder=visible(planned["project"])),
                                  hint=Msg(N_("its output is above; the project's files are put back")))
        return ran

    @staticmethod
    def _edit_file(root: EnvRoot, name: str, edits: list[RequirementEdit]) -> None:
        data, st = root.read_bytes(name, limit=FILE_LIMIT)
        lines = data.decode("utf-8").splitlines(keepends=True)
        for e in edits:
            line = lines[e["line"] - 1] if e["line"] <= len(lines) else ""
            body = line.rstrip("\r\n")
            if body != e["old"]:
                raise OrtfixError(Msg(N_("{name} line {line} is not {old} any more"), name=name, line=e["line"],
                                      old=repr(visible(e["old"]))),
                                  hint=Msg(N_("make a new plan; the project's files are put back")))
            lines[e["line"] - 1] = e["new"] + line[len(body):]
        root.atomic_write(name, "".join(lines).encode("utf-8"), st.st_mode & 0o7777)

    def check_undo(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[str | Msg]:
        record = self.typed_record(step)
        if "sidecar_sha256" not in record:
            return []
        try:
            self._saved(step, ctx)
        except (OrtfixError, BadField) as exc:
            return [problem(exc)]
        return []

    def _saved(self, step: Step, ctx: StepContext) -> dict[str, bytes]:
        record = self.typed_record(step)
        doc = ctx.read_sidecar(SIDECAR, record["sidecar_sha256"])
        if not isinstance(doc, dict):
            raise BadField(Msg(N_("the saved project files are not an object")))
        out = {}
        for name, sha in record["saved"].items():
            if sha == "":
                continue
            data = base64.b64decode(str(doc.get(name, "")), validate=True)
            if sha256_bytes(data) != sha:
                raise BadField(Msg(N_("the saved copy of {name} does not match its sha256"), name=name))
            out[name] = data
        return out

    def check_record(self, env: TargetEnv, step: Step) -> None:
        files = self.typed_details(step.details)["files"]
        _file_shas(step.record, "saved", files)
        want_sha(step.record, "sidecar_sha256")
        if "after" in step.record:
            _file_shas(step.record, "after", files)

    def reverse(self, env: TargetEnv, step: Step, ctx: StepContext) -> list[UndoNote]:
        record = self.typed_record(step)
        if "sidecar_sha256" not in record:
            return []
        planned = self.typed_details(step.details)
        saved = self._saved(step, ctx)
        after = record.get("after")  # absent while the apply itself is undone: every file goes back
        notes = []
        with EnvRoot(planned["project"]) as root:
            for name, sha in record["saved"].items():
                now = root.sha256(name) or ""
                if now == sha:
                    continue
                if after is not None and now != after.get(name, ""):
                    notes.append(self._edited_later(root, planned["project"], name, saved.get(name)))
                elif sha == "":
                    root.unlink(name)
                else:
                    st = root.lstat(name)
                    root.atomic_write(name, saved[name], (st.st_mode & 0o7777) if st is not None else 0o644)
        return notes

    @staticmethod
    def _edited_later(root: EnvRoot, project: str, name: str, before: bytes | None) -> UndoNote:
        """A project file edited after the apply stays as the user left it; the version from before the apply is
        written beside it (when there was one, and nothing holds that name)."""
        path = f"{visible(project)}/{visible(name)}"
        keep = f"{name}.before-ortfix"
        if before is None:
            said = Msg(N_("it did not exist before the apply"))
        elif root.exists(keep):
            said = Msg(N_("{copy} exists already, so the version from before the apply stays in the journal only"),
                       copy=visible(keep))
        else:
            root.write_new(keep, before, 0o644)
            said = Msg(N_("the version from before the apply is in {copy}"), copy=visible(keep))
        return UndoNote(Cause.CHANGED_LATER, path, Msg(N_("{path} was edited after the apply: left as it is; {said}"),
                                                       path=path, said=said))

    def changes(self, step: Step) -> list[str]:
        planned = self.typed_details(step.details)
        return [f"~ {planned['project']}/{name}" for name in planned["files"]]


def _file_shas(record: Mapping[str, object], key: str, files: Mapping[str, str]) -> None:
    """`record[key]`: a sha256 ("" for an absent file) for each planned file, and for no other."""
    shas = want_dict(record, key)
    if set(shas) != set(files):
        raise BadField(Msg(N_("the files in {key} are not the planned ones"), key=key))
    for name, sha in shas.items():
        if sha != "":
            want_sha(shas, name)


def _requirement(text: str) -> None:
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        raise BadField(Msg(N_("{text} is not a requirement: {reason}"), text=repr(text), reason=str(exc))) from exc
    if text.lstrip().startswith("-"):
        raise BadField(Msg(N_("{text} is not a requirement"), text=repr(text)))
