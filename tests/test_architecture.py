"""The package's shape, checked: no import cycle (function-level imports included, so none hides one), nothing
below `cli/` imports click, no module imports a higher layer (the speed code sits with the commands, so no domain
module reaches it), and no module is over 400 lines without saying why in its docstring."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ortfix"
MAX_LINES = 400

# Low to high. A module may import from its own layer and the layers below it, never from a higher one.
LAYERS: dict[str, int] = {
    "errors": 0, "fields": 0, "safetext": 0, "strenum": 0, "versions": 0, "subproc": 0, "childtime": 0, "cachedir": 0,
    "outfile": 0,
    "i18n": 0, "record": 0,
    "target": 1, "compat": 1,
    "system": 2,
    "check": 3,
    "plan": 4, "explain": 4, "tune": 4,
    "transaction": 5, "verify": 5, "export": 5,
    "speed": 6, "commands": 6,
    "cli": 7, "__main__": 8,
}
# The host seam (system/host.py and each OS's host.py): what ortfix's own process does on the machine it runs on;
# subproc.py and cachedir.py ask it, so it sits at their layer (it imports only errors); with it, the cache folder's
# rule worked out with `os` alone (system/cachebase.py, standard library only), and paths as str answered as pathlib
# answers them (system/pathform.py, standard library only: a replayed `check` imports no pathlib).
HOST_SEAM = {"ortfix.system.host": 0, "ortfix.system.linux.host": 0, "ortfix.system.windows.host": 0,
             "ortfix.system.cachebase": 0, "ortfix.system.pathform": 0}
# Modules whose layer is not their package's: the finding codes are vocabulary (they import only strenum), which the
# compat layer's error-pattern schema names; whose environment a child may run (target/owner.py, errors only) is
# checked by subproc at the moment of every launch; the Windows display language (system/windows/uilang.py, standard
# library only) is what i18n, which every layer's text uses, reads when no variable names a language.
MODULE_LAYERS: dict[str, int] = {"ortfix.check.codes": 0, "ortfix.target.owner": 0, "ortfix.system.windows.uilang": 0,
                                 **HOST_SEAM}


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path) -> set[str]:
    """The ortfix modules `path` imports when it runs (anywhere in the file, TYPE_CHECKING blocks left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node)
            for n in ast.walk(node)}
    me = _name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("ortfix"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            if not base.startswith("ortfix"):
                continue
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {m for m in found if m in MODULES and m != me}


GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def _layer(module: str) -> int | None:
    if module in MODULE_LAYERS:
        return MODULE_LAYERS[module]
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in MODULES if m != "ortfix" and _layer(m) is None]
    assert not unplaced, f"give these a layer in LAYERS: {unplaced}"


