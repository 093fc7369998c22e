/* 2-bit gradient compression with error feedback (MXNet's rule).
 *
 * For each value:  r += g;  r >= t: code 0b11 (+t), r -= t;  r <= -t: code 0b10 (-t),
 * r += t;  otherwise code 0b00.  16 codes fill one 32-bit word, 4 per byte, the first
 * value of each byte in its two most significant bits: value k of a word sits in byte
 * k/4 at bit shift 6 - 2*(k%4) (the layout of MXNet's quantize_2bit kernel).  Bytes are
 * in memory order, so the packed stream is the same on any endianness.
 *
 * The codes of 16 values are first gathered as two 16-bit masks (P: >= t, Q: <= -t),
 * spread to one bit pair per value, then each byte's pairs are put in MSB-first order.
 */
#include "mgext.h"

#if MG_X86
#include <immintrin.h>
#endif

#define QBLOCK 2048 /* float16 grads are widened to float32 this many at a time */

/* bit k -> bit 2k, for k < 16 */
static inline uint32_t spread16(uint32_t x)
{
    x = (x | (x << 8)) & 0x00ff00ffu;
    x = (x | (x << 4)) & 0x0f0f0f0fu;
    x = (x | (x << 2)) & 0x33333333u;
    x = (x | (x << 1)) & 0x55555555u;
    return x;
}

/* Value k's code at bits 2k..2k+1 (LSB-first) -> the MSB-first order inside each byte. */
static inline uint32_t word_from_masks(uint32_t pos, uint32_t neg)
{
    uint32_t w = spread16(pos) | (spread16(pos | neg) << 1);
    w = ((w & 0x33333333u) << 2) | ((w >> 2) & 0x33333333u);
    w = ((w & 0x0f0f0f0fu) << 4) | ((w >> 4) & 0x0f0f0f0fu);
    return w;
}

static inline void store_word(uint8_t *dst, uint32_t w)
{
    dst[0] = (uint8_t)w;
    dst[1] = (uint8_t)(w >> 8);
    dst[2] = (uint8_t)(w >> 16);
    dst[3] = (uint8_t)(w >> 24);
}

static inline uint32_t load_word(const uint8_t *src)
{
    return (uint32_t)src[0] | ((uint32_t)src[1] << 8) | ((uint32_t)src[2] << 16) |
           ((uint32_t)src[3] << 24);
}

#define DEFINE_QUANTIZE_SCALAR(T, SUF)                                                      \
    static void quantize_##SUF(const T *g, T *r, uint8_t *packed, T t, size_t begin,        \
                               size_t end)                                                  \
    {                                                                                       \
        for (size_t w0 = begin; w0 < end; w0 += 16) {                                       \
            size_t cnt = end - w0 < 16 ? end - w0 : 16;                                     \
            uint32_t pos = 0, neg = 0;                                                      \
            for (size_t k = 0; k < cnt; k++) {                                              \
                T x = r[w0 + k] + g[w0 + k];                                                \
                uint32_t p = x >= t, q = x <= -t;                                           \
                r[w0 + k] = p ? x - t : (q ? x + t : x);                                    \
                pos |= p << k;                                                              \
                neg |= q << k;                                                              \
            }                                                                               \
            store_word(packed + w0 / 4, word_from_masks(pos, neg));                         \
        }                                                                                   \
    }

DEFINE_QUANTIZE_SCALAR(float, f32)
DEFINE_QUANTIZE_SCALAR(double, f64)

#if MG_X86
__attribute__((target("avx2"))) static void quantize_f32_avx2(const float *g, float *r,
                                                              uint8_t *packed, float t,
                                                              size_t begin, size_t end)
{
    const __m256 tp = _mm256_set1_ps(t), tn = _mm256_set1_ps(-t);
    size_t i = begin;
    for (; i + 16 <= end; i += 16) {
        uint32_t pos = 0, neg = 0;
        for (int h = 0; h < 2; h++) {
            __m256 x = _mm256_add_ps(_mm256_loadu_ps(r + i + 8 * h),
                                     _mm256_loadu_ps(g + i + 8 * h));
            __m256 p = _mm256_cmp_ps(x, tp, _CMP_GE_OQ);
            __m256 q = _mm256_cmp_ps(x, tn, _CMP_LE_OQ);
            x = _mm256_blendv_ps(x, _mm256_sub_ps(x, tp), p);
            x = _mm256_blendv_ps(x, _mm256_add_ps(x, tp), q);
            _mm256_storeu_ps(r + i + 8 * h, x);
            pos |= (uint32_t)_mm256_movemask_ps(p) << (8 * h);
            neg |= (uint32_t)_mm256_movemask_ps(q) << (8 * h);
        }
        uint32_t w = word_from_masks(pos, neg);
        memcpy(packed + i / 4, &w, 4); /* x86 is little-endian: bytes in order */
    }
    quantize_f32(g, r, packed, t, i, end);
}
#endif

static void quantize_f32_any(const float *g, float *r, uint8_t *packed, float t, size_t begin,
                             size_t end)
{
#if MG_X86
    if (mg_cpu.avx2) {
        quantize_f32_avx2(g, r, packed, t, begin, end);
        return;
    }
#endif
    quantize_f32(g, r, packed, t, begin, end);
}

