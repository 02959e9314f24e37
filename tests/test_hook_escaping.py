"""The hook files are written into paths ortfix does not choose: a prefix may hold spaces, quotes, `$`, backticks,
backslashes, bytes that are not UTF-8, or a newline. Whatever it holds, a hook either works exactly (sourced in a real
sh, imported by a real interpreter) or is refused before anything is written, with one line; never does a path
become a command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from clitools import REPO, assert_one_line_error
from ortfix.errors import OrtfixError
from ortfix.system.linux import hooks
from support.fixtures import make_venv, pip_install
from txtools import assert_same_tree, tree_state

CONTROL = ["\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\u2028"]

# Names that would run something, or break the quoting, if a hook pasted them into shell or Python text.
NASTY_NAMES = [
    "sp ace",
    "q'uote'",
    'd"q"',
    "$HOME${HOME}",
    "`touch TICK`",
    "$(touch PWNED)",
    "back\\slash\\",
    "semi;colon&amp|pipe>out",
    "*glob?[x]",
    "~tilde",
    "-dash",
    "!bang",
    "#hash",
    "ünïcödé",
    "all of it: ' \" $(touch PWNED) `touch TICK` \\ ; * ~ #",
]

LIBM = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6", "/lib64/libm.so.6",
                         "/usr/lib/libm.so.6") if Path(p).exists()), None)
needs_libm = pytest.mark.skipif(LIBM is None, reason="no libm.so.6 at a known path")


# ---------------------------------------------------------------------------------------------------------------------
# refused: control characters, and (for the shell hooks) paths that are not UTF-8
# ---------------------------------------------------------------------------------------------------------------------


def _refused(exc: pytest.ExceptionInfo[OrtfixError], char: str) -> None:
    line = exc.value.rendered()
    assert "\n" not in line and char not in line, line  # one line, the character shown escaped
    assert "control character" in line and "move the environment to a plain path" in line
    assert exc.value.exit_code == 2


@pytest.mark.parametrize("char", CONTROL, ids=[repr(c) for c in CONTROL])
def test_control_character_in_the_prefix_is_refused(char: str) -> None:
    prefix = f"/tmp/x/co{char}cd;touch PWNED{char}#"
    with pytest.raises(OrtfixError) as exc:
        hooks.render_conda_activate([prefix + "/lib"], prefix)
    _refused(exc, char)
    with pytest.raises(OrtfixError) as exc:
        hooks.render_conda_deactivate(prefix)
    _refused(exc, char)
    site = prefix + "/lib/python3.11/site-packages"
    with pytest.raises(OrtfixError) as exc:
        hooks.render_preload_module([site + "/nvidia/cudnn/lib/libcudnn.so.9"], site)
    _refused(exc, char)


@pytest.mark.parametrize("char", CONTROL, ids=[repr(c) for c in CONTROL])
def test_control_character_in_a_library_folder_is_refused(char: str) -> None:
    prefix = "/opt/env"
    for folder in (f"{prefix}/lib/x{char}y", f"/usr/local/cuda{char}touch PWNED/lib64"):
        with pytest.raises(OrtfixError) as exc:
            hooks.render_conda_activate([f"{prefix}/lib", folder], prefix)
        _refused(exc, char)
    with pytest.raises(OrtfixError) as exc:
        hooks.render_preload_module([f"/usr/local/cuda{char}x/lib64/libcudart.so.12"], f"{prefix}/site-packages")
    _refused(exc, char)


def test_shell_hooks_refuse_paths_that_are_not_utf8() -> None:
    prefix = os.fsdecode(b"/tmp/env-\xff\xfe")
    renders: list[Callable[[], str]] = [
        lambda: hooks.render_conda_activate([prefix + "/lib"], prefix),
        lambda: hooks.render_conda_deactivate(prefix),
        lambda: hooks.render_conda_activate([os.fsdecode(b"/opt/\xff/lib")], "/opt/env")]
    for render in renders:
        with pytest.raises(OrtfixError, match="is not valid UTF-8") as exc:
            render()
        assert "\n" not in exc.value.rendered()


# ---------------------------------------------------------------------------------------------------------------------
# quoted: everything else works exactly, in a real shell and a real interpreter
# ---------------------------------------------------------------------------------------------------------------------


def _write_conda_hooks(prefix: Path, dirs: list[str]) -> tuple[Path, Path]:
    activate, deactivate = hooks.conda_hook_paths(str(prefix))
    activate.parent.mkdir(parents=True)
    deactivate.parent.mkdir(parents=True)
    activate.write_text(hooks.render_conda_activate(dirs, str(prefix)), encoding="utf-8")
    deactivate.write_text(hooks.render_conda_deactivate(str(prefix)), encoding="utf-8")
    return activate, deactivate


SHELLS = [s for s in ("sh", "bash", "dash") if shutil.which(s)]


# What the loader itself reads in LD_LIBRARY_PATH: separators and its own variables. A conda hook cannot carry them.
LOADER_SPECIAL = [n for n in NASTY_NAMES if ":" in n or ";" in n] + ["co:lon", "$ORIGIN/x", "${LIB}", "$PLATFORM"]


@pytest.mark.parametrize("name", LOADER_SPECIAL)
@pytest.mark.parametrize("where", ["prefix", "folder"])
def test_conda_hooks_refuse_what_the_loader_would_split_or_expand(tmp_path: Path, name: str, where: str) -> None:
    """`/home/u/a;lib` on LD_LIBRARY_PATH is `/home/u/a` plus a relative `lib`, searched in the current directory."""
    prefix = tmp_path / "envs" / (name if where == "prefix" else "plain")
    folder = prefix / "lib" / (name if where == "folder" else "plain") / "nvidia" / "cudnn" / "lib"
    with pytest.raises(OrtfixError) as info:
        hooks.render_conda_activate([str(folder)], str(prefix))
    assert "LD_LIBRARY_PATH" in info.value.message and "move the environment" in str(info.value.hint)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("name", [n for n in NASTY_NAMES if n not in LOADER_SPECIAL])
def test_conda_hooks_with_special_characters_in_a_real_shell(tmp_path: Path, name: str, shell: str) -> None:
    prefix = tmp_path / "envs" / name
    inside = prefix / "lib" / name / "nvidia" / "cudnn" / "lib"
    outside = tmp_path / "cuda" / name / "lib64"
    activate, deactivate = _write_conda_hooks(prefix, [str(inside), str(outside)])
    assert hooks.read_conda_hook(str(prefix)) == [str(inside), str(outside)]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    show = 'if [ -n "${LD_LIBRARY_PATH+x}" ]; then printf "set:%s\\n" "$LD_LIBRARY_PATH"; else echo unset; fi'
    script = f'. "$1"; {show}; . "$2"; {show}'
    for before in (None, "/opt/old lib:/usr/lib"):
        env = {"PATH": "/usr/bin:/bin", "CONDA_PREFIX": str(prefix), "HOME": str(tmp_path / "home")}
        if before is not None:
            env["LD_LIBRARY_PATH"] = before
        proc = subprocess.run([shell, "-c", script, shell, str(activate), str(deactivate)], capture_output=True,
                              text=True, env=env, cwd=cwd, check=False)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        tail = f":{before}" if before else ""
        assert proc.stdout.splitlines() == [f"set:{inside}:{outside}{tail}",
                                            "unset" if before is None else f"set:{before}"]
    assert list(cwd.iterdir()) == []  # nothing ran: no TICK, no PWNED, no `out`
    assert not any(p.name in ("TICK", "PWNED") for p in tmp_path.rglob("*"))


def _fake_onnxruntime(site: Path) -> None:
    (site / "onnxruntime").mkdir(parents=True, exist_ok=True)
    (site / "onnxruntime" / "__init__.py").write_text("")


def _import_with_hook(site: Path | bytes, code: str = "import onnxruntime", **env: str
                      ) -> subprocess.CompletedProcess[bytes]:
    script = "import site, sys; site.addsitedir(sys.argv[1]); " + code
    return subprocess.run([sys.executable, "-c", script, os.fsdecode(site) if isinstance(site, bytes) else site],
                          capture_output=True, env={"PATH": "/usr/bin:/bin", **env}, check=False)


@needs_libm
@pytest.mark.parametrize("name", NASTY_NAMES)
def test_preload_module_with_special_characters_in_a_real_interpreter(tmp_path: Path, name: str) -> None:
    assert LIBM is not None
    site = tmp_path / name / "site-packages"
    inside = site / "nvidia" / name / "lib" / "libm.so.6"
    outside = tmp_path / "cuda" / name / "libm.so.6"
    for lib in (inside, outside):
        lib.parent.mkdir(parents=True)
        shutil.copy(LIBM, lib)
    _fake_onnxruntime(site)
    module, pth = hooks.preload_paths(str(site))
    module.write_text(hooks.render_preload_module([str(inside), str(outside)], str(site)), encoding="utf-8")
    pth.write_text(hooks.render_preload_pth(), encoding="utf-8")
    assert hooks.read_preload_hook(str(site)) == [str(inside), str(outside)]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = subprocess.run([sys.executable, "-c", "import site, sys; site.addsitedir(sys.argv[1]); import onnxruntime",
                           str(site)], capture_output=True, text=True, cwd=cwd, check=False,
                          env={"PATH": "/usr/bin:/bin", "ORTFIX_PRELOAD_DEBUG": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [f"ortfix preload: loaded {inside}", f"ortfix preload: loaded {outside}"]
    assert list(cwd.iterdir()) == []


@needs_libm
def test_preload_module_with_paths_that_are_not_utf8(tmp_path: Path) -> None:
    """The preload module is Python source: `repr` writes such a path as escapes, and it loads from there."""
    assert LIBM is not None
    site = os.fsencode(tmp_path) + b"/site-\xff/site-packages"
    inside = site + b"/nvidia/\xfe/lib/libm.so.6"
    outside = os.fsencode(tmp_path) + b"/cuda-\xfd/libm.so.6"
    for lib in (inside, outside):
        os.makedirs(os.path.dirname(lib))
        shutil.copy(os.fsencode(LIBM), lib)
    site_s = os.fsdecode(site)
    _fake_onnxruntime(Path(site_s))
    module, pth = hooks.preload_paths(site_s)
    text = hooks.render_preload_module([os.fsdecode(inside), os.fsdecode(outside)], site_s)
    text.encode("utf-8")  # valid text, ready to be written
    module.write_text(text, encoding="utf-8")
    pth.write_text(hooks.render_preload_pth(), encoding="utf-8")
    assert hooks.read_preload_hook(site_s) == [os.fsdecode(inside), os.fsdecode(outside)]
    proc = _import_with_hook(site, ORTFIX_PRELOAD_DEBUG="1")
    assert proc.returncode == 0, proc.stderr
    # (the interpreter writes what is not UTF-8 to stderr as backslash escapes)
    assert proc.stderr.decode("ascii").splitlines() == [
        f"ortfix preload: loaded {os.fsdecode(lib)}".encode("utf-8", "backslashreplace").decode("ascii")
        for lib in (inside, outside)]


# ---------------------------------------------------------------------------------------------------------------------
# end to end: `ortfix plan` and `ortfix apply` on an environment at a path with a newline
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["conda", "venv"])
def test_plan_and_apply_refuse_a_prefix_with_a_newline(tmp_path: Path, wheelhouse: Path, layout: str) -> None:
    plain = tmp_path / "plain"
    python = make_venv(plain)
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)  # LIB002: a hook is planned
    if layout == "conda":
        (plain / "conda-meta").mkdir()
    prefix = tmp_path / "co\ncd;touch PWNED\n#"
    plain.rename(prefix)  # made at a plain path (pip's own scripts), then moved: the interpreter works from anywhere
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    before = tree_state(prefix)
    listing = sorted(os.listdir(tmp_path))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}

    def ortfix(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "ortfix", *args, "--python", str(prefix)], capture_output=True,
                              text=True, env=env, cwd=cwd, stdin=subprocess.DEVNULL, timeout=300, check=False)

    for args in (["plan"], ["plan", "--hook", "conda" if layout == "conda" else "preload"], ["apply", "--yes"]):
        assert_one_line_error(ortfix(*args), "contains a control character ('\\n')",
                              "move the environment to a plain path")
        assert_same_tree(before, tree_state(prefix))
        assert sorted(os.listdir(tmp_path)) == listing
        assert list(cwd.iterdir()) == []
    assert not (REPO / "PWNED").exists()
    assert not any(p.name == "PWNED" for p in tmp_path.rglob("*"))
