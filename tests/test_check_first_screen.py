"""The first screen of `ortfix check` (issue 27, item 6): the finding a plan fixes is read first, and the library
tables show only the libraries that are a problem unless --verbose. Real venvs with hermetic wheels, the real
`ortfix` command, and the real loader as the judge of which libraries load."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from checktools import nvidia_lib_path, plan_json, site_packages
from clitools import run_ortfix
from ortfix.check.codes import FindingCode, Severity
from ortfix.check.diagnose import first_screen_order
from ortfix.check.findings import Finding
from support.fixtures import build_stub_lib, ld_so_list, make_venv, pip_install

# what onnxruntime-gpu 1.22.0's CUDA provider NEEDs (tests/support/fixtures.py builds it so)
NEEDED = {"libcublasLt.so.12", "libcublas.so.12", "libcurand.so.10", "libcufft.so.11", "libcudart.so.12",
          "libcudnn.so.9", "libnvrtc.so.12"}
_FINDING = re.compile(r"^[✗!i] ([A-Z]+[0-9]{3}) (error|warning|info): ")
_ROW = re.compile(r"^  (lib\S+)\s+(NOT FOUND|/\S+)")


@pytest.fixture(scope="module")
def half(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> tuple[Path, dict[str, str]]:
    """onnxruntime-gpu 1.22.0 with its [cuda] extra only (no cuDNN, and no cuBLAS, which comes with cuDNN's wheel),
    the installed NVIDIA libraries on LD_LIBRARY_PATH: half of what the provider needs loads, half is missing."""
    venv = tmp_path_factory.mktemp("half") / "venv"
    python = make_venv(venv)
    pip_install(python, "onnxruntime-gpu[cuda]==1.22.0", find_links=wheelhouse)
    return python, {"LD_LIBRARY_PATH": nvidia_lib_path(venv), "ORTFIX_NO_CACHE": "1"}


def _check_text(python: Path, *extra: str, env: dict[str, str]) -> list[str]:
    proc = run_ortfix("check", "--python", str(python), *extra, env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, (proc.stdout, proc.stderr)
    return proc.stdout.splitlines()


def _findings(lines: list[str]) -> list[tuple[str, str]]:
    """(code, severity) of each finding, in the order printed."""
    return [(m[1], m[2]) for m in map(_FINDING.match, lines) if m]


def _table(lines: list[str]) -> list[str]:
    """The lines of the CUDA provider's table, after its header, up to the blank line that ends it."""
    start = lines.index("libonnxruntime_providers_cuda.so needs:") + 1
    return lines[start:lines.index("", start)]


def _rows(lines: list[str]) -> dict[str, str]:
    """library → where the table says it loads from (or NOT FOUND)."""
    return {m[1]: m[2] for m in map(_ROW.match, _table(lines)) if m}


def _provider(python: Path) -> Path:
    return site_packages(python.parent.parent) / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so"


@pytest.mark.slow
@pytest.mark.parametrize("machine", [(), ("--driver", "535.104.12")], ids=["this-machine", "driver-given"])
def test_the_first_finding_is_the_one_the_plan_fixes(half: tuple[Path, dict[str, str]],
                                                     machine: tuple[str, ...]) -> None:
    python, env = half
    lines = _check_text(python, *machine, env=env)
    printed = _findings(lines)
    _rc, plan = plan_json(python, *machine, env=env)
    fixed = {code for a in plan["actions"] for code in a["fixes"]}
    assert printed and printed[0][0] in fixed, (printed, fixed)  # LIB001 here, not the machine's DRV001
    # all the errors the plan fixes, then the other errors, then warnings, then information
    rank = [({"error": 0, "warning": 1, "info": 2}[severity], severity == "error" and code not in fixed)
            for code, severity in printed]
    assert rank == sorted(rank), printed
    if machine:  # planning for another machine: no "no driver" at all
        assert "DRV001" not in {code for code, _ in printed}
    # --json lists them in the same order
    doc = json.loads(run_ortfix("check", "--python", str(python), "--json", *machine, env=env).stdout)
    assert [(f["code"], f["severity"]) for f in doc["findings"]] == printed


def test_fixable_errors_come_before_others_whatever_their_code() -> None:
    """DRV003 (a reboot, which no plan does) sorts before LIB002 by code, and is listed after it; warnings stay after
    every error, information last."""
    def make(code: FindingCode, severity: Severity) -> Finding:
        return Finding(code, severity, "s", (), "f")

    findings = [make(FindingCode.REBOOT_NEEDED, Severity.ERROR), make(FindingCode.UNKNOWN_VERSION, Severity.INFO),
                make(FindingCode.LIB_SHADOWED, Severity.WARNING), make(FindingCode.LIB_NOT_ON_PATH, Severity.ERROR),
                make(FindingCode.NO_DRIVER, Severity.ERROR)]
    ordered = [f.code for f in sorted(findings, key=first_screen_order)]
    assert ordered == ["LIB002", "DRV001", "DRV003", "LIB004", "MTX001"]


@pytest.mark.slow
def test_default_shows_only_the_libraries_that_are_a_problem(half: tuple[Path, dict[str, str]]) -> None:
    python, env = half
    real = ld_so_list(_provider(python), {"LD_LIBRARY_PATH": env["LD_LIBRARY_PATH"]})  # the real loader's answer
    loads = {name for name in NEEDED if real[name]}
    missing = NEEDED - loads
    assert loads and missing, real  # the scenario: half loads, half does not

    default = _check_text(python, env=env)
    rows = _rows(default)
    assert set(rows) == missing and set(rows.values()) == {"NOT FOUND"}, _table(default)
    assert _table(default)[-1] == f"  {len(loads)} more found by the loader; --verbose lists every library"

    for flag in ("--verbose", "-v"):
        verbose = _check_text(python, flag, env=env)
        rows = _rows(verbose)
        assert set(rows) >= NEEDED, _table(verbose)
        assert {name: rows[name] for name in NEEDED} == {name: real[name] or "NOT FOUND" for name in NEEDED}
        assert not any("more found by the loader" in line for line in verbose)
        # the rest of the report is the same
        assert [ln for ln in verbose if not ln.startswith("  ")] == [ln for ln in default if not ln.startswith("  ")]


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> tuple[Path, list[str]]:
    """onnxruntime-gpu 1.22.0 with [cuda,cudnn]: the installed NVIDIA library folders are everything it needs."""
    venv = tmp_path_factory.mktemp("full") / "venv"
    python = make_venv(venv)
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    return python, nvidia_lib_path(venv).split(":")


@pytest.mark.slow
def test_a_healthy_table_is_one_line(full: tuple[Path, list[str]]) -> None:
    """Everything the provider needs loads: the table is its header and one line counting them."""
    python, folders = full
    env = {"LD_LIBRARY_PATH": ":".join(folders), "ORTFIX_NO_CACHE": "1"}
    verbose = _rows(_check_text(python, "--verbose", env=env))
    assert set(verbose) >= NEEDED and "NOT FOUND" not in verbose.values(), verbose
    assert _table(_check_text(python, env=env)) == [
        f"  all {len(verbose)} found by the loader; --verbose lists every library"]


@pytest.mark.slow
def test_a_shadowed_library_keeps_its_row(full: tuple[Path, list[str]], tmp_path: Path) -> None:
    """A copy outside the environment found before the environment's own (LIB004) loads, and is a problem: its row
    stays, with the outside path, and only the rows that load as they should are counted away."""
    python, folders = full
    outside = tmp_path / "usr-local-cuda" / "lib64"
    build_stub_lib(outside / "libcudnn.so.9.0.0", soname="libcudnn.so.9")
    os.symlink("libcudnn.so.9.0.0", outside / "libcudnn.so.9")
    env = {"LD_LIBRARY_PATH": ":".join([str(outside), *folders]), "ORTFIX_NO_CACHE": "1"}
    lines = _check_text(python, env=env)
    assert _rows(lines) == {"libcudnn.so.9": str(outside / "libcudnn.so.9")}, _table(lines)
    shown = len(_rows(_check_text(python, "--verbose", env=env)))
    assert _table(lines)[-1] == f"  {shown - 1} more found by the loader; --verbose lists every library"
    assert any(line.startswith("! LIB004 warning: libcudnn.so.9 loads from") for line in lines)


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info < (3, 11), reason="the check cache records on Python >= 3.11")
def test_a_replayed_check_keeps_to_its_own_verbosity(half: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """`check` and `check --verbose` are two answers: neither is replayed for the other."""
    from ortfix.speed.replay import RACY_MARGIN_NS

    python, env = half
    env = {"LD_LIBRARY_PATH": env["LD_LIBRARY_PATH"], "ORTFIX_CACHE_DIR": str(tmp_path / "cache")}
    time.sleep(RACY_MARGIN_NS / 1e9 + 0.2)  # results that depend on files changed within the margin are not kept
    default = _check_text(python, env=env)
    assert len(list((tmp_path / "cache" / "checks").glob("*.json"))) == 1  # kept, for a replay
    verbose = _check_text(python, "--verbose", env=env)
    assert set(_rows(verbose)) >= NEEDED and not set(_rows(default)) >= NEEDED
    assert _check_text(python, env=env) == default and _check_text(python, "-v", env=env) == verbose
