"""The Ansible collection (`ansible/ansible_collections/ortfix/fleet`) driven by real ansible-core: an inventory of
four real broken venvs on this machine (`ansible_connection=local`, one host per venv, forks 4), each host's ortfix
being this checkout's (`<test python> -m ortfix`), pip configured the way an offline user configures it (a
PIP_CONFIG_FILE with no-index and the stub wheelhouse, passed with the play's `environment`).

The hosts: `cpu-a` and `cpu-b` have the CPU package (apply swaps it for the GPU build), `gpu` has the GPU build whose
NVIDIA libraries are not findable (apply adds the preload hook), and `failing` has the CPU package but is fixed with
`hook: none`, so the swap installs fine and ortfix's verification really fails (nothing makes the libraries findable):
ortfix rolls it back and the task fails with ortfix's one line while the other hosts go on.

The tests share one fleet and run in file order: report → fix --check --diff → fix, fix again → rollback --check,
rollback, rollback again. ansible-core is installed with this machine's pip configuration into a tools venv cached
under the test cache folder; without an index the tests skip with one line. Task results are read from the JSON file
the playbooks write on the controller (`-e ortfix_results=FILE`), and the counts from PLAY RECAP.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from checktools import site_packages
from clitools import REPO
from support.fixtures import pip_install
from support.testcache import cache_root
from txtools import assert_same_tree, fresh_process, load_code, tree_state

COLLECTIONS = REPO / "ansible"
COLLECTION = COLLECTIONS / "ansible_collections" / "ortfix" / "fleet"
PLAYBOOKS = COLLECTION / "playbooks"
MODULE = COLLECTION / "plugins" / "modules" / "ortfix.py"
TOOLS = "ansible-tools-1"
FIXED_HOSTS = ("cpu-a", "cpu-b", "gpu")
HOSTS = (*FIXED_HOSTS, "failing")
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)



@pytest.fixture(scope="module")
def ansible_python() -> Path:
    """The python of a venv with ansible-core, made once per machine with this machine's pip configuration."""
    root = cache_root() / TOOLS
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{TOOLS}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "complete"
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True)
            proc = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q",
                                   "--disable-pip-version-check", "ansible-core>=2.15"],
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                pytest.skip(f"ansible-core cannot be installed with this machine's pip configuration: {last}")
            done.write_text("ok\n")
    return root / "bin" / "python"


@dataclass
class Fleet:
    root: Path
    tools: Path
    inventory: Path
    env: dict[str, str]
    venvs: dict[str, Path]
    cpu_template: Path  # a venv with the CPU package, copied for each host
    before: dict[str, dict[str, tuple[Any, ...]]] = field(default_factory=dict)
    after_fix: dict[str, dict[str, tuple[Any, ...]]] = field(default_factory=dict)
    runs: int = 0

    def trees(self) -> dict[str, dict[str, tuple[Any, ...]]]:
        return {host: tree_state(venv) for host, venv in self.venvs.items()}


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str
    recap: dict[str, dict[str, int]]
    results: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, ansible_python: Path, venv_template: Path,
          cpu_template: Path) -> Iterator[Fleet]:
    """The hosts' venvs are copies of the session's templates (tests/conftest.py): a venv with its own pip, and one
    with the CPU package from `wheelhouse` too; the GPU host's set is installed into its copy."""
    root = tmp_path_factory.mktemp("fleet")
    template = venv_template
    venvs = {}
    for host in ("cpu-a", "cpu-b", "failing"):
        venvs[host] = root / "hosts" / host
        shutil.copytree(cpu_template, venvs[host], symlinks=True)
    venvs["gpu"] = root / "hosts" / "gpu"
    shutil.copytree(template, venvs["gpu"], symlinks=True)
    pip_install(venvs["gpu"] / "bin" / "python", "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)

    conf = root / "pip.conf"  # how a user with an offline wheelhouse configures pip
    conf.write_text(f"[global]\nno-index = true\nfind-links = {wheelhouse}\n")
    hosts: dict[str, dict[str, Any]] = {
        host: {"ortfix_python": str(venv / "bin" / "python"),
               "ortfix_environment": {"PIP_CONFIG_FILE": str(conf)}} for host, venv in venvs.items()}
    hosts["failing"]["ortfix_hook"] = "none"
    inventory = root / "inventory.yml"
    inventory.write_text(json.dumps({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": str(ansible_python),
                 "ortfix_command": [sys.executable, "-m", "ortfix"]},
        "hosts": hosts}}, indent=2))

    isolated = root / "no-config"
    isolated.mkdir()
    (root / "ansible.cfg").write_text("[defaults]\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "ORTFIX_TEST_", "ANSIBLE_")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(XDG_CONFIG_HOME=str(isolated), XDG_CONFIG_DIRS=str(isolated),  # none of this machine's pip files
               ANSIBLE_CONFIG=str(root / "ansible.cfg"), ANSIBLE_HOME=str(root / "ansible-home"),
               ANSIBLE_LOCAL_TEMP=str(root / "ansible-tmp"), ANSIBLE_REMOTE_TEMP=str(root / "ansible-tmp"),
               ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_FORKS="4", ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_DEPRECATION_WARNINGS="0")
    f = Fleet(root, ansible_python.parent, inventory, env, venvs, cpu_template)
    f.before = f.trees()
    yield f


