"""`ortfix export`: each format executed for real. A requirements file installed with pip's hash-checking mode into a
fresh venv; a Dockerfile fragment's RUN lines run by sh (pip: the venv's) and its ENV applied; the sh script and its
undo script run by sh in a CPU venv whose path has spaces and quotes, the environment byte-identical afterwards; the
ps1 scripts checked as text (no PowerShell here). Each time the independent fresh-process loader check
(txtools.load_code) decides whether the libraries load, and export itself must leave the target unchanged.

Real pip, real venvs, the hermetic stub wheelhouse (tests/conftest.py) behind an offline pip configuration."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checktools import site_packages
from support.fixtures import NVIDIA_CU12, fake_nvidia_wheel, pip_install
from txtools import (
    assert_same_tree,
    copy_venv,
    fresh_process,
    load_code,
    one_line_error,
    ortfix,
    ortfix_json,
    tree_state,
)


@pytest.fixture(scope="module")
def base(export_base: dict[str, Path]) -> dict[str, Path]:
    """tests/conftest.py's export_base: an empty venv and a CPU venv, copied by each test."""
    return export_base


@pytest.fixture(scope="module")
def env(export_env: dict[str, str]) -> dict[str, str]:
    return export_env


LEFT, RIGHT = "\u2018", "\u2019"  # PowerShell reads these typographic quotes as single quotes too


def ps_quoted(text: str) -> str:
    return "'" + text.replace("'", "''").replace(LEFT, LEFT * 2).replace(RIGHT, RIGHT * 2) + "'"


def provider(venv: Path) -> Path:
    return site_packages(venv) / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so"


def docker_env_value(fragment: str, inherited: str | None) -> str:
    """The ENV line's LD_LIBRARY_PATH as the image gets it (the same ${VAR:+...} expansion, done by sh)."""
    [line] = [ln for ln in fragment.splitlines() if ln.startswith("ENV ")]
    m = re.fullmatch(r'ENV LD_LIBRARY_PATH=(".*")', line)
    assert m, line
    shell_env = {"PATH": "/usr/bin:/bin", **({"LD_LIBRARY_PATH": inherited} if inherited is not None else {})}
    return subprocess.run(["sh", "-c", f"printf '%s' {m.group(1)}"], capture_output=True, text=True,
                          env=shell_env, check=True).stdout


