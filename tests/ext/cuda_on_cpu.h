/* Lets g++ compile minigluon_ext/cuda_src for the CPU (tests/ext/cuda_on_cpu.py).
 *
 * The kernel qualifiers become nothing, and the thread coordinates become exported globals
 * that the Python runner sets before each call: calling a kernel once per (block, thread)
 * of a grid runs that grid's threads one after another.  That is faithful for the kernels
 * cuda_src allows (independent items, no shared memory, no barriers; common.cuh). */
#include <math.h>

struct mg_dim3 {
    unsigned int x, y, z;
};

extern "C" {
mg_dim3 blockIdx, blockDim, threadIdx, gridDim;
}

#define __global__
#define __device__
#define __forceinline__ inline
