/* One SGD step in one pass over weight, gradient and momentum, with NumPy's exact results.
 *
 * The optimizer's NumPy form makes up to seven passes over the arrays (a rescaled copy of
 * the gradient, weight decay, momentum scaling, ...); for a ResNet-18's 11M weights that
 * is about 45 ms a step, most of it memory traffic.  Here each element is read and written
 * once, with the same float operations in the same order (and -ffp-contract=off), so the
 * bits match the NumPy form:
 *
 *     g = grad * rescale;  g = clip(g, -clip, clip) if clip > 0;  g = g + wd * w if wd
 *     with momentum: mom = mom * momentum;  mom = mom - lr * g;  w = w + mom
 *     without:       w = w - lr * g
 */
#include "layers.h"

#define DEFINE_SGD(T, SUF)                                                                  \
    MG_CLONES static void sgd_##SUF(const mg_sgd_args *a, T *restrict w,                    \
                                    const T *restrict grad, T *restrict mom, size_t n)      \
    {                                                                                       \
        const T rescale = (T)a->rescale, clip = (T)a->clip, wd = (T)a->wd, lr = (T)a->lr;   \
        const T momentum = (T)a->momentum;                                                  \
        const int clipping = a->clip > 0, decay = a->wd != 0;                               \
        for (size_t i = 0; i < n; i++) {                                                    \
            T g = grad[i] * rescale;                                                        \
            if (clipping) /* np.clip: max then min, NaN kept */                             \
                g = g < -clip ? -clip : (g > clip ? clip : g);                              \
            if (decay)                                                                      \
                g = g + wd * w[i];                                                          \
            if (mom) {                                                                      \
                T m = mom[i] * momentum;                                                    \
                m = m - lr * g;                                                             \
                mom[i] = m;                                                                 \
                w[i] = w[i] + m;                                                            \
            } else {                                                                        \
                w[i] = w[i] - lr * g;                                                       \
            }                                                                               \
        }                                                                                   \
    }

DEFINE_SGD(float, f32)
DEFINE_SGD(double, f64)

void mg_sgd_task(void *args, size_t begin, size_t end)
{
    const mg_sgd_args *a = (const mg_sgd_args *)args;
    size_t at = begin * MG_SGD_BLOCK, stop = end * MG_SGD_BLOCK;
    size_t n = (stop < a->n ? stop : a->n) - at;
    if (a->dtype == MG_F32)
        sgd_f32(a, (float *)a->w + at, (const float *)a->grad + at,
                a->mom ? (float *)a->mom + at : NULL, n);
    else
        sgd_f64(a, (double *)a->w + at, (const double *)a->grad + at,
                a->mom ? (double *)a->mom + at : NULL, n);
}
