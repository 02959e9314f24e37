#!/usr/bin/python
"""The Ansible module `ortfix.fleet.ortfix`: runs the real `ortfix` command on the managed host with `--json` (an argv
list, never a shell string) and turns its JSON documents into a task result. Everything ortfix prints is read as
untrusted input: a document that is not JSON, has another schema or lacks a field of the expected type fails the task
with one line, never a traceback.

Over 400 lines because Ansible ships a module as one file (nothing of ortfix is importable on the managed host's
Ansible interpreter), its DOCUMENTATION, EXAMPLES and RETURN (about 130 lines) included."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from typing import Optional, TypedDict, TypeVar

from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped,import-not-found,unused-ignore]

DOCUMENTATION = r"""
---
module: ortfix
short_description: Check, fix and roll back the ONNX Runtime GPU setup of a Python environment with ortfix
description:
  - Runs the C(ortfix) command on the managed host (with C(--json)) against one Python interpreter or environment.
  - C(state=checked) runs C(ortfix check) and returns its findings; nothing is changed.
  - C(state=fixed) runs C(ortfix plan), then applies exactly that plan as one verified transaction
    (C(ortfix apply PLAN --yes)). In check mode only the plan is made. With C(--diff) the plan is shown.
    A failed verification fails the task with ortfix's one-line reason; ortfix has already rolled the
    transaction back, and its id is returned.
  - C(state=rolled_back) rolls back every ortfix transaction still applied to the environment, newest first,
    returning it to how it was before ortfix changed it.
  - The task reports C(changed) only when a transaction was applied or rolled back.
version_added: "0.1.0"
author: ortfix contributors
requirements:
  - ortfix on the managed host (C(pipx install ortfix), or see the C(ortfix) option)
options:
  state:
    description: What the environment should be.
    type: str
    choices: [checked, fixed, rolled_back]
    default: checked
  python:
    description:
      - The target interpreter or environment folder (C(ortfix --python)).
      - Omitted, ortfix picks the active environment, else the first C(python3) on C(PATH).
    type: str
  hook:
    description: How the CUDA libraries are made findable (C(ortfix plan --hook)); only with C(state=fixed).
    type: str
    choices: [auto, conda, preload, user-path, none]
  driver:
    description:
      - Plan for this NVIDIA driver version (C(--driver)), e.g. for an image built on a host without a GPU.
      - Only with C(state=fixed).
    type: str
  compute_capability:
    description: Plan for this GPU compute capability (C(--compute-capability), e.g. C(8.6)); only with C(state=fixed).
    type: str
  ortfix:
    description:
      - The ortfix command on the managed host, as a path or as a list of arguments
        (e.g. C([/opt/tools/bin/python, -m, ortfix])). Never run through a shell.
    type: raw
    default: ortfix
notes:
  - Supports check mode and diff mode.
  - The user's pip configuration on the managed host is what ortfix installs with; set C(PIP_CONFIG_FILE)
    with the task's C(environment) keyword to use another one (an offline wheelhouse).
  - Run as root (C(become)) against an environment that another user owns, ortfix refuses to start that
    environment's code (its interpreter, pip, onnxruntime), which would run as root. Run the task as the owner
    (C(become_user)), or list the environment in C(ORTFIX_SAFE_ENVS) with the task's C(environment) keyword.
"""

EXAMPLES = r"""
- name: Make ONNX Runtime run on the GPU in the application's venv
  ortfix.fleet.ortfix:
    state: fixed
    python: /srv/app/.venv

- name: What is wrong, as data
  ortfix.fleet.ortfix:
    python: /srv/app/.venv/bin/python
  register: gpu_check

- name: Prepare an image on a build host for R535 GPUs
  ortfix.fleet.ortfix:
    state: fixed
    python: /opt/image/venv
    driver: "535.104.12"
    compute_capability: "8.6"

- name: Undo everything ortfix did
  ortfix.fleet.ortfix:
    state: rolled_back
    python: /srv/app/.venv
    ortfix: [/opt/ortfix/bin/python, -m, ortfix]
