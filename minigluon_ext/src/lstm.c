/* One LSTM step's cell update, forward and backward, in one pass over the gates.
 *
 * Unfused, a step is a dozen operators (add, split, three sigmoids, two tanh, products,
 * sum), each a Python call and a pass over (N, 4H) or (N, H) arrays, and as many tape
 * nodes; the language model runs it 70 times a batch.  Here a row n of the two gate
 * projections (MXNet's order: input, forget, candidate, output) gives
 *   i = sigmoid(a_i), f = sigmoid(a_f), g = tanh(a_g), o = sigmoid(a_o),   a = i2h + h2h
 *   c' = f*c + i*g,  h = o*tanh(c')
 * and keeps (i, f, g, o) for the backward, which from dh and dc' gives the gradient of
 * the pre-activations (for i2h and h2h alike) and of c.
 *
 * float64 uses libm's exp and tanh.  float32 uses the branch-free exp and tanh below, so
 * that the row loops vectorize (libm's calls are a third of the step otherwise): a
 * Cody-Waite reduction with a degree-6 polynomial for exp, an odd polynomial for tanh
 * below |x| = 0.625 and 1 - 2/(exp(2|x|) + 1) above.  Both are within a few ulp of NumPy's,
 * not bit for bit; NaN stays NaN.
 */
#include <math.h>

#include "layers.h"

/* The compiler only turns the selects below into vector blends when it may evaluate both
 * sides without regard to floating-point exception flags, which nothing here reads; the
 * results do not change. */
#define MG_NO_TRAP __attribute__((optimize("no-trapping-math")))

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

#define DEFINE_LSTM(T, SUF, TANH)                                                           \
    MG_NO_TRAP MG_CLONES static void forward_row_##SUF(size_t hd, const T *restrict x,                  \
                                            const T *restrict y, const T *restrict c,       \
                                            T *restrict act, T *restrict h,                 \
                                            T *restrict cn)                                 \
    {                                                                                       \
        for (size_t k = 0; k < hd; k++) {                                                   \
            T i = sigmoid_##SUF(x[k] + y[k]);                                               \
            T f = sigmoid_##SUF(x[hd + k] + y[hd + k]);                                     \
            T g = TANH(x[2 * hd + k] + y[2 * hd + k]);                                      \
            T o = sigmoid_##SUF(x[3 * hd + k] + y[3 * hd + k]);                             \
            T next = f * c[k] + i * g;                                                      \
            act[k] = i;                                                                     \
            act[hd + k] = f;                                                                \
            act[2 * hd + k] = g;                                                            \
            act[3 * hd + k] = o;                                                            \
            cn[k] = next;                                                                   \
            h[k] = o * TANH(next);                                                          \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    MG_NO_TRAP MG_CLONES static void backward_row_##SUF(size_t hd, const T *restrict act,               \
                                             const T *restrict c, const T *restrict cn,     \
                                             const T *restrict dh, const T *restrict dcn,   \
                                             T *restrict da, T *restrict dc)                \
    {                                                                                       \
        for (size_t k = 0; k < hd; k++) {                                                   \
            T i = act[k], f = act[hd + k], g = act[2 * hd + k], o = act[3 * hd + k];        \
            T t = TANH(cn[k]);                                                              \
            T dct = dcn[k] + dh[k] * o * ((T)1 - t * t);                                    \
            da[k] = dct * g * i * ((T)1 - i);                                               \
            da[hd + k] = dct * c[k] * f * ((T)1 - f);                                       \
            da[2 * hd + k] = dct * i * ((T)1 - g * g);                                      \
            da[3 * hd + k] = dh[k] * t * o * ((T)1 - o);                                    \
            dc[k] = dct * f;                                                                \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void lstm_row_##SUF(const mg_lstm_args *a, size_t n)                             \
    {                                                                                       \
        size_t hd = a->hidden, row = 4 * hd, first = n * hd, second = (a->n + n) * hd;      \
        const T *c = (const T *)a->c + first;                                               \
        if (!a->dout) {                                                                     \
            forward_row_##SUF(hd, (const T *)a->i2h + n * row, (const T *)a->h2h + n * row, \
                              c, (T *)a->act + n * row, (T *)a->out + first,                \
                              (T *)a->out + second);                                        \
            return;                                                                         \
        }                                                                                   \
        backward_row_##SUF(hd, (const T *)a->act + n * row, c, (const T *)a->out + second,  \
                           (const T *)a->dout + first, (const T *)a->dout + second,         \
                           (T *)a->da + n * row, (T *)a->dc + first);                       \
    }

DEFINE_LSTM(float, f32, tanh_f32)
DEFINE_LSTM(double, f64, tanh_f64)

void mg_lstm_task(void *args, size_t begin, size_t end)
{
    const mg_lstm_args *a = (const mg_lstm_args *)args;
    for (size_t n = begin; n < end; n++) {
        if (a->dtype == MG_F32)
            lstm_row_f32(a, n);
        else
            lstm_row_f64(a, n);
    }
}
