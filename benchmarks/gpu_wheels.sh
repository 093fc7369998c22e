#!/usr/bin/env bash
# Fill .whl/ (in the repo root) with the wheels the GPU machine lacks, for its Python 3.12
# on manylinux x86_64: run HERE, where pip reaches the index, before benchmarks/gpu_check.sh
# is run THERE with `.whl` carried. Its image has numpy, opencv, threadpoolctl, psutil,
# scipy, pytest (and pytest-timeout, pytest-xdist), torch and CuPy (see
# /work/.library/device/KINDS.md "Python packages already there"); minigluon also imports
# pyzmq (the kvstore's sockets) and tqdm (the launcher's progress bar). Versions are this
# machine's, so both sides run what the suite runs here.
#
#   bash benchmarks/gpu_wheels.sh            # then: ls .whl
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# .whl/ must never be committed: ignore it in the exclude file every worktree shares
exclude="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"

version() {   # the version installed here, else the fallback given
    "$PY" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || echo "$2"
}
WANT=("pyzmq==$(version pyzmq 27.1.0)" "tqdm==$(version tqdm 4.67.1)")

rm -rf .whl && mkdir -p .whl
for spec in "${WANT[@]}"; do
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$spec" || {
        echo "gpu_wheels.sh: pip found no cp312 manylinux x86_64 wheel for $spec; add" \
             "--platform manylinux_2_N_x86_64 for the N its wheels name (PyPI's file list)" >&2
        exit 1; }
done
# what the wheels need beyond what the device has (pyzmq needs cffi only on PyPy)
for w in .whl/*.whl; do
    needs=$(unzip -p "$w" '*/METADATA' | grep '^Requires-Dist' | grep -v 'extra ==' || true)
    echo "$(basename "$w"): ${needs:-no requirements}" | tr '\n' ' '; echo
done
count=$(ls .whl/*.whl | wc -l)
[ "$count" -eq "${#WANT[@]}" ] || { echo "gpu_wheels.sh: want ${#WANT[@]} wheels, got $count" >&2; exit 1; }
echo "gpu_wheels.sh: $count wheels in .whl ($(du -sh .whl | cut -f1)); carry '.whl' to the device"
