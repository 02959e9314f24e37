"""What every plan must be, whatever the release, the driver or the layout: coherent (the header's target is what
every action serves), of one CUDA major, and confined to the environment. Used by the real-wheel sweep
(test_releases.py) and by the pure-core tests over recorded facts (test_core_matrix.py)."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def _wheels_by_major() -> dict[int, set[str]]:
    """The NVIDIA distributions of each CUDA major, from the matrix data (compat/cuda.yaml)."""
    doc = yaml.safe_load((REPO / "compat" / "cuda.yaml").read_text(encoding="utf-8"))
    out: dict[int, set[str]] = {}
    for row in doc["cuda"]:
        out.setdefault(row["major"], set()).update(w["distribution"] for w in row["wheels"])
    for row in doc["cudnn"]:
        out.setdefault(row["cuda_major"], set()).add(row["distribution"])
    return out


WHEELS = _wheels_by_major()


def requirements(plan: dict[str, Any]) -> list[str]:
    return [r for a in plan["actions"] if a["kind"] == "pip-install" for r in a["details"]["requirements"]]


def hook_libraries(plan: dict[str, Any]) -> list[str]:
    for action in plan["actions"]:
        if action["kind"] == "write-file" and action["details"]["path"].endswith("_ortfix_preload.py"):
            for line in action["details"]["content"].splitlines():
                if line.startswith("LIBRARIES = "):
                    libraries: list[str] = ast.literal_eval(line.split("=", 1)[1].strip())
                    return libraries
    return []


def requirement_name(requirement: str) -> str:
    """The distribution a requirement names (`nvidia-cudnn-cu12~=9.0` -> nvidia-cudnn-cu12)."""
    for i, ch in enumerate(requirement):
        if ch in "=<>~!;[ ":
            return requirement[:i]
    return requirement


def assert_coherent(plan: dict[str, Any], installed: str | None, installed_major: int | None, prefix: str) -> None:
    """The header's target is what every action serves: a build swap is an uninstall plus `==version`; every NVIDIA
    wheel and every library the hook loads is of the target's CUDA major."""
    target = plan["target"]
    assert target is not None, plan["notes"]
    reqs = requirements(plan)
    pinned = [r for r in reqs if requirement_name(r) == "onnxruntime-gpu"]
    uninstalled = [a["details"]["distribution"] for a in plan["actions"] if a["kind"] == "pip-uninstall"]
    if pinned:
        assert pinned == [f"onnxruntime-gpu=={target['version']}"]
        if installed is not None:  # the installed GPU build goes first, or stays outside the environment, said so
            kept_outside = any(n.startswith("onnxruntime-gpu ") and "outside this environment" in n
                               for n in plan["notes"])
            assert "onnxruntime-gpu" in uninstalled or kept_outside, (uninstalled, plan["notes"])
    else:
        assert target["version"] == installed and target["cuda_major"] == installed_major, target
    major = target["cuda_major"]
    for req in reqs:
        if requirement_name(req) != "onnxruntime-gpu":
            assert requirement_name(req) in WHEELS[major], f"{req} is not a CUDA {major} wheel"
    for lib in hook_libraries(plan):
        assert ("nvidia/cu13/" in lib) == (major == 13) or lib.startswith("nvidia/cudnn/"), (major, lib)
    assert not [n for n in plan["notes"] if "no NVIDIA pip wheel is known" in n], plan["notes"]
    assert {f["code"] for f in plan["unresolved"]} <= {"DRV001"}, plan["unresolved"]
    assert_confined(plan, prefix)


def assert_confined(plan: dict[str, Any], prefix: str) -> None:
    """No change outside the environment: every uninstall, written file and link lies under its prefix."""
    root = os.path.realpath(prefix) + os.sep
    for action in plan["actions"]:
        details = action["details"]
        where = details.get("location") or details.get("path")
        if where is not None:
            assert (os.path.realpath(where) + os.sep).startswith(root), (action["kind"], where)
