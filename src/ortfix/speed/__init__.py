"""What makes `check` fast, used by the command layer only: starting the probe early (check, plan),
recording what a check looked at on the file system, and replaying an identical earlier check.

Where a check's time goes (issue 22's targets: `check --fresh` <= 0.5x and a replayed `check` <= 0.3x the wall time
of `import onnxruntime`, scripts/bench_check.py; both not reached yet). Measured on the onnxruntime-gpu 1.22.0 venv
with its NVIDIA wheels (tests/ortvenvs.py `gpu_venv`), Python 3.11, as instructions of ortfix's own process under
callgrind (wall times on the shared 2-core machine vary by 2x between runs of the same tree):
- A replayed check is the interpreter's start (39M instructions with `site`, ~17 ms), the imports before the probe
  starts (~20 ms: `subprocess` 7 ms with `locale`, `threading`, `signal`, `selectors`; `pathlib` 3.4 ms with
  `urllib.parse` and `ipaddress`), then the probe itself (~29 ms, 13 of them the target's `python -S` start), which
  it waits for; the rest (commands/inputs.py's NamedTuples and `typing`, 5 ms; reading the saved check back) runs
  meanwhile. 168M instructions in all. What is left to take: the imports before the spawn (a `posix_spawn` start in
  subproc.py and a target chosen without pathlib) and the probe's own 16 ms (scanning the distributions, sysconfig).
- A fresh check (539M) is mostly imports (446M of it, measured by importing check's modules alone): defining the 44
  frozen dataclasses on its path costs about 4.2M instructions each (~185M, a third of the check: dataclasses
  compiles six methods per class at import), and importing `dataclasses` itself (`inspect`, `ast`, `dis`,
  `tokenize`) 72M. The probe (73M, in its own process) finishes while these imports still run. What is left to take:
  classes defined without `dataclasses`' per-class code generation, and the modules a Linux check without a project
  never uses (system/project.py, system/uvargs.py, check/windows.py) imported where they are used.
"""
