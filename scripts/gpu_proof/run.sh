#!/usr/bin/env bash
# The real-GPU proof (issue "Prove the CUDA path on a real NVIDIA GPU"), run on a lent GPU machine that has no package
# index: python3 there holds torch (CUDA 13 build, with its NVIDIA wheels) and the CPU onnxruntime, seed 001's
# situation. Everything it installs comes from WHEELS (a folder of wheels carried to the machine).
#
#   bash scripts/gpu_proof/run.sh WHEELS OUTDIR [TARGET_PYTHON]
#
# Steps, each timed, its output kept in OUTDIR: the driver as the machine reports it (nvidia-smi, /proc, NVML), ortfix
# check on the target and on a --system-site-packages venv, a sha256 snapshot of the target, plan + apply (seed 001:
# the CPU package swapped for onnxruntime-gpu), verify (three levels), tune on a convolution model with changing
# shapes, rollback, a second snapshot and the difference. OUTDIR/summary.txt has one line per step.
set -u
wheels=$(cd "$1" && pwd); out=$2; target=${3:-$(python3 -c 'import sys; print(sys.executable)')}
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
mkdir -p "$out"; summary=$out/summary.txt; : >"$summary"
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=$wheels PIP_DISABLE_PIP_VERSION_CHECK=1
prefix=$("$target" -c 'import sys; print(sys.prefix)')

note() { echo "$*" | tee -a "$summary"; }
# step NAME CMD...: runs CMD with stdout to OUTDIR/NAME.out and stderr to NAME.err, notes rc and seconds
step() {
  local name=$1; shift
  local t0; t0=$(date +%s%N)
  "$@" >"$out/$name.out" 2>"$out/$name.err"; local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  note "$(printf '%-22s rc=%-3s %4d.%03ds' "$name" "$rc" $((ms / 1000)) $((ms % 1000)))"
  return $rc
}
snapshot() {  # every file and link under the target's prefix (ortfix's own .ortfix folder aside): sha256, mode, type
  (cd "$prefix" && find . -path ./.ortfix -prune -o \( -type f -o -type l \) -print0 \
    | xargs -0 -P 16 -n 200 sh -c 'for f; do if [ -L "$f" ]; then echo "link $(readlink "$f") $f";
        else echo "$(sha256sum <"$f" | cut -c1-64) $(stat -c %a "$f") $f"; fi; done' _ | sort -k3) >"$1"
}

# ortfix itself, in a venv of its own (no index here: its dependencies are wheels in WHEELS, ortfix is this checkout)
ofx=/tmp/ortfix-venv
python3 -m venv --without-pip "$ofx"
site=$("$ofx/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
python3 -m pip install -q --no-index --no-deps --target "$site" "$wheels"/click-*.whl "$wheels"/packaging-*.whl \
  "$wheels"/pyyaml-*.whl "$wheels"/pyelftools-*.whl "$wheels"/platformdirs-*.whl "$wheels"/pefile-*.whl
cp -r "$repo/src/ortfix" "$site/" && cp -r "$repo/compat" "$site/ortfix/_compat"
ortfix() { "$ofx/bin/python" -m ortfix "$@"; }

note "target $target (prefix $prefix)"
# 1. the driver as the machine itself reports it
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1
nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader >"$out/nvidia-smi.csv" 2>&1
cat /proc/driver/nvidia/version >"$out/proc-driver-nvidia-version.txt" 2>&1
cat /sys/module/nvidia/version >"$out/sys-module-nvidia-version.txt" 2>&1
"$ofx/bin/python" -c 'from ortfix.system.driver import _GPU_QUERY; print(_GPU_QUERY)' >/tmp/gpu_query.py
step nvml-query python3 /tmp/gpu_query.py; cp "$out/nvml-query.out" "$out/nvml-query.json"
note "nvidia-smi: $(cat "$out/nvidia-smi.csv")"
note "nvml: $(cat "$out/nvml-query.json")"
"$target" -m pip list >"$out/pip-list-before.txt" 2>&1
"$target" -m pip check >"$out/pip-check-before.txt" 2>&1

# 2. check: the target as it is, and a --system-site-packages venv on it
step check-text ortfix check --python "$target"
step check-json ortfix check --json --python "$target"
python3 -m venv --without-pip --system-site-packages /tmp/ssp-venv
step check-ssp-json ortfix check --json --python /tmp/ssp-venv/bin/python
"$ofx/bin/python" - "$out" <<'PY' | tee -a "$summary"
import json, sys
out = sys.argv[1]
smi = (open(out + "/nvidia-smi.csv").read().strip().splitlines() or [""])[0].split(", ") + ["?"] * 4
for name in ("check-json", "check-ssp-json"):
    doc = json.load(open("%s/%s.out" % (out, name)))
    drv = (doc.get("facts") or {}).get("driver") or {}
    gpus = drv.get("gpus") or [{}]
    print("%s: driver %s (smi %s), cuda %s, gpu %s cc %s (smi %s cc %s), findings %s" % (
        name, drv.get("version"), smi[3], drv.get("cuda_version"), gpus[0].get("name"),
        gpus[0].get("compute_capability"), smi[1], smi[2],
        sorted(f.get("code") for f in doc.get("findings", []))))
PY

# 3. seed 001 repaired: plan, apply, check, verify
"$target" -c 'import onnxruntime, numpy' 2>/dev/null  # bytecode the verification would write anyway
snapshot "$out/snapshot-before.txt"
step plan ortfix plan --python "$target"
step apply ortfix apply --yes --python "$target" \
  || { grep -q -- '--system' "$out/apply.err" && step apply-system ortfix apply --yes --system --python "$target"; }
step check-after ortfix check --python "$target"
"$target" -m pip check >"$out/pip-check-after.txt" 2>&1
note "pip check before: $(tail -1 "$out/pip-check-before.txt") | after: $(tail -1 "$out/pip-check-after.txt")"
step verify ortfix verify --python "$target"
step verify-json ortfix verify --json --python "$target"
"$target" -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available(), torch.backends.cudnn.version())' \
  >"$out/torch-after.txt" 2>&1; note "torch after apply: $(tail -1 "$out/torch-after.txt")"

# 4. tune on a convolution model with changing shapes (seed 004)
python3 "$here/conv_model.py" /tmp/tune_conv.onnx
step tune ortfix tune /tmp/tune_conv.onnx --python "$target" --shapes 1x3x224x224 \
  --shapes "1x3x256x320;2x3x192x160;1x3x288x224;4x3x128x128"
step tune-json ortfix tune --json /tmp/tune_conv.onnx --python "$target" --shapes 1x3x224x224 \
  --shapes "1x3x256x320;2x3x192x160;1x3x288x224;4x3x128x128"

# 5. rollback, byte for byte
step rollback ortfix rollback --yes --python "$target"
snapshot "$out/snapshot-after.txt"
if cmp -s "$out/snapshot-before.txt" "$out/snapshot-after.txt"; then
  note "rollback: byte-identical ($(wc -l <"$out/snapshot-before.txt") files and links)"
else
  diff "$out/snapshot-before.txt" "$out/snapshot-after.txt" >"$out/snapshot-diff.txt"
  note "rollback: DIFFERS ($(grep -c '^[<>]' "$out/snapshot-diff.txt") lines in snapshot-diff.txt)"
fi
step check-after-rollback ortfix check --python "$target"
(cd "$out" && tail -n 40 ./*.err >stderr-tails.txt 2>&1)
