"""`--installer auto|pip|uv` with a real uv (installed by this module with pip into a tools venv cached under the test
cache folder; skipped with one line when that cannot be done) applying the hermetic stub wheelhouse's CPU→GPU swap,
with the user's pip configuration (no-index + find-links: it only works if uv was given it) translated."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from txtools import (
    assert_same_tree,
    fresh_process,
    load_code,
    one_line_error,
    ortfix,
    ortfix_env,
    ortfix_json,
    pip_config,
    pip_venv,
    tree_state,
)


def _venv(template: Path, tmp: Path) -> Path:
    return pip_venv(template, tmp / "cpu venv")


def _env(tmp: Path, wheelhouse: Path, uv_bin: Path | None, conf_extra: str = "") -> dict[str, str]:
    conf = pip_config(tmp, wheelhouse)
    if conf_extra:
        conf.write_text(conf.read_text() + conf_extra)
    env = ortfix_env(conf, tmp, UV_CACHE_DIR=str(tmp / "uv-cache"))
    if uv_bin is not None:
        env["PATH"] = f"{uv_bin}{os.pathsep}{env['PATH']}"
    return env


def test_auto_with_uv_on_path_applies_with_uv_and_rolls_back_without_it(
        cpu_template: Path, wheelhouse: Path, uv_bin: Path, tmp_path: Path) -> None:
    python = _venv(cpu_template, tmp_path)
    venv = python.parent.parent
    env = _env(tmp_path, wheelhouse, uv_bin)
    before = tree_state(venv)
    plan = ortfix_json("plan", "--python", str(python), env=env, expect=1)
    assert plan["installer"] == "uv" and plan["options"]["installer"] == "auto"
    opts = plan["installer_options"]
    assert opts[opts.index("--find-links") + 1] == str(wheelhouse) and "--no-index" in opts and "--no-config" in opts
    text = ortfix("plan", "--python", str(python), env=env)
    assert "via: uv pip install --python" in text.stdout and "--no-index" in text.stdout, text.stdout

    # uv's own settings that would change the meaning are set aside: a symlink into uv's cache is never installed
    proc = ortfix("apply", "--python", str(python), "--yes", env={**env, "UV_LINK_MODE": "symlink"})
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert f"installing with uv: {uv_bin / 'uv'} pip install --python" in proc.stdout
    cudnn = next(venv.glob("lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9"))
    assert cudnn.is_file() and not cudnn.is_symlink() and cudnn.stat().st_nlink == 2  # a hard link from uv's cache
    loaded = fresh_process(python, load_code())
    assert loaded.stdout.strip().endswith("all loaded"), loaded.stderr
    [journal] = (venv / ".ortfix" / "transactions").glob("*/journal.json")
    doc = json.loads(journal.read_text())["body"]
    assert doc["installer"] == "uv"
    [step] = [s for s in doc["steps"] if s["kind"] == "pip-install"]
    assert step["details"]["installer"] == "uv"
    argv = step["record"]["argv"]  # the uv command with the translated options
    assert argv[1:3] == ["pip", "install"] and "--no-index" in argv and str(wheelhouse) in argv

    # uv's cache emptied meanwhile: the files the install wrote are still the environment's own
    subprocess.run([str(uv_bin / "uv"), "cache", "clean"], env=env, check=True, capture_output=True)
    assert cudnn.stat().st_nlink == 1
    no_uv = {**env, "PATH": env["PATH"].split(os.pathsep, 1)[1]}
    assert shutil.which("uv", path=no_uv["PATH"]) is None
    back = ortfix("rollback", "--python", str(python), "--yes", env=no_uv)
    assert back.returncode == 0, (back.stdout[-2000:], back.stderr[-2000:])
    assert_same_tree(before, tree_state(venv))


def test_explicit_uv_applies_a_saved_plan(cpu_template: Path, wheelhouse: Path, uv_bin: Path, tmp_path: Path) -> None:
    python = _venv(cpu_template, tmp_path)
    env = _env(tmp_path, wheelhouse, uv_bin)
    saved = tmp_path / "plan.json"
    assert ortfix("plan", "--python", str(python), "--installer", "uv", "-o", str(saved), env=env).returncode == 1
    assert json.loads(saved.read_text())["options"]["installer"] == "uv"
    one_line_error(ortfix("apply", str(saved), "--python", str(python), "--installer", "pip", "--yes", env=env),
                   "a saved plan is applied exactly as it is")
    proc = ortfix("apply", str(saved), "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "installing with uv:" in proc.stdout
    assert fresh_process(python, load_code()).stdout.strip().endswith("all loaded")


def test_untranslatable_setting_makes_auto_use_pip_and_says_why(
        cpu_template: Path, wheelhouse: Path, uv_bin: Path, tmp_path: Path) -> None:
    python = _venv(cpu_template, tmp_path)
    env = _env(tmp_path, wheelhouse, uv_bin, "only-binary = :all:\n")
    plan = ortfix_json("plan", "--python", str(python), env=env, expect=1)
    assert plan["installer"] == "pip" and plan["installer_options"] == []
    assert "installing with pip, not uv: your pip configuration sets only-binary, which uv cannot honour the same " \
           "way" in plan["notes"]
    one_line_error(ortfix("plan", "--python", str(python), "--installer", "uv", env=env), "--installer uv",
                   "only-binary")


def test_uv_requested_without_uv_is_one_line(cpu_template: Path, wheelhouse: Path, tmp_path: Path) -> None:
    python = _venv(cpu_template, tmp_path)
    env = _env(tmp_path, wheelhouse, None)
    assert shutil.which("uv", path=env["PATH"]) is None, "uv is on this machine's PATH: the test needs it absent"
    before = tree_state(python.parent.parent)
    one_line_error(ortfix("apply", "--python", str(python), "--installer", "uv", "--yes", env=env),
                   "--installer uv", "no uv executable")
    assert_same_tree(before, tree_state(python.parent.parent))


def test_credentials_in_an_index_url_are_never_shown(
        cpu_template: Path, wheelhouse: Path, uv_bin: Path, tmp_path: Path) -> None:
    python = _venv(cpu_template, tmp_path)
    env = _env(tmp_path, wheelhouse, uv_bin)
    env["PIP_NO_INDEX"] = "no"
    env["PIP_INDEX_URL"] = "http://alice:hunter2@127.0.0.1:9/simple"
    proc = ortfix("plan", "--python", str(python), "--json", env=env)
    assert proc.returncode == 1, proc.stderr
    assert "hunter2" not in proc.stdout + proc.stderr
    # passed in uv's environment, never on its command line
    assert "UV_INDEX_URL=http://alice:****@127.0.0.1:9/simple" in json.loads(proc.stdout)["installer_options"]
    text = ortfix("plan", "--python", str(python), env=env)
    assert "via: UV_INDEX_URL='http://alice:****@127.0.0.1:9/simple' uv pip install --python" in text.stdout
    assert "hunter2" not in text.stdout + text.stderr


class _AuthIndex:
    """The wheelhouse as a PEP 503 simple index over local HTTP that answers only requests carrying the basic-auth
    credentials alice:hunter2 (401 otherwise)."""

    def __init__(self, root: Path) -> None:
        import base64
        import functools
        import http.server
        import re
        import threading

        wanted = "Basic " + base64.b64encode(b"alice:hunter2").decode()
        self.authorized = threading.Event()
        index = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.headers.get("Authorization") != wanted:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="index"')
                    self.end_headers()
                    return
                index.authorized.set()
                m = re.fullmatch(r"/simple/([a-z0-9-]+)/", self.path)
                if m is None:
                    super().do_GET()
                    return
                links = "".join(f'<a href="/{w.name}">{w.name}</a>' for w in root.glob("*.whl")
                                if re.sub(r"[-_.]+", "-", w.name.split("-")[0]).lower() == m.group(1))
                body = f"<html><body>{links}</body></html>".encode()
                self.send_response(200 if links else 404)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_index_credentials_reach_uv_in_its_environment_never_its_command_line(
        cpu_template: Path, wheelhouse: Path, uv_bin: Path, tmp_path: Path) -> None:
    """`index-url = http://alice:hunter2@host/simple/` in a 0600 pip.conf: uv must get the password (the index
    answers nothing without it) from its environment, not from its command line, which every local user reads in
    /proc/PID/cmdline. A `uv` in front of the real one records each command line it is started with."""
    python = _venv(cpu_template, tmp_path)
    venv = python.parent.parent
    index = _AuthIndex(wheelhouse)
    try:
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\nindex-url = http://alice:hunter2@127.0.0.1:{index.port}/simple/\n"
                        "trusted-host = 127.0.0.1\n")
        conf.chmod(0o600)
        argv_log = tmp_path / "uv-argv.log"
        front = tmp_path / "front"
        front.mkdir()
        (front / "uv").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{argv_log}"\nexec "{uv_bin / "uv"}" "$@"\n')
        (front / "uv").chmod(0o755)
        env = ortfix_env(conf, tmp_path, UV_CACHE_DIR=str(tmp_path / "uv-cache"))
        env["PATH"] = f"{front}{os.pathsep}{env['PATH']}"
        proc = ortfix("apply", "--python", str(python), "--yes", env=env)
    finally:
        index.close()
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "installing with uv:" in proc.stdout and index.authorized.is_set()
    lines = argv_log.read_text().splitlines()
    installs = [ln for ln in lines if ln.startswith("pip install --python")]  # the dry run and the install
    assert len(installs) >= 2 and all(ln.startswith(("pip install --python", "pip check --python")) for ln in lines), \
        lines  # and uv's own consistency check, before and after
    assert "hunter2" not in argv_log.read_text()
    assert "hunter2" not in proc.stdout + proc.stderr
    journals = "".join(p.read_text() for p in (venv / ".ortfix").rglob("*.json"))
    assert "hunter2" not in journals and "alice:****@" in journals


def test_uv_compiling_bytecode_applies_and_rolls_back(
        cpu_template: Path, wheelhouse: Path, uv_bin: Path, tmp_path: Path) -> None:
    """UV_COMPILE_BYTECODE=1 (uv's advice for Docker images): uv writes `__pycache__/*.pyc` that its RECORD does not
    list. They are the install's own: the apply stands (no "another installer at the same time?"), and a rollback
    removes them with the rest."""
    python = _venv(cpu_template, tmp_path)
    venv = python.parent.parent
    env = {**_env(tmp_path, wheelhouse, uv_bin), "UV_COMPILE_BYTECODE": "1"}
    before = tree_state(venv)
    proc = ortfix("apply", "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "installing with uv:" in proc.stdout
    compiled = list(venv.glob("lib/python3*/site-packages/onnxruntime/capi/__pycache__/*.pyc"))
    assert compiled  # uv did compile
    assert fresh_process(python, load_code()).stdout.strip().endswith("all loaded")
    back = ortfix("rollback", "--python", str(python), "--yes", env=env)
    assert back.returncode == 0, (back.stdout[-2000:], back.stderr[-2000:])
    assert_same_tree(before, tree_state(venv))


def test_a_plan_saved_before_the_option_existed_still_applies(
        cpu_template: Path, wheelhouse: Path, tmp_path: Path) -> None:
    python = _venv(cpu_template, tmp_path)
    env = _env(tmp_path, wheelhouse, None)  # no uv: auto is pip, as every plan was before
    saved = tmp_path / "plan.json"
    assert ortfix("plan", "--python", str(python), "-o", str(saved), env=env).returncode == 1
    doc = json.loads(saved.read_text())
    del doc["options"]["installer"], doc["installer_options"]
    saved.write_text(json.dumps(doc))
    proc = ortfix("apply", str(saved), "--python", str(python), "--yes", env=env)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "installing with pip:" in proc.stdout
