/* ReLU, clip (ReLU6 is clip(x, 0, 6)) and their gradients, element-wise, with NumPy's
 * exact results:
 * relu(x) = x where x > 0 or x is NaN, else +0 (np.maximum(x, 0));
 * grad = dy * 1 where x > 0, else dy * 0 (so -0, NaN for dy = inf or NaN), as dy * (x > 0);
 * clip(x) = NumPy 2's np.clip(x, lo, hi): lo where x < lo, hi where x > hi, else x (NaN
 * kept, -0 kept against lo = +0); its grad = dy * 1 where lo <= x <= hi, else dy * 0.
 */
#include "layers.h"

/* 1.0 where x > 0, else 0.0, from bits: a plain `x > 0 ? 1 : 0` lets the compiler turn
 * dy * that into a branch, which mispredicts on every other element and stops SIMD. */
#define DEFINE_ONE_IF(T, U, ONE)                                                            \
    static inline T one_if_##T(T x)                                                         \
    {                                                                                       \
        U bits = (U)0 - (U)(x > 0);                                                         \
        bits &= ONE;                                                                        \
        T f;                                                                                \
        memcpy(&f, &bits, sizeof f);                                                        \
        return f;                                                                           \
    }

DEFINE_ONE_IF(float, uint32_t, 0x3f800000u)
DEFINE_ONE_IF(double, uint64_t, 0x3ff0000000000000ull)

/* 1.0 where lo <= x <= hi, else 0.0 (NaN: 0.0), from bits as one_if. */
#define DEFINE_ONE_WITHIN(T, U, ONE)                                                        \
    static inline T one_within_##T(T x, T lo, T hi)                                         \
    {                                                                                       \
        U bits = (U)0 - (U)((x >= lo) & (x <= hi));                                         \
        bits &= ONE;                                                                        \
        T f;                                                                                \
        memcpy(&f, &bits, sizeof f);                                                        \
        return f;                                                                           \
    }

DEFINE_ONE_WITHIN(float, uint32_t, 0x3f800000u)
DEFINE_ONE_WITHIN(double, uint64_t, 0x3ff0000000000000ull)

#define DEFINE_RELU(T, SUF)                                                                 \
    MG_CLONES static void relu_##SUF(const T *restrict x, T *restrict out, size_t n)        \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            out[i] = (x[i] > 0 || x[i] != x[i]) ? x[i] : (T)0;                              \
    }                                                                                       \
    MG_CLONES static void relu_back_##SUF(const T *restrict x, const T *restrict dy,        \
                                          T *restrict out, size_t n)                        \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            out[i] = dy[i] * one_if_##T(x[i]);                                              \
    }                                                                                       \
    /* NumPy 2's order: lo only where x < lo, then hi only where that is > hi; so NaN    \
     * passes both and x = -0 stays -0 against lo = +0 */                                   \
    MG_CLONES static void clip_##SUF(const T *restrict x, T *restrict out, size_t n, T lo,  \
                                     T hi)                                                  \
    {                                                                                       \
        for (size_t i = 0; i < n; i++) {                                                    \
            T v = x[i] < lo ? lo : x[i];                                                    \
            out[i] = v > hi ? hi : v;                                                       \
        }                                                                                   \
    }                                                                                       \
    MG_CLONES static void clip_back_##SUF(const T *restrict x, const T *restrict dy,        \
                                          T *restrict out, size_t n, T lo, T hi)            \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            out[i] = dy[i] * one_within_##T(x[i], lo, hi);                                  \
    }

DEFINE_RELU(float, f32)
DEFINE_RELU(double, f64)

static void block(const mg_relu_args *a, size_t item, size_t *at, size_t *len)
{
    *at = item * MG_RELU_BLOCK;
    *len = a->n - *at < MG_RELU_BLOCK ? a->n - *at : MG_RELU_BLOCK;
}

static void relu_block(const mg_relu_args *a, size_t at, size_t len)
{
    if (a->dtype == MG_F32)
        relu_f32((const float *)a->x + at, (float *)a->out + at, len);
    else
        relu_f64((const double *)a->x + at, (double *)a->out + at, len);
}

static void clip_block(const mg_relu_args *a, size_t at, size_t len)
{
    if (a->dtype == MG_F32)
        clip_f32((const float *)a->x + at, (float *)a->out + at, len, (float)a->lo,
                 (float)a->hi);
    else
        clip_f64((const double *)a->x + at, (double *)a->out + at, len, a->lo, a->hi);
}

void mg_relu_task(void *args, size_t begin, size_t end)
{
    const mg_relu_args *a = (const mg_relu_args *)args;
    for (size_t item = begin; item < end; item++) {
        size_t at, len;
        block(a, item, &at, &len);
        (a->clip ? clip_block : relu_block)(a, at, len);
    }
}

static void relu_back_block(const mg_relu_args *a, size_t at, size_t len)
{
    if (a->dtype == MG_F32)
        relu_back_f32((const float *)a->x + at, (const float *)a->dy + at,
                      (float *)a->out + at, len);
    else
        relu_back_f64((const double *)a->x + at, (const double *)a->dy + at,
                      (double *)a->out + at, len);
}

static void clip_back_block(const mg_relu_args *a, size_t at, size_t len)
{
    if (a->dtype == MG_F32)
        clip_back_f32((const float *)a->x + at, (const float *)a->dy + at,
                      (float *)a->out + at, len, (float)a->lo, (float)a->hi);
    else
        clip_back_f64((const double *)a->x + at, (const double *)a->dy + at,
                      (double *)a->out + at, len, a->lo, a->hi);
}

void mg_relu_back_task(void *args, size_t begin, size_t end)
{
    const mg_relu_args *a = (const mg_relu_args *)args;
    for (size_t item = begin; item < end; item++) {
        size_t at, len;
        block(a, item, &at, &len);
        (a->clip ? clip_back_block : relu_back_block)(a, at, len);
    }
}
