#!/usr/bin/env bash
# The prepared device check of issue 21, for ONE call on a GPU machine (device tool `run`,
# with `.whl` carried; fill it here first with benchmarks/gpu_wheels.sh):
#
#   bash benchmarks/gpu_check.sh            # from the repo root; results under $OUT
#
# Steps, each under its own `timeout` (at most 475 s in all, kill grace included: under the
# 8 minutes of the plan, so one 10-minute call fits with device time left to rerun once):
#   1. install the carried wheels into /tmp/site                        (<= 20 s)
#   2. build minigluon_ext in place; on failure the NumPy fallback runs  (<= 60 s)
#   3. the device: nvidia-smi, and the versions Python sees             (<= 10 + 20 s)
#   4. python3 -m pytest tests/gpu and the CUDA kernels' tests, tests/ext/test_cuda_*.py,
#      which also run on a GPU where there is one (4 processes with pytest-xdist) (<= 225 s)
#   5. python3 benchmarks/gpu.py --torch-python python3, once per model  (<= 45 + 65 s)
# Files under $OUT (7, of the 8 that come back): summary.txt (the short answer), setup.log,
# device.txt, tests.log, tests.xml, bench.json, bench.err.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
START=$(date +%s)
export PYTHONUNBUFFERED=1
unset MINIGLUON_SIMULATED_GPUS MINIGLUON_GPU_TESTS   # a real GPU, nothing simulated

say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo "$(( $(date +%s) - START )) s"; }

say "gpu_check: $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# 1. wheels: pyzmq and tqdm are not in the device's image
if ls .whl/*.whl > /dev/null 2>&1; then
    if timeout 20 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --upgrade --target /tmp/site .whl/*.whl > "$OUT/setup.log" 2>&1; then
        say "wheels: installed $(cd .whl && ls *.whl | tr '\n' ' ')"
    else
        say "wheels: install FAILED (exit $?), see setup.log"
    fi
else
    say "wheels: none carried (no .whl/*.whl): run benchmarks/gpu_wheels.sh here, carry .whl"
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"

# 2. the C extension, in place (-j: the machine has 16 cores); GPU_CHECK_SKIP_BUILD=1 keeps
# the one there (a dry run of this script on a machine without a GPU)
if [ "${GPU_CHECK_SKIP_BUILD:-0}" = 1 ]; then
    say "extension: not built (GPU_CHECK_SKIP_BUILD=1)"
elif timeout 60 "$PY" setup.py build_ext --inplace -j 8 >> "$OUT/setup.log" 2>&1; then
    say "extension: built ($(ls minigluon_ext/_kernels*.so 2>/dev/null | xargs -n1 basename))"
else
    say "extension: build FAILED (exit $?): the NumPy fallback runs; see setup.log"
fi

# 3. the device and the software that will run
{
    timeout 10 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
        || echo "nvidia-smi failed (exit $?)"
    timeout 20 "$PY" - <<'PY' 2>&1
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
for name in ("numpy", "cupy", "torch", "zmq", "tqdm", "psutil", "pytest", "xdist"):
    try:
        mod = importlib.import_module(name)
        print(name, getattr(mod, "__version__", "?"))
    except Exception as err:
        print(name, "MISSING:", type(err).__name__, err)
import minigluon as mx, minigluon_ext
print("minigluon", mx.__version__, "num_gpus", mx.context.num_gpus(),
      "C kernels", minigluon_ext.native is not None)
try:
    import minigluon_ext.gpu
    print("minigluon_ext.gpu: imports")
except Exception as err:
    print("minigluon_ext.gpu: MISSING:", type(err).__name__, err)
PY
} > "$OUT/device.txt" 2>&1
say "device: $(head -1 "$OUT/device.txt")"
grep -E "MISSING|num_gpus" "$OUT/device.txt" | sed 's/^/  /' | tee -a "$SUMMARY"

# 4. tests/gpu and tests/ext/test_cuda_*.py (verbose, so that a run cut short still shows
# which tests ran)
# (plugins the image has, each used only when it imports: an unknown flag stops pytest)
extra=()
"$PY" -c "import xdist" 2>/dev/null && extra+=(-n 4)
"$PY" -c "import pytest_timeout" 2>/dev/null && extra+=(--timeout 120)
timeout -k 10 225 "$PY" -m pytest tests/gpu tests/ext/test_cuda_*.py -v -rfEs -p no:cacheprovider -o addopts="" \
    --durations 15 ${extra[@]+"${extra[@]}"} --junitxml "$OUT/tests.xml" \
    > "$OUT/tests.log" 2>&1
code=$?
say "tests: exit $code$([ $code -eq 124 ] && echo ' (TIMED OUT at 225 s)'), $(elapsed)"
for dir in tests/gpu tests/ext; do
    # one verbose line per test: 'tests/...::name PASSED', or '[gw2] ... PASSED tests/...'
    counts=$(grep -E '^(tests/|\[gw[0-9]+\])' "$OUT/tests.log" | grep -F "$dir/" \
             | grep -oE '\b(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b' | sort | uniq -c \
             | awk '{s = s (NR > 1 ? ", " : "") $1 " " tolower($2)} END {printf "%s", s}')
    say "  $dir: ${counts:-no results}"
done
grep -E "^(FAILED|ERROR) " "$OUT/tests.log" | head -25 | sed 's/^/  /' | tee -a "$SUMMARY"
grep -E "^SKIPPED" "$OUT/tests.log" | head -5 | sed 's/^/  /' | tee -a "$SUMMARY"
tail -1 "$OUT/tests.log" | sed 's/^/  /' | tee -a "$SUMMARY"

# 5. the benchmark, PyTorch on the same GPU: one run per model, so that a slow ResNet-18
# cannot take LeNet's figures with it (each run prints its JSON line into bench.json)
: > "$OUT/bench.json"
: > "$OUT/bench.err"
timeout -k 10 45 "$PY" benchmarks/gpu.py --torch-python "$PY" --models lenet --round-s 1 \
    >> "$OUT/bench.json" 2>> "$OUT/bench.err"
code=$?
say "benchmark lenet: exit $code$([ $code -eq 124 ] && echo ' (TIMED OUT at 45 s)'), $(elapsed)"
timeout -k 10 65 "$PY" benchmarks/gpu.py --torch-python "$PY" --models resnet18 --round-s 1 \
    >> "$OUT/bench.json" 2>> "$OUT/bench.err"
code=$?
say "benchmark resnet18: exit $code$([ $code -eq 124 ] && echo ' (TIMED OUT at 65 s)'), $(elapsed)"
"$PY" - "$OUT/bench.json" <<'PY' 2>&1 | tee -a "$SUMMARY"
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
if not lines:
    sys.exit("  no JSON line: see bench.err")
for result in map(json.loads, lines):
    if "skipped" in result:
        print(f"  skipped: {result['skipped']}")
        continue
    print(f"  device {result['device']}, torch {result['torch']}, {result['rounds']} rounds")
    for name, m in result["models"].items():
        if "not_run" in m or "error" in m:
            print(f"  {name}: {m.get('error') or 'not run, ' + m['not_run']}")
            continue
        print(f"  {name} batch {m['batch']}: minigluon {m['minigluon_samples_s']} samples/s, "
              f"torch {m['torch_samples_s']}, ratio {m['ratio']} (won {m['won']})"
              + (f"; torch failed: {m['torch_error']}" if "torch_error" in m else ""))
PY
say "gpu_check: done in $(elapsed)"
