"""Plans for another machine: a CPU build host (a Docker build, a golden image) prepares an environment for a GPU
machine it is not. `plan --driver V -o plan.json` then `apply plan.json`, or `apply --driver V` directly, on this
machine without an NVIDIA driver: everything that can be verified without a driver is (the libraries load in a
fresh process, check is clean), one line says the GPU part was not (`ortfix verify` on the GPU machine does that),
and the exit status is 0. A saved plan applied with a --driver that contradicts it is refused in one line.

Real venvs with their own pip, real wheels from a wheelhouse configured as a user configures an offline
wheelhouse, the real `ortfix` in a subprocess; the last test does the same with the real onnxruntime and NVIDIA
wheels from the configured index (marked realwheels).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from txtools import (
    assert_same_tree,
    fresh_process,
    load_code,
    one_line_error,
    ortfix,
    ortfix_json,
    real_cpu_venv,
    tree_state,
)

pytestmark = pytest.mark.slow  # every test here builds a venv, runs pip or starts wine

DRIVER = "550.54.14"  # R550: CUDA 12.4, so CUDA toolkit wheels are capped below 12.5
OTHER_DRIVER = "535.104.12"
NOT_VERIFIED = "GPU part not verified: no NVIDIA driver on this machine (the plan assumes driver 550.54.14)"


@pytest.fixture()
def env(tmp_path: Path, wheelhouse: Path) -> dict[str, str]:
    """How a user with an offline wheelhouse configures pip; no activated environment."""
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nno-index = true\nfind-links = {wheelhouse}\n")
    isolated = tmp_path / "no-pip-config"
    isolated.mkdir()
    out = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "ORTFIX_TEST_")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    out.update(PIP_CONFIG_FILE=str(conf), XDG_CONFIG_HOME=str(isolated), XDG_CONFIG_DIRS=str(isolated))
    return out


@pytest.fixture(scope="module", autouse=True)
def _driverless() -> None:
    """These tests are about a machine without an NVIDIA driver (this one): elsewhere they do not apply."""
    probe = ortfix("check", "--python", sys.executable, "--json", "--fresh", env=dict(os.environ))
    if json.loads(probe.stdout)["facts"]["driver"]["present"]:
        pytest.skip("this machine has an NVIDIA driver")


def capped(doc: dict[str, object]) -> bool:
    """The plan caps a CUDA toolkit wheel at what R550 runs (CUDA 12.4; a plan without a driver caps none): it was
    planned for that driver."""
    plan = doc.get("plan", doc)
    assert isinstance(plan, dict)
    reqs = [r for a in plan["actions"] if a["kind"] == "pip-install" for r in a["details"]["requirements"]]
    return any(r.startswith("nvidia-") and r.endswith(",<12.5") for r in reqs)


def test_a_plan_made_for_a_gpu_machine_is_applied_here_and_rolled_back(cpu_venv: Path, env: dict[str, str],
                                                                       tmp_path: Path) -> None:
    python = cpu_venv / "bin" / "python"
    before = tree_state(cpu_venv)
    plan_file = tmp_path / "plan.json"
    planned = ortfix("plan", "--python", str(cpu_venv), "--driver", DRIVER, "-o", str(plan_file), env=env)
    assert planned.returncode == 1, planned.stderr  # changes pending
    assert f"for a machine with NVIDIA driver {DRIVER}" in planned.stdout
    assert capped(json.loads(plan_file.read_text()))

    # same host, nothing changed: the plan is what ortfix plans here for that driver, so it is applied
    proc = ortfix("apply", str(plan_file), "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "Applied transaction" in proc.stdout
    assert proc.stdout.splitlines()[0].startswith(f"target {python} ")
    lines = [ln for ln in proc.stdout.splitlines() if "GPU part not verified" in ln]
    assert len(lines) == 1 and lines[0].startswith(NOT_VERIFIED), lines
    assert "`ortfix verify` on the GPU machine" in lines[0]
    assert "Still needs you" not in proc.stdout  # the driver is not this machine's problem: it is the GPU host's
    # what could be verified here was: the libraries load in a fresh process, as the user starts it
    assert "all loaded" in fresh_process(python, load_code()).stdout

    history = ortfix_json("history", "--python", str(cpu_venv), env=env)
    [tx] = history["transactions"]
    assert tx["status"] == "applied"
    ortfix_json("rollback", "--python", str(cpu_venv), "--yes", env=env)
    assert_same_tree(before, tree_state(cpu_venv))


def test_apply_with_driver_plans_for_it(cpu_venv: Path, env: dict[str, str]) -> None:
    before = tree_state(cpu_venv)
    doc = ortfix_json("apply", "--python", str(cpu_venv), "--driver", DRIVER, "--compute-capability", "8.6",
                      "--yes", env=env)
    assert doc["exit_code"] == 0 and doc["status"] == "applied", doc.get("verification")
    assert doc["plan"]["options"]["driver_version"] == DRIVER
    assert doc["plan"]["options"]["compute_capability"] == "8.6"
    assert capped(doc)
    assert doc["verification"]["ok"] is True
    assert doc["verification"]["gpu_not_verified"].startswith(NOT_VERIFIED)
    ortfix_json("rollback", "--python", str(cpu_venv), "--yes", env=env)
    assert_same_tree(before, tree_state(cpu_venv))


def test_without_driver_apply_keeps_its_behaviour(cpu_venv: Path, env: dict[str, str]) -> None:
    """No --driver on a machine without one: the plan is for this machine, whose missing driver is a problem
    ortfix cannot fix. The changes are applied and verified as far as they can be (exit 0), and the missing driver is
    what still needs the user."""
    proc = ortfix("apply", "--python", str(cpu_venv), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "Still needs you: DRV001" in proc.stdout
    assert "GPU part not verified" not in proc.stdout
    ortfix_json("rollback", "--python", str(cpu_venv), "--yes", env=env)


def test_a_contradicting_driver_is_refused(cpu_venv: Path, env: dict[str, str], tmp_path: Path) -> None:
    before = tree_state(cpu_venv)
    with_driver = tmp_path / "for-550.json"
    without = tmp_path / "for-here.json"
    ortfix("plan", "--python", str(cpu_venv), "--driver", DRIVER, "-o", str(with_driver), env=env)
    ortfix("plan", "--python", str(cpu_venv), "-o", str(without), env=env)

    line = one_line_error(ortfix("apply", str(with_driver), "--python", str(cpu_venv), "--driver", OTHER_DRIVER,
                                 "--yes", env=env), f"planned for NVIDIA driver {DRIVER}", f"--driver {OTHER_DRIVER}")
    assert "leave --driver out" in line
    one_line_error(ortfix("apply", str(without), "--python", str(cpu_venv), "--driver", DRIVER, "--yes", env=env),
                   "planned without --driver", f"--driver {DRIVER}")
    one_line_error(ortfix("apply", str(with_driver), "--python", str(cpu_venv), "--compute-capability", "8.6",
                          "--yes", env=env), "planned without --compute-capability")
    assert_same_tree(before, tree_state(cpu_venv))
    # the driver it was planned for may be repeated
    same = ortfix("apply", str(with_driver), "--python", str(cpu_venv), "--driver", DRIVER, "--dry-run", env=env)
    assert same.returncode == 1 and "Dry run: nothing was changed" in same.stdout, same.stderr
    assert_same_tree(before, tree_state(cpu_venv))


@pytest.mark.parametrize(("options", "fragment"), [
    (["--driver", "banana"], "--driver 'banana': not an NVIDIA driver version"),
    (["--driver", "550"], "--driver '550'"),
    (["--compute-capability", "8"], "--compute-capability '8'"),
])
def test_apply_judges_machine_options_as_plan_does(tmp_path: Path, env: dict[str, str], options: list[str],
                                                   fragment: str) -> None:
    """Judged before the target is looked at: an empty venv will do."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    for command in (["plan"], ["apply", "--yes"]):
        one_line_error(ortfix(*command, "--python", str(tmp_path / "v"), *options, env=env), fragment)


