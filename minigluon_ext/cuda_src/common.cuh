/* What every kernel file in cuda_src/ starts from (minigluon_ext/gpu.py puts it in front of
 * each file before NVRTC compiles it).
 *
 * The rule for kernels here: each is a grid-stride loop over independent items, with no
 * shared memory, no __syncthreads and no atomics between items, so any grid computes the
 * same result.  That keeps them simple, and it lets tests/ext/cuda_on_cpu.py compile the
 * very same source for the CPU (threads run one after another) and compare it with the C
 * kernels of minigluon_ext/src bit for bit on a machine without a GPU.
 *
 * Plain C types only: NVRTC has no <stdint.h>.  Sizes and indices are long long.
 */
#define MG_KERNEL extern "C" __global__ void
#define MG_DEVICE static __device__ __forceinline__

/* i walks the items [0, n) this thread owns: start at the global thread index, step by the
 * number of threads in the grid. */
#define MG_FOR(i, n)                                                                     \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (long long)(n); \
         i += (long long)blockDim.x * gridDim.x)

/* a / b, with *rem = a % b, for 0 <= a and 0 < b: in 32 bits when both fit, because a GPU
 * divides 64-bit integers in software, many times slower (a kernel's index split would
 * cost more than its memory traffic).  Not static: NVRTC warns of an unused static function
 * in every file that does not call it. */
__device__ __forceinline__ long long mg_divmod(long long a, long long b, long long *rem)
{
    long long q = (a <= 0x7fffffffLL && b <= 0x7fffffffLL)
                      ? (long long)((unsigned int)a / (unsigned int)b)
                      : a / b;
    *rem = a - q * b;
    return q;
}
