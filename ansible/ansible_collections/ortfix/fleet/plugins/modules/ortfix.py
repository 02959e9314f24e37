#!/usr/bin/python
"""The Ansible module `ortfix.fleet.ortfix`: runs the real `ortfix` command on the managed host with `--json` (an argv
list, never a shell string) and turns its JSON documents into a task result. Everything ortfix prints is read as
untrusted input: a document that is not JSON, has another schema or lacks a field of the expected type fails the task
with one line, never a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

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
  description: A compact summary, e.g. C({"healthy": false, "codes": ["ORT002"], "errors": 1, "warnings": 0}).
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


class OrtfixFailed(Exception):
    """The task fails with this one line (and these extra result fields)."""

    def __init__(self, message: str, **result: object) -> None:
        super().__init__(message)
        self.result = result


# ---------------------------------------------------------------------------------------------------------------------
# reading ortfix's documents
# ---------------------------------------------------------------------------------------------------------------------


def _field(doc: dict, key: str, kind: type | tuple, where: str, *, optional: bool = False) -> object:
    """doc[key], which must be of `kind` (None allowed when optional)."""
    if key not in doc:
        if optional:
            return None
        raise OrtfixFailed(f"ortfix's {where} has no field {key!r}: this module cannot read this ortfix version")
    value = doc[key]
    if value is None and optional:
        return None
    # bool is an int in Python: an int field must not accept true/false
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise OrtfixFailed(f"ortfix's {where} field {key!r} is {type(value).__name__}, not what this module reads")
    return value


def _dicts(doc: dict, key: str, where: str) -> list[dict]:
    items = _field(doc, key, list, where)
    assert isinstance(items, list)
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise OrtfixFailed(f"ortfix's {where} field {key!r}[{n}] is {type(item).__name__}, not an object")
    return items


def _strings(doc: dict, key: str, where: str) -> list[str]:
    items = _field(doc, key, list, where)
    assert isinstance(items, list)
    if not all(isinstance(s, str) for s in items):
        raise OrtfixFailed(f"ortfix's {where} field {key!r} holds something other than text")
    return items


def _text(doc: dict, key: str, where: str, *, optional: bool = False) -> str | None:
    value = _field(doc, key, str, where, optional=optional)
    assert value is None or isinstance(value, str)
    return value


def _finding(raw: dict, where: str) -> dict:
    """A finding as the module returns it: the fields every finding has, checked; the rest passed on as read."""
    out = {"code": _text(raw, "code", where), "severity": _text(raw, "severity", where),
           "summary": _text(raw, "summary", where)}
    out["evidence"] = _strings(raw, "evidence", where) if "evidence" in raw else []
    out["fix"] = _text(raw, "fix", where, optional=True)
    out["data"] = _field(raw, "data", dict, where, optional=True) or {}
    return out


def _interpreter(doc: dict, where: str) -> dict:
    raw = _field(doc, "interpreter", dict, where)
    assert isinstance(raw, dict)
    _text(raw, "python", f"{where} interpreter")
    return raw


class Ortfix:
    """The ortfix command on this host, run with an argv list and --json."""

    def __init__(self, module: AnsibleModule, command: list[str]) -> None:
        self.module = module
        self.command = command

    def run(self, name: str, args: list[str], ok_codes: tuple[int, ...] = (0, 1)) -> dict:
        argv = [*self.command, *args, "--json"]
        rc, out, err = self.module.run_command(argv, check_rc=False)
        where = f"`ortfix {name}` output"
        try:
            doc = json.loads(out)
        except ValueError:
            last = (err or out or "").strip().splitlines()[-1:] or ["no output"]
            raise OrtfixFailed(f"`ortfix {name}` printed no JSON document (exit {rc}): {last[0][:MAX_TEXT]}",
                               rc=rc) from None
        if not isinstance(doc, dict):
            raise OrtfixFailed(f"{where} is not a JSON object", rc=rc)
        schema = _text(doc, "schema", where)
        exit_code = _field(doc, "exit_code", int, where)
        if exit_code != rc:
            raise OrtfixFailed(f"{where} says exit code {exit_code}, but ortfix exited {rc}", rc=rc)
        if schema == ERROR_SCHEMA:
            error = _field(doc, "error", dict, where)
            assert isinstance(error, dict)
            message = _text(error, "message", f"{where} error")
            hint = _text(error, "hint", f"{where} error", optional=True)
            raise OrtfixFailed(f"ortfix {name}: {message}", rc=rc, hint=hint)
        if schema != SCHEMAS[name]:
            raise OrtfixFailed(f"{where} has schema {schema!r}; this module reads {SCHEMAS[name]!r} "
                               "(update the collection or ortfix)", rc=rc)
        if _text(doc, "command", where) != name:
            raise OrtfixFailed(f"{where} is the document of another command ({doc['command']!r})", rc=rc)
        if rc not in ok_codes:
            raise OrtfixFailed(f"`ortfix {name}` exited {rc}", rc=rc)
        return doc


# ---------------------------------------------------------------------------------------------------------------------
# the three states
# ---------------------------------------------------------------------------------------------------------------------


def _target_args(params: dict) -> list[str]:
    return ["--python", params["python"]] if params["python"] else []


def _summary(findings: list[dict], healthy: bool) -> dict:
    return {"healthy": healthy, "codes": [f["code"] for f in findings],
            "errors": sum(1 for f in findings if f["severity"] == "error"),
            "warnings": sum(1 for f in findings if f["severity"] == "warning")}


def checked(ortfix: Ortfix, params: dict) -> dict:
    doc = ortfix.run("check", ["check", *_target_args(params)])
    where = "`ortfix check` output"
    findings = [_finding(f, f"{where} finding") for f in _dicts(doc, "findings", where)]
    healthy = _field(doc, "healthy", bool, where)
    assert isinstance(healthy, bool)
    return {"changed": False, "interpreter": _interpreter(doc, where), "findings": findings,
            "ortfix_summary": _summary(findings, healthy)}


def _plan_actions(doc: dict) -> list[dict]:
    where = "`ortfix plan` output action"
    actions = []
    for raw in _dicts(doc, "actions", "`ortfix plan` output"):
        actions.append({"kind": _text(raw, "kind", where), "summary": _text(raw, "summary", where),
                        "changes": _strings(raw, "changes", where), "fixes": _strings(raw, "fixes", where)})
    return actions


def render_plan(python: str, plan: dict) -> str:
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


def fixed(ortfix: Ortfix, params: dict, module: AnsibleModule) -> dict:
    options = _target_args(params)
    for flag, key in (("--hook", "hook"), ("--driver", "driver"), ("--compute-capability", "compute_capability")):
        if params[key]:
            options += [flag, params[key]]
    folder = tempfile.mkdtemp(prefix="ortfix-ansible-")
    try:
        plan_file = os.path.join(folder, "plan.json")
        doc = ortfix.run("plan", ["plan", *options, "-o", plan_file])
        where = "`ortfix plan` output"
        interpreter = _interpreter(doc, where)
        target = _field(doc, "target", dict, where, optional=True)
        if isinstance(target, dict):
            target = {"package": _text(target, "package", f"{where} target"),
                      "version": _text(target, "version", f"{where} target")}
        plan = {"actions": _plan_actions(doc), "installer": _text(doc, "installer", where), "target": target,
                "unresolved": [_finding(f, f"{where} unresolved") for f in _dicts(doc, "unresolved", where)]}
        result: dict = {"changed": False, "interpreter": interpreter, "plan": plan, "findings": plan["unresolved"],
                        "warnings_from_ortfix": []}
        if not plan["actions"]:
            return result
        if module._diff:
            result["diff"] = {"prepared": render_plan(str(interpreter["python"]), plan)}
        if module.check_mode:
            result["changed"] = True
            return result
        # The plan just shown, applied only while ortfix would plan exactly the same (it refuses a stale plan).
        apply_args = ["apply", plan_file, "--yes"] + (["--python", params["python"]] if params["python"] else [])
        try:
            applied = ortfix.run("apply", apply_args)
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
    tx = _field(applied, "transaction", dict, where)
    assert isinstance(tx, dict)
    tx_id = _text(tx, "id", f"{where} transaction")
    result["transaction_id"] = tx_id
    result["warnings_from_ortfix"] = _strings(applied, "warnings", where)
    if status == "applied":
        result["changed"] = True
        return result
    # Verification failed: ortfix rolled the transaction back; its message is the one-line reason.
    reason = _text(tx, "message", f"{where} transaction", optional=True) or f"transaction {tx_id} ended {status}"
    raise OrtfixFailed(f"{reason}; every change was rolled back (transaction {tx_id})", transaction_id=tx_id, transaction_status=status, plan=plan, interpreter=interpreter)


def rolled_back(ortfix: Ortfix, params: dict, module: AnsibleModule) -> dict:
    doc = ortfix.run("history", ["history", *_target_args(params)], ok_codes=(0,))
    where = "`ortfix history` output transaction"
    pending = []
    for raw in _dicts(doc, "transactions", "`ortfix history` output"):
        status = _text(raw, "status", where)
        tx_id = _text(raw, "id", where)
        if status == "unreadable":
            raise OrtfixFailed(f"transaction {tx_id} cannot be read: {raw.get('error')}; see `ortfix history`")
        if status in STILL_APPLIED:
            assert isinstance(tx_id, str)
            if not TX_ID.fullmatch(tx_id):
                raise OrtfixFailed(f"`ortfix history` names a transaction {tx_id!r} that is not an ortfix id")
            pending.append({"id": tx_id, "status": status, "changes": _strings(raw, "changes", where)})
    pending.sort(key=lambda t: t["id"], reverse=True)  # ids sort by time: newest first
    result: dict = {"changed": bool(pending), "interpreter": _interpreter(doc, "`ortfix history` output"),
                    "rolled_back": pending, "warnings_from_ortfix": []}
    if not pending or module.check_mode:
        return result
    done: list[dict] = []
    for tx in pending:
        try:
            out = ortfix.run("rollback", ["rollback", tx["id"], "--yes", *_target_args(params)])
        except OrtfixFailed as exc:
            raise OrtfixFailed(str(exc), changed=bool(done), rolled_back=done, transaction_id=tx["id"],
                               **{k: v for k, v in exc.result.items() if k != "changed"}) from None
        rb_where = "`ortfix rollback` output"
        rb_tx = _field(out, "transaction", dict, rb_where)
        assert isinstance(rb_tx, dict)
        if _text(rb_tx, "id", f"{rb_where} transaction") != tx["id"]:
            raise OrtfixFailed(f"`ortfix rollback {tx['id']}` rolled back another transaction", changed=True)
        result["warnings_from_ortfix"] += _strings(out, "warnings", rb_where)
        done.append(tx)
    result["rolled_back"] = done
    return result


def _command(raw: object) -> list[str]:
    """The `ortfix` option as an argv prefix: a path (a name on PATH) or a non-empty list of strings."""
    if isinstance(raw, str):
        command = [raw]
    elif isinstance(raw, list) and raw and all(isinstance(a, str) and a for a in raw):
        command = list(raw)
    else:
        raise OrtfixFailed("option ortfix must be a path or a non-empty list of arguments, e.g. "
                           "[/opt/venv/bin/python, -m, ortfix]")
    if not command[0]:
        raise OrtfixFailed("option ortfix is empty")
    return command


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
    params = module.params
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
        fields = {"changed": False, **exc.result}
        module.fail_json(msg=str(exc)[:MAX_TEXT], **fields)
    for warning in result.get("warnings_from_ortfix", []):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
