/* Sums of several arrays and the optimizer's scale-and-add.
 *
 * Order of addition (the NumPy fallback adds in the same order, so results are
 * bit-identical):  out[i] = ((a0[i] + a1[i]) + a2[i]) + ...,  and with accumulate
 * out[i] = (((out[i] + a0[i]) + a1[i]) + ...).  float32 and float64 add in their own
 * precision, each step rounded; float16 adds in float32 and rounds once at the end.
 *
 * Every input is read from memory once and out written once; out may be one of the inputs.
 */
#include "mgext.h"

#if MG_X86
#include <immintrin.h>
#endif

#define BLOCK 2048
#define PER_PASS 4
#define DIRECT 8 /* up to this many inputs are read side by side in one pass */

/* t = s0 + s1 + ... (set) or t = t + s0 + s1 + ... (add), for up to 4 sources, left to right. */
#define DEFINE_PASSES(T, SUF)                                                               \
    MG_CLONES static void set1_##SUF(T *restrict t, const T *restrict a, size_t n)          \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            t[i] = a[i];                                                                    \
    }                                                                                       \
    MG_CLONES static void set2_##SUF(T *restrict t, const T *restrict a,                    \
                                     const T *restrict b, size_t n)                         \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            t[i] = a[i] + b[i];                                                             \
    }                                                                                       \
    MG_CLONES static void set3_##SUF(T *restrict t, const T *restrict a,                    \
                                     const T *restrict b, const T *restrict c, size_t n)    \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            t[i] = (a[i] + b[i]) + c[i];                                                    \
    }                                                                                       \
    MG_CLONES static void set4_##SUF(T *restrict t, const T *restrict a,                    \
                                     const T *restrict b, const T *restrict c,              \
                                     const T *restrict d, size_t n)                         \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            t[i] = ((a[i] + b[i]) + c[i]) + d[i];                                           \
    }                                                                                       \
    MG_CLONES static void add1_##SUF(T *restrict t, const T *restrict a, size_t n)          \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            t[i] = t[i] + a[i];                                                             \
    }                                                                                       \
    MG_CLONES static void add2_##SUF(T *restrict t, const T *restrict a,                    \
                                     const T *restrict b, size_t n)                         \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            t[i] = (t[i] + a[i]) + b[i];                                                    \
    }                                                                                       \
    MG_CLONES static void add3_##SUF(T *restrict t, const T *restrict a,                    \
                                     const T *restrict b, const T *restrict c, size_t n)    \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            t[i] = ((t[i] + a[i]) + b[i]) + c[i];                                           \
    }                                                                                       \
    MG_CLONES static void add4_##SUF(T *restrict t, const T *restrict a,                    \
                                     const T *restrict b, const T *restrict c,              \
                                     const T *restrict d, size_t n)                         \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            t[i] = (((t[i] + a[i]) + b[i]) + c[i]) + d[i];                                  \
    }                                                                                       \
    static void pass_##SUF(T *t, const T *const *s, int m, int set, size_t n)               \
    {                                                                                       \
        switch (m * 2 + set) {                                                              \
        case 3: set1_##SUF(t, s[0], n); break;                                              \
        case 5: set2_##SUF(t, s[0], s[1], n); break;                                        \
        case 7: set3_##SUF(t, s[0], s[1], s[2], n); break;                                  \
        case 9: set4_##SUF(t, s[0], s[1], s[2], s[3], n); break;                            \
        case 2: add1_##SUF(t, s[0], n); break;                                              \
        case 4: add2_##SUF(t, s[0], s[1], n); break;                                        \
        case 6: add3_##SUF(t, s[0], s[1], s[2], n); break;                                  \
        case 8: add4_##SUF(t, s[0], s[1], s[2], s[3], n); break;                            \
        }                                                                                   \
    }

DEFINE_PASSES(float, f32)
DEFINE_PASSES(double, f64)

/* The inputs in order, with out in front when accumulating; element offset applied. */
static int sources(const mg_sum_args *a, size_t elem, size_t offset, const void **dst,
                   int first, int most)
{
    int m = 0;
    int total = a->k + (a->accumulate ? 1 : 0);
    for (int j = first; j < total && m < most; j++, m++) {
        const void *base = a->accumulate ? (j == 0 ? a->out : a->in[j - 1]) : a->in[j];
        dst[m] = (const char *)base + offset * elem;
    }
    return m;
}

