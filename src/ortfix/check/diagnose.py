"""Facts → findings: the entry point that runs the rules in order and sorts what they find (`first_screen_order`:
the errors a plan fixes first). The rules live by what they look at: packages.py (the ORT packages), damaged.py
(half-done installs), driver_gpu.py (driver and GPU), libraries.py (the CUDA libraries and sonames), torch_compat.py
(torch), addons.py (TensorRT and onnxruntime-genai; genai_directml.py: genai beside onnxruntime-directml),
windows.py (what only Windows has), winstore.py (the Store Python), project.py (the project around the environment);
findings.py holds `Finding`."""

from __future__ import annotations

from ortfix.check.addons import genai_findings, tensorrt_findings
from ortfix.check.codes import PLAN_FIXES
from ortfix.check.damaged import damaged_findings, interrupted_findings, orphaned_findings
from ortfix.check.driver_gpu import driver_findings
from ortfix.check.facts import Facts, OrtInstall
from ortfix.check.findings import Finding
from ortfix.check.genai_directml import genai_directml_findings
from ortfix.check.libraries import (
    library_findings,
    matrix_agreement_findings,
    partial_cudnn_findings,
    soname_link_findings,
    unreadable_dir_findings,
)
from ortfix.check.packages import CPU_PACKAGE, package_findings
from ortfix.check.project import project_findings
from ortfix.check.torch_compat import torch_findings
from ortfix.compat.matrix import Matrix


def diagnose(facts: Facts, matrix: Matrix, *, with_tensorrt: bool = False) -> list[Finding]:
    """The findings of `facts`; `with_tensorrt`: TensorRT was asked for, so its libraries are judged even where none
    is installed (check/addons.py)."""
    findings: list[Finding] = []
    findings += package_findings(facts)
    findings += damaged_findings(facts)
    findings += orphaned_findings(facts)
    gpu = gpu_install(facts)
    findings += driver_findings(facts, matrix, gpu)
    if gpu is not None:
        findings += matrix_agreement_findings(gpu, sonames=facts.platform.library_names_are_sonames)
        for provider in gpu.providers:
            if provider.provider == "cuda":
                findings += library_findings(facts, gpu, provider)
        findings += torch_findings(facts, gpu)
        findings += tensorrt_findings(facts, matrix, gpu, asked=with_tensorrt)
    findings += genai_findings(facts, matrix, gpu)
    findings += genai_directml_findings(facts, matrix, gpu)  # beside onnxruntime-directml (Windows)
    findings += soname_link_findings(facts)
    if facts.platform.library_names_are_sonames:  # the matrix lists cuDNN's sub-libraries by SONAME
        cuda = next((p for p in gpu.providers if p.provider == "cuda"), None) if gpu is not None else None
        findings += partial_cudnn_findings(facts, matrix, cuda)
    findings += unreadable_dir_findings(facts)
    findings += interrupted_findings(facts)
    if facts.windows is not None or facts.probe.windows is not None:  # what only Windows has (a Linux check's
        from ortfix.check.windows import windows_findings  # rules find nothing there: not imported)
        from ortfix.check.winstore import store_python_findings

        findings += windows_findings(facts, gpu)
        findings += store_python_findings(facts, findings)
    findings += project_findings(facts)
    findings.sort(key=first_screen_order)
    return findings


def first_screen_order(finding: Finding) -> tuple[int, bool, str]:
    """Errors first, and of those first the ones `ortfix plan` can fix (codes.py's PLAN_FIXES): the actual cause,
    which a plan changes, is read before what a plan cannot change (no driver on a build host); then the other
    errors, the warnings, the information. Text and JSON list the findings in this order."""
    return (finding.severity.rank, finding.code not in PLAN_FIXES, finding.code)


def gpu_install(facts: Facts) -> OrtInstall | None:
    """The ORT folder `import onnxruntime` picks (the first on sys.path), if its build is a GPU one: what check
    judges, plan keeps or replaces, and verify checks."""
    active = facts.active_ort
    if active is not None and any(p.provider == "cuda" for p in active.providers) and active.package != CPU_PACKAGE:
        return active
    return None