def test_a_plan_made_with_python3_is_applied_with_the_folder(cpu_venv: Path, env: dict[str, str],
                                                             tmp_path: Path) -> None:
    """`python3` and `python` of one venv are one interpreter: a plan made through either (the python3 on PATH,
    --python ENV/bin/python3) is the plan `--python ENV` or an activated ENV makes, and is applied there."""
    plan_file = tmp_path / "plan.json"
    ortfix("plan", "--python", str(cpu_venv / "bin" / "python3"), "--driver", DRIVER, "-o", str(plan_file), env=env)
    assert json.loads(plan_file.read_text())["python"] == str(cpu_venv / "bin" / "python")
    for how in (["--python", str(cpu_venv)], []):
        extra = {} if how else {"VIRTUAL_ENV": str(cpu_venv)}
        proc = ortfix("apply", str(plan_file), *how, "--dry-run", env={**env, **extra})
        assert proc.returncode == 1 and "Dry run: nothing was changed" in proc.stdout, proc.stderr


@pytest.mark.realwheels
def test_real_wheels_plan_for_a_gpu_machine_applied_here(tmp_path: Path) -> None:
    """The same with the real CPU onnxruntime and the real onnxruntime-gpu and NVIDIA wheels (about 2 GB) from this
    machine's own pip configuration."""
    venv = tmp_path / "real venv"
    python = real_cpu_venv(venv)
    real_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    before = tree_state(venv)
    plan_file = tmp_path / "plan.json"
    assert ortfix("plan", "--python", str(venv), "--driver", DRIVER, "-o", str(plan_file), env=real_env
                  ).returncode == 1
    proc = ortfix("apply", str(plan_file), "--python", str(venv), "--yes", env=real_env, timeout=1200)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert sum(NOT_VERIFIED in ln for ln in proc.stdout.splitlines()) == 1, proc.stdout[-3000:]
    assert "all loaded" in fresh_process(python, load_code()).stdout
    ortfix_json("rollback", "--python", str(venv), "--yes", env=real_env)
    assert_same_tree(before, tree_state(venv))
