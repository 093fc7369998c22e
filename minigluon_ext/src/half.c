/* float16 <-> float32 array conversion.
 *
 * The portable path is the bit-exact scalar code in mgext.h.  On x86-64 with F16C the
 * hardware converts 8 values at a time; it rounds finite values and infinities exactly
 * like the scalar code (round to nearest even) but may quiet a signalling NaN, so any
 * group of 8 that holds a NaN goes through the scalar code instead.
 */
#include "mgext.h"

#if MG_X86
#include <immintrin.h>
#endif

static void h2f_scalar(const uint16_t *src, float *dst, size_t begin, size_t end)
{
    for (size_t i = begin; i < end; i++)
        dst[i] = mg_h2f(src[i]);
}

static void f2h_scalar(const float *src, uint16_t *dst, size_t begin, size_t end)
{
    for (size_t i = begin; i < end; i++)
        dst[i] = mg_f2h(src[i]);
}

#if MG_X86
__attribute__((target("avx,f16c"))) static void h2f_f16c(const uint16_t *src, float *dst,
                                                         size_t begin, size_t end)
{
    const __m128i exp_mask = _mm_set1_epi16(0x7fff);
    const __m128i inf = _mm_set1_epi16(0x7c00);
    size_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, exp_mask), inf);
        if (_mm_movemask_epi8(nan))
            h2f_scalar(src, dst, i, i + 8);
        else
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    h2f_scalar(src, dst, i, end);
}

__attribute__((target("avx,f16c"))) static void f2h_f16c(const float *src, uint16_t *dst,
                                                         size_t begin, size_t end)
{
    size_t i = begin;
    for (; i + 8 <= end; i += 8) {
        __m256 x = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)))
            f2h_scalar(src, dst, i, i + 8);
        else
            _mm_storeu_si128((__m128i *)(dst + i),
                             _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    f2h_scalar(src, dst, i, end);
}

#endif

void mg_h2f_range(const uint16_t *src, float *dst, size_t begin, size_t end)
{
#if MG_X86
    if (mg_cpu.f16c) {
        h2f_f16c(src, dst, begin, end);
        return;
    }
#endif
    h2f_scalar(src, dst, begin, end);
}

void mg_f2h_range(const float *src, uint16_t *dst, size_t begin, size_t end)
{
#if MG_X86
    if (mg_cpu.f16c) {
        f2h_f16c(src, dst, begin, end);
        return;
    }
#endif
    f2h_scalar(src, dst, begin, end);
}

void mg_h2f_task(void *args, size_t begin, size_t end)
{
    mg_convert_args *a = (mg_convert_args *)args;
    mg_h2f_range((const uint16_t *)a->src, (float *)a->dst, begin, end);
}

void mg_f2h_task(void *args, size_t begin, size_t end)
{
    mg_convert_args *a = (mg_convert_args *)args;
    mg_f2h_range((const float *)a->src, (uint16_t *)a->dst, begin, end);
}
