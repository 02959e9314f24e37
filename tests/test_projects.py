"""Projects around the environment (issue 20, item 3): the project's `.venv` is the default target, check names the
project files that bring the CPU onnxruntime back (PRJ001), `apply --project` changes the project through its own
tool (a real uv, poetry and pdm, installed into cached tools venvs) or edits the requirements line, the next
`uv sync` / `poetry install --sync` / `pdm sync --clean` / `pip install -r` keeps the GPU build, and rollback puts
every project file back byte for byte. Hermetic: the stub wheelhouse; pip and uv configured offline (--no-index,
find-links), poetry and pdm pointed at it served as a simple index on 127.0.0.1 through the project's own sources."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from support.testcache import cache_root, locked
from txtools import (
    assert_same_tree,
    fresh_process,
    load_code,
    one_line_error,
    ortfix_env,
    pip_config,
    pip_venv,
    tree_state,
)


def run_in(folder: Path, *args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """The real ortfix, run from `folder` as a user in their project does (no --python unless given)."""
    return subprocess.run([sys.executable, "-m", "ortfix", *args], capture_output=True, text=True, env=dict(env),
                          cwd=folder, stdin=subprocess.DEVNULL, timeout=600, check=False)


def site_dists(venv: Path) -> set[str]:
    return {p.name.split("-")[0].lower() for p in venv.glob("lib/python3*/site-packages/*.dist-info")}


def _user_env(tmp: Path, wheelhouse: Path, uv: Path | None) -> dict[str, str]:
    """A user offline: pip configured with no-index + find-links, uv with the same through its own variables."""
    env = ortfix_env(pip_config(tmp, wheelhouse), tmp, UV_CACHE_DIR=str(tmp / "uv-cache"), UV_NO_INDEX="1",
                     UV_FIND_LINKS=str(wheelhouse), UV_PYTHON_DOWNLOADS="never", UV_PYTHON=sys.executable)
    env = {k: v for k, v in env.items() if k not in ("UV_PROJECT_ENVIRONMENT",)}
    if uv is not None:
        env["PATH"] = f"{uv}{os.pathsep}{env['PATH']}"
    return env


# ---------------------------------------------------------------------------------------------------------------------
# uv
# ---------------------------------------------------------------------------------------------------------------------


@pytest.fixture()
def uv_project(tmp_path: Path, wheelhouse: Path, uv_bin: Path) -> tuple[Path, dict[str, str]]:
    """`uv init` + `uv add onnxruntime==1.22.0`: a project whose .venv (made by uv, without pip) has the CPU build."""
    env = _user_env(tmp_path, wheelhouse, uv_bin)
    project = tmp_path / "demo"
    project.mkdir()
    for argv in (["init", "--bare", "--name", "demo"], ["add", "onnxruntime==1.22.0"]):
        proc = subprocess.run([str(uv_bin / "uv"), *argv], cwd=project, env=env, capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, proc.stderr
    assert "onnxruntime" in site_dists(project / ".venv")
    return project, env


def test_uv_project_default_target_check_apply_sync_and_rollback(uv_project: tuple[Path, dict[str, str]]) -> None:
    project, env = uv_project
    venv = project / ".venv"
    inner = project / "src" / "pkg"
    inner.mkdir(parents=True)
    # The system python3 comes first on PATH; uv would still use ./.venv, and so does ortfix.
    env = {**env, "PATH": f"{Path(sys.base_prefix) / 'bin'}{os.pathsep}{env['PATH']}"}
    plan = run_in(inner, "plan", "--json", env=env)
    assert plan.returncode == 1, plan.stderr[-2000:]
    doc = json.loads(plan.stdout)
    assert doc["prefix"] == str(venv), doc["prefix"]
    first = run_in(inner, "check", env=env).stdout.splitlines()[0]
    assert first.startswith(f"target {venv / 'bin' / 'python'} ") and "the project's" in first, first

    check = run_in(project, "check", "--json", env=env)
    [prj] = [f for f in json.loads(check.stdout)["findings"] if f["code"] == "PRJ001"]
    assert any(e.startswith("pyproject.toml:") and "onnxruntime==1.22.0" in e for e in prj["evidence"]), prj
    assert any(e.startswith("uv.lock:") for e in prj["evidence"]), prj
    assert "uv sync" in prj["summary"]
    plan_text = run_in(project, "plan", env=env).stdout
    assert "uv remove --no-sync onnxruntime && uv add --no-sync onnxruntime-gpu==1.22.0" in plan_text, plan_text

    files = {n: (project / n).read_bytes() for n in ("pyproject.toml", "uv.lock")}
    before = tree_state(venv)
    applied = run_in(project, "apply", "--project", "--yes", env=env)
    assert applied.returncode == 0, (applied.stdout[-3000:], applied.stderr[-3000:])
    pyproject = (project / "pyproject.toml").read_text()
    assert "onnxruntime-gpu==1.22.0" in pyproject and '"onnxruntime==1.22.0"' not in pyproject, pyproject
    assert 'name = "onnxruntime-gpu"' in (project / "uv.lock").read_text()

    back = run_in(project, "rollback", "--yes", env=env)
    assert back.returncode == 0, (back.stdout[-2000:], back.stderr[-2000:])
    assert {n: (project / n).read_bytes() for n in files} == files
    assert_same_tree(before, tree_state(venv))

    # Applied again, the project's own sync keeps the GPU build and its NVIDIA wheels.
    again = run_in(project, "apply", "--project", "--yes", env=env)
    assert again.returncode == 0, (again.stdout[-3000:], again.stderr[-3000:])
    synced = subprocess.run(["uv", "sync"], cwd=project, env=env, capture_output=True, text=True, check=False)
    assert synced.returncode == 0, synced.stderr
    dists = site_dists(venv)
    assert "onnxruntime_gpu" in dists and "onnxruntime" not in dists, dists
    assert "nvidia_cudnn_cu12" in dists, dists
    assert fresh_process(venv / "bin" / "python", load_code()).stdout.strip().endswith("all loaded")


def test_pipless_uv_venv_with_untranslatable_config_says_why(uv_project: tuple[Path, dict[str, str]]) -> None:
    project, env = uv_project
    conf = Path(env["PIP_CONFIG_FILE"])
    conf.write_text(conf.read_text() + "only-binary = :all:\n")
    proc = run_in(project, "plan", env=env)
    assert "no uv was found" not in proc.stdout + proc.stderr, proc.stdout
    assert "uv cannot be used: your pip configuration sets only-binary" in proc.stdout, proc.stdout
    before = tree_state(project / ".venv")
    one_line_error(run_in(project, "apply", "--yes", env=env), "uv", "is not used", "only-binary")
    assert_same_tree(before, tree_state(project / ".venv"))


# ---------------------------------------------------------------------------------------------------------------------
# requirements files
# ---------------------------------------------------------------------------------------------------------------------


def test_requirements_project_line_edit_survives_pip_install_r(
        cpu_template: Path, wheelhouse: Path, tmp_path: Path) -> None:
    project = tmp_path / "app"
    project.mkdir()
    python = pip_venv(cpu_template, project / ".venv")
    original = b"# pinned\r\nonnxruntime==1.22.0 ; sys_platform == 'linux'  # the CPU build\n--only-binary=:all:  \n"
    (project / "requirements.txt").write_bytes(original)
    env = _user_env(tmp_path, wheelhouse, None)
    check = run_in(project, "check", "--python", str(python), "--json", env=env)
    [prj] = [f for f in json.loads(check.stdout)["findings"] if f["code"] == "PRJ001"]
    assert prj["evidence"][0].startswith("requirements.txt:2:") and "pip install -r requirements.txt" in prj["summary"]
    note = run_in(project, "plan", "--python", str(python), env=env).stdout
    assert "requirements.txt line 2" in note and "onnxruntime-gpu==1.22.0" in note, note

    before = tree_state(python.parent.parent)
    applied = run_in(project, "apply", "--python", str(python), "--project", "--yes", env=env)
    assert applied.returncode == 0, (applied.stdout[-3000:], applied.stderr[-3000:])
    assert (project / "requirements.txt").read_bytes() == original.replace(
        b"onnxruntime==1.22.0 ;", b"onnxruntime-gpu==1.22.0 ;")
    reinstall = subprocess.run([str(python), "-m", "pip", "install", "-r", "requirements.txt", "--no-deps"],
                               cwd=project, env=env, capture_output=True, text=True, check=False)
    assert reinstall.returncode == 0, reinstall.stderr
    dists = site_dists(python.parent.parent)
    assert "onnxruntime_gpu" in dists and "onnxruntime" not in dists, dists

    back = run_in(project, "rollback", "--python", str(python), "--yes", env=env)
    assert back.returncode == 0, (back.stdout[-2000:], back.stderr[-2000:])
    assert (project / "requirements.txt").read_bytes() == original
    assert_same_tree(before, tree_state(python.parent.parent))



def test_rollback_leaves_a_requirements_file_edited_after_the_apply(
        cpu_template: Path, wheelhouse: Path, tmp_path: Path) -> None:
    project = tmp_path / "app"
    project.mkdir()
    python = pip_venv(cpu_template, project / ".venv")
    original = b"onnxruntime==1.22.0\nnumpy\n"
    (project / "requirements.txt").write_bytes(original)
    env = _user_env(tmp_path, wheelhouse, None)
    applied = run_in(project, "apply", "--python", str(python), "--project", "--yes", env=env)
    assert applied.returncode == 0, (applied.stdout[-3000:], applied.stderr[-3000:])
    edited = (project / "requirements.txt").read_bytes() + b"requests\n"  # the user's own edit, after the apply
    (project / "requirements.txt").write_bytes(edited)

    back = run_in(project, "rollback", "--python", str(python), "--yes", "--verbose", env=env)
    assert back.returncode == 0, (back.stdout[-2000:], back.stderr[-2000:])
    assert (project / "requirements.txt").read_bytes() == edited
    assert (project / "requirements.txt.before-ortfix").read_bytes() == original
    assert "requirements.txt was edited after the apply" in back.stdout, back.stdout

# ---------------------------------------------------------------------------------------------------------------------
# poetry and pdm: detected, the exact commands shown; `--project` runs them (a real poetry and pdm, installed into
# cached tools venvs), resolving against the stub wheels served as a simple index on the loopback
# ---------------------------------------------------------------------------------------------------------------------

POETRY = """[tool.poetry]
name = "demo"
version = "0.1.0"

