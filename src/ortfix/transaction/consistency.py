"""The installer's own consistency check (`python -m pip check`; `uv pip check --python ...`), run in preflight and
after the last step: a broken requirement the apply brought in rolls it back. What was broken before is not the
apply's doing and is never blamed on it.

One exception is ortfix's job itself: a distribution that asks for the CPU package `onnxruntime` by name is left
"not installed" when the plan swaps that package for the GPU build (ORT005 says who asks; the GPU build provides the
same `onnxruntime` import package)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from ortfix import subproc
from ortfix.safetext import visible
from ortfix.transaction.actions.base import TargetEnv

if TYPE_CHECKING:
    from ortfix.plan.model import Plan

_PROBLEM = re.compile(r" (requires|has requirement) |not supported on this platform|incompatib", re.IGNORECASE)
_MISSING = re.compile(r"requires `?([A-Za-z0-9][A-Za-z0-9._-]*)[^,`]*`?, (which is not installed|but it's not "
                      r"installed)")


def check_argv(env: TargetEnv, installer: str | None) -> list[str] | None:
    """The consistency check of the installer that makes the change; None when there is none to run."""
    if installer == "uv":
        return [env.uv, "pip", "check", "--python", env.python] if env.uv else None
    return [env.python, "-m", "pip", "check", "--disable-pip-version-check"]


def installer_check(env: TargetEnv, installer: str | None) -> tuple[str, ...] | None:
    """The broken requirements the installer reports now (escaped for a terminal), None when its check could not
    run (no pip in the environment, no uv): the apply then says so instead of comparing."""
    argv = check_argv(env, installer)
    if argv is None:
        return None
    try:
        proc = subproc.run(argv, target_python=env.python, timeout=300)
    except OSError:
        return None
    text = f"{proc.stdout}\n{proc.stderr}"
    if proc.returncode not in (0, 1) or "No module named pip" in text:
        return None
    return tuple(dict.fromkeys(visible(line.strip()) for line in text.splitlines() if _PROBLEM.search(line)))


def new_problems(before: Iterable[str], after: Iterable[str], swapped: Iterable[str] = ()) -> list[str]:
    """What `after` reports that `before` did not, less the requirements on a distribution the plan swapped for
    another ONNX Runtime build (`swapped`: names the plan uninstalled for that)."""
    seen = set(before)
    gone = {canonicalize_name(n) for n in swapped}
    out = []
    for line in after:
        if line in seen:
            continue
        missing = _MISSING.search(line)
        if missing and canonicalize_name(missing.group(1)) in gone:
            continue
        out.append(line)
    return out


def swapped_builds(plan: Plan) -> list[str]:
    """The ONNX Runtime builds the plan uninstalls while it installs one (the CPU package for the GPU build)."""
    from ortfix.plan.kinds import ActionKind
    from ortfix.plan.neighbours import ORT_BUILDS

    installs = any(a.kind == ActionKind.PIP_INSTALL for a in plan.actions)
    return [str(a.details["distribution"]) for a in plan.actions
            if installs and a.kind == ActionKind.PIP_UNINSTALL
            and canonicalize_name(str(a.details["distribution"])) in ORT_BUILDS]