def playbook(fleet: Fleet, name: str, *args: str) -> Run:
    fleet.runs += 1
    results = fleet.root / f"results-{fleet.runs}.json"
    proc = subprocess.run([str(fleet.tools / "ansible-playbook"), "-i", str(fleet.inventory), str(PLAYBOOKS / name),
                           "-e", f"ortfix_results={results}", *args],
                          capture_output=True, text=True, env=fleet.env, cwd=fleet.root, timeout=300, check=False)
    recap = {m[0]: {"ok": int(m[1]), "changed": int(m[2]), "unreachable": int(m[3]), "failed": int(m[4])}
             for m in RECAP.findall(proc.stdout)}
    assert set(recap) == set(HOSTS), (proc.stdout[-4000:], proc.stderr[-3000:])
    found = json.loads(results.read_text()) if results.exists() else {}
    return Run(proc.returncode, proc.stdout + proc.stderr, recap, found)


def _changed(run: Run) -> dict[str, int]:
    return {host: counts["changed"] for host, counts in run.recap.items()}


# ---------------------------------------------------------------------------------------------------------------------
# the fleet report: `ortfix check` gathered by Ansible
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_report_gathers_findings_as_data(fleet: Fleet) -> None:
    report = fleet.root / "report.md"
    run = playbook(fleet, "report.yml", "-e", f"report={report}")
    assert run.returncode == 0, run.output[-4000:]
    assert all(c["failed"] == 0 for c in run.recap.values()), run.recap
    # `checked` changes nothing: the only changes are the two report files, written once on the controller
    assert sum(c["changed"] for c in run.recap.values()) == 2, run.recap
    data = json.loads((fleet.root / "report.json").read_text())
    assert set(data) == set(HOSTS)
    for host, venv in fleet.venvs.items():
        result = data[host]
        assert result["interpreter"]["python"] == str(venv / "bin" / "python")
        codes = {f["code"] for f in result["findings"]}
        assert all(isinstance(f["summary"], str) and f["severity"] in ("error", "warning", "info")
                   for f in result["findings"])
        assert result["ortfix_summary"]["codes"] == [f["code"] for f in result["findings"]]
        assert result["ortfix_summary"]["healthy"] is False
        assert ("LIB002" if host == "gpu" else "ORT002") in codes, (host, codes)
    rows = [line for line in report.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0] == "| host | target | findings |"
    table = {r.split(" | ")[0][2:]: r.split(" | ") for r in rows[1:]}
    assert sorted(table) == sorted(HOSTS)
    assert table["gpu"][1] == str(fleet.venvs["gpu"] / "bin" / "python")
    assert "LIB002" in table["gpu"][2] and "ORT002" in table["cpu-a"][2]


# ---------------------------------------------------------------------------------------------------------------------
# state: fixed
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_check_mode_shows_the_plan_and_changes_nothing(fleet: Fleet) -> None:
    run = playbook(fleet, "fix.yml", "--check", "--diff")
    assert run.returncode == 0, run.output[-4000:]
    assert _changed(run) == dict.fromkeys(HOSTS, 1), run.recap
    assert "uninstall onnxruntime 1.22.0  [fixes ORT002]" in run.output  # the plan, in the diff
    assert "_ortfix_preload.pth" in run.output
    for host in HOSTS:
        result = run.results[host]
        assert result["changed"] is True and "transaction_id" not in result
        kinds = [a["kind"] for a in result["plan"]["actions"]]
        assert kinds == (["write-file", "write-file"] if host == "gpu" else
                         ["pip-uninstall", "pip-install"] + (["write-file"] * 2 if host != "failing" else []))
    assert_same_trees(fleet.before, fleet.trees())


def assert_same_trees(before: dict[str, dict[str, tuple[Any, ...]]],
                      after: dict[str, dict[str, tuple[Any, ...]]]) -> None:
    for host in before:
        assert_same_tree(before[host], after[host])


