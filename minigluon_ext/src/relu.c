/* ReLU, clip (ReLU6 is clip(x, 0, 6)) and their gradients, element-wise, with NumPy's
 * exact results (the formulas are in activation.h, which batchnorm.c shares):
 * grad = dy * 1 where x > 0, else dy * 0 (so -0, NaN for dy = inf or NaN), as dy * (x > 0);
 * clip's grad = dy * 1 where lo <= x <= hi, else dy * 0.
 */
#include "activation.h"
#include "layers.h"

#define DEFINE_RELU(T, SUF)                                                                 \
    MG_CLONES static void relu_##SUF(const T *restrict x, T *restrict out, size_t n)        \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            out[i] = mg_relu_##T(x[i]);                                                     \
    }                                                                                       \
    MG_CLONES static void relu_back_##SUF(const T *restrict x, const T *restrict dy,        \
                                          T *restrict out, size_t n)                        \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            out[i] = dy[i] * mg_one_if_##T(x[i]);                                           \
    }                                                                                       \
    MG_CLONES static void clip_##SUF(const T *restrict x, T *restrict out, size_t n, T lo,  \
                                     T hi)                                                  \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            out[i] = mg_clip_##T(x[i], lo, hi);                                             \
    }                                                                                       \
    MG_CLONES static void clip_back_##SUF(const T *restrict x, const T *restrict dy,        \
                                          T *restrict out, size_t n, T lo, T hi)            \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            out[i] = dy[i] * mg_one_within_##T(x[i], lo, hi);                               \
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