/* The last pass: out = ((t + s0) + s1) + ... (t NULL: out = (s0 + s1) + ...), m <= 8 sources.
 * Every vector is loaded before it is stored, so out may be one of the sources; with
 * `stream`, out is written with non-temporal stores once it is aligned. */
#define DEFINE_FINAL_ELEM(T, SUF)                                                           \
    static inline T final_elem_##SUF(const T *t, const T *const *s, int m, size_t i)        \
    {                                                                                       \
        int j = 0;                                                                          \
        T x = t ? t[i] : s[j++][i];                                                         \
        for (; j < m; j++)                                                                  \
            x = x + s[j][i];                                                                \
        return x;                                                                           \
    }

DEFINE_FINAL_ELEM(float, f32)
DEFINE_FINAL_ELEM(double, f64)

#define DEFINE_FINAL_SIMD(NAME, ATTR, T, SUF, VEC, LANES, LOADU, ADD, STOREU, STREAM)        \
    ATTR static void NAME(T *out, const T *t, const T *const *s, int m, size_t n, int stream) \
    {                                                                                       \
        size_t i = 0;                                                                       \
        if (stream)                                                                         \
            for (; i < n && ((uintptr_t)(out + i) & (sizeof(VEC) - 1)); i++)                \
                out[i] = final_elem_##SUF(t, s, m, i);                                      \
        for (; i + LANES <= n; i += LANES) {                                                \
            int j = 0;                                                                      \
            VEC x = t ? LOADU(t + i) : LOADU(s[j++] + i);                                   \
            for (; j < m; j++)                                                              \
                x = ADD(x, LOADU(s[j] + i));                                                \
            if (stream)                                                                     \
                STREAM(out + i, x);                                                         \
            else                                                                            \
                STOREU(out + i, x);                                                         \
        }                                                                                   \
        for (; i < n; i++)                                                                  \
            out[i] = final_elem_##SUF(t, s, m, i);                                          \
    }

#if MG_X86
#define AVX __attribute__((target("avx")))
DEFINE_FINAL_SIMD(final_f32_sse2, , float, f32, __m128, 4, _mm_loadu_ps, _mm_add_ps,
                  _mm_storeu_ps, _mm_stream_ps)
DEFINE_FINAL_SIMD(final_f32_avx, AVX, float, f32, __m256, 8, _mm256_loadu_ps, _mm256_add_ps,
                  _mm256_storeu_ps, _mm256_stream_ps)
DEFINE_FINAL_SIMD(final_f64_sse2, , double, f64, __m128d, 2, _mm_loadu_pd, _mm_add_pd,
                  _mm_storeu_pd, _mm_stream_pd)
DEFINE_FINAL_SIMD(final_f64_avx, AVX, double, f64, __m256d, 4, _mm256_loadu_pd, _mm256_add_pd,
                  _mm256_storeu_pd, _mm256_stream_pd)