@pytest.mark.slow
def test_fix_repairs_the_fleet_and_a_failing_host_stops_no_other(fleet: Fleet) -> None:
    run = playbook(fleet, "fix.yml")
    assert run.returncode == 2, run.output[-4000:]  # ansible-playbook: a host failed
    assert {h: (c["changed"], c["failed"]) for h, c in run.recap.items()} == {
        "cpu-a": (1, 0), "cpu-b": (1, 0), "gpu": (1, 0), "failing": (0, 1)}, run.recap
    for host in FIXED_HOSTS:
        venv = fleet.venvs[host]
        assert re.fullmatch(r"\d{8}T\d{9}Z-[0-9a-f]{4}", run.results[host]["transaction_id"])
        provider = site_packages(venv) / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so"
        loaded = fresh_process(venv / "bin" / "python", load_code(provider))
        assert "all loaded" in loaded.stdout, (host, loaded.stderr)
    failed = run.results["failing"]
    assert failed["failed"] is True and failed["changed"] is False
    assert failed["msg"].startswith("verification failed: ") and "libcudart.so.12: cannot open" in failed["msg"]
    assert failed["msg"].endswith(f"every change was rolled back (transaction {failed['transaction_id']})")
    assert "\n" not in failed["msg"]
    assert "fatal: [failing]: FAILED!" in run.output
    assert_same_tree(fleet.before["failing"], tree_state(fleet.venvs["failing"]))

    fleet.after_fix = fleet.trees()
    again = playbook(fleet, "fix.yml")
    assert _changed(again) == dict.fromkeys(HOSTS, 0), again.recap
    assert [h for h, c in again.recap.items() if c["failed"]] == ["failing"]
    for host in FIXED_HOSTS:
        assert again.results[host]["plan"]["actions"] == []
        assert {f["code"] for f in again.results[host]["findings"]} <= {"DRV001"}  # no driver on this machine
    assert_same_trees(fleet.after_fix, fleet.trees())


# ---------------------------------------------------------------------------------------------------------------------
# state: rolled_back
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_rollback_restores_every_host_byte_for_byte(fleet: Fleet) -> None:
    assert fleet.after_fix, "runs after test_fix_repairs_the_fleet_and_a_failing_host_stops_no_other"
    preview = playbook(fleet, "rollback.yml", "--check")
    assert preview.returncode == 0, preview.output[-4000:]
    assert _changed(preview) == {"cpu-a": 1, "cpu-b": 1, "gpu": 1, "failing": 0}, preview.recap
    for host in FIXED_HOSTS:
        [tx] = preview.results[host]["rolled_back"]
        assert tx["status"] == "applied" and any("onnxruntime-gpu" in c or "_ortfix_preload" in c
                                                 for c in tx["changes"])
    assert preview.results["failing"]["rolled_back"] == []  # its transaction was rolled back by ortfix already
    assert_same_trees(fleet.after_fix, fleet.trees())

    run = playbook(fleet, "rollback.yml")
    assert run.returncode == 0, run.output[-4000:]
    assert _changed(run) == {"cpu-a": 1, "cpu-b": 1, "gpu": 1, "failing": 0}, run.recap
    assert_same_trees(fleet.before, fleet.trees())

    again = playbook(fleet, "rollback.yml")
    assert _changed(again) == dict.fromkeys(HOSTS, 0), again.recap
    assert all(c["failed"] == 0 for c in again.recap.values())


# ---------------------------------------------------------------------------------------------------------------------
# what the module reads is untrusted: each bad document fails the task with one line, never a traceback
# ---------------------------------------------------------------------------------------------------------------------