[tool.poetry.dependencies]
python = "^3.9"
onnxruntime = "1.22.0"
"""
PDM = """[project]
name = "demo"
version = "0.1.0"
dependencies = []

[tool.pdm.dev-dependencies]
infer = [
    "onnxruntime==1.22.0",
]
"""
LOCK = '[[package]]\nname = "numpy"\nversion = "2.0.0"\n\n[[package]]\nname = "onnxruntime"\nversion = "1.22.0"\n'


@pytest.mark.parametrize(("manager", "pyproject", "line", "command"), [
    ("poetry", POETRY, 7, "poetry remove --lock onnxruntime && poetry add --lock onnxruntime-gpu==1.22.0"),
    ("pdm", PDM, 8, "pdm remove --no-sync --dev --group infer onnxruntime && pdm add --no-sync --dev --group infer "
                    "onnxruntime-gpu==1.22.0"),
])
def test_poetry_and_pdm_projects_are_detected(cpu_template: Path, wheelhouse: Path, tmp_path: Path, manager: str,
                                              pyproject: str, line: int, command: str) -> None:
    """The plan shows the tool's commands; without the tool installed, `--project` is one line (exit 2) in
    preflight and nothing is changed."""
    project = tmp_path / "app"
    project.mkdir()
    python = pip_venv(cpu_template, project / ".venv")
    (project / "pyproject.toml").write_text(pyproject)
    (project / f"{manager}.lock").write_text(LOCK)
    env = _user_env(tmp_path, wheelhouse, None)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not shutil.which(manager, path=p))
    check = run_in(tmp_path, "check", "--python", str(python), "--json", env=env)
    [prj] = [f for f in json.loads(check.stdout)["findings"] if f["code"] == "PRJ001"]
    assert f"the {manager} project at {project}" in prj["summary"], prj
    assert prj["evidence"][0].startswith(f"pyproject.toml:{line}:") and "onnxruntime" in prj["evidence"][0], prj
    assert prj["evidence"][1] == f'{manager}.lock:6: name = "onnxruntime"', prj
    plan = run_in(tmp_path, "plan", "--python", str(python), env=env).stdout
    assert command in plan, plan
    before = tree_state(tmp_path / "app")
    one_line_error(run_in(tmp_path, "apply", "--python", str(python), "--project", "--yes", env=env),
                   "preflight failed", f"updates the project with {manager}, which is not installed")
    assert_same_tree(before, tree_state(tmp_path / "app"))


def test_poetry_extra_is_left_to_the_user(cpu_template: Path, wheelhouse: Path, tmp_path: Path) -> None:
    """`poetry remove` has no option naming an extra: removing from the main group would leave the extra's CPU pin,
    so --project refuses (one line, exit 2) before any change instead of running it."""
    project = tmp_path / "app"
    project.mkdir()
    python = pip_venv(cpu_template, project / ".venv")
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0.1.0"\n\n'
                                            '[project.optional-dependencies]\ninfer = ["onnxruntime==1.22.0"]\n\n'
                                            '[tool.poetry]\npackage-mode = false\n')
    (project / "poetry.lock").write_text(LOCK)
    env = _user_env(tmp_path, wheelhouse, None)
    before = tree_state(project)
    one_line_error(run_in(project, "apply", "--python", str(python), "--project", "--yes", env=env),
                   "--project", "extra 'infer'", "poetry remove` cannot name")
    assert_same_tree(before, tree_state(project))


def _tool_bin(tmp_path_factory: pytest.TempPathFactory, program: str, requirement: str) -> Path:
    """A folder holding only `program` (to put on PATH): pip-installed once into a cached tools venv."""
    tools = cache_root() / f"{program}-tools"
    exe = tools / "bin" / program
    with locked(cache_root() / f"{program}-tools.lock"):
        if not exe.exists():
            shutil.rmtree(tools, ignore_errors=True)
            made = subprocess.run([sys.executable, "-m", "venv", str(tools)], capture_output=True, check=False)
            got = made.returncode == 0 and subprocess.run(
                [str(tools / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                 requirement], capture_output=True, check=False).returncode == 0
            if not got or not exe.exists():
                shutil.rmtree(tools, ignore_errors=True)
                pytest.skip(f"{program} could not be installed with pip here (no index reachable?)")
    folder = tmp_path_factory.mktemp(f"{program}-bin")
    (folder / program).symlink_to(exe)
    return folder


@pytest.fixture(scope="module")
def poetry_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tool_bin(tmp_path_factory, "poetry", "poetry")


@pytest.fixture(scope="module")
def pdm_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # pdm's "locked" extra pins the HTTP libraries it was released with (a newer hishel breaks it)
    return _tool_bin(tmp_path_factory, "pdm", "pdm[locked]")


@pytest.fixture(scope="module")
def simple_index(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Iterator[str]:
    """The stub wheels as a PEP 503 simple index (a page per project, sha256 in each link) on 127.0.0.1: how
    poetry and pdm users point the tool at their own index."""
    root = tmp_path_factory.mktemp("simple-index")
    for wheel in sorted(wheelhouse.glob("*.whl")):
        page = root / "simple" / parse_wheel_filename(wheel.name)[0]
        page.mkdir(parents=True, exist_ok=True)
        shutil.copy(wheel, page / wheel.name)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        with open(page / "index.html", "a") as f:
            f.write(f'<a href="{wheel.name}#sha256={digest}">{wheel.name}</a>\n')

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    server.shutdown()
    server.server_close()


PYTHON_RANGE = f">={sys.version_info[0]}.{sys.version_info[1]},<{sys.version_info[0]}.{sys.version_info[1] + 1}"
TOOL_PROJECTS = {
    # poetry 2: PEP 621 metadata, the user's own index as the primary source (the default index is then not used)
    "poetry": f"""[project]