"""

RETURN = r"""
interpreter:
  description: The target as ortfix chose it (python, python_version, environment, prefix, chosen_by).
  returned: always
  type: dict
findings:
  description:
    - C(checked) - every finding of C(ortfix check) (code, severity, summary, evidence, fix, data).
    - C(fixed) - the findings ortfix cannot fix here (the plan's C(unresolved)), e.g. DRV001 on a host without a driver.
  returned: when state is checked or fixed
  type: list
  elements: dict
ortfix_summary:
  description: A compact summary - healthy, the finding codes, how many errors and warnings.
  sample: {"healthy": false, "codes": ["DRV001", "ORT002"], "errors": 2, "warnings": 0}
  returned: when state is checked
  type: dict
plan:
  description: The plan's actions (kind, summary, changes, fixes), its installer and its target build.
  returned: when state is fixed
  type: dict
transaction_id:
  description: The transaction applied, or the one that failed verification and was rolled back.
  returned: when state is fixed and a transaction was made
  type: str
rolled_back:
  description: The transactions rolled back (or, in check mode, that would be), newest first, with their changes.
  returned: when state is rolled_back
  type: list
  elements: dict
warnings_from_ortfix:
  description: Warnings ortfix printed (e.g. a file edited since the install, left in place by a rollback).
  returned: when state is fixed or rolled_back
  type: list
  elements: str
"""

SCHEMAS = {
    "check": "ortfix.check/2",
    "plan": "ortfix.plan/2",
    "apply": "ortfix.apply/2",
    "rollback": "ortfix.rollback/2",
    "history": "ortfix.history/2",
}
ERROR_SCHEMA = "ortfix.error/1"
# What `ortfix history` calls a transaction that still has changes in the environment (an interrupted one included:
# `ortfix rollback` finishes it).
STILL_APPLIED = ("applied", "kept", "running", "rolling-back")
TX_ID = re.compile(r"\b(\d{8}T\d{9}Z-[0-9a-f]{4})\b")
MAX_TEXT = 2000

Doc = dict[str, object]  # a JSON object as read, before its fields are checked


class Finding(TypedDict):
    code: str
    severity: str
    summary: str
    evidence: list[str]
    fix: Optional[str]
    data: Doc


class Action(TypedDict):
    kind: str
    summary: str
    changes: list[str]
    fixes: list[str]


class Build(TypedDict):
    package: str
    version: str


class Plan(TypedDict):
    actions: list[Action]
    installer: str
    target: Optional[Build]
    unresolved: list[Finding]


class PendingTx(TypedDict):
    id: str
    status: str
    changes: list[str]


class OrtfixFailed(Exception):
    """The task fails with this one line (and these extra result fields)."""

    def __init__(self, message: str, **result: object) -> None:
        super().__init__(message)
        self.result = result


# ---------------------------------------------------------------------------------------------------------------------
# reading ortfix's documents: every field checked for presence and type
# ---------------------------------------------------------------------------------------------------------------------


T = TypeVar("T")


def _raw(doc: Doc, key: str, where: str) -> object:
    if key not in doc:
        raise OrtfixFailed(f"ortfix's {where} has no field {key!r}: this module cannot read this ortfix version")
    return doc[key]


def _wrong(where: str, key: str, value: object) -> OrtfixFailed:
    return OrtfixFailed(f"ortfix's {where} field {key!r} is {type(value).__name__}, not what this module reads")


def _typed(doc: Doc, key: str, where: str, kind: type[T]) -> T:
    value = _raw(doc, key, where)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):  # bool is an int in Python
        raise _wrong(where, key, value)
    return value


def _text(doc: Doc, key: str, where: str) -> str:
    return _typed(doc, key, where, str)


def _text_or_none(doc: Doc, key: str, where: str) -> Optional[str]:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise _wrong(where, key, value)
    return value


def _int(doc: Doc, key: str, where: str) -> int:
    return _typed(doc, key, where, int)


def _bool(doc: Doc, key: str, where: str) -> bool:
    return _typed(doc, key, where, bool)


def _object(doc: Doc, key: str, where: str) -> Doc:
    value = _raw(doc, key, where)
    if not isinstance(value, dict):
        raise _wrong(where, key, value)
    return value


def _objects(doc: Doc, key: str, where: str) -> list[Doc]:
    items = _raw(doc, key, where)
    if not isinstance(items, list):
        raise _wrong(where, key, items)
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise OrtfixFailed(f"ortfix's {where} field {key!r}[{n}] is {type(item).__name__}, not an object")
    return items


def _strings(doc: Doc, key: str, where: str) -> list[str]:
    items = _raw(doc, key, where)
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise OrtfixFailed(f"ortfix's {where} field {key!r} is not a list of text")
    return items


def _finding(raw: Doc, where: str) -> Finding:
    """A finding as the module returns it: code, severity and summary required; evidence, fix and data checked."""
    data = raw.get("data") or {}
    if not isinstance(data, dict):
        raise _wrong(where, "data", data)
    return {"code": _text(raw, "code", where), "severity": _text(raw, "severity", where),
            "summary": _text(raw, "summary", where),
            "evidence": _strings(raw, "evidence", where) if "evidence" in raw else [],
            "fix": _text_or_none(raw, "fix", where), "data": data}


def _interpreter(doc: Doc, where: str) -> Doc:
    raw = _object(doc, "interpreter", where)
    _text(raw, "python", f"{where} interpreter")
    return raw


class Ortfix:
    """The ortfix command on this host, run with an argv list (never a shell) and --json."""

    def __init__(self, module: AnsibleModule, command: list[str]) -> None:
        self.module = module
        self.command = command

    def run(self, name: str, args: list[str], ok_codes: tuple[int, ...] = (0, 1)) -> Doc:
        argv = [*self.command, *args, "--json"]
        rc, out, err = self.module.run_command(argv, check_rc=False)
        where = f"`ortfix {name}` output"
        try:
            doc = json.loads(out)
        except ValueError:
            last = (err or out or "").strip().splitlines()[-1:] or ["no output"]
            raise OrtfixFailed(f"`ortfix {name}` printed no JSON document (exit {rc}): {last[0][:MAX_TEXT]}",
                               rc=rc) from None
        except RecursionError:  # nested deeper than Python's parser goes: not a document ortfix prints
            raise OrtfixFailed(f"`ortfix {name}` printed a JSON document nested too deeply to read (exit {rc})",
                               rc=rc) from None
        if not isinstance(doc, dict):
            raise OrtfixFailed(f"{where} is not a JSON object", rc=rc)
        schema = _text(doc, "schema", where)
        exit_code = _int(doc, "exit_code", where)
        if exit_code != rc:
            raise OrtfixFailed(f"{where} says exit code {exit_code}, but ortfix exited {rc}", rc=rc)
        if schema == ERROR_SCHEMA:
            error = _object(doc, "error", where)
            message = _text(error, "message", f"{where} error")
            hint = _text_or_none(error, "hint", f"{where} error")
            raise OrtfixFailed(f"ortfix {name}: {message}", rc=rc, hint=hint)
        if schema != SCHEMAS[name]:
            raise OrtfixFailed(f"{where} has schema {schema!r}; this module reads {SCHEMAS[name]!r} "
                               "(update the collection or ortfix)", rc=rc)
        command = _text(doc, "command", where)
        if command != name:
            raise OrtfixFailed(f"{where} is the document of another command ({command!r})", rc=rc)
        if rc not in ok_codes:
            raise OrtfixFailed(f"`ortfix {name}` exited {rc}", rc=rc)
        return doc


# ---------------------------------------------------------------------------------------------------------------------
# the three states
# ---------------------------------------------------------------------------------------------------------------------


def _target_args(params: Doc) -> list[str]:
    python = params["python"]
    return ["--python", python] if isinstance(python, str) and python else []


def checked(ortfix: Ortfix, params: Doc) -> Doc:
    doc = ortfix.run("check", ["check", *_target_args(params)])
    where = "`ortfix check` output"
    findings = [_finding(f, f"{where} finding") for f in _objects(doc, "findings", where)]
    summary = {"healthy": _bool(doc, "healthy", where), "codes": [f["code"] for f in findings],
               "errors": sum(1 for f in findings if f["severity"] == "error"),
               "warnings": sum(1 for f in findings if f["severity"] == "warning")}
    return {"changed": False, "interpreter": _interpreter(doc, where), "findings": findings,
            "ortfix_summary": summary}


def _plan(doc: Doc) -> Plan:
    where = "`ortfix plan` output"
    actions: list[Action] = []
    for raw in _objects(doc, "actions", where):
        at = f"{where} action"
        actions.append({"kind": _text(raw, "kind", at), "summary": _text(raw, "summary", at),
                        "changes": _strings(raw, "changes", at), "fixes": _strings(raw, "fixes", at)})
    target: Optional[Build] = None
    if doc.get("target") is not None:
        raw_target = _object(doc, "target", where)
        target = {"package": _text(raw_target, "package", f"{where} target"),
                  "version": _text(raw_target, "version", f"{where} target")}
    return {"actions": actions, "installer": _text(doc, "installer", where), "target": target,
            "unresolved": [_finding(f, f"{where} unresolved") for f in _objects(doc, "unresolved", where)]}


def render_plan(python: str, plan: Plan) -> str:
    """The plan as `--diff` shows it."""
    target = plan["target"]
    build = f"{target['package']} {target['version']}" if target else "the installed build"
    lines = [f"ortfix plan for {python} ({build}, installer {plan['installer']}):"]
    for n, action in enumerate(plan["actions"], 1):
        fixes = f"  [fixes {', '.join(action['fixes'])}]" if action["fixes"] else ""
        lines.append(f"{n}. {action['summary']}{fixes}")
        lines += [f"     {change}" for change in action["changes"]]
    lines += [f"still needs you: {f['code']} {f['summary']}" for f in plan["unresolved"]]
    return "\n".join(lines) + "\n"


def fixed(ortfix: Ortfix, params: Doc, module: AnsibleModule) -> Doc:
    options = _target_args(params)
    for flag, key in (("--hook", "hook"), ("--driver", "driver"), ("--compute-capability", "compute_capability")):
        value = params[key]
        if isinstance(value, str) and value:
            options += [flag, value]
    folder = tempfile.mkdtemp(prefix="ortfix-ansible-")
    try:
        plan_file = os.path.join(folder, "plan.json")
        doc = ortfix.run("plan", ["plan", *options, "-o", plan_file])
        interpreter = _interpreter(doc, "`ortfix plan` output")
        plan = _plan(doc)
        result: Doc = {"changed": False, "interpreter": interpreter, "plan": plan, "findings": plan["unresolved"],
                       "warnings_from_ortfix": []}
        if not plan["actions"]:
            return result
        if module._diff:
            result["diff"] = {"prepared": render_plan(str(interpreter["python"]), plan)}
        if module.check_mode:
            result["changed"] = True
            return result
        # The plan just shown, applied only while ortfix would plan exactly the same (it refuses a stale plan).
        try:
            applied = ortfix.run("apply", ["apply", plan_file, "--yes", *_target_args(params)])
        except OrtfixFailed as exc:
            hint = exc.result.get("hint")
            found = TX_ID.search(hint) if isinstance(hint, str) else None
            if found:
                exc.result["transaction_id"] = found.group(1)
            raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    where = "`ortfix apply` output"
    status = _text(applied, "status", where)
    if status == "nothing-to-do":
        return result
    tx = _object(applied, "transaction", where)
    tx_id = _text(tx, "id", f"{where} transaction")
    result["transaction_id"] = tx_id
    result["warnings_from_ortfix"] = _strings(applied, "warnings", where)
    if status == "applied":
        result["changed"] = True
        return result
    # Verification failed: ortfix rolled the transaction back; its message is the one-line reason.
    reason = _text_or_none(tx, "message", f"{where} transaction") or f"transaction {tx_id} ended {status}"
    raise OrtfixFailed(f"{reason}; every change was rolled back (transaction {tx_id})", transaction_id=tx_id,
                       transaction_status=status, plan=plan, interpreter=interpreter)


def rolled_back(ortfix: Ortfix, params: Doc, module: AnsibleModule) -> Doc:
    doc = ortfix.run("history", ["history", *_target_args(params)], ok_codes=(0,))
    where = "`ortfix history` output transaction"
    pending: list[PendingTx] = []
    for raw in _objects(doc, "transactions", "`ortfix history` output"):
        status = _text(raw, "status", where)
        tx_id = _text(raw, "id", where)
        if status == "unreadable":
            raise OrtfixFailed(f"transaction {tx_id} cannot be read: {raw.get('error')}; see `ortfix history`")
        if status in STILL_APPLIED:
            if not TX_ID.fullmatch(tx_id):
                raise OrtfixFailed(f"`ortfix history` names a transaction {tx_id!r} that is not an ortfix id")
            pending.append({"id": tx_id, "status": status, "changes": _strings(raw, "changes", where)})
    pending.sort(key=lambda t: t["id"], reverse=True)  # ids sort by time: newest first
    warnings: list[str] = []
    result: Doc = {"changed": bool(pending), "interpreter": _interpreter(doc, "`ortfix history` output"),
                   "rolled_back": pending, "warnings_from_ortfix": warnings}
    if not pending or module.check_mode:
        return result
    done: list[PendingTx] = []
    for tx in pending:
        try:
            out = ortfix.run("rollback", ["rollback", tx["id"], "--yes", *_target_args(params)])
        except OrtfixFailed as exc:
            extra = {k: v for k, v in exc.result.items() if k != "changed"}
            raise OrtfixFailed(str(exc), changed=bool(done), rolled_back=done, transaction_id=tx["id"],
                               **extra) from None
        at = "`ortfix rollback` output"
        if _text(_object(out, "transaction", at), "id", f"{at} transaction") != tx["id"]:
            raise OrtfixFailed(f"`ortfix rollback {tx['id']}` rolled back another transaction", changed=True)
        warnings += _strings(out, "warnings", at)
        done.append(tx)
    result["rolled_back"] = done
    return result


def _command(raw: object) -> list[str]:
    """The `ortfix` option as an argv prefix: a path (or a name on PATH), or a non-empty list of arguments."""
    if isinstance(raw, str) and raw:
        return [raw]
    if isinstance(raw, list) and raw and all(isinstance(a, str) and a for a in raw):
        return list(raw)
    raise OrtfixFailed("option ortfix must be a path or a non-empty list of arguments, e.g. "
                       "[/opt/venv/bin/python, -m, ortfix]")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["checked", "fixed", "rolled_back"], "default": "checked"},
            "python": {"type": "str"},
            "hook": {"type": "str", "choices": ["auto", "conda", "preload", "user-path", "none"]},
            "driver": {"type": "str"},
            "compute_capability": {"type": "str"},
            "ortfix": {"type": "raw", "default": "ortfix"},
        },
        supports_check_mode=True,
    )
    params: Doc = module.params
    try:
        state = params["state"]
        plan_options = [k for k in ("hook", "driver", "compute_capability") if params[k]]
        if state != "fixed" and plan_options:
            raise OrtfixFailed(f"option {plan_options[0]} applies only to state=fixed")
        command = _command(params["ortfix"])
        if os.sep not in command[0]:
            found = module.get_bin_path(command[0])
            if not found:
                raise OrtfixFailed(f"{command[0]} is not on this host's PATH: install ortfix (pipx install ortfix) "
                                   "or name it with the option ortfix")
            command[0] = found
        ortfix = Ortfix(module, command)
        if state == "checked":
            result = checked(ortfix, params)
        elif state == "fixed":
            result = fixed(ortfix, params, module)
        else:
            result = rolled_back(ortfix, params, module)
    except OrtfixFailed as exc:
        module.fail_json(msg=str(exc)[:MAX_TEXT], **{"changed": False, **exc.result})
        return
    warnings = result.get("warnings_from_ortfix")
    for warning in warnings if isinstance(warnings, list) else []:
        module.warn(str(warning))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
