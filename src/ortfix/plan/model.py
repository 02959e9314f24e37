"""What a plan is: the options it was made with (`PlanOptions`), its actions (`Action`), the ORT build it ends up
with (`ChosenBuild`, the plan's "target" in JSON), the `Plan` itself with its JSON form, and the fingerprint that
ties a saved plan to the facts, options and actions it was made from (`plan_fingerprint`, `PLAN_SCHEMA`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, get_args

from ortfix.check.findings import Finding, finding_json
from ortfix.i18n import Msg

# How libraries are made findable: by the environment's kind, a conda hook, a preload hook (Windows: the PATH hook),
# the Windows user PATH in the registry, or not at all.
HookOption = Literal["auto", "conda", "preload", "user-path", "none"]
HOOK_CHOICES: tuple[HookOption, ...] = get_args(HookOption)
# Which installer runs the install: uv when it is found and the pip configuration translates, else pip (auto).
InstallerOption = Literal["auto", "pip", "uv"]
INSTALLER_CHOICES: tuple[InstallerOption, ...] = get_args(InstallerOption)


def hook_option(value: object) -> HookOption | None:
    """`value` as a `--hook` choice, or None when it is not one (a saved plan's options are untrusted)."""
    return next((c for c in HOOK_CHOICES if c == value), None)


def installer_option(value: object) -> InstallerOption | None:
    """`value` as an `--installer` choice, or None when it is not one."""
    return next((c for c in INSTALLER_CHOICES if c == value), None)


@dataclass(frozen=True)
class PlanOptions:
    """What the user asked for: part of the plan (a saved plan is re-planned from them and must come out the same)."""

    ort_version: str | None = None
    cuda_major: int | None = None
    hook: HookOption = "auto"
    driver_version: str | None = None  # planned for a machine with this driver (a CPU build host's plan)
    compute_capability: str | None = None
    installer: InstallerOption = "auto"
    project: bool = False  # also change the project's files through its own tool (apply --project)
    with_tensorrt: bool = False  # also provide the TensorRT provider's libraries (--with tensorrt; plan/tensorrt.py)


@dataclass(frozen=True)
class Action:
    """One change of the plan. Its words are `Msg`s: English in the plan's JSON and files (`str()`), translated on
    the terminal (`.text()`)."""

    kind: str
    summary: Msg
    changes: tuple[str | Msg, ...]  # "+ path", "- distribution", "~ path": what exactly changes
    undo: Msg
    fixes: tuple[str, ...]  # finding codes this action addresses
    details: Mapping[str, object] = field(default_factory=dict)  # the kind's TypedDict (plan/kinds.py)

    def detail_items(self, key: str) -> list[object]:
        """A list-valued detail (a pip-install's requirements, a user-path's entries); [] when there is none."""
        value = self.details.get(key)
        return list(value) if isinstance(value, list) else []


@dataclass(frozen=True)
class ChosenBuild:
    """The ORT build the plan ends up with, and why it was chosen (the plan's "target" in JSON)."""

    package: str
    version: str
    cuda_major: int
    cudnn_major: int | None
    index: str
    reasons: tuple[str | Msg, ...]


@dataclass(frozen=True)
class Plan:
    schema: str
    created: str
    ortfix_version: str
    python: str
    prefix: str
    environment: str
    fingerprint: str  # of the facts, the options and the actions: what `apply PLAN.json` must find again
    facts_fingerprint: str  # of the facts alone: tells "the environment changed" from "the file was edited"
    options: PlanOptions
    matrix_version: str
    installer: str | None
    target: ChosenBuild | None
    actions: tuple[Action, ...]
    unresolved: tuple[Finding, ...]  # problems no action here can fix (the driver, a reboot...)
    notes: tuple[str | Msg, ...]
    # The options uv is run with (from the pip configuration, credentials redacted); empty for pip.
    installer_options: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.actions

    def to_json(self) -> dict[str, object]:
        doc = asdict(self, dict_factory=_english_dict)
        doc["unresolved"] = [finding_json(f) for f in self.unresolved]
        return doc


def _english(value: object) -> object:
    """A field's value for JSON: a Msg as its English text (also inside a list or tuple)."""
    if isinstance(value, Msg):
        return str(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_english(v) for v in value)
    return value


def _english_dict(items: list[tuple[str, object]]) -> dict[str, object]:
    return {key: _english(value) for key, value in items}


def plan_fingerprint(facts_fingerprint: str, options: PlanOptions, actions: Sequence[Action]) -> str:
    opts = asdict(options)
    if opts["installer"] == "auto":  # the default: a plan saved before the option existed keeps its fingerprint
        del opts["installer"]
    if not opts["project"]:  # likewise
        del opts["project"]
    if not opts["with_tensorrt"]:  # likewise
        del opts["with_tensorrt"]
    doc = {"facts": facts_fingerprint, "options": opts,
           "actions": [{"kind": a.kind, "details": dict(a.details)} for a in actions]}
    data = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:16]