def run_module(ansible_python: Path, tmp_path: Path, module_args: dict[str, Any],
               env: dict[str, str] | None = None) -> dict[str, Any]:
    """The module run as Ansible runs it on a host (its arguments in a file), without ansible-playbook."""
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": module_args}))
    proc = subprocess.run([str(ansible_python), str(MODULE), str(args)], capture_output=True, text=True,
                          env=env, check=False, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    assert "\n" not in result.get("msg", ""), result
    return result


@pytest.mark.slow
def test_a_refused_apply_fails_with_ortfixs_line_and_changes_nothing(fleet: Fleet, ansible_python: Path,
                                                                     tmp_path: Path) -> None:
    """A real refusal: the host's pip configuration points at an empty wheelhouse, so apply's preflight stops before
    any change (exit 2, the error document) and the task fails with its message and hint."""
    venv = tmp_path / "venv"
    shutil.copytree(fleet.cpu_template, venv, symlinks=True)
    before = tree_state(venv)
    empty = tmp_path / "empty-wheelhouse"
    empty.mkdir()
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nno-index = true\nfind-links = {empty}\n")
    result = run_module(ansible_python, tmp_path, {
        "state": "fixed", "python": str(venv / "bin" / "python"), "ortfix": [sys.executable, "-m", "ortfix"]},
        env={**fleet.env, "PIP_CONFIG_FILE": str(conf)})
    assert result["failed"] is True and result["changed"] is False and result["rc"] == 2, result
    assert result["msg"].startswith("ortfix apply: pip cannot get onnxruntime-gpu==1.22.0"), result["msg"]
    assert "nothing was changed" in result["hint"]
    assert_same_tree(before, tree_state(venv))
    missing = run_module(ansible_python, tmp_path, {"state": "checked", "ortfix": "no-such-ortfix-here"},
                         env=fleet.env)
    assert missing["failed"] is True
    assert missing["msg"].startswith("no-such-ortfix-here is not on this host's PATH"), missing


FAKE_ORTFIX = """import json, sys
mode = {mode!r}
if mode == "not json":
    print("Traceback (most recent call last): oops"); sys.exit(2)
if mode == "deep":
    print('{{"schema": ' + "[" * 100000 + "]" * 100000 + "}}"); sys.exit(0)
doc = {{"schema": "ortfix.check/2", "command": "check", "exit_code": 0, "healthy": True,
       "interpreter": {{"python": "/x/bin/python"}}, "findings": []}}
if mode == "other schema":
    doc["schema"] = "ortfix.check/9"
elif mode == "mistyped":
    doc["findings"] = [{{"code": 7, "severity": "error", "summary": "x"}}]
elif mode == "missing":
    del doc["healthy"]
elif mode == "exit code":
    doc["exit_code"] = 1
elif mode == "error":
    doc = {{"schema": "ortfix.error/1", "command": "check", "exit_code": 2,
           "error": {{"message": "no python3 on PATH", "hint": "pass --python"}}}}
print(json.dumps(doc)); sys.exit(doc["exit_code"] if mode != "exit code" else 0)
"""


@pytest.mark.parametrize(("mode", "message"), [
    ("not json", "`ortfix check` printed no JSON document (exit 2): Traceback (most recent call last): oops"),
    ("other schema", "`ortfix check` output has schema 'ortfix.check/9'; this module reads 'ortfix.check/2'"),
    ("mistyped", "ortfix's `ortfix check` output finding field 'code' is int, not what this module reads"),
    ("missing", "ortfix's `ortfix check` output has no field 'healthy'"),
    ("exit code", "`ortfix check` output says exit code 1, but ortfix exited 0"),
    ("error", "ortfix check: no python3 on PATH"),
    ("deep", "`ortfix check` printed a JSON document nested too deeply to read (exit 0)"),
])
def test_module_refuses_what_it_cannot_read(ansible_python: Path, tmp_path: Path, mode: str, message: str) -> None:
    fake = tmp_path / "fake_ortfix.py"
    fake.write_text(FAKE_ORTFIX.format(mode=mode))
    result = run_module(ansible_python, tmp_path, {"state": "checked", "ortfix": [sys.executable, str(fake)]})
    assert result["failed"] is True and result["msg"].startswith(message), result
    if mode == "error":
        assert result["hint"] == "pass --python" and result["rc"] == 2


def test_module_documentation_is_what_the_module_takes(ansible_python: Path, tmp_path: Path) -> None:
    """ansible-doc reads DOCUMENTATION/EXAMPLES/RETURN; its options are exactly the module's argument_spec."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_HOME=str(tmp_path / "home"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_CONFIG=str(tmp_path / "none.cfg"))
    proc = subprocess.run([str(ansible_python.parent / "ansible-doc"), "-j", "ortfix.fleet.ortfix"],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["ortfix.fleet.ortfix"]
    options = doc["doc"]["options"]
    assert set(options) == {"state", "python", "hook", "driver", "compute_capability", "ortfix"}
    assert options["state"]["choices"] == ["checked", "fixed", "rolled_back"]
    assert options["hook"]["choices"] == ["auto", "conda", "preload", "user-path", "none"]
    assert {"interpreter", "findings", "ortfix_summary", "plan", "transaction_id", "rolled_back"} <= set(doc["return"])
    assert "ortfix.fleet.ortfix:" in doc["examples"]
    # galaxy.yml is valid: the collection builds, with the module and the playbooks in it
    build = subprocess.run([str(ansible_python.parent / "ansible-galaxy"), "collection", "build", str(COLLECTION),
                            "--output-path", str(tmp_path / "dist")], capture_output=True, text=True, env=env,
                           check=False, timeout=120)
    assert build.returncode == 0, build.stderr
    [tarball] = (tmp_path / "dist").glob("ortfix-fleet-*.tar.gz")
    with tarfile.open(tarball) as tar:
        assert {"plugins/modules/ortfix.py", "playbooks/fix.yml", "playbooks/report.yml"} <= set(tar.getnames())
