"""The library folders a plan's hook makes findable, read back from the hook files the plan writes (ortfix's own
rendering) with system/linux/hooks.py's own readers: the preload module's `LIBRARIES` (relative to its site-packages) or
the conda activate.d hook's `# ortfix-dir:` lines. A Dockerfile puts them on LD_LIBRARY_PATH instead."""

from __future__ import annotations

import os

from ortfix.plan.kinds import ActionKind
from ortfix.plan.model import Plan
from ortfix.system.linux.hooks import CONDA_HOOK_NAME, PRELOAD_MODULE, conda_hook_dirs, preload_libraries


def library_folders(plan: Plan) -> list[str]:
    """The folders, in load order, each once; [] when the plan writes no Linux hook."""
    folders: list[str] = []
    for action in plan.actions:
        if action.kind != ActionKind.WRITE_FILE:
            continue
        path, content = str(action.details["path"]), str(action.details["content"])
        if os.path.basename(path) == PRELOAD_MODULE:
            folders += [os.path.dirname(lib) for lib in preload_libraries(content, os.path.dirname(path)) or []]
        elif path.endswith(f"activate.d/{CONDA_HOOK_NAME}"):
            folders += conda_hook_dirs(content)
    return list(dict.fromkeys(folders))
