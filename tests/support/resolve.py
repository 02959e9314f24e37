"""What real pip resolves requirements to on the configured index (`install --dry-run --no-deps --only-binary=:all:`),
asked once per test process. With `--no-deps` each requirement resolves on its own, so one pip run answers every
requirement of distinct projects at once, and a requirement already answered is not asked again: each dry run
downloads every wheel it picks whole (the index serves no PEP 658 metadata), and the NVIDIA wheels are GBs.

The answers live only as long as the process: a new test run asks the index again."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from support.slowguard import refuse_slow

_PIP = ("-m", "pip", "--disable-pip-version-check", "install", "--dry-run", "--ignore-installed", "--no-deps",
        "--only-binary=:all:", "--quiet", "--report", "-")

_VERSIONS: dict[str, str | None] = {}  # requirement -> the version pip picked, None where its marker excludes it


def _name(requirement: str) -> str:
    return canonicalize_name(Requirement(requirement).name)


def _ask(batch: list[str]) -> dict[str, str | None]:
    """One pip run for requirements of distinct projects; a failure names the requirement pip could not resolve."""
    proc = subprocess.run([sys.executable, *_PIP, *batch], capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0 and len(batch) > 1:
        answers: dict[str, str | None] = {}
        for requirement in batch:  # which one: each alone, for the message
            answers.update(_ask([requirement]))
        return answers
    assert proc.returncode == 0, f"{batch}: pip could not resolve it\n{proc.stderr}"
    picked: dict[str, list[str]] = {}
    for item in json.loads(proc.stdout)["install"]:
        picked.setdefault(canonicalize_name(item["metadata"]["name"]), []).append(item["metadata"]["version"])
    answers = {}
    for requirement in batch:
        versions = picked.get(_name(requirement), [])
        assert len(versions) <= 1, (requirement, versions)
        answers[requirement] = versions[0] if versions else None
    return answers


def resolved(requirements: Iterable[str]) -> dict[str, str | None]:
    """Each requirement -> the version pip resolves it to (None where its environment marker leaves it out), from as
    few pip runs as the distinct project names allow; AssertionError naming a requirement pip cannot resolve."""
    wanted = list(dict.fromkeys(requirements))
    todo = [r for r in wanted if r not in _VERSIONS]
    if todo:
        refuse_slow(f"pip ({' '.join(todo)})")
    while todo:
        batch: list[str] = []
        later: list[str] = []
        names: set[str] = set()
        for requirement in todo:
            (later if _name(requirement) in names else batch).append(requirement)
            names.add(_name(requirement))
        _VERSIONS.update(_ask(batch))
        todo = later
    return {r: _VERSIONS[r] for r in wanted}
