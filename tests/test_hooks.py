"""The hook files plan shows are the ones apply will write: they must work in a real shell and a real interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ortfix.system.linux import hooks
from support.fixtures import make_venv

NASTY = "env with space 'quote\" $HOME `x`"


def _sh(script: str, env: dict[str, str], *args: str) -> str:
    # Paths travel as positional arguments ("$1"), never pasted into the script text.
    return subprocess.run(["sh", "-c", script, "sh", *args], capture_output=True, text=True, env=env,
                          check=True).stdout


@pytest.mark.parametrize("before", [None, "", "/opt/old:/usr/lib"])
def test_conda_hooks_prepend_and_restore_exactly(tmp_path: Path, before: str | None) -> None:
    prefix = tmp_path / NASTY
    libdir = prefix / "lib" / "python3.11" / "site-packages" / "nvidia" / "cublas" / "lib"
    outside = "/usr/local/cuda-12.4/lib64"
    activate, deactivate = hooks.conda_hook_paths(str(prefix))
    activate.parent.mkdir(parents=True)
    deactivate.parent.mkdir(parents=True)
    activate.write_text(hooks.render_conda_activate([str(libdir), outside], str(prefix)))
    deactivate.write_text(hooks.render_conda_deactivate(str(prefix)))
    env = {"PATH": "/usr/bin:/bin", "CONDA_PREFIX": str(prefix)}
    if before is not None:
        env["LD_LIBRARY_PATH"] = before
    # `.` the scripts exactly as conda does, then print the variable NUL-terminated (or say it is unset)
    show = 'if [ -n "${LD_LIBRARY_PATH+x}" ]; then printf "set:%s\\n" "$LD_LIBRARY_PATH"; else echo unset; fi'
    out = _sh(f'. "$1"; {show}; . "$2"; {show}', env, str(activate), str(deactivate)).splitlines()
    expected_active = f"{libdir}:{outside}" + (f":{before}" if before else "")
    assert out[0] == f"set:{expected_active}"
    assert out[1] == ("unset" if before is None else f"set:{before}")
    assert hooks.read_conda_hook(str(prefix)) == [str(libdir), outside]


@pytest.mark.parametrize("before", [None, "/opt/old"])
def test_stacked_conda_environments_each_restore_their_own(tmp_path: Path, before: str | None) -> None:
    """`conda activate A; conda activate --stack B; conda deactivate; conda deactivate` with both hooked: each
    deactivate puts back exactly what its activate found."""
    scripts = []
    for name in ("A", f"B {NASTY}"):
        prefix = tmp_path / name
        libdir = prefix / "lib" / "nvidia" / "lib"
        activate, deactivate = hooks.conda_hook_paths(str(prefix))
        activate.parent.mkdir(parents=True)
        deactivate.parent.mkdir(parents=True)
        activate.write_text(hooks.render_conda_activate([str(libdir)], str(prefix)))
        deactivate.write_text(hooks.render_conda_deactivate(str(prefix)))
        scripts.append((str(prefix), str(activate), str(deactivate), str(libdir)))
    (a_prefix, a_on, a_off, a_lib), (b_prefix, b_on, b_off, b_lib) = scripts
    env = {"PATH": "/usr/bin:/bin"}
    if before is not None:
        env["LD_LIBRARY_PATH"] = before
    show = 'if [ -n "${LD_LIBRARY_PATH+x}" ]; then printf "set:%s\\n" "$LD_LIBRARY_PATH"; else echo unset; fi'
    # CONDA_PREFIX is what conda sets for the environment being (de)activated
    script = (f'CONDA_PREFIX="$1"; . "$2"; {show}; CONDA_PREFIX="$4"; . "$5"; {show}; . "$6"; {show}; '
              f'CONDA_PREFIX="$1"; . "$3"; {show}')
    out = _sh(script, env, a_prefix, a_on, a_off, b_prefix, b_on, b_off).splitlines()
    tail = f":{before}" if before else ""
    assert out == [f"set:{a_lib}{tail}", f"set:{b_lib}:{a_lib}{tail}", f"set:{a_lib}{tail}",
                   "unset" if before is None else f"set:{before}"]


@pytest.mark.parametrize("before", [None, "/opt/old"])
def test_conda_deactivate_keeps_what_was_set_after_activation(tmp_path: Path, before: str | None) -> None:
    """The deactivate hook takes out what its activate hook put first, from LD_LIBRARY_PATH as it is then: a folder
    the user (or another package's activate.d) added meanwhile stays. Putting back the value saved at activation
    dropped it."""
    prefix = tmp_path / NASTY
    libdir = prefix / "lib" / "nvidia" / "cudnn" / "lib"
    activate, deactivate = hooks.conda_hook_paths(str(prefix))
    activate.parent.mkdir(parents=True)
    deactivate.parent.mkdir(parents=True)
    activate.write_text(hooks.render_conda_activate([str(libdir)], str(prefix)))
    deactivate.write_text(hooks.render_conda_deactivate(str(prefix)))
    env = {"PATH": "/usr/bin:/bin", "CONDA_PREFIX": str(prefix)}
    if before is not None:
        env["LD_LIBRARY_PATH"] = before
    show = 'if [ -n "${LD_LIBRARY_PATH+x}" ]; then printf "set:%s\\n" "$LD_LIBRARY_PATH"; else echo unset; fi'
    script = f'. "$1"; export LD_LIBRARY_PATH="/mine:$LD_LIBRARY_PATH"; . "$2"; {show}'
    out = _sh(script, env, str(activate), str(deactivate)).splitlines()
    assert out == ["set:/mine" + (f":{before}" if before else "")]


def test_preload_hook_loads_only_when_onnxruntime_is_imported(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "onnxruntime").mkdir(parents=True)
    (site / "onnxruntime" / "__init__.py").write_text("")
    libc = "/lib/x86_64-linux-gnu/libm.so.6" if Path("/lib/x86_64-linux-gnu/libm.so.6").exists() else "libm.so.6"
    module, pth = hooks.preload_paths(str(site))
    module.write_text(hooks.render_preload_module([libc], str(site)))
    pth.write_text(hooks.render_preload_pth())
    code = ("import sys; print('before', '_ortfix_preload' in sys.modules); import onnxruntime; "
            "print('after', [m for m in sys.meta_path if 'Ortfix' in repr(m)])")
    env = {"PYTHONPATH": "", "ORTFIX_PRELOAD_DEBUG": "1", "PATH": "/usr/bin:/bin"}
    # site.addsitedir processes .pth files the same way site-packages does
    script = f"import site; site.addsitedir({str(site)!r}); " + code
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert "before True" in proc.stdout
    assert "after []" in proc.stdout  # the hook removed itself once it fired
    assert f"loaded {libc}" in proc.stderr
    assert hooks.read_preload_hook(str(site)) == [libc]


# ---------------------------------------------------------------------------------------------------------------------
# The preload hook never breaks the interpreter's start-up (or `import onnxruntime`), whatever became of its module
# ---------------------------------------------------------------------------------------------------------------------


def _venv_with_preload_hook(tmp_path: Path, libraries: list[str]) -> tuple[Path, Path]:
    """A real venv with the preload hook written by the real render functions; (its interpreter, its purelib)."""
    python = make_venv(tmp_path / "venv")
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    module, pth = hooks.preload_paths(str(purelib))
    module.write_text(hooks.render_preload_module(libraries, str(purelib)))
    pth.write_text(hooks.render_preload_pth())
    (purelib / "onnxruntime").mkdir()
    (purelib / "onnxruntime" / "__init__.py").write_text("")
    return python, purelib


def _start(python: Path, code: str = "pass", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **env}, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["deleted", "broken"])
def test_preload_pth_is_silent_when_its_module_is_gone_or_broken(tmp_path: Path, damage: str) -> None:
    python, purelib = _venv_with_preload_hook(tmp_path, ["libm.so.6"])
    assert _start(python, "import sys; print('_ortfix_preload' in sys.modules)").stdout == "True\n"
    module, _pth = hooks.preload_paths(str(purelib))
    if damage == "deleted":
        module.unlink()
    else:
        module.write_text("raise RuntimeError('half-written')\n")
    for code in ("pass", "import onnxruntime; print('imported')"):
        proc = _start(python, code)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    proc = _start(python, "pass", ORTFIX_PRELOAD_DEBUG="1")
    assert proc.returncode == 0
    [line] = proc.stderr.splitlines()  # one line, even where site.py reads the .pth twice (Python 3.11 venvs)
    assert line.startswith("ortfix preload: the preload hook is not active (")
    assert ("ModuleNotFoundError" if damage == "deleted" else "RuntimeError: half-written") in line
    assert hooks.PRELOAD_PTH in line and "ortfix rollback" in line


@pytest.mark.slow
def test_preload_module_never_raises(tmp_path: Path) -> None:
    python, _purelib = _venv_with_preload_hook(tmp_path, ["/nonexistent/libcudnn.so.9", "libm.so.6"])
    # A library that does not load is left to ORT's own message; ctypes missing (a stripped interpreter) is too.
    for code in ("import onnxruntime; print('imported')",
                 "import sys; sys.modules['ctypes'] = None; import onnxruntime; print('imported')"):
        proc = _start(python, code)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "imported\n", ""), proc.stderr
    proc = _start(python, "import sys; sys.modules['ctypes'] = None; import onnxruntime",
                  ORTFIX_PRELOAD_DEBUG="1")
    assert proc.returncode == 0
    [line] = proc.stderr.splitlines()
    assert line.startswith("ortfix preload: cannot load anything: ") and "import of ctypes halted" in line


def test_preload_pth_is_one_import_line() -> None:
    line = hooks.render_preload_pth()
    assert line.endswith("\n") and line.count("\n") == 1
    assert line.startswith("import ")  # what makes site.py execute it
    compile(line, "_ortfix_preload.pth", "exec")
