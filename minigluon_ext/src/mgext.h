/* Shared declarations of the minigluon_ext kernels.
 *
 * The kernels work on raw, already validated, contiguous buffers; the Python module
 * (module.c) checks the buffers it receives before calling them.  Every kernel works on a
 * half-open element range [begin, end) so that mg_parallel_for can split it over threads.
 */
#ifndef MGEXT_H
#define MGEXT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum mg_dtype { MG_F16 = 0, MG_F32 = 1, MG_F64 = 2 };

/* Ranges handed to threads start at multiples of this many elements, so a thread never
 * shares a 2-bit word (16 values) or, for float32, a 64-byte cache line with another. */
#define MG_GRAIN 16
#define MG_MAX_THREADS 64

/* Function multiversioning: on x86-64 Linux with GCC/Clang the hot loops are compiled twice,
 * for baseline x86-64 and for AVX2, and the loader picks one at run time (ifunc). */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(MG_NO_CLONES)
#define MG_X86 1
#define MG_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MG_X86 0
#define MG_CLONES
#endif

/* What the CPU can do, filled once by mg_cpu_init() when the module loads (tests may turn
 * the SIMD paths off to exercise the portable code), and the output size from which sums
 * write with non-temporal stores (bypassing the caches saves reading out before writing). */
typedef struct {
    int avx2;
    int f16c;
    size_t stream_bytes;
} mg_cpu_features;
extern mg_cpu_features mg_cpu;
void mg_cpu_init(void);

typedef void (*mg_range_fn)(void *ctx, size_t begin, size_t end);

/* Run fn over [0, n) split into at most nthreads ranges; the caller's thread runs one. */
void mg_parallel_for(size_t n, int nthreads, mg_range_fn fn, void *ctx);

/* IEEE binary16 <-> binary32.  float->half rounds to nearest even, overflows to infinity;
 * NaN keeps its sign and the top 10 payload bits (a payload that would vanish becomes 1),
 * half->float keeps the payload: the same bits as NumPy's astype. */
static inline float mg_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {
        /* subnormal half: normalise the significand into a binary32 normal */
        uint32_t e = 113;
        while (!(man & 0x400u)) {
            man <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t mg_f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff) {
        uint32_t payload = man >> 13;
        if (man != 0 && payload == 0)
            payload = 1; /* keep a NaN a NaN */
        return (uint16_t)(sign | 0x7c00u | payload);
    }
    int e = (int)exp - 112; /* biased half exponent */
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        uint32_t m = man | 0x800000u;
        int shift = 14 - e;
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
        q++; /* a carry may run into the exponent, up to infinity: that is right */
    return (uint16_t)(sign | q);
}

/* Array conversions over [begin, end) (half.c). */
void mg_h2f_range(const uint16_t *src, float *dst, size_t begin, size_t end);
void mg_f2h_range(const float *src, uint16_t *dst, size_t begin, size_t end);

/* reduce.c */
typedef struct {
    int dtype;
    int accumulate;
    int k;
    int stream; /* write out with non-temporal stores */
    void *out;
    const void *const *in;
} mg_sum_args;
void mg_sum_range(void *args, size_t begin, size_t end);

typedef struct {
    int dtype;
    double alpha, beta;
    void *out;
    const void *a;
} mg_scale_add_args;
void mg_scale_add_range(void *args, size_t begin, size_t end);

/* quantize.c; begin is a multiple of 16, packed is indexed from word 0 of the array. */
typedef struct {
    int dtype; /* of grad; residual is float32 for float16 grads, else grad's dtype */
    double threshold;
    const void *grad;
    void *residual;
    uint8_t *packed;
    size_t n;
} mg_quantize_args;
void mg_quantize_range(void *args, size_t begin, size_t end);

typedef struct {
    int dtype; /* of out */
    int add;
    const void *lut; /* 4 values of out's dtype, indexed by the 2-bit code */
    const uint8_t *packed;
    void *out;
} mg_dequantize_args;
void mg_dequantize_range(void *args, size_t begin, size_t end);

typedef struct {
    const void *src;
    void *dst;
} mg_convert_args;
void mg_h2f_task(void *args, size_t begin, size_t end);
void mg_f2h_task(void *args, size_t begin, size_t end);

#endif
