"""The actions that make libraries findable: the preload hook (a venv: load them by absolute path when onnxruntime
is imported) or the conda activate.d/deactivate.d hooks (put their folders first on LD_LIBRARY_PATH), each a file
written with its content, digest and mode; libraries in load order (a library's dependencies first)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping

from ortfix.check.codes import FindingCode as Code
from ortfix.check.facts import Facts
from ortfix.plan.kinds import ActionKind
from ortfix.plan.model import Action, PlanOptions
from ortfix.system import hooks
from ortfix.system.inventory import parse_lib_name

# Load order for the preload hook: a library's dependencies first (cuBLAS needs cuBLASLt, cuDNN needs cuBLAS...).
_LOAD_ORDER = ("cudart", "nvJitLink", "nvrtc", "nvrtc-builtins", "cublasLt", "cublas", "cufft", "curand",
               "cusparse", "cusolver", "cudnn", "nvinfer", "nvinfer_plugin", "nvonnxparser")


def hook_kind(facts: Facts, options: PlanOptions) -> str:
    if options.hook != "auto":
        return options.hook
    return "conda" if facts.probe.env_kind == "conda" else "preload"


def _order(hook_libs: Mapping[str, str]) -> list[str]:
    def key(soname: str) -> tuple[int, str]:
        parsed = parse_lib_name(soname)
        family = parsed[0] if parsed else ""
        base = family.split("_")[0] if family.startswith("cudnn") else family
        rank = _LOAD_ORDER.index(base) if base in _LOAD_ORDER else len(_LOAD_ORDER)
        # libcudnn.so.N before its sub-libraries; sub-libraries in name order.
        return (rank * 2 + (1 if family != base else 0), soname)

    return [hook_libs[s] for s in sorted(hook_libs, key=key)]


def hook_actions(facts: Facts, kind: str, hook_libs: Mapping[str, str], codes: set[Code]) -> list[Action]:
    fixes = tuple(sorted(c for c in codes if c in (Code.LIB_NOT_ON_PATH, Code.LIB_SHADOWED, Code.LIB_MISSING,
                                                   Code.LIB_WRONG_MAJOR, Code.SONAME_LINK_MISSING,
                                                   Code.LIB_OTHER_CUDA)))
    if kind == "conda":
        dirs = list(dict.fromkeys(os.path.dirname(p) for p in _order(hook_libs)))
        activate, deactivate = hooks.conda_hook_paths(facts.probe.prefix)
        return [
            _write(str(activate), hooks.render_conda_activate(dirs, facts.probe.prefix),
                   f"conda activate.d hook: put {len(dirs)} folder(s) first on LD_LIBRARY_PATH", fixes,
                   facts.hook_files_present),
            _write(str(deactivate), hooks.render_conda_deactivate(facts.probe.prefix),
                   "conda deactivate.d hook: restore LD_LIBRARY_PATH exactly", fixes, facts.hook_files_present),
        ]
    site = facts.probe.purelib
    module, pth = hooks.preload_paths(site)
    libs = _order(hook_libs)
    return [
        _write(str(module), hooks.render_preload_module(libs, site),
               f"preload hook: load {len(libs)} librar{'y' if len(libs) == 1 else 'ies'} by absolute path when "
               "onnxruntime is imported", fixes, facts.hook_files_present),
        _write(str(pth), hooks.render_preload_pth(), "activate the preload hook at interpreter start-up", fixes,
               facts.hook_files_present),
    ]


def _write(path: str, content: str, summary: str, fixes: tuple[str, ...], present: tuple[str, ...]) -> Action:
    existed = path in present
    digest = hashlib.sha256(content.encode()).hexdigest()
    return Action(
        ActionKind.WRITE_FILE, f"{'replace' if existed else 'write'} {path}: {summary}",
        (f"{'~' if existed else '+'} {path} ({len(content.encode())} bytes)",),
        "the previous file is restored" if existed else "the file is deleted",
        fixes,
        {"path": path, "content": content, "sha256": digest, "mode": 0o644, "replaces_existing": existed})
