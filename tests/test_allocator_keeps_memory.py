"""The allocator tuning (minigluon/_allocator.py) keeps freed array memory in the process.

A hybridized ResNet-18 training step at batch 16 frees about 1.1 GB at once when its graph's
values go; with the heap trimmed above 1 GiB (the tuning's first value) that memory went
back to the OS and the next step faulted it in again, 160,000 page faults (0.3 CPU s, 12% of
the step: the 'hybridized slower than plain' of docs/performance.md). The test frees more
than 1 GiB of heap blocks at once, in a fresh process, and checks the memory stays resident
and is reused without page faults; with the tuning off, glibc maps and unmaps such blocks.
"""
import json
import os
import subprocess
import sys

PROBE = r"""
import ctypes, json, os, resource
import minigluon  # noqa: F401  (applies the tuning at import)

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

# read /proc/self/statm into a buffer made before the blocks: a Python read would malloc
# its 8 KiB buffer above them and pin the heap's top
STATM = os.open('/proc/self/statm', os.O_RDONLY)
TEXT = ctypes.create_string_buffer(256)
libc.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]


def resident_mb():
    size = libc.pread(STATM, TEXT, 255, 0)
    return int(TEXT.raw[:size].split()[1]) * 4096 / 2**20


def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

BLOCK = 31 << 20          # below the 32 MiB mmap threshold: served from the heap
COUNT = 40                # 1.24 GB, more than the old 1 GiB trim threshold

blocks = (ctypes.c_void_p * COUNT)()   # made first: nothing of Python's above the blocks


def allocate():
    for i in range(COUNT):
        blocks[i] = libc.malloc(BLOCK)
    for i in range(COUNT):
        ctypes.memset(blocks[i], 1, BLOCK)    # touch every page, as a step's arrays are


# malloc/free directly: NumPy's arrays would put small allocations (their shapes) between
# the blocks, which pin the heap's top in a test; a graph's values go with theirs
allocate()
before = resident_mb()
for i in reversed(range(COUNT)):      # the whole top of the heap is free at once
    libc.free(blocks[i])
after_free = resident_mb()
start = faults()
allocate()
print(json.dumps({"before": before, "after_free": after_free,
                  "refault_pages": faults() - start}))
"""


def _probe(tmp_path, tuning):
    # run as a script file: under `python -c` something of the interpreter's stays
    # allocated above the blocks and the heap's top is never free (seen, not explained)
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {**os.environ, "MINIGLUON_MALLOC_TUNING": tuning}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_freed_heap_stays_resident_and_is_reused_without_faults(tmp_path):
    got = _probe(tmp_path, "1")
    print(got)
    assert got["before"] > 1200
    assert got["after_free"] > 0.9 * got["before"], got       # nothing handed back
    # 1.24 GB is 300,000 pages: reusing the kept blocks touches next to none
    assert got["refault_pages"] < 10_000, got


def test_with_the_tuning_off_the_memory_goes_back(tmp_path):
    got = _probe(tmp_path, "0")
    print(got)
    assert got["after_free"] < 0.5 * got["before"], got        # the control: glibc's default
