"""A saved plan (`ortfix plan -o plan.json`) read back for `ortfix apply plan.json`.

A plan file carries intent, not commands: what was planned, for which environment, with which options. It may come
from another machine, a colleague or a CI artifact, so it is untrusted input:

1. read with a size limit, owned by the user running ortfix or by the environment's owner (as git trusts only its
   owner's repositories);
2. parsed strictly: known fields only, each of its type and size; the options are checked like the command line's;
3. the target comes from `--python` (or the active environment), never from the file: the file's prefix must be
   that environment's;
4. every action's details are checked against the environment (`Handler.check_details`: plain requirements, only
   ortfix's own hook files, modes from a fixed set, links named like libraries next to their file);
5. the plan is made again from today's facts with the file's options, and its actions must be exactly the file's
   (the fingerprint covers the facts, the options and the actions). What is applied is that plan, built by ortfix:
   no argument list, path or content is ever taken from the file.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ortfix.errors import OrtfixError
from ortfix.fields import (
    BadField,
    exact_fields,
    want_bool,
    want_dict,
    want_list,
    want_opt_str,
    want_str,
    want_str_list,
)
from ortfix.i18n import N_, Msg
from ortfix.plan.model import HOOK_CHOICES, INSTALLER_CHOICES, Plan, PlanOptions, hook_option, installer_option
from ortfix.plan.schema import PLAN_SCHEMA
from ortfix.system.confine import read_regular, require_trusted_owner
from ortfix.transaction.actions import handler_for
from ortfix.transaction.actions.base import open_env, scripts_folder
from ortfix.transaction.journal import loads_json
from ortfix.versions import validate_machine_options, validate_ort_version

PLAN_FILE_LIMIT = 16 << 20
_FIELDS = ("schema", "created", "ortfix_version", "python", "prefix", "environment", "fingerprint",
           "facts_fingerprint", "options", "matrix_version", "installer", "target", "actions", "unresolved", "notes")
_ACTION_FIELDS = ("kind", "summary", "changes", "undo", "fixes", "details")
_OPTION_FIELDS = ("ort_version", "cuda_major", "hook", "driver_version", "compute_capability")
# Fields a plan written before they existed lacks: "installer" (then "auto") and the plan's "installer_options".
_OPTIONAL_OPTION_FIELDS = ("installer", "project", "with_tensorrt")
_OPTIONAL_FIELDS = ("installer_options",)
# Optional: the target the plan was made for and how it was chosen (what `plan` printed first). Informational only:
# apply never takes anything from it (the environment is --python's, and the plan's prefix must be that one).
_INTERPRETER = "interpreter"
_INTERPRETER_FIELDS = ("python", "python_version", "environment", "prefix", "chosen_by", "ortfix_own_environment")


@dataclass(frozen=True)
class PlannedAction:
    kind: str
    details: Mapping[str, object]


@dataclass(frozen=True)
class PlanFile:
    """What apply takes from a saved plan: the environment it is for, the options, and the actions to compare."""

    path: str
    data: bytes
    owner: int
    python: str  # the interpreter it was planned with (said when the facts differ)
    prefix: str
    fingerprint: str
    facts_fingerprint: str
    options: PlanOptions
    actions: tuple[PlannedAction, ...]


def _bad(where: str, why: str) -> OrtfixError:
    return OrtfixError(Msg(N_("{path} is not a valid ortfix plan: {error}"), path=where, error=why),
                       hint=Msg(N_("a plan carries intent, not commands; make a new one with "
                                   "`ortfix plan -o plan.json`")))


def parse_options(doc: object) -> PlanOptions:
    if not isinstance(doc, dict):
        raise BadField("options is not an object")  # i18n: english (validation details stay English: fields.py)
    installer = installer_option(doc.get("installer", "auto"))
    if installer is None:
        raise BadField(f"options.installer is not one of {', '.join(INSTALLER_CHOICES)}")  # i18n: english
    project = doc.get("project", False)
    if not isinstance(project, bool):
        raise BadField("options.project is not true or false")  # i18n: english
    with_tensorrt = doc.get("with_tensorrt", False)
    if not isinstance(with_tensorrt, bool):
        raise BadField("options.with_tensorrt is not true or false")  # i18n: english
    d = exact_fields({k: v for k, v in doc.items() if k not in _OPTIONAL_OPTION_FIELDS}, _OPTION_FIELDS, "options")
    ort_version = want_opt_str(d, "ort_version", limit=64, where="options")
    cuda = d["cuda_major"]
    if cuda is not None and (not isinstance(cuda, int) or isinstance(cuda, bool) or not 10 <= cuda <= 20):
        raise BadField("options.cuda_major is not a CUDA major from 10 to 20")  # i18n: english
    hook = hook_option(want_str(d, "hook", limit=16, where="options"))
    if hook is None:
        raise BadField(f"options.hook is not one of {', '.join(HOOK_CHOICES)}")  # i18n: english
    driver = want_opt_str(d, "driver_version", limit=32, where="options")
    cc = want_opt_str(d, "compute_capability", limit=8, where="options")
    try:  # judged exactly as on the command line
        validate_ort_version(ort_version)
        validate_machine_options(driver, cc)
    except OrtfixError as exc:
        raise BadField(f"options: {exc.message}") from exc
    return PlanOptions(ort_version=ort_version, cuda_major=cuda, hook=hook, driver_version=driver,
                       compute_capability=cc, installer=installer, project=project,
                       with_tensorrt=with_tensorrt)


def _action(doc: object, n: int) -> PlannedAction:
    where = f"action {n}"
    d = exact_fields(doc, _ACTION_FIELDS, where)
    kind = want_str(d, "kind", limit=32, where=where)
    try:
        handler = handler_for(kind)
    except OrtfixError as exc:
        raise BadField(f"action {n}: {exc.message}") from exc
    want_str(d, "summary", where=where)
    want_str(d, "undo", where=where)
    want_str_list(d, "changes", where=where)
    want_str_list(d, "fixes", limit=16, where=where)
    details = want_dict(d, "details", where=where)
    missing = sorted(handler.details_keys - set(details))
    unknown = sorted(set(details) - handler.details_keys)
    if unknown:
        raise BadField(f"action {n} ({kind}) has an unknown detail {unknown[0]!r}")
    if missing:
        raise BadField(f"action {n} ({kind}) lacks detail {missing[0]!r}")
    return PlannedAction(kind, details)


def _interpreter(doc: object) -> None:
    d = exact_fields(doc, _INTERPRETER_FIELDS, _INTERPRETER)
    for key in ("python", "environment", "prefix", "chosen_by"):
        want_str(d, key, where=_INTERPRETER)
    want_opt_str(d, "python_version", limit=64, where=_INTERPRETER)
    want_bool(d, "ortfix_own_environment", where=_INTERPRETER)


def parse(doc: object) -> tuple[str, str, str, str, PlanOptions, tuple[PlannedAction, ...]]:
    """(python, prefix, fingerprint, facts fingerprint, options, actions) of a plan document; BadField when
    malformed."""
    if not isinstance(doc, dict) or doc.get("schema") != PLAN_SCHEMA:
        schema = doc.get("schema") if isinstance(doc, dict) else None
        raise BadField(f"its schema is {schema!r}, not {PLAN_SCHEMA}" if isinstance(schema, str)  # i18n: english
                       else f"it has no schema {PLAN_SCHEMA}")  # i18n: english
    if _INTERPRETER in doc:
        _interpreter(doc[_INTERPRETER])
        doc = {k: v for k, v in doc.items() if k != _INTERPRETER}
    # What `plan --json` printed (the envelope's fields, informational) is a plan file too; only these values.
    if "command" in doc or "exit_code" in doc:
        if doc.get("command") != "plan" or doc.get("exit_code") not in (0, 1) or type(doc.get("exit_code")) is not int:
            raise BadField("its command/exit_code are not those of `ortfix plan --json` "  # i18n: english
                           "(command 'plan', exit_code 0 or 1)")
        doc = {k: v for k, v in doc.items() if k not in ("command", "exit_code")}
    if _OPTIONAL_FIELDS[0] in doc:
        want_str_list(doc, _OPTIONAL_FIELDS[0], items=200)
        doc = {k: v for k, v in doc.items() if k not in _OPTIONAL_FIELDS}
    d = exact_fields(doc, _FIELDS, "the plan")
    for key in ("created", "ortfix_version", "environment", "matrix_version"):
        want_str(d, key)
    want_opt_str(d, "installer", limit=16)
    if d["target"] is not None:
        want_dict(d, "target")
    want_list(d, "unresolved", limit=200)
    want_list(d, "notes", limit=200)
    actions = want_list(d, "actions", limit=100)
    return (want_str(d, "python"), want_str(d, "prefix"), want_str(d, "fingerprint", limit=64),
            want_str(d, "facts_fingerprint", limit=64), parse_options(d["options"]),
            tuple(_action(a, i) for i, a in enumerate(actions, 1)))


def read_plan_file(path: Path) -> PlanFile:
    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_NONBLOCK", 0))  # the last two are POSIX's, O_BINARY Windows'
    except OSError as exc:
        raise OrtfixError(Msg(N_("cannot read {path}: {error}"), path=str(path), error=str(exc.strerror or exc))
                          ) from exc
    data, st = read_regular(fd, where, PLAN_FILE_LIMIT)
    try:
        doc = loads_json(data, where)
        python, prefix, fingerprint, facts_fingerprint, options, actions = parse(doc)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad(where, str(exc)) from exc
    return PlanFile(where, data, st.st_uid, python, prefix, fingerprint, facts_fingerprint, options, actions)


def check_against(saved: PlanFile, fresh: Plan, purelib: str, platlib: str) -> None:
    """Accept the saved plan only for the environment it was made for, from its trusted owner, with every action
    valid there and exactly what ortfix plans now; OrtfixError naming the first reason otherwise."""
    where = saved.path
    if os.path.realpath(saved.prefix) != os.path.realpath(fresh.prefix):
        raise OrtfixError(Msg(N_("{path} was made for {saved}, not {prefix}"), path=where, saved=repr(saved.prefix),
                              prefix=fresh.prefix),
                          hint=Msg(N_("apply it with --python {prefix} (ortfix never takes the interpreter from the "
                                      "file), or make a new plan"), prefix=shlex.quote(saved.prefix)))
    env = open_env(fresh.python, fresh.prefix, purelib, platlib, scripts_folder(fresh.prefix),
                   fresh.environment)
    try:
        require_trusted_owner(saved.owner, env.fs.uid, where, hint=Msg(N_(
            "ortfix does not apply a plan of dubious ownership; make a new one with `ortfix plan -o plan.json`")))
        for n, action in enumerate(saved.actions, 1):
            try:
                handler_for(action.kind).check_details(env, action.details)
            except (BadField, OrtfixError) as exc:
                why = exc.one_line() if isinstance(exc, OrtfixError) else str(exc)
                raise _bad(where, f"action {n} ({action.kind}): {why}") from exc
    finally:
        env.fs.close()
    if saved.facts_fingerprint != fresh.facts_fingerprint:
        spelled: str | Msg = (Msg(N_("; it was made with the interpreter {saved}, this is {python}"),
                                  saved=repr(saved.python), python=repr(fresh.python))
                              if saved.python != fresh.python else "")
        raise OrtfixError(Msg(N_("the environment changed since {path} was made (fingerprint {saved}, now "
                                 "{fingerprint}{spelled})"), path=where, saved=saved.facts_fingerprint,
                              fingerprint=fresh.facts_fingerprint, spelled=spelled),
                          hint=Msg(N_("make a new plan: `ortfix plan -o plan.json`")))
    mine = [(a.kind, _canonical(a.details)) for a in fresh.actions]
    theirs = [(a.kind, _canonical(a.details)) for a in saved.actions]
    if mine != theirs or saved.fingerprint != fresh.fingerprint:
        first = next((i for i, (m, t) in enumerate(zip(mine, theirs), 1) if m != t), min(len(mine), len(theirs)) + 1)
        raise OrtfixError(Msg(N_("{path} does not hold what ortfix plans for this environment (first difference: "
                                 "action {n}): the file was edited, or made by another ortfix version"),
                              path=where, n=first),
                          hint=Msg(N_("make a new plan with `ortfix plan -o plan.json` and review it")))


def _canonical(details: Mapping[str, object]) -> str:
    return json.dumps(details, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
