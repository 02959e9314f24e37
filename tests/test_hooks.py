"""The hook files plan shows are the ones apply will write: they must work in a real shell and a real interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ortfix import hooks

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