#define FINAL(SUF, ...)                                                                     \
    (mg_cpu.avx2 ? final_##SUF##_avx(__VA_ARGS__) : final_##SUF##_sse2(__VA_ARGS__))
#else
#define DEFINE_FINAL_PLAIN(T, SUF)                                                          \
    static void final_##SUF(T *out, const T *t, const T *const *s, int m, size_t n, int stream) \
    {                                                                                       \
        (void)stream;                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            out[i] = final_elem_##SUF(t, s, m, i);                                          \
    }
DEFINE_FINAL_PLAIN(float, f32)
DEFINE_FINAL_PLAIN(double, f64)
#define FINAL(SUF, ...) final_##SUF(__VA_ARGS__)
#endif

/* Up to 8 inputs: one streaming pass over the whole range.  More: per block, all but the
 * last group of (up to 4) inputs are summed into an L1-resident buffer t, and the last
 * pass adds that group to t and writes out. */
#define DEFINE_SUM(T, SUF)                                                                  \
    static void sum_##SUF(const mg_sum_args *a, size_t begin, size_t end)                   \
    {                                                                                       \
        const void *s[DIRECT];                                                              \
        int total = a->k + (a->accumulate ? 1 : 0);                                         \
        T *out = (T *)a->out;                                                               \
        if (total <= DIRECT) {                                                              \
            sources(a, sizeof(T), begin, s, 0, DIRECT);                                     \
            FINAL(SUF, out + begin, NULL, (const T *const *)s, total, end - begin, a->stream); \
            return;                                                                         \
        }                                                                                   \
        T t[BLOCK];                                                                         \
        int last = (total - 1) / PER_PASS * PER_PASS;                                       \
        for (size_t i0 = begin; i0 < end; i0 += BLOCK) {                                    \
            size_t n = end - i0 < BLOCK ? end - i0 : BLOCK;                                 \
            for (int j = 0; j < last; j += PER_PASS) {                                      \
                int m = sources(a, sizeof(T), i0, s, j, PER_PASS);                          \
                pass_##SUF(t, (const T *const *)s, m, j == 0, n);                           \
            }                                                                               \
            int m = sources(a, sizeof(T), i0, s, last, PER_PASS);                           \
            FINAL(SUF, out + i0, t, (const T *const *)s, m, n, a->stream);                  \
        }                                                                                   \
    }

DEFINE_SUM(float, f32)
DEFINE_SUM(double, f64)

/* float16: each input is widened to float32 block by block, summed in float32. */
static void sum_block_f16(const mg_sum_args *a, size_t i0, size_t n)
{
    float t[BLOCK], w[BLOCK];
    const void *s[1] = {NULL};
    int total = a->k + (a->accumulate ? 1 : 0);
    for (int j = 0; j < total; j++) {
        sources(a, sizeof(uint16_t), i0, s, j, 1);
        mg_h2f_range((const uint16_t *)s[0], j == 0 ? t : w, 0, n);
        if (j > 0) {
            const float *ws = w;
            pass_f32(t, &ws, 1, 0, n);
        }
    }
    mg_f2h_range(t, (uint16_t *)a->out + i0, 0, n);
}

void mg_sum_range(void *args, size_t begin, size_t end)
{
    const mg_sum_args *a = (const mg_sum_args *)args;
    if (a->dtype == MG_F32)
        sum_f32(a, begin, end);
    else if (a->dtype == MG_F64)
        sum_f64(a, begin, end);
    else
        for (size_t i0 = begin; i0 < end; i0 += BLOCK)
            sum_block_f16(a, i0, end - i0 < BLOCK ? end - i0 : BLOCK);
#if MG_X86
    if (a->stream)
        _mm_sfence(); /* make the streamed stores visible before the threads join */
#endif
}

/* out = alpha*out + beta*a: two products, each rounded, then their sum (no fused
 * multiply-add, so NumPy's `out *= alpha; out += beta*a` gives the same bits). */
#define DEFINE_SCALE_ADD(T, SUF)                                                            \
    MG_CLONES static void scale_add_##SUF(T *restrict o, const T *restrict a, T alpha,      \
                                          T beta, size_t n)                                 \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            o[i] = alpha * o[i] + beta * a[i];                                              \
    }                                                                                       \
    MG_CLONES static void scale_add_self_##SUF(T *o, T alpha, T beta, size_t n)             \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            o[i] = alpha * o[i] + beta * o[i];                                              \
    }

DEFINE_SCALE_ADD(float, f32)
DEFINE_SCALE_ADD(double, f64)

static void scale_add_f16(uint16_t *o, const uint16_t *a, float alpha, float beta,
                          size_t begin, size_t end)
{
    float t[BLOCK], w[BLOCK];
    for (size_t i0 = begin; i0 < end; i0 += BLOCK) {
        size_t n = end - i0 < BLOCK ? end - i0 : BLOCK;
        mg_h2f_range(o + i0, t, 0, n);
        mg_h2f_range(a + i0, w, 0, n);
        scale_add_f32(t, w, alpha, beta, n);
        mg_f2h_range(t, o + i0, 0, n);
    }
}

void mg_scale_add_range(void *args, size_t begin, size_t end)
{
    const mg_scale_add_args *s = (const mg_scale_add_args *)args;
    size_t n = end - begin;
    if (s->dtype == MG_F64) {
        double *o = (double *)s->out + begin;
        const double *a = (const double *)s->a + begin;
        if ((const void *)o == (const void *)a)
            scale_add_self_f64(o, s->alpha, s->beta, n);
        else
            scale_add_f64(o, a, s->alpha, s->beta, n);
    } else if (s->dtype == MG_F32) {
        float *o = (float *)s->out + begin;
        const float *a = (const float *)s->a + begin;
        if ((const void *)o == (const void *)a)
            scale_add_self_f32(o, (float)s->alpha, (float)s->beta, n);
        else
            scale_add_f32(o, a, (float)s->alpha, (float)s->beta, n);
    } else {
        scale_add_f16((uint16_t *)s->out, (const uint16_t *)s->a, (float)s->alpha,
                      (float)s->beta, begin, end);
    }
}