name = "demo"
version = "0.1.0"
requires-python = "{PYTHON_RANGE}"
dependencies = []

[tool.poetry]
package-mode = false

[[tool.poetry.source]]
name = "local"
url = "{{index}}"
priority = "primary"
""",
    # pdm: a source named "pypi" replaces the default index
    "pdm": f"""[project]
name = "demo"
version = "0.1.0"
requires-python = "{PYTHON_RANGE}"
dependencies = []

[tool.pdm]
distribution = false

[[tool.pdm.source]]
name = "pypi"
url = "{{index}}"
""",
}
# How the user added onnxruntime (poetry: the main dependencies; pdm: a dev group), and how they sync.
TOOL_ADD = {"poetry": ["add", "onnxruntime==1.22.0"],
            "pdm": ["add", "--dev", "--group", "infer", "onnxruntime==1.22.0"]}
TOOL_SYNC = {"poetry": ["install", "--sync"], "pdm": ["sync", "--clean"]}
TOOL_DECLARED = {"poetry": '"onnxruntime-gpu (==1.22.0)"', "pdm": '"onnxruntime-gpu==1.22.0"'}


@pytest.mark.parametrize("manager", ["poetry", "pdm"])
def test_poetry_and_pdm_apply_project_sync_keeps_gpu_and_rollback_restores(
        request: pytest.FixtureRequest, cpu_template: Path, wheelhouse: Path, simple_index: str, tmp_path: Path,
        manager: str) -> None:
    tool_bin: Path = request.getfixturevalue(f"{manager}_bin")
    project = tmp_path / "demo"
    project.mkdir()
    (project / "pyproject.toml").write_text(TOOL_PROJECTS[manager].format(index=simple_index))
    venv = pip_venv(cpu_template, project / ".venv").parent.parent  # the in-project venv the tool finds and uses
    env = _user_env(tmp_path, wheelhouse, None)
    env.update(PATH=f"{tool_bin}{os.pathsep}{env['PATH']}", POETRY_CACHE_DIR=str(tmp_path / "poetry-cache"),
               POETRY_VIRTUALENVS_IN_PROJECT="true", PDM_CACHE_DIR=str(tmp_path / "pdm-cache"),
               PDM_CHECK_UPDATE="false")

    def tool(*argv: str) -> None:
        proc = subprocess.run([manager, *argv], cwd=project, env=env, capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL, timeout=600)
        assert proc.returncode == 0, (argv, proc.stdout[-2000:], proc.stderr[-2000:])

    tool(*TOOL_ADD[manager])
    lock = project / f"{manager}.lock"
    files = {p: p.read_bytes() for p in (project / "pyproject.toml", lock)}
    assert b'name = "onnxruntime"' in files[lock]
    plan_text = run_in(project, "plan", env=env).stdout
    shown = {"poetry": "poetry remove --lock onnxruntime && poetry add --lock onnxruntime-gpu==1.22.0",
             "pdm": "pdm remove --no-sync --dev --group infer onnxruntime && pdm add --no-sync --dev --group infer "
                    "onnxruntime-gpu==1.22.0"}[manager]
    assert shown in plan_text, plan_text

    before = tree_state(venv)
    applied = run_in(project, "apply", "--project", "--yes", env=env)
    assert applied.returncode == 0, (applied.stdout[-3000:], applied.stderr[-3000:])
    pyproject = (project / "pyproject.toml").read_text()
    assert TOOL_DECLARED[manager] in pyproject and "onnxruntime==" not in pyproject.replace("-gpu==", ""), pyproject
    if manager == "pdm":  # in the group it was declared in, not the project's main dependencies
        assert "dependencies = []" in pyproject and "infer = [" in pyproject, pyproject
    locked_names = set(re.findall(r'^name = "([^"]+)"$', lock.read_text(), re.MULTILINE))
    assert "onnxruntime-gpu" in locked_names and "onnxruntime" not in locked_names, locked_names

    back = run_in(project, "rollback", "--yes", env=env)
    assert back.returncode == 0, (back.stdout[-2000:], back.stderr[-2000:])
    assert {p: p.read_bytes() for p in files} == files
    assert_same_tree(before, tree_state(venv))

    # Applied again, the project's own sync keeps the GPU build and its NVIDIA wheels.
    again = run_in(project, "apply", "--project", "--yes", env=env)
    assert again.returncode == 0, (again.stdout[-3000:], again.stderr[-3000:])
    tool(*TOOL_SYNC[manager])
    dists = site_dists(venv)
    assert "onnxruntime_gpu" in dists and "onnxruntime" not in dists, dists
    assert "nvidia_cudnn_cu12" in dists, dists
    assert fresh_process(venv / "bin" / "python", load_code()).stdout.strip().endswith("all loaded")


def test_no_project_no_finding(cpu_template: Path, wheelhouse: Path, tmp_path: Path) -> None:
    python = pip_venv(cpu_template, tmp_path / "plain" / "venv")
    env = _user_env(tmp_path, wheelhouse, None)
    check = run_in(tmp_path, "check", "--python", str(python), "--json", env=env)
    assert "PRJ001" not in {f["code"] for f in json.loads(check.stdout)["findings"]}
    assert shutil.which("python3")  # the test machine has one: the PATH fallback is exercised elsewhere
