#!/usr/bin/env python3
"""Benchmark `ortfix apply` / `ortfix rollback` against the pip commands they stand for, measured in one run.

1. Downloads (once, with your pip configuration) the real wheels of the CPU→GPU swap: onnxruntime 1.22.0,
   onnxruntime-gpu 1.22.0 and the NVIDIA CUDA 12 wheels, into a wheelhouse. Every timed command afterwards uses a pip
   configuration with `no-index` and that wheelhouse only: no network, same inputs for both sides.
2. Makes three identical venvs with the CPU onnxruntime.
3. Times, on the same wheels: (a) `ortfix apply --installer pip --yes` in venv A, (b) `ortfix apply --installer uv
   --yes` in venv U (uv with a fresh, empty cache folder on the same filesystem: it unpacks every wheel, as pip
   does, and hard-links from its cache), (c) the plain pip commands the apply wraps in venv B (`pip uninstall -y
   onnxruntime` + `pip install <the plan's requirements>`). Ratios against (c); targets: (a) <= 1.1x, (b) <= 0.5x.
4. Times `ortfix rollback --yes` in A and, in B, reinstalling the previous packages with pip
   (`pip uninstall -y <the new distributions>` + `pip install onnxruntime==1.22.0`). Target: rollback >= 10x faster;
   and `ortfix rollback` of U's uv apply with no uv on PATH.

uv: `--uv PATH`, else `uv` on PATH, else pip-installed once (with your pip configuration) into a tools venv in the
work folder.

Usage: python scripts/bench_apply.py [--workdir DIR] [--wheelhouse DIR] [--uv PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CPU = "onnxruntime==1.22.0"
PLAN_REQS = ["onnxruntime-gpu==1.22.0", "nvidia-cublas-cu12~=12.0", "nvidia-curand-cu12~=10.0",
             "nvidia-cufft-cu12~=11.0", "nvidia-cuda-runtime-cu12~=12.0", "nvidia-cudnn-cu12~=9.0",
             "nvidia-cuda-nvrtc-cu12~=12.0"]


def run(argv: list[str], env: dict[str, str], *, quiet: bool = True) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=quiet, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{(proc.stderr or '')[-2000:]}")
    return elapsed


def offline_env(workdir: Path, wheelhouse: Path) -> dict[str, str]:
    conf = workdir / "pip-offline.conf"
    conf.write_text(f"[global]\nno-index = true\nfind-links = {wheelhouse}\ndisable-pip-version-check = true\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k not in ("VIRTUAL_ENV",
                                                                                       "CONDA_PREFIX")}
    empty = workdir / "no-config"
    empty.mkdir(exist_ok=True)
    env.update(PIP_CONFIG_FILE=str(conf), XDG_CONFIG_HOME=str(empty), XDG_CONFIG_DIRS=str(empty))
    return env


def find_or_install_uv(work: Path, given: Path | None) -> Path:
    if given is not None:
        return given
    found = shutil.which("uv")
    if found:
        return Path(found)
    tools = work / "uv-tools"
    uv = tools / "bin" / "uv"
    if not uv.exists():
        print(f"installing uv into {tools} (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True)
        subprocess.run([str(tools / "bin" / "python"), "-m", "pip", "install", "-q", "uv"], check=True)
    return uv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "ortfix-bench-apply")
    parser.add_argument("--wheelhouse", type=Path, help="use these wheels (already downloaded) instead")
    parser.add_argument("--uv", type=Path, help="the uv executable to measure (default: on PATH, else installed)")
    args = parser.parse_args()
    work: Path = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    wheelhouse = args.wheelhouse or work / "wheelhouse"
    if args.wheelhouse is None and not (wheelhouse / ".complete").exists():
        print(f"downloading the real wheels into {wheelhouse} (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wheelhouse), CPU, *PLAN_REQS],
                       check=True)
        (wheelhouse / ".complete").write_text("ok\n")
    env = offline_env(work, wheelhouse)
    uv = find_or_install_uv(work, args.uv)
    uv_bin = work / "uv-bin"  # only uv, first on PATH for the uv apply
    shutil.rmtree(uv_bin, ignore_errors=True)
    uv_bin.mkdir()
    (uv_bin / "uv").symlink_to(uv.resolve())
    uv_cache = work / "uv-cache"
    shutil.rmtree(uv_cache, ignore_errors=True)  # fresh: uv unpacks every wheel itself, as pip does
    uv_env = {**env, "PATH": f"{uv_bin}{os.pathsep}{env.get('PATH', '')}", "UV_CACHE_DIR": str(uv_cache)}
    # As when ortfix is installed (pip compiles it): start-up from cached bytecode, even under PYTHONDONTWRITEBYTECODE.
    import ortfix

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(ortfix.__file__).parent)], check=True)
    venvs = {}
    for name in ("A", "U", "B"):
        venv = work / f"venv-{name}"
        if venv.exists():
            shutil.rmtree(venv)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", CPU], env)
        venvs[name] = venv / "bin" / "python"
    a, u, b = venvs["A"], venvs["U"], venvs["B"]
    for wheel in wheelhouse.glob("*.whl"):  # both sides read the wheels from a warm page cache
        with wheel.open("rb") as f:
            while f.read(1 << 24):
                pass
    ortfix = [sys.executable, "-m", "ortfix"]

    t_apply = run([*ortfix, "apply", "--installer", "pip", "--python", str(a), "--yes"], env)
    t_uv = run([*ortfix, "apply", "--installer", "uv", "--python", str(u), "--yes"], uv_env)
    t_plain = (run([str(b), "-m", "pip", "uninstall", "-y", "-q", "onnxruntime"], env)
               + run([str(b), "-m", "pip", "install", "-q", *PLAN_REQS], env))

    history = json.loads(subprocess.run([*ortfix, "history", "--python", str(a), "--json"], env=env,
                                        capture_output=True, text=True, check=True).stdout)
    new = [c[2:].rsplit(" ", 1)[0] for c in history["transactions"][-1]["changes"] if c.startswith("+ ")
           and not c.startswith("+ /")]
    t_rollback = run([*ortfix, "rollback", "--python", str(a), "--yes"], env)
    t_reinstall = (run([str(b), "-m", "pip", "uninstall", "-y", "-q", *new], env)
                   + run([str(b), "-m", "pip", "install", "-q", CPU], env))
    t_rollback_uv = run([*ortfix, "rollback", "--python", str(u), "--yes"], env)  # env: no uv on PATH

    print()
    print(f"swap: {CPU} -> {', '.join(PLAN_REQS)} (offline wheelhouse {wheelhouse})")
    print(f"(c) plain pip uninstall + pip install           {t_plain:8.2f} s")
    print(f"(a) ortfix apply --installer pip --yes          {t_apply:8.2f} s   ratio {t_apply / t_plain:.2f}x "
          "(target <= 1.1x)")
    print(f"(b) ortfix apply --installer uv --yes           {t_uv:8.2f} s   ratio {t_uv / t_plain:.2f}x "
          f"(target <= 0.5x; {uv})")
    print(f"ortfix rollback --yes                           {t_rollback:8.2f} s")
    print(f"pip uninstall new + pip install previous        {t_reinstall:8.2f} s   rollback is "
          f"{t_reinstall / t_rollback:.1f}x faster (target >= 10x)")
    print(f"ortfix rollback --yes of the uv apply (no uv)   {t_rollback_uv:8.2f} s")
    print("(rollback returns once the environment is restored; the files the install added, moved aside by rename,"
          " are deleted in the background)")


if __name__ == "__main__":
    main()
