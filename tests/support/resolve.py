"""What real pip resolves requirements to on the configured index (`install --dry-run --no-deps --only-binary=:all:`),
asked once per test process. With `--no-deps` each requirement resolves on its own, so one pip run answers every
requirement of distinct projects at once, and a requirement already answered is not asked again.

The dry runs use a pip of its own (RESOLVER_PIP, in a venv made once in the tests' cache) with
`--use-feature=fast-deps`: it reads each picked wheel's METADATA with HTTP range requests. The pip of the venv running
the tests (Python 3.11's bundled 23.2) downloads every wheel it picks whole where the index serves no metadata files
(PEP 658): the NVIDIA wheels are GBs, and one test run fetched each of them several times over just to resolve. Where
that pip cannot be installed, the running interpreter's pip resolves as before.

The answers live only as long as the process: a new test run asks the index again."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Iterable

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from support.slowguard import refuse_slow

RESOLVER_PIP = "pip>=26.3"  # fast-deps reads metadata by range requests in `install --dry-run` (measured: 26.3)
_DRY_RUN = ("--disable-pip-version-check", "install", "--dry-run", "--ignore-installed", "--no-deps",
            "--only-binary=:all:", "--quiet")

_VERSIONS: dict[str, str | None] = {}  # requirement -> the version pip picked, None where its marker excludes it


def _name(requirement: str) -> str:
    return canonicalize_name(Requirement(requirement).name)


@functools.cache
def _resolver() -> tuple[str, ...]:
    """The command that starts the dry run's pip, with its options: RESOLVER_PIP's with fast-deps, from a venv made
    once per machine in the tests' cache (ortvenvs.cached_venv), else this interpreter's pip."""
    from ortvenvs import cached_venv

    try:
        venv = cached_venv("resolver-pip", RESOLVER_PIP, with_pip=True)
    except subprocess.CalledProcessError:  # no index, or no such pip on it
        return (sys.executable, "-m", "pip")
    return (str(venv / "bin" / "python"), "-m", "pip", "--use-feature=fast-deps")


def dry_run(requirements: Iterable[str], *, report: bool) -> subprocess.CompletedProcess[str]:
    """`pip install --dry-run --ignore-installed --no-deps --only-binary=:all: --quiet REQUIREMENTS` on this machine's
    pip configuration, with the resolver's pip; with `report`, pip's JSON report on stdout."""
    wanted = list(requirements)
    refuse_slow(f"pip ({' '.join(wanted)})")
    argv = [*_resolver(), *_DRY_RUN, *(["--report", "-"] if report else []), *wanted]
    return subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)


def _ask(batch: list[str]) -> dict[str, str | None]:
    """One pip run for requirements of distinct projects; a failure names the requirement pip could not resolve."""
    proc = dry_run(batch, report=True)
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
