"""onnxruntime-genai beside onnxruntime-directml (Windows): the CPU `onnxruntime-genai` there has no DirectML
(DmlExecutionProvider), so it is GENAI001 too, and the package that fits is `onnxruntime-genai-directml` of the
newest release whose onnxruntime-directml requirement the installed one meets (compat/addons.yaml). Judged only where
the active ONNX Runtime is onnxruntime-directml; beside a GPU build check/addons.py judges genai. There
`onnxruntime-genai-cuda` is GENAI003: genai of another flavour than ORT's."""

from __future__ import annotations

from ortfix.check.addons import genai_at, genai_installs, genai_other_flavour
from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding
from ortfix.compat.addons import GENAI_CPU, GENAI_CUDA, GENAI_DIRECTML
from ortfix.compat.matrix import Matrix
from ortfix.i18n import N_, Msg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ortfix.check.findings import GenaiData

DIRECTML_PACKAGE = "onnxruntime-directml"


def directml_install(facts: Facts, gpu: OrtInstall | None) -> OrtInstall | None:
    """The active ONNX Runtime when it is onnxruntime-directml and no GPU build is: what genai pairs with."""
    active = facts.active_ort
    return active if gpu is None and active is not None and active.package == DIRECTML_PACKAGE else None


def genai_directml_findings(facts: Facts, matrix: Matrix, gpu: OrtInstall | None) -> list[Finding]:
    """GENAI001 for the CPU onnxruntime-genai beside onnxruntime-directml, GENAI003 for onnxruntime-genai-cuda there,
    naming onnxruntime-genai-directml."""
    dml = directml_install(facts, gpu)
    if dml is None:
        return []
    replacement = matrix.addons.genai_directml_for(dml.version or "")
    swap = (Msg(N_("replace it with {requirement} (for {ort} {version}); `ortfix plan` moves ONNX Runtime to "
                   "onnxruntime-gpu and this to {package}"), requirement=f"{GENAI_DIRECTML}=={replacement}",
                ort=str(dml.package), version=str(dml.version), package=GENAI_CUDA) if replacement
            else Msg(N_("no {package} release the matrix knows accepts {ort} {version}"), package=GENAI_DIRECTML,
                     ort=str(dml.package), version=str(dml.version)))
    out = []
    for g in genai_installs(facts):
        data: GenaiData = {"installed": g.dist.name, "version": g.dist.version, "replacement": replacement}
        if g.dist.normalized == GENAI_CUDA:
            out.append(genai_other_flavour(g, ("CUDA", "onnxruntime-gpu", "DirectML"), dml, swap, data))
        if g.dist.normalized != GENAI_CPU:
            continue
        out.append(Finding(
            FindingCode.GENAI_CPU, Severity.ERROR,
            Msg(N_("{name} {version} is the CPU build of onnxruntime-genai: beside {package} it has no DirectML "
                   "(DmlExecutionProvider)"), name=g.dist.name, version=g.dist.version, package=str(dml.package)),
            (genai_at(g),), swap, data))
    return out
