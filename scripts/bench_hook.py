#!/usr/bin/env python3
"""What ortfix's preload hook costs at start-up, measured in one run (median of N runs each, bytecode cached as for
a user; the first runs are warm-ups).

In a real onnxruntime-gpu[cuda,cudnn]==1.22.0 venv:
  python -c pass                       without the hook, then with it (the .pth imports a tiny module)
  python -c "import onnxruntime"       without the hook (libraries not loaded: the CUDA provider would fail)
  ... + onnxruntime.preload_dlls()     without the hook: ORT's own loader for the NVIDIA wheels
  python -c "import onnxruntime"       with the hook (it loads the same libraries by absolute path)

The hook is installed with `ortfix apply --yes` and removed again with `ortfix rollback --yes`.

Usage: python scripts/bench_hook.py [--venv DIR] [--wheelhouse DIR] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GPU = "onnxruntime-gpu[cuda,cudnn]==1.22.0"


def child_env(base: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "CONDA_PREFIX",
                                                      "PYTHONPATH")}
    return env


def median_ms(argv: list[str], runs: int, env: dict[str, str]) -> float:
    samples = []
    for i in range(runs + 2):
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"failed: {argv}\n{proc.stderr[-1500:]}")
        if i >= 2:
            samples.append(elapsed * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "ortfix-bench-hook")
    parser.add_argument("--wheelhouse", type=Path, help="install from these wheels only (no index)")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    env = child_env(dict(os.environ))
    if args.wheelhouse is not None:
        conf = Path(tempfile.mkdtemp()) / "pip.conf"
        conf.write_text(f"[global]\nno-index = true\nfind-links = {args.wheelhouse}\n")
        env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = str(conf)
    venv: Path = args.venv
    python = venv / "bin" / "python"
    if not (venv / ".ortfix-bench-ready").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", GPU], env=env, check=True)
        (venv / ".ortfix-bench-ready").write_text("ok\n")
    ortfix = [sys.executable, "-m", "ortfix"]
    runs = args.runs
    imp = "import onnxruntime"
    pre = "import onnxruntime; onnxruntime.preload_dlls()"
    check = "import ctypes, onnxruntime; ctypes.CDLL('libcudnn.so.9'); ctypes.CDLL('libcublasLt.so.12')"

    pass_plain = median_ms([str(python), "-c", "pass"], runs, env)
    import_plain = median_ms([str(python), "-c", imp], runs, env)
    import_preload = median_ms([str(python), "-c", pre], runs, env)
    subprocess.run([*ortfix, "apply", "--python", str(python), "--yes"], env=env, stdin=subprocess.DEVNULL,
                   capture_output=True, check=True)
    try:
        subprocess.run([str(python), "-c", check], env=env, check=True)  # the hook really loads them
        pass_hook = median_ms([str(python), "-c", "pass"], runs, env)
        import_hook = median_ms([str(python), "-c", imp], runs, env)
    finally:
        subprocess.run([*ortfix, "rollback", "--python", str(python), "--yes"], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, check=True)

    print(f"venv {venv} ({GPU}), median of {runs} runs each")
    print(f"python -c pass                                  no hook {pass_plain:7.1f} ms   hook {pass_hook:7.1f} ms"
          f"   (+{pass_hook - pass_plain:.1f} ms)")
    print(f"python -c 'import onnxruntime'                  no hook {import_plain:7.1f} ms   (libraries not loaded)")
    print(f"import onnxruntime; onnxruntime.preload_dlls()  no hook {import_preload:7.1f} ms")
    print(f"python -c 'import onnxruntime'                     hook {import_hook:7.1f} ms   "
          f"(vs preload_dlls: {import_hook - import_preload:+.1f} ms)")


if __name__ == "__main__":
    main()
