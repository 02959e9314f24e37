"""The library folders a plan's hook makes findable, read back from the hook files the plan writes (ortfix's own
rendering, system/hooks.py): the preload module's `LIBRARIES` (relative to its site-packages) or the conda
activate.d hook's `# ortfix-dir:` lines. A Dockerfile puts them on LD_LIBRARY_PATH instead."""

from __future__ import annotations

import ast
import os
import re

from ortfix.plan.kinds import ActionKind
from ortfix.plan.model import Plan
from ortfix.system.hooks import CONDA_HOOK_NAME, PRELOAD_MODULE


def library_folders(plan: Plan) -> list[str]:
    """The folders, in load order, each once; [] when the plan writes no Linux hook."""
    folders: list[str] = []
    for action in plan.actions:
        if action.kind != ActionKind.WRITE_FILE:
            continue
        path, content = str(action.details["path"]), str(action.details["content"])
        if os.path.basename(path) == PRELOAD_MODULE:
            m = re.search(r"^LIBRARIES = (\[.*\])$", content, re.M)
            entries = ast.literal_eval(m.group(1)) if m else []
            site = os.path.dirname(path)
            folders += [os.path.dirname(os.path.normpath(os.path.join(site, e))) for e in entries
                        if isinstance(e, str)]
        elif path.endswith(f"activate.d/{CONDA_HOOK_NAME}"):
            folders += re.findall(r"^# ortfix-dir: (.*)$", content, re.M)
    return list(dict.fromkeys(folders))