def test_requirements_pin_everything_with_hashes_and_install_into_a_fresh_venv(
        base: dict[str, Path], env: dict[str, str], tmp_path: Path) -> None:
    target = copy_venv(base["cpu"], tmp_path / "target")
    before = tree_state(target)
    out = tmp_path / "requirements.txt"
    doc = ortfix_json("export", "requirements", "--python", str(target), "-o", str(out), env=env)
    assert doc["written"] == [str(out)] and doc["hashes"] is True
    assert_same_tree(before, tree_state(target))  # export changes nothing in the target
    text = out.read_text()
    pins = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert len(pins) == 7 and all(re.fullmatch(r"[a-z0-9-]+==[0-9.]+ --hash=sha256:[0-9a-f]{64}", p) for p in pins)
    assert any(p.startswith("nvidia-cublas-cu12==12.4.5.8 ") for p in pins)  # the plan said ~=12.0
    assert "# ORT002: " in text and "pip uninstall -y onnxruntime" in text

    fresh = copy_venv(base["empty"], tmp_path / "fresh")
    proc = subprocess.run([str(fresh / "bin" / "python"), "-m", "pip", "install", "--require-hashes", "-r", str(out),
                           "--disable-pip-version-check"], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # Nothing left to install: ortfix plans only the hook for it; its Dockerfile ENV makes everything load.
    plan = ortfix_json("plan", "--python", str(fresh), env=env, expect=1)
    assert {a["kind"] for a in plan["actions"]} == {"write-file"}
    fragment = ortfix_json("export", "dockerfile", "--python", str(fresh), env=env)["text"]
    assert "pip install" not in fragment
    python = fresh / "bin" / "python"
    assert "all loaded" not in fresh_process(python, load_code(provider(fresh))).stdout
    library_path = docker_env_value(fragment, None)
    run = fresh_process(python, load_code(provider(fresh)),
                        env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": library_path})
    assert "all loaded" in run.stdout, run.stderr


def test_dockerfile_run_lines_and_env_fix_a_cpu_venv(base: dict[str, Path], env: dict[str, str],
                                                     tmp_path: Path) -> None:
    """Exported from one environment for an image whose environment is elsewhere (--prefix-in-image): one RUN layer
    (the CPU wheel is not kept in a lower layer), each reason said once, and the ENV names the image's folders."""
    exporting = copy_venv(base["cpu"], tmp_path / "export env")
    image = copy_venv(base["cpu"], tmp_path / "image env")
    fragment = ortfix_json("export", "dockerfile", "--python", str(exporting), "--prefix-in-image", str(image),
                           env=env)["text"]
    runs = [ln[len("RUN "):] for ln in fragment.splitlines() if ln.startswith("RUN ")]
    assert len(runs) == 1 and runs[0].startswith("pip uninstall -y 'onnxruntime' && pip install --no-cache-dir "), runs
    comments = [ln for ln in fragment.splitlines() if ln.startswith("# ")]
    assert len(comments) == len(set(comments)), fragment
    assert not any(str(exporting) in ln for ln in fragment.splitlines()[2:]), fragment  # only the header names it
    # The image's pip is the environment's (a copied venv's bin/pip would start the original's python).
    shell_env = {**env, "PATH": "/usr/bin:/bin", "PY": str(image / "bin" / "python")}
    for line in runs:
        proc = subprocess.run(["sh", "-c", 'pip() { "$PY" -m pip "$@"; }; ' + line], capture_output=True, text=True,
                              env=shell_env, check=False)
        assert proc.returncode == 0, (line, proc.stderr[-2000:])
    sp = site_packages(image)
    assert (sp / "onnxruntime_gpu-1.22.0.dist-info").is_dir() and not (sp / "onnxruntime-1.22.0.dist-info").exists()
    assert not (sp / "_ortfix_preload.pth").exists()  # no hook: the ENV does it
    python = image / "bin" / "python"
    assert "all loaded" not in fresh_process(python, load_code(provider(image))).stdout
    value = docker_env_value(fragment, "/opt/other lib")
    assert value.endswith(":/opt/other lib") and str(sp / "nvidia" / "cudnn" / "lib") in value.split(":")
    assert not docker_env_value(fragment, None).endswith(":")  # no empty entry (the current folder) when unset
    run = fresh_process(python, load_code(provider(image)), env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": value})
    assert "all loaded" in run.stdout, run.stderr


def test_dockerfile_pins_a_kept_build_and_says_where_its_paths_are_from(base: dict[str, Path], env: dict[str, str],
                                                                       tmp_path: Path, wheelhouse: Path) -> None:
    """Seed 000: onnxruntime-gpu installed, only its libraries missing. The image gets that very build
    (onnxruntime-gpu==1.22.0 with the libraries); without --prefix-in-image one line warns that the paths are the
    exporting environment's."""
    kept = copy_venv(base["empty"], tmp_path / "kept")
    pip_install(kept / "bin" / "python", "onnxruntime-gpu==1.22.0", find_links=wheelhouse, no_deps=True)
    proc = ortfix("export", "dockerfile", "--python", str(kept), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [run] = [ln for ln in proc.stdout.splitlines() if ln.startswith("RUN ")]
    assert run.startswith("RUN pip install --no-cache-dir ") and "'onnxruntime-gpu==1.22.0'" in run.split(), run
    assert "'nvidia-cudnn-cu12==9.1.0.70'" in run.split(), run
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("ortfix: warning:")]
    assert len(warnings) == 1 and "--prefix-in-image" in warnings[0], proc.stderr


@pytest.mark.parametrize(("given", "said"), [("opt/venv", "not an absolute path"), ("/opt/a:b", "has a ':'"),
                                              ("/opt/v\nRUN evil", "control character")])
def test_a_bad_prefix_in_image_is_one_line(base: dict[str, Path], env: dict[str, str], given: str,
                                           said: str) -> None:
    one_line_error(ortfix("export", "dockerfile", "--python", str(base["cpu"]), "--prefix-in-image", given,
                          env=env), "--prefix-in-image", said)


def test_a_folder_outside_the_environment_cannot_be_mapped_into_the_image() -> None:
    from ortfix.errors import OrtfixError
    from ortfix.export.dockerfile import in_image

    assert in_image("/e/venv/lib/python3.11/site-packages/nvidia/cudnn/lib", "/e/venv", "/opt/venv") == \
        "/opt/venv/lib/python3.11/site-packages/nvidia/cudnn/lib"
    for outside in ("/usr/local/cuda/lib64", "/e/venv-other/lib", "/e/venv/../x/lib", "relative/lib"):
        with pytest.raises(OrtfixError, match="lies outside the environment"):
            in_image(outside, "/e/venv", "/opt/venv")


def test_sh_script_fixes_and_its_undo_restores_byte_for_byte(base: dict[str, Path], env: dict[str, str],
                                                             tmp_path: Path) -> None:
    target = copy_venv(base["cpu"], tmp_path / "it's a \"venv\" $HOME")
    python = target / "bin" / "python"
    before = tree_state(target)
    script = tmp_path / "fix.sh"
    proc = ortfix("export", "sh", "--python", str(target), "-o", str(script), env=env)
    assert proc.returncode == 0, proc.stderr
    undo = tmp_path / "fix.undo.sh"
    assert undo.is_file() and os.access(script, os.X_OK)
    assert_same_tree(before, tree_state(target))
    text = script.read_text()
    assert text.startswith("#!/bin/sh\n") and "\nset -eu\n" in text and '"$PYTHON" -m pip install' in text
    assert "'nvidia-cudnn-cu12==9.1.0.70'" in text

    sh_env = {**env, "PATH": "/usr/bin:/bin"}
    # A fix script that fails half-way (pip finds nothing): the undo script puts back what it had moved.
    empty_conf = tmp_path / "empty.conf"
    empty_conf.write_text("[global]\nno-index = true\n")
    failed = subprocess.run(["sh", str(script)], capture_output=True, text=True,
                            env={**sh_env, "PIP_CONFIG_FILE": str(empty_conf)}, check=False)
    assert failed.returncode != 0 and "No matching distribution" in failed.stderr
    assert not (site_packages(target) / "onnxruntime-1.22.0.dist-info").exists()  # moved aside before pip ran
    undone = subprocess.run(["sh", str(undo)], capture_output=True, text=True, env=sh_env, check=False)
    assert undone.returncode == 0, (undone.stdout[-2000:], undone.stderr[-2000:])
    assert_same_tree(before, tree_state(target))

    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, env=sh_env, check=False)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    run = fresh_process(python, load_code(provider(target)))
    assert "all loaded" in run.stdout, run.stderr
    plan = json.loads(ortfix("plan", "--python", str(target), "--json", env=env).stdout)
    assert not [a for a in plan["actions"] if a["kind"].startswith("pip-")]
    again = subprocess.run(["sh", str(script)], capture_output=True, text=True, env=sh_env, check=False)
    assert again.returncode == 2 and "already run" in again.stderr

    undone = subprocess.run(["sh", str(undo)], capture_output=True, text=True, env=sh_env, check=False)
    assert undone.returncode == 0, (undone.stdout[-2000:], undone.stderr[-2000:])
    assert_same_tree(before, tree_state(target))
    twice = subprocess.run(["sh", str(undo)], capture_output=True, text=True, env=sh_env, check=False)
    assert twice.returncode == 2 and "nothing to undo" in twice.stderr

    # Another interpreter is refused before anything happens.
    line = next(ln for ln in text.splitlines() if ln.startswith("PYTHON="))
    other = text.replace(line, f"PYTHON='{base['empty'] / 'bin' / 'python'}'")
    wrong = tmp_path / "wrong.sh"
    wrong.write_text(other)
    refused = subprocess.run(["sh", str(wrong)], capture_output=True, text=True, env=sh_env, check=False)
    assert refused.returncode == 2 and "is not the interpreter of" in refused.stderr
    assert_same_tree(before, tree_state(target))


def test_sh_script_and_dockerfile_in_a_conda_layout(base: dict[str, Path], env: dict[str, str],
                                                    tmp_path: Path) -> None:
    """conda: activate.d/deactivate.d hooks in folders the script makes (and the undo removes); the Dockerfile's
    ENV holds the folders the activate.d hook would prepend."""
    target = copy_venv(base["cpu"], tmp_path / "conda env")
    (target / "conda-meta").mkdir()
    before = tree_state(target)
    script = tmp_path / "fix.sh"
    assert ortfix("export", "sh", "--python", str(target), "-o", str(script), env=env).returncode == 0
    fragment = ortfix_json("export", "dockerfile", "--python", str(target), env=env)["text"]
    sh_env = {**env, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, env=sh_env, check=False)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    activate = target / "etc/conda/activate.d/ortfix-cuda-libs.sh"
    assert activate.is_file() and (target / "etc/conda/deactivate.d/ortfix-cuda-libs.sh").is_file()
    python = target / "bin" / "python"
    run = subprocess.run(["sh", "-c", '. "$1"; exec "$2" -c "$3"', "sh", str(activate), str(python),
                          load_code(provider(target))], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "CONDA_PREFIX": str(target)}, check=False)
    assert "all loaded" in run.stdout, run.stderr
    run = fresh_process(python, load_code(provider(target)),
                        env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": docker_env_value(fragment, None)})
    assert "all loaded" in run.stdout, run.stderr
    undone = subprocess.run(["sh", str(tmp_path / "fix.undo.sh")], capture_output=True, text=True, env=sh_env,
                            check=False)
    assert undone.returncode == 0, undone.stderr[-2000:]
    assert_same_tree(before, tree_state(target))
    assert not (target / "etc").exists()


def test_ps1_scripts_as_text(base: dict[str, Path], env: dict[str, str], tmp_path: Path) -> None:
    target = copy_venv(base["cpu"], tmp_path / f"o'k {LEFT}venv{RIGHT} x")
    out = tmp_path / "fix.ps1"
    doc = ortfix_json("export", "ps1", "--python", str(target), "-o", str(out), env=env)
    assert doc["written"] == [str(out), str(tmp_path / "fix.undo.ps1")]
    data = out.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")  # CRLF throughout
    text = data.decode("utf-8")
    assert f"$Prefix = {ps_quoted(str(target))}\r\n" in text
    assert "$ErrorActionPreference = 'Stop'" in text and "$LASTEXITCODE" in text
    assert "Invoke-Checked -m pip install --disable-pip-version-check --no-deps 'onnxruntime-gpu==1.22.0'" in text
    # every hook file is written from base64, byte for byte what the plan holds
    plan = ortfix_json("plan", "--python", str(target), env=env, expect=1)
    writes = [a["details"] for a in plan["actions"] if a["kind"] == "write-file"]
    blobs = re.findall(r"WriteAllBytes\((.*?), \[Convert\]::FromBase64String\('([A-Za-z0-9+/=]+)'\)\)", text)
    assert len(blobs) == len(writes) == 2
    for (path, blob), want in zip(blobs, writes):
        assert path == ps_quoted(want["path"])
        assert base64.b64decode(blob).decode("utf-8") == want["content"]
    undo = (tmp_path / "fix.undo.ps1").read_text(encoding="utf-8")
    assert "discard-named" in undo and "restore $Stash" in undo and undo.index("discard-files") < undo.index(
        "discard-named")


def test_saved_plan_exported_only_while_it_holds(base: dict[str, Path], env: dict[str, str], tmp_path: Path) -> None:
    target = copy_venv(base["cpu"], tmp_path / "target")
    plan_file = tmp_path / "plan.json"
    proc = ortfix("plan", "--python", str(target), "-o", str(plan_file), env=env)
    assert proc.returncode == 1, proc.stderr
    doc = ortfix_json("export", "dockerfile", str(plan_file), "--python", str(target), env=env)
    assert doc["source"] == str(plan_file) and "ENV LD_LIBRARY_PATH=" in doc["text"]

    edited = tmp_path / "edited.json"
    saved = json.loads(plan_file.read_text())
    saved["actions"][1]["details"]["requirements"][1] = "nvidia-cublas-cu12~=12.1"
    edited.write_text(json.dumps(saved))
    one_line_error(ortfix("export", "sh", str(edited), "--python", str(target), env=env), "was edited")

    subprocess.run([str(target / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q", "onnxruntime"],
                   check=True, capture_output=True, env=env)
    before = tree_state(target)
    one_line_error(ortfix("export", "requirements", str(plan_file), "--python", str(target), env=env),
                   "the environment changed since")
    assert_same_tree(before, tree_state(target))


def test_an_environment_without_pip_is_refused(base: dict[str, Path], env: dict[str, str], tmp_path: Path) -> None:
    target = copy_venv(base["cpu"], tmp_path / "no pip")
    sp = site_packages(target)
    for entry in sp.iterdir():
        if entry.name == "pip" or (entry.name.startswith("pip-") and entry.name.endswith(".dist-info")):
            shutil.rmtree(entry)
    one_line_error(ortfix("export", "sh", "--python", str(target), env=env), "has no pip", "ensurepip")


@pytest.mark.parametrize("fmt", ["dockerfile", "requirements"])
def test_an_environment_path_with_a_newline_is_refused(base: dict[str, Path], env: dict[str, str], tmp_path: Path,
                                                       fmt: str) -> None:
    """The path goes into comment lines (and a Dockerfile cannot quote a newline): an injected line is a command."""
    target = copy_venv(base["cpu"], tmp_path / "env\nRUN touch /tmp/owned #")
    before = tree_state(target)
    out = tmp_path / "out"
    one_line_error(ortfix("export", fmt, "--hook", "none", "--python", str(target), "-o", str(out), env=env),
                   "control character", "plain path")
    assert not out.exists()
    assert_same_tree(before, tree_state(target))


def test_a_library_folder_with_a_colon_is_refused_in_a_dockerfile(base: dict[str, Path], env: dict[str, str],
                                                                  tmp_path: Path) -> None:
    """LD_LIBRARY_PATH splits on ':': an ENV line naming such a folder would name two folders, neither of them it."""
    target = copy_venv(base["cpu"], tmp_path / "env:prod")
    one_line_error(ortfix("export", "dockerfile", "--python", str(target), env=env), "':'", "LD_LIBRARY_PATH")


def _report(*entries: tuple[str, str, str | None]) -> str:
    """A pip --report document (the fields pins.parse_report reads, as pip 23 writes them)."""
    return json.dumps({"version": "1", "install": [
        {"metadata": {"name": name, "version": version}, "requested": True,
         "download_info": {"url": f"file:///w/{name}-{version}-py3-none-any.whl",
                           "archive_info": {"hashes": {"sha256": sha}} if sha else {}}}
        for name, version, sha in entries]})


def test_requirements_without_every_hash_carry_none_and_say_why() -> None:
    from ortfix.export.model import ExportInput
    from ortfix.export.pins import parse_report
    from ortfix.export.requirements import render_requirements
    from ortfix.plan.model import Action, Plan, PlanOptions

    pins = parse_report(_report(("onnxruntime-gpu", "1.22.0", "a" * 64), ("nvidia-cudnn-cu12", "9.1.0.70", None)))
    install = Action("pip-install", "install", ("+ onnxruntime-gpu",), "uninstall", ("ORT002",),
                     {"requirements": ["onnxruntime-gpu==1.22.0", "nvidia-cudnn-cu12~=9.0"], "installer": "pip",
                      "reinstall": False})
    plan = Plan("ortfix.plan/2", "now", "0.1.0", "/e/bin/python", "/e", "venv", "f" * 16, "g" * 16, PlanOptions(),
                "1", "pip", None, (install,), (), ())
    inp = ExportInput(plan, "/e/bin/python", "/e", tuple(pins), {"ORT002": "the CPU-only package is installed"})
    text = render_requirements(inp)
    lines = text.splitlines()
    assert "onnxruntime-gpu==1.22.0" in lines and "nvidia-cudnn-cu12==9.1.0.70" in lines
    assert "--hash" not in text and "# No hashes: pip reported none for nvidia-cudnn-cu12" in text
    assert "# ORT002: the CPU-only package is installed" in lines

    with_all = parse_report(_report(("onnxruntime-gpu", "1.22.0", "a" * 64)))
    assert render_requirements(ExportInput(plan, "/e/bin/python", "/e", tuple(with_all), {})).count(
        f"onnxruntime-gpu==1.22.0 --hash=sha256:{'a' * 64}") == 1


@pytest.mark.parametrize("name", ["x; rm -rf ~", "'quoted'", "a b"])
def test_a_report_naming_something_unpinnable_is_refused(name: str) -> None:
    from ortfix.errors import OrtfixError
    from ortfix.export.pins import parse_report

    with pytest.raises(OrtfixError, match="cannot pin"):
        parse_report(_report((name, "1.0", None)))


def test_the_stash_program_refuses_a_record_that_reaches_outside_the_environment(
        base: dict[str, Path], tmp_path: Path) -> None:
    """A RECORD is read back from disk: a row that climbs out of the prefix stops the step before anything moves."""
    from ortfix.export.snippets import STEPS_PY

    target = copy_venv(base["cpu"], tmp_path / "target")
    outside = tmp_path / "not-ours.txt"
    outside.write_text("precious\n")
    [dist_info] = site_packages(target).glob("onnxruntime-1.22.0.dist-info")
    record = dist_info / "RECORD"
    depth = len(site_packages(target).relative_to(tmp_path).parts)
    record.write_text(record.read_text() + "/".join([".."] * depth) + "/not-ours.txt,,\n")
    before = tree_state(target)
    steps = tmp_path / "steps.py"
    steps.write_text(STEPS_PY)
    stash = tmp_path / "stash"
    proc = subprocess.run([str(target / "bin" / "python"), "-I", "-B", str(steps), "stash-dists", str(stash),
                           str(dist_info)], capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "is outside" in proc.stderr, proc.stderr
    assert outside.read_text() == "precious\n"
    assert_same_tree(before, tree_state(target))
    assert not stash.exists() or not any(stash.rglob("*"))  # nothing was moved aside


def _victims(folder: Path, *names: str) -> dict[Path, tuple[bytes, int]]:
    """A file of someone else's for each name, 0600, and a link planted at that name in `folder` pointing to it:
    {victim: (its bytes, its mode)}."""
    out = {}
    for name in names:
        victim = folder.parent / f"victim of {name}"
        victim.write_bytes(f"not ortfix's: {name}\n".encode())
        victim.chmod(0o600)
        (folder / name).symlink_to(victim)
        out[victim] = (victim.read_bytes(), victim.stat().st_mode)
    return out


@pytest.mark.parametrize("fmt", ["sh", "ps1"])
def test_export_replaces_links_planted_at_the_file_and_its_undo_script(base: dict[str, Path], env: dict[str, str],
                                                                       tmp_path: Path, fmt: str) -> None:
    """A folder others can write (the issue: root exporting into one): links planted at `fix.sh` and at the derived
    `fix.undo.sh`, which the user never named, point at a 0600 file; export replaces both links with new files and
    leaves the files they pointed to as they were, content and mode."""
    target = copy_venv(base["cpu"], tmp_path / "target")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    victims = _victims(shared, f"fix.{fmt}", f"fix.undo.{fmt}")
    doc = ortfix_json("export", fmt, "--python", str(target), "-o", str(shared / f"fix.{fmt}"), env=env)
    assert doc["written"] == [str(shared / f"fix.{fmt}"), str(shared / f"fix.undo.{fmt}")]
    for victim, (data, mode) in victims.items():
        assert (victim.read_bytes(), victim.stat().st_mode) == (data, mode), victim
    for name in (f"fix.{fmt}", f"fix.undo.{fmt}"):
        written = shared / name
        assert not written.is_symlink() and written.stat().st_mode & 0o777 == 0o755
    assert "pip install" in (shared / f"fix.{fmt}").read_text(encoding="utf-8")
    assert sorted(p.name for p in shared.iterdir()) == sorted([f"fix.{fmt}", f"fix.undo.{fmt}"])  # no temp left


def test_plan_and_requirements_outputs_replace_a_planted_link(base: dict[str, Path], env: dict[str, str],
                                                              tmp_path: Path) -> None:
    target = copy_venv(base["cpu"], tmp_path / "target")
    shared = tmp_path / "shared"
    shared.mkdir()
    victims = _victims(shared, "plan.json", "requirements.txt")
    assert ortfix("plan", "--python", str(target), "-o", str(shared / "plan.json"), env=env).returncode == 1
    ortfix_json("export", "requirements", "--python", str(target), "-o", str(shared / "requirements.txt"), env=env)
    for victim, (data, mode) in victims.items():
        assert (victim.read_bytes(), victim.stat().st_mode) == (data, mode), victim
    assert json.loads((shared / "plan.json").read_text())["schema"].startswith("ortfix.plan/")
    assert (shared / "requirements.txt").stat().st_mode & 0o777 == 0o644
    assert "--hash=sha256:" in (shared / "requirements.txt").read_text()


def test_an_output_that_cannot_be_written_is_one_line(base: dict[str, Path], env: dict[str, str],
                                                      tmp_path: Path) -> None:
    """-o into a folder that does not exist: one line naming the folder, before anything is planned
    (commands/inputs.output_file)."""
    target = copy_venv(base["cpu"], tmp_path / "target")
    one_line_error(ortfix("export", "sh", "--python", str(target), "-o", str(tmp_path / "missing" / "fix.sh"),
                          env=env), "cannot write", f"no folder {tmp_path / 'missing'}")
    one_line_error(ortfix("plan", "--python", str(target), "-o", str(tmp_path / "missing" / "plan.json"), env=env),
                   "cannot write", f"no folder {tmp_path / 'missing'}")


def _hostile_sdist(folder: Path, name: str, version: str, marker: Path) -> Path:
    """A real source distribution whose build code (an in-tree build backend, as a setup.py would be) writes `marker`
    as soon as pip asks it anything: resolving it at all runs it. It needs nothing from an index to build."""
    import io
    import tarfile

    dist = f"{name.replace('-', '_')}-{version}"
    backend = (f"open({str(marker)!r}, 'a').write('built by pip\\n')\n"
               "def get_requires_for_build_wheel(config_settings=None):\n    return []\n"
               "def prepare_metadata_for_build_wheel(directory, config_settings=None):\n"
               "    import os\n"
               f"    info = os.path.join(directory, {dist + '.dist-info'!r})\n"
               "    os.makedirs(info)\n"
               f"    open(os.path.join(info, 'METADATA'), 'w').write('Metadata-Version: 2.1\\nName: {name}\\n"
               f"Version: {version}\\n')\n"
               f"    return {dist + '.dist-info'!r}\n")
    files = {"pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "hostile"\nbackend-path = ["."]\n',
             "hostile.py": backend,
             "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}
    path = folder / f"{dist}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{dist}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _env_with(env: dict[str, str], tmp_path: Path, *find_links: Path) -> dict[str, str]:
    conf = tmp_path / "links.conf"
    conf.write_text("[global]\nno-index = true\nfind-links = " + " ".join(str(f) for f in find_links) + "\n")
    return {**env, "PIP_CONFIG_FILE": str(conf)}


def test_commands_that_change_nothing_never_build_a_newer_sdist(base: dict[str, Path], env: dict[str, str],
                                                                tmp_path: Path, wheelhouse: Path) -> None:
    """The find-links folder (or index) has a newer sdist of a plan requirement (`nvidia-cublas-cu12~=12.0`): pip
    without `--only-binary` prefers it and runs its build code in every dry run. Wheels only: the stub's wheel is
    pinned, and nothing of the sdist runs."""
    target = copy_venv(base["cpu"], tmp_path / "target")
    marker = tmp_path / "PWNED"
    sdists = tmp_path / "sdists"
    sdists.mkdir()
    _hostile_sdist(sdists, "nvidia-cublas-cu12", "12.99.0", marker)
    hostile = _env_with(env, tmp_path, wheelhouse, sdists)
    before = tree_state(target)
    dry = ortfix("apply", "--dry-run", "--python", str(target), env=hostile)
    assert dry.returncode == 1, (dry.stdout[-2000:], dry.stderr[-2000:])
    assert not marker.exists(), "apply --dry-run ran the sdist's build code"
    doc = ortfix_json("export", "requirements", "--python", str(target), env=hostile)
    assert not marker.exists(), "export requirements ran the sdist's build code"
    assert "nvidia-cublas-cu12==12.4.5.8" in doc["pins"]
    doc = ortfix_json("export", "sh", "--python", str(target), env=hostile)
    assert not marker.exists(), "export sh ran the sdist's build code"
    assert "'nvidia-cublas-cu12==12.4.5.8'" in doc["text"]
    assert_same_tree(before, tree_state(target))


def test_a_requirement_only_available_as_an_sdist_is_one_line(base: dict[str, Path], env: dict[str, str],
                                                             tmp_path: Path, wheelhouse: Path) -> None:
    target = copy_venv(base["cpu"], tmp_path / "target")
    marker = tmp_path / "PWNED"
    links = tmp_path / "links"
    shutil.copytree(wheelhouse, links)
    for wheel in links.glob("nvidia_cudnn_cu12-*.whl"):
        wheel.unlink()
    _hostile_sdist(links, "nvidia-cudnn-cu12", "9.1.0.70", marker)
    hostile = _env_with(env, tmp_path, links)
    before = tree_state(target)
    for args in (["apply", "--dry-run"], ["export", "requirements"], ["export", "sh"], ["apply", "--yes"]):
        one_line_error(ortfix(*args, "--python", str(target), env=hostile), "nvidia-cudnn-cu12", "wheels only",
                       "pip wheel")
        assert not marker.exists(), args
    assert_same_tree(before, tree_state(target))


@pytest.mark.parametrize("folder_fd", [True, False], ids=["folder descriptor", "by path (Windows)"])
def test_write_new_replaces_a_link_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             folder_fd: bool) -> None:
    """The helper behind every output file, with a folder descriptor (POSIX) and by path (what Windows, which has
    none, runs): a link at the name is replaced, its target keeps content and mode, no temporary file is left."""
    from ortfix.outfile import write_new

    if not folder_fd:
        monkeypatch.setattr(os, "supports_dir_fd", set())
    folder = tmp_path / "out"
    folder.mkdir()
    victims = _victims(folder, "fix.sh")
    monkeypatch.chdir(tmp_path)  # a relative temporary name would land here
    write_new(folder / "fix.sh", b"#!/bin/sh\n", 0o755)
    for victim, (data, mode) in victims.items():
        assert (victim.read_bytes(), victim.stat().st_mode) == (data, mode)
    written = folder / "fix.sh"
    assert not written.is_symlink() and written.read_bytes() == b"#!/bin/sh\n"
    assert written.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in folder.iterdir()] == ["fix.sh"] and sorted(p.name for p in tmp_path.iterdir()) == [
        "out", "victim of fix.sh"]
def test_a_record_naming_the_interpreter_leaves_it_in_place(base: dict[str, Path], env: dict[str, str],
                                                            tmp_path: Path) -> None:
    """A RECORD row naming what `bin/python` links to: stashed with the distribution, the fix script's next
    `"$PYTHON" -m pip` would find no interpreter (127) and the undo script stop at its own guard. Only the
    distribution's own install locations are stashed (transaction/ownfiles.py's rule, generated into steps.py)."""
    target = copy_venv(base["cpu"], tmp_path / "target")
    python = target / "bin" / "python"
    named = target / "bin" / (os.readlink(python) if python.is_symlink() else "python")
    sp = site_packages(target)
    record = sp / "onnxruntime-1.22.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + os.path.relpath(named, sp) + ",,\n")
    before = tree_state(target)
    script = tmp_path / "fix.sh"
    assert ortfix("export", "sh", "--python", str(target), "-o", str(script), env=env).returncode == 0
    sh_env = {**env, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, env=sh_env, check=False)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert f"{str(named)!r} stays" in done.stderr and os.path.lexists(named)
    run = fresh_process(python, load_code(provider(target)))
    assert "all loaded" in run.stdout, run.stderr
    undone = subprocess.run(["sh", str(tmp_path / "fix.undo.sh")], capture_output=True, text=True, env=sh_env,
                            check=False)
    assert undone.returncode == 0, (undone.stdout[-2000:], undone.stderr[-2000:])
    assert_same_tree(before, tree_state(target))


@pytest.mark.parametrize("rel", ["pyvenv.cfg", "bin/python3.11", "bin/python", "bin/Activate.ps1", "bin/activate",
                                 "bin/pydoc3", "Scripts/python.exe", "lib/python3.11/os.py", ".ortfix/x",
                                 "lib/python3.11/site-packages/onnxruntime/__init__.py", "bin/onnxruntime_test",
                                 "bin/pip3", "share/man/man1/isympy.1", "include/site/python3.11/x/x.h",
                                 "etc/jupyter/x.json", "sharex/y", "bin", "lib/python3.11/site-packages"])
def test_the_steps_program_and_the_transaction_apply_one_rule(rel: str) -> None:
    """The exported steps program carries the rule as generated text: it decides as the transaction's own does."""
    from ortfix.export.snippets import STEPS_PY
    from ortfix.transaction.ownfiles import RULE_PY, is_own_file

    assert RULE_PY in STEPS_PY
    namespace: dict[str, Any] = {"os": os, "re": re}
    exec(RULE_PY, namespace)  # ortfix's own generated program text, under test
    sites, scripts = ["lib/python3.11/site-packages"], "bin"
    assert namespace["own_file"](rel, sites, scripts) == is_own_file(rel, sites, scripts)
    expected = rel.startswith(("lib/python3.11/site-packages/", "share/", "include/", "etc/")) or rel in (
        "bin/onnxruntime_test", "bin/pip3")
    assert is_own_file(rel, sites, scripts) == expected


def test_the_fix_script_installs_exactly_the_pins(base: dict[str, Path], wheelhouse: Path, tmp_path: Path) -> None:
    """A dependency changed on the day: the export saw nvidia-cublas-cu12 12.4.5.8 installed (cuDNN needs >=12.4,
    so nothing to pin); the fix script runs where 12.1.3.1 is installed. pip would upgrade it by itself, uninstalling
    12.1.3.1 unstashed, and the undo script would say "undone" without it. With the pins only (--no-deps), the
    undo script restores the environment byte for byte."""
    house = tmp_path / "house"
    house.mkdir()
    for wheel in wheelhouse.glob("*.whl"):
        if not wheel.name.startswith(("nvidia_cudnn_cu12-", "nvidia_cublas_cu12-")):
            shutil.copy(wheel, house)
    cublas, cudnn = (next(s for s in NVIDIA_CU12 if s.distribution == n)
                     for n in ("nvidia-cublas-cu12", "nvidia-cudnn-cu12"))
    dataclasses.replace(cudnn, requires=["nvidia-cublas-cu12>=12.4"]).build(house)
    for version in ("12.4.5.8", "12.1.3.1"):  # the newer layout: no nvidia/__init__.py shared with the pins
        fake_nvidia_wheel(house, cublas.distribution, version, cublas.libs, cublas.lib_dir, needed=cublas.needed,
                          namespace=True)
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nno-index = true\nfind-links = {house}\n")
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("PIP_", "ORTFIX_TEST_")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    isolated = tmp_path / "no-pip-config"
    isolated.mkdir()
    environ.update(PIP_CONFIG_FILE=str(conf), XDG_CONFIG_HOME=str(isolated), XDG_CONFIG_DIRS=str(isolated))
    target = copy_venv(base["cpu"], tmp_path / "target")
    python = target / "bin" / "python"
    pip_install(python, "nvidia-cublas-cu12==12.4.5.8", find_links=house)
    script = tmp_path / "fix.sh"
    assert ortfix("export", "sh", "--python", str(target), "-o", str(script), env=environ).returncode == 0
    text = script.read_text()
    assert "'nvidia-cudnn-cu12==9.1.0.70'" in text and "nvidia-cublas-cu12==" not in text
    pip_install(python, "nvidia-cublas-cu12==12.1.3.1", find_links=house)  # on the day
    before = tree_state(target)
    sh_env = {**environ, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, env=sh_env, check=False)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert list(site_packages(target).glob("nvidia_cublas_cu12-12.1.3.1.dist-info"))
    undone = subprocess.run(["sh", str(tmp_path / "fix.undo.sh")], capture_output=True, text=True, env=sh_env,
                            check=False)
    assert undone.returncode == 0 and "undone" in undone.stdout, (undone.stdout[-2000:], undone.stderr[-2000:])
    assert_same_tree(before, tree_state(target))