def test_no_import_cycle() -> None:
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(GRAPH[node]):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep):], dep] if dep in stack else [node, dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert not cycles, " | ".join(" -> ".join(c) for c in cycles)


def test_no_upward_imports() -> None:
    upward = [f"{m} -> {d}" for m, deps in GRAPH.items() for d in deps
              if m != "ortfix" and d != "ortfix" and (_layer(d) or 0) > (_layer(m) or 0)]
    assert not upward, upward


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("ortfix.cli")))
def test_nothing_below_cli_imports_click(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "click" not in names


# The modules allowed over MAX_LINES, each with its reason: a module not here that grows past it fails, and so does an
# entry for a module that is no longer over it (drop the entry when a module is split).
LONG_MODULES = {
    "ortfix.target._probe": "sent to the target as the source of one `python -c`: one file, standard library only",
    "ortfix.target.probe": "the probe report's types (the Windows part's: system/windows), each parsed strictly here",
    "ortfix.cli.app": "mostly the commands' help texts; the command bodies are a few lines each",
    "ortfix.system.linux.confine": "PosixEnvRoot and the descriptor-level *at helpers it alone is built from",
    "ortfix.system.windows.confine": "the whole EnvRoot interface for Windows, one lifecycle",
    "ortfix.check.facts": "the facts' types, gathering them and the per-install analysis that reads them",
}


def test_long_modules_are_allowed_by_name() -> None:
    over = {name: path.read_text(encoding="utf-8").count("\n") for name, path in MODULES.items()}
    over = {name: lines for name, lines in over.items() if lines > MAX_LINES}
    unexplained = sorted(f"{name} ({lines} lines)" for name, lines in over.items() if name not in LONG_MODULES)
    assert not unexplained, f"split these, or add them to LONG_MODULES with the reason: {unexplained}"
    stale = sorted(set(LONG_MODULES) - set(over))
    assert not stale, f"no longer over {MAX_LINES} lines: drop them from LONG_MODULES: {stale}"
    assert all(reason.strip() for reason in LONG_MODULES.values())


MAX_FUNCTION_LINES = 80


def _sent_as_source(path: Path) -> bool:
    """The probe and the child scripts (target/_*.py, verify/_*.py): sent to another interpreter as the source of one
    `python -c`, so each stays one file that runs on its own."""
    return path.parent.name in ("target", "verify") and path.name.startswith("_") and path.name != "__init__.py"


def _long_functions(name: str, source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """The functions (methods and nested functions included) in `source` longer than `limit` lines, from `def` to
    the last line (decorators, such as click's option declarations, left out)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                found.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_80_lines() -> None:
    long = [found for name, path in sorted(MODULES.items()) if not _sent_as_source(path)
            for found in _long_functions(name, path.read_text(encoding="utf-8"))]
    assert not long, f"split these into named steps (at most {MAX_FUNCTION_LINES} lines each): {long}"


def test_the_function_length_rule_catches_a_long_function() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    assert _long_functions("m", f"def f() -> None:\n{body}") == [f"m:1 f ({MAX_FUNCTION_LINES + 1} lines)"]
    assert _long_functions("m", f"def f() -> None:\n{body[body.index(chr(10)) + 1:]}") == []
    nested = "class C:\n    def g(self) -> None:\n" + "".join(f"        y{i} = {i}\n"
                                                          for i in range(MAX_FUNCTION_LINES))
    assert _long_functions("m", nested) == [f"m:2 g ({MAX_FUNCTION_LINES + 1} lines)"]
    assert _sent_as_source(PACKAGE / "target" / "_probe.py")
    assert not _sent_as_source(PACKAGE / "plan" / "make.py")
# Issue 22: the OS is asked of the platform on the facts (`facts.platform`, system/platform.py), not forked on by hand.
# The host's OS is asked of system/host.py (HOST), the target's of `facts.platform`. The OS branches left outside
# system/, per file, and why each is still there. A new one fails here: ask the platform or the host (add a member to
# its Protocol) instead, or add it to this list with its reason.
OS_BRANCH = re.compile(r'"Windows"|is_windows\b|targets_windows|sys\.platform|os\.name *[!=]=')
OS_BRANCHES_ALLOWED = {
    "target/_probe.py": (5, "runs inside the target interpreter, standard library only: cannot import system/"),
    "transaction/ownfiles.py": (1, "the rule's copy generated into the exported steps program, which runs on its own"),
    # the target, asked through facts.platform.is_windows: verify's fresh-process check is verify-layer code per OS
    "verify/levels.py": (2, "the Windows loader level runs winloadcheck; its child gets the user's PATH"),
    "verify/genaicheck.py": (1, "genai's own DLL is loaded by winloadcheck on a Windows target, its .so on Linux"),
}


def test_os_branches_outside_system_are_only_the_allowed_ones() -> None:
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("system/"):
            continue
        hits = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if OS_BRANCH.search(line))
        if hits:
            found[rel] = hits
    assert found == {rel: count for rel, (count, _why) in OS_BRANCHES_ALLOWED.items()}
