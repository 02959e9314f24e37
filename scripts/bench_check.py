#!/usr/bin/env python3
"""Benchmark `ortfix check` against the baseline it must beat, measured in the same run.

1. Builds (or reuses) a venv with onnxruntime-gpu 1.22.0 and its [cuda,cudnn] extras from your configured index.
2. Prints the median wall time of `ortfix check --python <venv>` and of `<venv>/bin/python -c "import onnxruntime"`,
   and their ratio (target: <= 0.3). `check` is measured as users repeat it: nothing changed since the previous run,
   so it replays (speed/replay.py: the probe and every file system observation are still made). `check --fresh`,
   what a check costs right after something changed, is printed next to it with its own ratio (target: <= 0.5).
3. Installs 1,000 unrelated distributions (tiny real wheels, with real pip) into a hard-linked copy of that venv and
   prints how `check` grows, replayed and fresh (target: <= 1.2x).

Usage: python scripts/bench_check.py [--venv DIR] [--runs N] [--distributions N (0: skip step 3)]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ortfix.speed.replay import RACY_MARGIN_NS

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from support.fixtures import build_wheel  # noqa: E402  (the same real-wheel writer the tests use)

DEFAULT_VENV = Path(tempfile.gettempdir()) / "ortfix-bench-ort122"
SETTLE_S = RACY_MARGIN_NS / 1e9 + 0.2  # a check result is kept only once what it depends on has settled


def ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    marker = venv / ".ortfix-bench-ready"
    if marker.exists():
        return python
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "onnxruntime-gpu[cuda,cudnn]==1.22.0"], check=True)
    marker.write_text("ok\n")
    time.sleep(SETTLE_S)
    return python


def median_times(argvs: list[list[str]], runs: int, env: dict[str, str],
                 envs: list[dict[str, str]] | None = None) -> list[float]:
    """The median wall time of each command, their runs interleaved so that a machine that speeds up or slows down
    during the measurement (this one does) weighs on each alike. `envs`: each command's own environment."""
    samples: list[list[float]] = [[] for _ in argvs]
    for _ in range(runs):
        for argv, times, own_env in zip(argvs, samples, envs or [env] * len(argvs)):
            start = time.perf_counter()
            proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=own_env, check=False)
            times.append(time.perf_counter() - start)
            if proc.returncode not in (0, 1):
                raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {proc.stderr.decode()[-400:]}")
    return [statistics.median(times) for times in samples]


def with_many_distributions(venv: Path, count: int) -> Path:
    copy = venv.parent / (venv.name + f"-plus{count}")
    ready = copy / ".ortfix-bench-ready"
    if ready.exists():
        return copy / "bin" / "python"
    if copy.exists():
        shutil.rmtree(copy)
    # Hard links: instant, and pip only adds new files next to them.
    subprocess.run(["cp", "-al", str(venv), str(copy)], check=True)
    wheels = Path(tempfile.mkdtemp(prefix="ortfix-bench-wheels-"))
    names = [f"unrelated-dist-{i:04d}" for i in range(count)]
    for name in names:
        module = name.replace("-", "_")
        build_wheel(wheels, name, "1.0", {f"{module}/__init__.py": b"VALUE = 1\n"},
                    requires=["packaging"] if int(name[-4:]) % 10 == 0 else [])
    subprocess.run([str(copy / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--no-index", "--find-links", str(wheels), "--no-deps", *names], check=True)
    shutil.rmtree(wheels)
    ready.write_text("ok\n")
    time.sleep(SETTLE_S)
    return copy / "bin" / "python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--distributions", type=int, default=1000)
    args = parser.parse_args()

    ortfix = [sys.executable, "-m", "ortfix"]
    if shutil.which("ortfix") and Path(shutil.which("ortfix") or "").parent == Path(sys.executable).parent:
        ortfix = [str(Path(sys.executable).parent / "ortfix")]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "ORTFIX_NO_CACHE")}
    # A pip install byte-compiles ortfix; an editable checkout under PYTHONDONTWRITEBYTECODE=1 would not be, and
    # would be measured compiling its own sources on every run.
    import compileall

    import ortfix as ortfix_package

    compileall.compile_dir(str(Path(ortfix_package.__file__).parent), quiet=1)
    python = ensure_venv(args.venv)
    # The baseline byte-compiled too, as pip leaves it: a venv made under PYTHONDONTWRITEBYTECODE=1 (or copied from
    # one) would be measured compiling onnxruntime's sources on every import, a baseline that flatters the ratios.
    subprocess.run([str(python), "-m", "compileall", "-q", str(args.venv / "lib")], stdout=subprocess.DEVNULL,
                   check=False)
    check = [*ortfix, "check", "--python", str(python)]
    click_env = {**env, "ORTFIX_NO_FASTPATH": "1"}  # what the click-free path (cli/fastcheck.py) saves
    for warm_env in (env, click_env):  # warm the caches once (the environment is part of a replay's key)
        subprocess.run(check, stdout=subprocess.DEVNULL, env=warm_env, check=False)
    base, ours, fresh, via_click = median_times(
        [[str(python), "-c", "import onnxruntime"], check, [*check, "--fresh"], check], args.runs, env,
        envs=[env, env, env, click_env])
    print(f"import onnxruntime                  median {base * 1000:7.1f} ms  ({args.runs} runs)")
    print(f"ortfix check --python venv          median {ours * 1000:7.1f} ms  (repeated: replayed)")
    print(f"ortfix check --python venv --fresh  median {fresh * 1000:7.1f} ms  (everything looked at again)")
    print(f"  the same replayed check via click median {via_click * 1000:7.1f} ms  (ORTFIX_NO_FASTPATH=1)")
    print(f"ratio check / import                {ours / base:.2f}   (target <= 0.3)")
    print(f"ratio check --fresh / import        {fresh / base:.2f}   (target <= 0.5)")

    if args.distributions == 0:
        return
    many = with_many_distributions(args.venv, args.distributions)
    check_many = [*ortfix, "check", "--python", str(many)]
    subprocess.run(check_many, stdout=subprocess.DEVNULL, env=env, check=False)
    for label, extra in (("replayed", []), ("fresh", ["--fresh"])):
        ours_again, ours_many = median_times([[*check, *extra], [*check_many, *extra]], args.runs, env)
        print(f"ortfix check ({label}), +{args.distributions} distributions  median {ours_many * 1000:7.1f} ms "
              f"(same run without: {ours_again * 1000:.1f} ms)  growth {ours_many / ours_again:.2f}x   "
              "(target <= 1.2x)")


if __name__ == "__main__":
    main()
