"""What makes `check` fast, used by the command layer only: starting the probe early (check, plan),
recording what a check looked at on the file system, and replaying an identical earlier check.

Where a check's time goes (issue 22's targets: `check --fresh` <= 0.5x and a replayed `check` <= 0.3x the wall time
of `import onnxruntime`, scripts/bench_check.py). Measured on the onnxruntime-gpu 1.22.0 venv with its NVIDIA wheels
(tests/ortvenvs.py `gpu_venv`), Python 3.11, on the shared 2-core machine (load average 4-6), after the last round of
issue 22 (the probe's C encoder, no `typing` or gettext on a replay, lazier imports): old and new tree interleaved in
one run, 31 rounds, median wall time against `import onnxruntime`'s: replayed 0.38 -> 0.30 and 0.35 -> 0.31, fresh
0.76 -> 0.67 and 0.81 -> 0.72; alternate runs of `scripts/bench_check.py --runs 15 --distributions 0` (each against
its own import) scatter as much as they differ: replayed 0.37-0.41 -> 0.32-0.40, fresh 0.77-0.83 -> 0.77-0.89.
Instructions of ortfix's own process (callgrind, steady against load): replayed 172.4M -> 140.7M, fresh 543.5M ->
518.9M; the probe's 78.7M -> 73.0M.
- A replayed check was the interpreter's start (38M instructions with `site`, ~17 ms), the imports before the probe
  started (~20 ms: `subprocess` 7 ms with `locale`, `re`, `threading`, `signal`, `selectors`; `pathlib` 3.4 ms with
  `urllib.parse` and `ipaddress`), then the probe (~29 ms, 13 of them the target's `python -S` start), which it waits
  for; reading the saved check back and looking again at what it saw ran meanwhile. Now (early.py) the probe starts
  right after the command line is read, with `os.posix_spawn`, before `subprocess`, `pathlib` or the CLI are
  imported; the rest of ortfix's work overlaps it, and a replay reads its answer without importing `subprocess`
  (childtime.collect). The probe ends with `os._exit` once its report is out (no interpreter teardown). Callgrind,
  ortfix's own process (a replayed `check --python V`, the bench venv): instructions before the probe starts 108.7M
  -> 68.9M (38M of them the interpreter's start with `site`, 25M the `import re` of pip's console-script wrapper),
  after it 32.5M -> 63.5M (it overlaps the probe), in all 141.1M -> 132.4M; the probe 73.0M -> 65.2M. The critical
  path (the start of the probe, then the longer of the probe and the rest) is 181.7M -> 134.1M. Wall time against
  `import onnxruntime`, old and new tree interleaved in one run (/tmp's copy of the tree at the previous commit, its
  own venv), 31 rounds, medians, load average 4: replayed 0.364 -> 0.279 (116.7 -> 89.6 ms against 320.8 ms),
  `--fresh` 0.64 -> 0.56; scripts/bench_check.py alone (21 rounds, load 3.8): replayed 0.29, fresh 0.53. What is
  left: the probe is the critical path now (its `-S` start 27.7M, sysconfig, the distribution scan), and before it
  the interpreter's start and the wrapper's `re`, which ortfix does not control.
- A fresh check was mostly imports (443M of its 519M instructions, measured by importing check's modules alone), a
  third of them defining the 41 frozen dataclasses on its path (~4.2M each: `dataclasses` compiles six methods per
  class, one `exec` each) and 72M importing `dataclasses` itself (`inspect`, `ast`, `dis`, `tokenize`). They are
  records now (ortfix/record.py: methods written once, reading each class's field table; `dataclasses` is imported
  only where something off check's path asks for `__dataclass_fields__`). Measured after that change (issue 22, same
  venv, byte-compiled trees: PYTHONDONTWRITEBYTECODE=1 otherwise makes every run compile ortfix's sources, 190 ms),
  callgrind of ortfix's own process: fresh 517.7M -> 321.3M instructions, replayed 137.2M -> 137.0M (unchanged: a
  replay imports none of these); wall time against `import onnxruntime`, old and new tree interleaved in one run, 21
  rounds, medians (load average 2-3): fresh 0.91 -> 0.66 and 0.84 -> 0.63 (CPU time 0.87 -> 0.62), replayed 0.35 ->
  0.33 and 0.35 -> 0.38 (noise).
- The next round (issue 22) took what the fresh path imported and compiled without needing it: `packaging.version`
  (its regex compiled at import: the `Version` of compat/versions.py holds a plain release as its numbers and asks
  packaging only for anything else), `typing` (check/findings.py's 22 payload TypedDicts, a ForwardRef compiled
  per field, were 19M alone; the platform seam's Protocols moved to system/platform_protocols.py; the rest for mypy
  only),
  `shutil` with `bz2` and `lzma` (the host's `which`, system/host.py), uv's option translation and the wheelhouse
  manifest (facts only asks where uv is), safetext's patterns (printable text is returned as it is), `shlex` and the
  Windows-only rules; a record made with every field is assigned at once (record.py), and ld.so.cache's table is
  read in one pass. Measured on the same venv and machine (load average 2-4), old and new tree in one run: callgrind
  of ortfix's own process, five runs each, fresh 330.1M -> 275.4M instructions (min; median 342.7M -> 278.7M: the
  count moves with how the probe's output arrives), replayed 146.5M -> 143.5M (min of six); interleaved medians of
  31 rounds (`python -m ortfix`, wait4's CPU time of the process and its probe): fresh 155.2 -> 138.7 ms wall, 0.61x
  -> 0.54x `import onnxruntime`'s, CPU 0.61x -> 0.55x (an earlier run: 0.61x -> 0.53x); replayed unchanged (96.8 ->
  95.9 ms). scripts/bench_check.py on the new tree, three runs minutes apart: fresh 0.50, 0.59, 0.51 (the machine's
  load moves the baseline, 199-239 ms, more than the change moves the check). What is left on the fresh path:
  `configparser` (8.5M, only where pip configuration files exist: this machine has three), the `enum` classes
  (check/codes.py, cli/output.py: ~250 us for 13 members), ortfix's own module bodies (~75M: unmarshalling 28M of
  the process's, 71 classes) and the check's work (~60M: ld.so.cache's 570 entries, 158 realpath calls of which 61
  distinct, the owner checks run as root).
- The round after it (issue 22) took what was left that changes no output: the probe resolves sys.path's folders
  once instead of once per scan (each a realpath) and splits only METADATA's header block; a text `check` no longer
  imports the JSON envelope's module (cli/output.py, its `Command` enum); the CUDA toolkits under /usr/local are
  listed without `glob` (its import and fnmatch's patterns, ~5M); the project-file listing of the venv's folder
  (/tmp here: 2,300 entries, 3 ms of a replay's 4 ms of looking again) is matched with `filter`; `math` (a shared
  library to load) is imported only where a timeout is read. Callgrind, old and new tree (`python -m ortfix`, the
  bench venv, three runs each, steady to 0.1%): fresh 276.5M -> 271.0M, replayed 132.7M -> 131.2M, the probe 65.3M
  -> 64.3M. Wall time, old and new tree interleaved against `import onnxruntime` (`python -m ortfix`, each tree its
  own cache folder; 21 rounds at load 2.6, then 31 at 2.5): replayed 0.372x -> 0.347x and 0.321x -> 0.303x, fresh
  0.587x -> 0.574x and 0.554x -> 0.543x (within the noise); scripts/bench_check.py (21 rounds): the old tree 0.33x
  replayed, 0.42x fresh (load 2), the new one 0.28x, 0.47x (load 3). A repeated check that now and then ran in full
  was the cache's pruning: it kept the entries written last, so the check replayed most (never written again) went
  first once 64 others had been saved (a shared cache folder here held 64); a replay now dates its entry. What is
  left is fixed cost: before the probe starts, the interpreter's start with `site` (38M) and the `import re` of
  pip's console-script wrapper (25M; ortfix imports `re` itself on both paths, so it is paid once, only earlier);
  the probe's `python -S` start (27.7M), `os` and `site` (6.8M), `sysconfig.get_paths()` (5.7M: distributions patch
  their schemes, so only sysconfig can answer) and its 583 size checks; after the start, `pathlib` (18M with
  `urllib.parse` and `ipaddress`: Path runs through choose.py, replay.py and the cache folder) and, on a fresh check
  only, `configparser` (8.5M, where pip configuration files exist: pip's whole reading, every key and error, would
  have to be matched) and `subprocess` (~20M: the loader and driver queries run children).
- A replay imports no `pathlib` (with `fnmatch`, `ntpath`, `urllib.parse`, `ipaddress`) nor `contextlib` now: choosing
  the target, the prefetch, the replay and the cache folder use str paths (system/pathform.py answers as Path does,
  its errors included); as root, the owner check before the probe starts walks each folder once (3.2M -> 2.5M).
  Callgrind of ortfix's own process, replayed `check --python V` (bench venv, three runs each, steady to 0.1%): after
  the probe's spawn 62.07M -> 43.88M, before it 69.9M -> 68.7M; fresh 272.0M -> 269.9M (`pathlib` still comes with
  system/linux/ldcache.py, driver.py, target/probe.py, compat/load.py). Wall time, old and new tree interleaved:
  replayed 94.1 -> 85.7 ms, 0.280x -> 0.255x `import onnxruntime` (31 rounds, load 2.2), 115.4 -> 92.3 ms, 0.303x ->
  0.243x (41 rounds, load 4.7). The parent now reaches the probe's answer first and waits for it (median 11 ms, was
  1.9): the probe is the critical path, and what is left of the parent's own work after the spawn (`json` 5.2M, the
  probe's source read and filtered again to compare the early argv, ~2M) would not shorten a replay until it is not.
- The probe's own run (issue 22; callgrind of the argv the parent starts, the bench venv): the bootstrap carried the
  probe's 26,000-character source as its fallback, which the target decoded with the locale's decoder (mbstowcs),
  copied and parsed before running a line (6.7M); the source now travels in the probe's environment
  (probecmd.SOURCE_VAR, read only where the cached copy cannot be imported). An unrelated distribution's METADATA is
  searched in its header block. The probe 64.4M -> 57.1M instructions (its work after the `-S` start 36.7M -> 29.5M;
  CPU-only venv 58.5M -> 51.3M), output byte-identical. Before the spawn, the probe's module name is hashed with
  `_imp.source_hash` (zlib's library: 1.1M) and its source stripped once per process: 69.4M -> 66.5M; after it 61.4M
  -> 58.6M. Left: the probe's scan (RECORD rows 5.3M; 565 stats 4.2M, each building three times as int and float),
  `sysconfig.get_paths()` (5.6M: `_sysconfigdata` 2.5M, two full expansions with ~800 variables), the JSON encoding
  (3.8M, the C escaper's), and as root the owner checks before the spawn (3.4M: 15 realpath calls).
- A fresh check (issue 22, the round after) imports neither `subprocess` (the probe started early is waited for as a
  replay waits for it: target/proberun.EarlyProbe, childtime.collect; the loader and driver queries import subproc
  only where they run a child) nor, for pip files of the plain form, `configparser` (pipconfig.simple_sections,
  compared with RawConfigParser over 4,000 generated files), nor `unicodedata` for ASCII text; ld.so.cache's paths
  are decoded for the names looked up only (10.4M -> 4.7M to read it and look up 40 names), and each path is
  resolved, each loader folder stat'ed and each loaded library identified once per check (system/resolved.py:
  159 realpath calls for 61 paths, ~930 folder stat calls, ~220 library stat calls). Callgrind of ortfix's own
  process, `--fresh` on the bench venv (three runs each, median): 282.5M -> 227.3M; replayed 138.1M -> 135.9M.
  Interleaved wall time against `import onnxruntime`, 31 rounds, load 2.8: fresh 0.548x -> 0.426x (152.9 ->
  118.8 ms), replayed 0.324x -> 0.329x (unchanged: it already collected the probe this way).
- A fresh check imports no `pathlib` (nor `fnmatch`, `ntpath` with its failed `nt`/`_winapi` lookups, `urllib.parse`,
  `ipaddress`, `warnings`), `contextlib` or `zlib` either (issue 22): ld.so.cache, the driver files, the probe's
  parser, the matrix loader (its cache file named with cachedir.digest, as the other cache files), ld.so's cached
  answer and the hook files take str paths; `suppress` is a try. 153 -> 138 modules. Callgrind of ortfix's own
  process, `ortfix check --python V --fresh` (console script, bench venv, three runs each, median): 216.4M -> 197.4M
  (`python -m ortfix`, whose runpy imports contextlib itself: 220.3M -> 208.9M; CPU-only venv 189.1M -> 170.6M);
  replayed 107.1M, unchanged. Interleaved wall time against `import onnxruntime` (console scripts, each tree its own
  cache folder): fresh 129.8 -> 121.0 ms, 0.426x -> 0.397x (31 rounds, load 2.3); 126.2 -> 116.8 ms, 0.445x -> 0.412x
  (41 rounds, load 2.5).
- The probe's report (issue 22, the round after): an ORT distribution's RECORD rows were 65 of its 68 KB, digests
  most of it; a row is now its path alone but where it may list the extension module, whose size and digest tell two
  builds apart (probe schema 2). RECORD rows are split with rpartition; pyvenv.cfg is read without importing the
  utf-8-sig codec. As root, the owner check resolves each folder once (owner._real: 134 lstat calls -> 67).
  Callgrind, the argv the parent starts (bench venv, three runs each): the probe 57.1M -> 54.6M (CPU-only venv
  51.3M -> 49.0M; its work after the `-S` start ~29.4M -> ~26.9M), report 70.2 -> 47.2 KB; a replay before the
  spawn 61.1M -> 60.5M (owner checks 2.95M -> 2.24M); the parent's json.loads and parse 0.41 -> 0.27 ms. Wall time,
  interleaved: the probe alone -0.8 ms (151 pairs, load 0.9); replayed check -0.9 ms, 0.275x -> 0.270x (81 rounds,
  load 1.4). Left: `sysconfig` (its get_config_vars expands every path once before ours does), the 565 size checks.
"""