/* float16 grads: widened to float32 (exactly), residual and rule in float32. */
static void quantize_f16(const uint16_t *g, float *r, uint8_t *packed, float t, size_t begin,
                         size_t end)
{
    float w[QBLOCK];
    for (size_t i0 = begin; i0 < end; i0 += QBLOCK) {
        size_t n = end - i0 < QBLOCK ? end - i0 : QBLOCK;
        mg_h2f_range(g + i0, w, 0, n);
        /* i0 is a multiple of 16, so word i0/16 starts at byte i0/4 */
        quantize_f32_any(w, r + i0, packed + i0 / 4, t, 0, n);
    }
}

void mg_quantize_range(void *args, size_t begin, size_t end)
{
    const mg_quantize_args *a = (const mg_quantize_args *)args;
    if (a->dtype == MG_F64)
        quantize_f64((const double *)a->grad, (double *)a->residual, a->packed, a->threshold,
                     begin, end);
    else if (a->dtype == MG_F32)
        quantize_f32_any((const float *)a->grad, (float *)a->residual, a->packed,
                         (float)a->threshold, begin, end);
    else
        quantize_f16((const uint16_t *)a->grad, (float *)a->residual, a->packed,
                     (float)a->threshold, begin, end);
}

static inline unsigned code_at(const uint8_t *packed, size_t i)
{
    return (packed[i >> 2] >> (6 - 2 * (i & 3))) & 3u;
}

#define DEFINE_DEQUANTIZE_SCALAR(T, SUF)                                                    \
    static void dequantize_##SUF(const uint8_t *packed, T *out, const T *lut, int add,      \
                                 size_t begin, size_t end)                                  \
    {                                                                                       \
        if (add)                                                                            \
            for (size_t i = begin; i < end; i++)                                            \
                out[i] = out[i] + lut[code_at(packed, i)];                                  \
        else                                                                                \
            for (size_t i = begin; i < end; i++)                                            \
                out[i] = lut[code_at(packed, i)];                                           \
    }

DEFINE_DEQUANTIZE_SCALAR(float, f32)
DEFINE_DEQUANTIZE_SCALAR(double, f64)

static void dequantize_f16(const uint8_t *packed, uint16_t *out, const uint16_t *lut, int add,
                           size_t begin, size_t end)
{
    if (!add) {
        for (size_t i = begin; i < end; i++)
            out[i] = lut[code_at(packed, i)];
        return;
    }
    float wide[4];
    for (int c = 0; c < 4; c++)
        wide[c] = mg_h2f(lut[c]);
    for (size_t i = begin; i < end; i++)
        out[i] = mg_f2h(mg_h2f(out[i]) + wide[code_at(packed, i)]);
}

#if MG_X86
/* One word gives 16 codes: shift each lane to its code, then look the value up in the
 * 4-entry table with a lane permute. */
__attribute__((target("avx2"))) static void dequantize_f32_avx2(const uint8_t *packed,
                                                                float *out, const float *lut,
                                                                int add, size_t begin,
                                                                size_t end)
{
    const __m256 table =
        _mm256_setr_ps(lut[0], lut[1], lut[2], lut[3], lut[0], lut[1], lut[2], lut[3]);
    const __m256i lo = _mm256_setr_epi32(6, 4, 2, 0, 14, 12, 10, 8);
    const __m256i hi = _mm256_setr_epi32(22, 20, 18, 16, 30, 28, 26, 24);
    const __m256i three = _mm256_set1_epi32(3);
    size_t i = begin;
    for (; i + 16 <= end; i += 16) {
        __m256i w = _mm256_set1_epi32((int)load_word(packed + i / 4));
        __m256i c0 = _mm256_and_si256(_mm256_srlv_epi32(w, lo), three);
        __m256i c1 = _mm256_and_si256(_mm256_srlv_epi32(w, hi), three);
        __m256 v0 = _mm256_permutevar8x32_ps(table, c0);
        __m256 v1 = _mm256_permutevar8x32_ps(table, c1);
        if (add) {
            v0 = _mm256_add_ps(_mm256_loadu_ps(out + i), v0);
            v1 = _mm256_add_ps(_mm256_loadu_ps(out + i + 8), v1);
        }
        _mm256_storeu_ps(out + i, v0);
        _mm256_storeu_ps(out + i + 8, v1);
    }
    dequantize_f32(packed, out, lut, add, i, end);
}
#endif

void mg_dequantize_range(void *args, size_t begin, size_t end)
{
    const mg_dequantize_args *a = (const mg_dequantize_args *)args;
    if (a->dtype == MG_F64) {
        dequantize_f64(a->packed, (double *)a->out, (const double *)a->lut, a->add, begin, end);
    } else if (a->dtype == MG_F16) {
        dequantize_f16(a->packed, (uint16_t *)a->out, (const uint16_t *)a->lut, a->add, begin,
                       end);
    } else {
#if MG_X86
        if (mg_cpu.avx2) {
            dequantize_f32_avx2(a->packed, (float *)a->out, (const float *)a->lut, a->add,
                                begin, end);
            return;
        }
#endif
        dequantize_f32(a->packed, (float *)a->out, (const float *)a->lut, a->add, begin, end);
    }
}
