"""A real dist_sync job (2 workers, 2 servers) whose workers send their arrays down the GPU
path: staged in per-key "pinned" buffers (staging.py), compressed by the CUDA sources of
minigluon_ext/cuda_src compiled for the CPU, pulled back through the buffers. The values
must be the host path's, and each key must reuse its buffers round after round.

Only the dispatch is redirected in the workers (staging.on_device says yes to NumPy
arrays, gpu.kernels() gives the CPU build, the copier keeps its buffers in NumPy arrays);
everything after it is the code a GPU worker runs. Where there is a GPU, the same job
also runs on mx.gpu(0) arrays without any redirection.
"""
import os
import shutil

import pytest

from test_dist_cluster import run_job

EXT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ext")

GPU_PATH = """
sys.path.insert(0, EXT_DIR)
import cuda_on_cpu
from minigluon.kvstore import staging
from minigluon_ext import gpu

copiers = []
if REDIRECT:
    kernels = gpu.Kernels(cuda_on_cpu.CpuBackend())

    def make_copier():
        copiers.append(cuda_on_cpu.CpuCopier())
        return copiers[-1]

    staging.on_device = lambda data: True          # the dispatch lines, redirected
    staging.CudaCopier = make_copier
    gpu.kernels = lambda: kernels
CTX = mx.cpu() if REDIRECT else mx.gpu(0)

T = 0.5
SPECS = {3: ((3, 5), np.float32), 'big': ((40000,), np.float32), 'h': ((37,), np.float16)}
KEYS = list(SPECS)
plain, comp = mx.kv.create('dist_sync'), mx.kv.create('dist_sync')
comp.set_gradient_compression({'type': '2bit', 'threshold': T})
W, r = plain.num_workers, plain.rank
for kv in (plain, comp):
    kv.init(KEYS, [nd.zeros(s, dtype=d) for s, d in SPECS.values()])

def grad(key, rank, t):
    shape, dtype = SPECS[key]
    rng = np.random.RandomState(7 * t + 100 * rank + sum(map(ord, str(key))))
    return rng.uniform(-1, 1, shape).astype(dtype)

def quantize(g, residual):
    residual += g.astype(residual.dtype)
    sent = np.where(residual >= T, T, np.where(residual <= -T, -T, 0)).astype(residual.dtype)
    residual -= sent
    return sent

residuals = {(k, w): np.zeros(SPECS[k][0], np.float32 if SPECS[k][1] == np.float16
                              else SPECS[k][1]) for k in KEYS for w in range(W)}
for t in range(3):
    for kv in (plain, comp):
        kv.push(KEYS, [nd.array(grad(k, r, t), dtype=SPECS[k][1], ctx=CTX) for k in KEYS])
    outs = {id(kv): [nd.zeros(s, dtype=d, ctx=CTX) for s, d in SPECS.values()]
            for kv in (plain, comp)}
    plain.pull(KEYS, out=outs[id(plain)])
    for later in [comp.pull_later(k, o) for k, o in zip(KEYS, outs[id(comp)])]:
        later.wait()
    for i, k in enumerate(KEYS):
        dtype = SPECS[k][1]
        summed = (grad(k, 0, t).astype(np.float32) + grad(k, 1, t).astype(np.float32))
        np.testing.assert_array_equal(outs[id(plain)][i].asnumpy(), summed.astype(dtype),
                                      err_msg=f'plain {k} {t}')
        want = sum(quantize(grad(k, w, t), residuals[(k, w)]) for w in range(W))
        np.testing.assert_array_equal(outs[id(comp)][i].asnumpy(), want.astype(dtype),
                                      err_msg=f'compressed {k} {t}')
for k in KEYS:
    mine = comp._compressor.residual(k, np.zeros(1, SPECS[k][1]))
    mine = mine if REDIRECT else mine.get()          # on the GPU: a CuPy array
    np.testing.assert_array_equal(mine.reshape(SPECS[k][0]), residuals[(k, r)])
report(copiers=[dict(allocations=c.allocations, to_device=c.copies_to_device,
                     waited=c.synchronized) for c in copiers],
       launches=sorted({k for _, k, _ in kernels.backend.launches}) if REDIRECT else [])
"""


def has_gpu():
    """True where CuPy imports and sees a CUDA device."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:        # no CuPy, no driver or no device: each means no GPU here
        return False


@pytest.mark.skipif(not has_gpu(), reason="needs a GPU")
def test_a_dist_job_of_gpu_arrays_gives_the_host_values(tmp_path):
    # CudaCopier, CuPy's quantize_2bit and the CPU servers decoding it, for real
    code = f"EXT_DIR = {EXT_DIR!r}\nREDIRECT = False\n" + GPU_PATH
    run_job(tmp_path, code, workers=2, servers=2, env={"MXNET_KVSTORE_BIGARRAY_BOUND": "40"})


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_gpu_path_of_a_dist_job_gives_the_host_values_and_reuses_its_buffers(tmp_path):
    code = f"EXT_DIR = {EXT_DIR!r}\nREDIRECT = True\n" + GPU_PATH
    results, _ = run_job(tmp_path, code, workers=2, servers=2,
                         env={"MXNET_KVSTORE_BIGARRAY_BOUND": "40"})
    for res in results:
        plain, comp = res["copiers"]
        # per key a push and a pull buffer; compressed: a codes buffer per server part
        # (3 and 'h' whole, 'big' split in two) and a pull buffer
        assert plain["allocations"] == 6 and comp["allocations"] == 4 + 3
        # every pull reached its out through a buffer; each later round waited for the
        # copies of the round before (3 keys, rounds 2 and 3) before rewriting it
        assert plain["to_device"] == comp["to_device"] == 9
        assert plain["waited"] == comp["waited"] == 6
        assert res["launches"] == ["quantize_2bit_f32"]
