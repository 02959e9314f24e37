"""What keeps `check --fresh` fast (issue 22, speed/__init__.py): the modules a fresh check no longer imports, and the
host's `which` that replaced `shutil.which` on check's path (shutil's import pulls bz2 and lzma) answering as it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# What a fresh check imported before issue 22's last round, and no longer does: `typing` (the payload TypedDicts, the
# platform seam's Protocols), `packaging.version` (compat/versions.Version holds plain releases itself), `shutil`
# (the host's `which`), uv's option translation and the wheelhouse manifest (facts only asks where uv is), `shlex`
# (quoting, which a check's screen rarely needs), the rules of what only Windows has, and since the round after it
# `glob` (the CUDA toolkits under /usr/local: system/linux/inventory.toolkits).
NOT_ON_A_FRESH_CHECK = {"typing", "packaging.version", "shutil", "bz2", "lzma", "shlex", "ortfix.system.uvargs",
                        "ortfix.system.wheelmanifest", "ortfix.system.platform_protocols", "ortfix.check.windows",
                        "ortfix.check.winstore", "glob"}
_MODULES_AFTER_CHECK = """
import atexit
import sys
from ortfix.__main__ import entry
sys.argv = ["ortfix", *sys.argv[1:]]
atexit.register(lambda: sys.stderr.write("\\nmodules: %s\\n" % " ".join(sorted(sys.modules))))
entry()
"""


def _modules_after_check(argv: list[str], env: dict[str, str], cwd: Path) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", _MODULES_AFTER_CHECK, *argv], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120, check=False)
    assert proc.returncode == 1 and "\nmodules: " in proc.stderr, proc.stderr[-2000:]
    return set(proc.stderr.rsplit("modules: ", 1)[1].split())


@pytest.mark.slow
def test_a_fresh_check_imports_neither_typing_nor_packaging_version_nor_shutil(gpu_template: Path,
                                                                                tmp_path: Path) -> None:
    """A real fresh `check` of onnxruntime-gpu 1.22.0 with its NVIDIA wheels, in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "ORTFIX_NO_FASTPATH")}
    env["ORTFIX_CACHE_DIR"] = str(tmp_path / "cache")
    check = ["check", "--python", str(gpu_template / "bin" / "python"), "--fresh"]
    # The first check with a new cache folder validates the matrix's YAML once and saves it (compat/load.py); the
    # checks after it read the validated matrix back, as every check but the first does.
    _modules_after_check(check, env, tmp_path)
    for extra in ([], ["--json"]):
        loaded = _modules_after_check([*check, *extra], env, tmp_path)
        assert {"ortfix.check.facts", "ortfix.check.diagnose", "ortfix.compat.matrix"} <= loaded  # it checked
        assert loaded & NOT_ON_A_FRESH_CHECK == set()
        assert ("ortfix.cli.output" in loaded) == bool(extra)  # the JSON envelope's module, for --json only


# What a fresh check imported until issue 22's round after it, and no longer does: `pathlib` (with `fnmatch`, `ntpath`,
# `urllib.parse`, `ipaddress`, `warnings`: ld.so.cache's and the driver's default paths, the probe's parser, the
# matrix loader, ld.so's cached answer, the hook files), `contextlib` (facts.py's and the file caches' `suppress`) and
# `zlib` (the validated matrix's cache file name). A replayed check imports none of them either
# (tests/test_fastcheck.py).
NOT_IMPORTED_BY_A_FRESH_CHECK = ("pathlib", "contextlib", "zlib", "ntpath")
_FIRST_TO_IMPORT = """
import sys
from ortfix.__main__ import entry

WATCHED = NAMES


class Watch:  # notes the ortfix module whose code first imports a watched module (and finds nothing itself)
    seen = set()

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in WATCHED and name not in Watch.seen:
            Watch.seen.add(name)
            frame = sys._getframe(1)
            while frame is not None and not frame.f_globals.get("__name__", "").startswith("ortfix"):
                frame = frame.f_back
            by = frame.f_globals["__name__"] if frame is not None else "?"
            sys.stderr.write("\\n%s first imported by: %s\\n" % (name, by))
        return None


sys.meta_path.insert(0, Watch)
sys.argv = ["ortfix", *sys.argv[1:]]
entry()
""".replace("NAMES", repr(NOT_IMPORTED_BY_A_FRESH_CHECK))


