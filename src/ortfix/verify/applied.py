"""The verification after an apply's last step, before the transaction counts as applied: `ortfix verify`'s level 1
(a fresh process of the target loads every library the provider needs) and a re-check with no blocking finding left.
The apply command runs `ortfix check` on the environment as it is now and passes the result here, in the callable it
gives `transaction.apply.apply_plan` (the transaction layer does not import this one)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ortfix.check.codes import FindingCode
from ortfix.check.findings import Finding
from ortfix.i18n import N_, Msg
from ortfix.system.linux import hooks
from ortfix.verify.levels import Status, level_loader, no_gpu_reason

if TYPE_CHECKING:
    from ortfix.check.facts import Facts
    from ortfix.transaction.actions.base import TargetEnv
    from ortfix.verify.loadcheck import LoadCheck

# Findings that must be gone after an apply: the GPU provider cannot load while any of them is there.
BLOCKING = frozenset({
    FindingCode.LIB_MISSING, FindingCode.LIB_NOT_ON_PATH, FindingCode.LIB_WRONG_MAJOR, FindingCode.SONAME_LINK_MISSING,
    FindingCode.LIB_DAMAGED, FindingCode.LIB_OTHER_CUDA, FindingCode.NO_ORT, FindingCode.CPU_ONLY,
    FindingCode.CPU_AND_GPU, FindingCode.PROVIDER_MISSING, FindingCode.ORT_DAMAGED, FindingCode.ORT_ORPHANED})


@dataclass(frozen=True)
class Verification:
    ok: bool
    loader: LoadCheck | None
    blocking: tuple[str, ...]  # blocking finding codes the re-check still reports
    problems: tuple[str | Msg, ...]  # Msg: English in the journal and --json, translated on the screen
    # Applied for a machine with another driver (--driver) on one without any: why the GPU part (the provider
    # starts, a model matches the CPU) was not verified here. None: not such an apply.
    gpu_not_verified: Msg | None = None
    # what the load check left out and why (a library that needs the driver's libcuda)
    notes: tuple[str | Msg, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "loader": self.loader.to_json() if self.loader else None,
                "blocking_findings": list(self.blocking), "problems": [str(p) for p in self.problems],
                "gpu_not_verified": None if self.gpu_not_verified is None else str(self.gpu_not_verified),
                "notes": [str(n) for n in self.notes]}


def _codes_blocking(findings: Sequence[Finding]) -> tuple[str, ...]:
    return tuple(sorted({f.code for f in findings if f.code in BLOCKING}))


def verify_applied(env: TargetEnv, facts: Facts, findings: Sequence[Finding], *,
                   assumed_driver: str | None = None) -> Verification:
    """`ortfix verify`'s level 1 (a fresh process of the target, started as the user starts it, loads every library
    the provider needs, as its requesters would), and ortfix's own check (`facts`, `findings`: the environment as it
    is now, on this machine with its own driver, or none) has no blocking finding left.

    Everything here can be verified without a GPU. With `assumed_driver` (the plan was made with --driver for
    another machine) on a machine without a usable driver, that is all that can be: the result says so."""
    level = level_loader(facts, env.python, conda_hook=hooks.active_conda_hook(env.prefix, env.env_kind))
    blocking = _codes_blocking(findings)
    problems: list[str | Msg] = []
    if level.status is not Status.PASS:
        problems += list(level.load_check.failures if level.load_check and level.load_check.failures
                         else (level.verdict,))
    problems += [Msg(N_("ortfix check still reports {code}"), code=c) for c in blocking]
    no_gpu = no_gpu_reason(facts.driver) if assumed_driver else None
    not_verified = (Msg(N_("GPU part not verified: {why} on this machine (the plan assumes driver {driver}); "
                           "`ortfix verify` on the GPU machine checks that the CUDA provider starts and a model "
                           "matches the CPU"), why=no_gpu, driver=str(assumed_driver)) if no_gpu else None)
    need_driver = level.data.get("need_driver", {}) if level.status is Status.PASS else {}
    notes = tuple(n for n in level.evidence if str(n).split(":", 1)[0] in need_driver)
    return Verification(not problems, level.load_check, blocking, tuple(problems), not_verified, notes)

