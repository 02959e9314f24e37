"""The onnxruntime-genai swap: a CPU `onnxruntime-genai` (GENAI001), an `onnxruntime-genai-cuda` of another CUDA
major (GENAI002) or genai of another flavour than ORT's (GENAI003: `onnxruntime-genai-directml` beside the GPU build,
`onnxruntime-genai-cuda` beside onnxruntime-directml) is uninstalled and `onnxruntime-genai-cuda` of the target
build's CUDA major is installed, pinned to the newest release (compat/addons.yaml) whose ORT requirement the target
meets, so the swap never moves ORT; where onnxruntime-directml stays (Windows, no GPU build planned),
`onnxruntime-genai-directml` the same way: the flavour of where ORT ends up. The neighbour rule holds
(plan/neighbours.py): where another installed distribution requires the genai package by name, the swap is
left out and a note says who (`genai_breaks`, asked by plan/pip_actions.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from ortfix.check.codes import FindingCode
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding, genai_swap
from ortfix.check.genai_directml import directml_install
from ortfix.compat.addons import GENAI_CUDA, GENAI_DIRECTML
from ortfix.compat.matrix import Matrix
from ortfix.i18n import N_, Joined, Msg
from ortfix.plan.model import ChosenBuild
from ortfix.plan.needed_libraries import stack_majors, stack_version
from ortfix.plan.neighbours import Replacement

GENAI_CODES = (FindingCode.GENAI_CPU, FindingCode.GENAI_OTHER_CUDA, FindingCode.GENAI_OTHER_FLAVOUR)


@dataclass(frozen=True)
class GenaiChange:
    remove: tuple[str, ...] = ()  # the genai distributions to uninstall
    requirement: str | None = None  # onnxruntime-genai-cuda==V (or onnxruntime-genai-directml==V)
    fixes: tuple[FindingCode, ...] = ()
    notes: tuple[str | Msg, ...] = ()


def genai_change(facts: Facts, matrix: Matrix, by_code: Mapping[str, Sequence[Finding]],
                 target: ChosenBuild | None, installed: OrtInstall | None) -> GenaiChange:
    findings = [f for code in GENAI_CODES for f in by_code.get(code, [])]
    if not findings:
        return GenaiChange()
    requirement, why_not = _replacement(facts, matrix, target, installed)
    if requirement is None:
        return GenaiChange(notes=(Msg(N_("{reason}: onnxruntime-genai stays as it is"), reason=why_not or ""),))
    remove = tuple(dict.fromkeys(genai_swap(f)["installed"] for f in findings))
    return GenaiChange(remove, requirement, tuple(sorted({f.code for f in findings})))


def genai_breaks(genai: GenaiChange, changed: Sequence[Replacement]) -> Msg | None:
    """The note that leaves the swap out, where a replacement of the plan's packages stage (plan/pip_actions.py, the
    one neighbour check) that removes or replaces a genai distribution breaks what another distribution requires."""
    if genai.requirement is None:
        return None
    ours = {canonicalize_name(n) for n in (*genai.remove, GENAI_CUDA, GENAI_DIRECTML)}
    broken = [r for r in changed if r.broken and r.dist.normalized in ours]
    if not broken:
        return None
    who = Joined("; ", [Msg(N_("{who} requires {requirement}"), who=n.who, requirement=n.text)
                        for r in broken for n in r.broken])
    return Msg(N_("{installed} stays ({who}): replacing it with {requirement} would break that requirement"),
               installed=", ".join(genai.remove), who=who, requirement=genai.requirement)


def _replacement(facts: Facts, matrix: Matrix, target: ChosenBuild | None,
                 installed: OrtInstall | None) -> tuple[str | None, Msg | None]:
    """The genai requirement that fits where ONNX Runtime ends up: onnxruntime-genai-cuda of the GPU build's CUDA
    major; where onnxruntime-directml stays (Windows, no GPU build planned) onnxruntime-genai-directml. Else None
    and why."""
    version, (cuda, _) = stack_version(target, installed), stack_majors(target, installed)
    dml = directml_install(facts, installed) if target is None else None
    if dml is not None:
        pick = matrix.addons.genai_directml_for(dml.version or "")
        return ((f"{GENAI_DIRECTML}=={pick}", None) if pick else
                (None, Msg(N_("no {addon} release the matrix knows accepts {package} {version}"),
                           addon=GENAI_DIRECTML, package=str(dml.package), version=str(dml.version))))
    pick = matrix.addons.genai_cuda_for(version, cuda) if version and cuda else None
    if pick is None:
        return None, Msg(N_("no {addon} release the matrix knows is built for CUDA {cuda} and accepts "
                            "onnxruntime-gpu {version}"), addon=GENAI_CUDA, cuda=str(cuda), version=str(version))
    return f"{GENAI_CUDA}=={pick}", None