@pytest.mark.slow
def test_a_fresh_check_imports_no_pathlib_contextlib_or_zlib(gpu_template: Path, tmp_path: Path) -> None:
    """A real fresh `check` (onnxruntime-gpu 1.22.0 with its NVIDIA wheels), text and --json: nothing imports
    `pathlib`, `contextlib`, `zlib` or `ntpath` (~16M instructions of a fresh check's ~227M); the stderr names the
    module that did."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "ORTFIX_NO_FASTPATH")}
    env["ORTFIX_CACHE_DIR"] = str(tmp_path / "cache")
    argv = [sys.executable, "-c", _FIRST_TO_IMPORT, "check", "--python", str(gpu_template / "bin" / "python"),
            "--fresh"]
    # The first check with a new cache folder validates the matrix's YAML and saves it (tempfile, and shutil's zlib,
    # to write it): the checks after it, as every check but the first, read the validated matrix back.
    for run, extra in enumerate(([], [], ["--json"])):
        proc = subprocess.run([*argv, *extra], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
                              check=False)
        assert proc.returncode == 1 and proc.stdout.strip(), proc.stderr[-2000:]
        imported = [line for line in proc.stderr.splitlines() if " first imported by: " in line]
        assert run == 0 or imported == [], imported


@pytest.mark.skipif(sys.platform == "win32", reason="the POSIX host's which; Windows asks shutil itself")
def test_the_posix_hosts_which_answers_as_shutil_which(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ortfix.system.linux.host import PosixHost

    host = PosixHost()
    folders = {name: tmp_path / name for name in ("a", "b", "c", "d")}
    for folder in folders.values():
        folder.mkdir()
    (folders["a"] / "tool").write_text("not executable\n")  # skipped: no execute permission
    (folders["b"] / "tool").mkdir()  # skipped: a folder
    (folders["c"] / "tool").write_text("#!/bin/sh\n")
    (folders["c"] / "tool").chmod(0o755)
    (folders["d"] / "tool").symlink_to(folders["c"] / "tool")
    (folders["d"] / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "here").write_text("#!/bin/sh\n")
    (tmp_path / "here").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    a, b, c, d = (str(f) for f in folders.values())
    paths = [None, "", ":", os.pathsep.join([a, b, c]), os.pathsep.join([d, c]), os.pathsep.join([a, b]),
             os.pathsep.join([a, "", c]), os.pathsep.join([c, c, d]), os.pathsep.join(["", a]), a + os.pathsep,
             os.pathsep.join(["relative", c])]
    names = ["tool", "dangling", "here", "missing", "sh", "./here", str(tmp_path / "here"), "c/tool", "a/tool"]
    for path in paths:
        if path is None:
            monkeypatch.delenv("PATH", raising=False)
        else:
            monkeypatch.setenv("PATH", path)
        for name in names:
            assert host.which(name) == shutil.which(name), (path, name)
    monkeypatch.setenv("PATH", os.pathsep.join([a, b, c]))
    assert host.which("tool") == os.path.join(c, "tool")  # the comparison above compared something


def test_find_tool_looks_on_path_through_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ortfix.system.project import find_tool

    (tmp_path / "uv").write_text("#!/bin/sh\n")
    (tmp_path / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_tool("uv") == shutil.which("uv") == str(tmp_path / "uv")


def test_text_isprintable_accepts_has_nothing_safetext_escapes() -> None:
    """safetext's shortcut (no pattern compiled for printable text) rests on this: every character its patterns
    escape is one `str.isprintable` refuses; and each function answers as its pattern does, on either side of it."""
    from ortfix import safetext

    escaped = [chr(c) for c in range(0x110000) if safetext._shown().fullmatch(chr(c))]
    assert len(escaped) > 2048 and all(not ch.isprintable() for ch in escaped)
    samples = ["plain", "", "a\nb", "a\r\nb", "tab\there", "esc\x1b[31m", "ok ✓ ✗ ü 中文", "\u2028", "x\u202ey",
               "\udcff", "\u00a0nbsp", "zw\u200bsp", "\ufeff", "line\n\u2066iso\u2069\n", "\x85", "end\n"]
    for text in samples:
        assert safetext.visible(text) == safetext._shown().sub(safetext._escape, text)
        assert safetext.visible_lines(text) == safetext._shown_in_lines().sub(safetext._escape_in_lines, text)
        for surrogates in (False, True):
            match = (safetext._shown() if surrogates else safetext._control()).search(text)
            assert safetext.first_control(text, surrogates=surrogates) == (match.group(0) if match else None)


@pytest.mark.skipif(sys.platform == "win32", reason="the Linux inventory's toolkit folders")
def test_toolkit_folders_are_found_as_glob_finds_them(tmp_path: Path) -> None:
    """system/linux/inventory.py lists /usr/local/cuda* and each toolkit's targets/*/lib without glob: the same
    paths as glob.glob, sorted, over entries of every kind."""
    import glob

    from ortfix.system.linux.inventory import target_lib_dirs, toolkits

    root = tmp_path / "local"
    for name in ("cuda", "cuda-12.4", "cuda-13.0", "cudax", "notcuda", ".cuda", "cud"):
        (root / name).mkdir(parents=True)
    (root / "cuda-file").write_text("not a folder")
    (root / "cuda-link").symlink_to(root / "cuda-12.4")
    (root / "cuda-broken").symlink_to(root / "missing")
    targets = root / "cuda-12.4" / "targets"
    for name in ("x86_64-linux", "sbsa-linux", ".hidden", "no-lib"):
        (targets / name).mkdir(parents=True)
    for name in ("x86_64-linux", ".hidden"):
        (targets / name / "lib").mkdir()
    (targets / "sbsa-linux" / "lib").symlink_to(targets / "gone")  # a broken link: glob's lexists keeps it
    (targets / "a-file").write_text("")
    (targets / "linked").symlink_to(targets / "x86_64-linux")
    assert toolkits(str(root)) == sorted(glob.glob(str(root / "cuda*")))
    assert len(toolkits(str(root))) == 7
    for toolkit in [*toolkits(str(root)), str(tmp_path / "none")]:
        assert target_lib_dirs(toolkit) == sorted(glob.glob(os.path.join(toolkit, "targets", "*", "lib")))
    assert len(target_lib_dirs(str(root / "cuda-12.4"))) == 3
    assert toolkits(str(tmp_path / "none")) == []


def test_a_check_resolves_each_path_once_and_only_while_it_runs(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A check resolved the same paths again and again (159 realpath calls for 61 paths on the bench venv): while it
    gathers and judges its facts each is resolved once (system/resolved.py); after it, a path is resolved anew."""
    from ortfix.commands.check import run_check
    from ortfix.system import resolved

    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(tmp_path / "cache"))
    libs = tmp_path / "libs"  # a library folder the check looks at (as a candidate, then for its libraries)
    libs.mkdir()
    monkeypatch.setenv("LD_LIBRARY_PATH", str(libs))
    asked: list[str] = []
    real = os.path.realpath

    def counting(path: str, **options: bool) -> str:
        if sys._getframe(1).f_code.co_filename == resolved.__file__:
            asked.append(path)
        return real(path, **options)

    monkeypatch.setattr(os.path, "realpath", counting)
    run_check(sys.executable)
    assert str(libs) in asked and len(asked) == len(set(asked)), sorted(asked)
    link = tmp_path / "link"
    link.symlink_to("one")
    assert resolved.realpath(str(link)) == str(tmp_path / "one")
    link.unlink()
    link.symlink_to("two")
    assert resolved.realpath(str(link)) == str(tmp_path / "two")


