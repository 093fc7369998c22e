/* The activations of the recurrent cell kernels (lstm.c, gru.c), inlined in their row
 * loops.
 *
 * float64 uses libm's exp and tanh.  float32 uses the branch-free exp and tanh below, so
 * that the row loops vectorize (libm's calls are a third of an LSTM step otherwise): a
 * Cody-Waite reduction with a degree-6 polynomial for exp, an odd polynomial for tanh
 * below |x| = 0.625 and 1 - 2/(exp(2|x|) + 1) above.  Both are within a few ulp of NumPy's,
 * not bit for bit; NaN stays NaN.
 */
#ifndef MG_RNN_MATH_H
#define MG_RNN_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The compiler only turns the selects below into vector blends when it may evaluate both
 * sides without regard to floating-point exception flags, which nothing here reads; the
 * results do not change. */
#define MG_NO_TRAP __attribute__((optimize("no-trapping-math")))

/* The cell rows are a few dozen float operations a unit with five divisions, all
 * element-wise: an AVX-512 clone runs them 1.5-1.8x as fast as the AVX2 one where the CPU has
 * it (the language model's LSTM cell, one thread, quiet: 40 against 62-74 us forward for
 * 16 rows, 78 against 122 for 32), with the same bits (no reduction, no contraction). */
#if MG_X86
#define MG_RNN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MG_RNN_CLONES
#endif

/* e^x for float32: 0 below -87 (no subnormal results), infinity above 88.72. */
MG_NO_TRAP static inline float exp_f32(float x)
{
    float c = x < -87.0f ? -87.0f : x;
    c = c > 88.0f ? 88.0f : c;
    float t = c * 1.44269504088896341f + 0.5f;
    int k = (int)(t + 127.0f) - 127;   /* floor(t): t + 127 > 0 truncates to its floor */
    float kf = (float)k;
    float r = (c - kf * 0.693359375f) + kf * 2.12194440e-4f;   /* c - k ln 2, in two parts */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + r + 1.0f;
    int32_t bits = (k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    y = y * scale;
    y = x > 88.72f ? __builtin_inff() : y;
    y = x < -87.0f ? 0.0f : y;
    return x != x ? x : y;
}

MG_NO_TRAP static inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

MG_NO_TRAP static inline float tanh_f32(float x)
{
    float a = x < 0 ? -x : x, z = x * x;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                    1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
    float big = 1.0f - 2.0f / (exp_f32(2.0f * a) + 1.0f);
    big = x < 0 ? -big : big;
    return a < 0.625f ? small : big;
}

MG_NO_TRAP static inline double sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }

MG_NO_TRAP static inline double tanh_f64(double x) { return tanh(x); }

#endif