def test_the_matrix_folder_is_listed_as_pathlib_lists_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compat/load.py lists the matrix folder with str paths (a check imports no pathlib): the same files, in the same
    order, as Path.iterdir filtered by Path.suffix and sorted, for names at the edges of what a suffix is."""
    from ortfix.compat import load

    names = ["b.yaml", "A.yaml", "a.yml", ".yaml", "..yaml", "x.yaml.", "x.YAML", "c.json", "d.yaml.bak", "e..yml",
             "f.tar.yaml", "-.yaml", "z y.yaml"]
    for name in names:
        (tmp_path / name).write_text("")
    (tmp_path / "folder.yaml").mkdir()  # Path.iterdir lists folders too
    expected = sorted(p for p in tmp_path.iterdir() if p.suffix in (".yaml", ".yml"))
    assert len(expected) == 9
    for spelled in (tmp_path, str(tmp_path), f"{tmp_path}//", f"{tmp_path}/."):
        assert load.compat_files(spelled) == expected
        assert load.matrix_files_in(load.pathform.form(spelled)) == [str(p) for p in expected]
    monkeypatch.chdir(tmp_path)
    assert load.compat_files(".") == sorted(p for p in Path().iterdir() if p.suffix in (".yaml", ".yml"))
    monkeypatch.setenv("ORTFIX_COMPAT_DIR", f"{tmp_path}/./")
    assert load.compat_folder() == str(Path(f"{tmp_path}/./")) == str(load.default_compat_dir())
    monkeypatch.delenv("ORTFIX_COMPAT_DIR")
    here = Path(load.__file__)
    packaged = here.parents[1] / "_compat"
    assert load.compat_folder() == str(packaged if packaged.is_dir() else here.resolve().parents[3] / "compat")


@pytest.mark.skipif(sys.platform == "win32", reason="the Linux hook files")
def test_the_hook_files_check_reads_are_the_ones_apply_writes() -> None:
    """system/linux/hooks.py names the hook files as str for check (no pathlib) and as Path for plan and apply: the
    same paths, however the prefix or site-packages folder is spelled."""
    from ortfix.system.linux import hooks

    for folder in ("/", "/env", "/env/", "//env", "///env", "/a/./b", "/a/../b", "rel", "rel/", ".", "", "a//b"):
        conda = Path(folder) / "etc" / "conda"
        expected = (conda / "activate.d" / "ortfix-cuda-libs.sh", conda / "deactivate.d" / "ortfix-cuda-libs.sh")
        assert hooks.conda_hook_paths(folder) == expected
        assert hooks.conda_hook_files(folder) == tuple(str(p) for p in expected)
        assert hooks.preload_files(folder) == (str(Path(folder) / "_ortfix_preload.py"),
                                               str(Path(folder) / "_ortfix_preload.pth"))
