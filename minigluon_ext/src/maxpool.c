/* 2-D max pooling with the position of each maximum, and its gradient.
 *
 * A window's maximum is its first NaN if it holds one, else its first largest value, in
 * row-major order (NumPy's argmax rule); window positions outside the image are skipped,
 * and a window with none inside gives -inf and argmax -1.  The gradient adds dy of every
 * window, in row-major window order, to the input element its argmax names.
 */
#include <math.h>

#include "layers.h"

static inline size_t clamp(ptrdiff_t v, size_t hi)
{
    return v < 0 ? 0 : (size_t)v > hi ? hi : (size_t)v;
}

#define DEFINE_MAXPOOL(T, SUF)                                                              \
    static void maxpool_plane_##SUF(const mg_window *g, const T *x, T *out, int32_t *am)    \
    {                                                                                       \
        for (size_t y = 0; y < g->oh; y++) {                                                \
            ptrdiff_t r0 = (ptrdiff_t)(y * g->sh) - (ptrdiff_t)g->ph;                       \
            size_t rlo = clamp(r0, g->h), rhi = clamp(r0 + (ptrdiff_t)g->kh, g->h);         \
            for (size_t xo = 0; xo < g->ow; xo++, out++, am++) {                            \
                ptrdiff_t c0 = (ptrdiff_t)(xo * g->sw) - (ptrdiff_t)g->pw;                  \
                size_t clo = clamp(c0, g->w), chi = clamp(c0 + (ptrdiff_t)g->kw, g->w);     \
                T m = (T)-INFINITY;                                                         \
                int32_t best = -1;                                                          \
                for (size_t r = rlo; r < rhi; r++)                                          \
                    for (size_t c = clo; c < chi; c++) {                                    \
                        T v = x[r * g->w + c];                                              \
                        if (best < 0 || v > m || (v != v && m == m)) {                      \
                            m = v;                                                          \
                            best = (int32_t)(r * g->w + c);                                 \
                        }                                                                   \
                    }                                                                       \
                *out = m;                                                                   \
                *am = best;                                                                 \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void maxpool_back_plane_##SUF(mg_maxpool_back_args *a, size_t p)                 \
    {                                                                                       \
        const T *dy = (const T *)a->dy + p * a->out_size;                                   \
        const int32_t *am = a->argmax + p * a->out_size;                                    \
        T *dx = (T *)a->dx + p * a->in_size;                                                \
        memset(dx, 0, a->in_size * sizeof(T));                                              \
        for (size_t o = 0; o < a->out_size; o++) {                                          \
            if (am[o] < 0)                                                                  \
                continue;                                                                   \
            if ((size_t)am[o] >= a->in_size) {                                              \
                __atomic_store_n(&a->bad, 1, __ATOMIC_RELAXED);                             \
                continue;                                                                   \
            }                                                                               \
            dx[am[o]] = dx[am[o]] + dy[o];                                                  \
        }                                                                                   \
    }

DEFINE_MAXPOOL(float, f32)
DEFINE_MAXPOOL(double, f64)

void mg_maxpool_task(void *args, size_t begin, size_t end)
{
    const mg_maxpool_args *a = (const mg_maxpool_args *)args;
    size_t in = a->g.h * a->g.w, out = a->g.oh * a->g.ow;
    for (size_t p = begin; p < end; p++) {
        if (a->dtype == MG_F32)
            maxpool_plane_f32(&a->g, (const float *)a->x + p * in, (float *)a->out + p * out,
                              a->argmax + p * out);
        else
            maxpool_plane_f64(&a->g, (const double *)a->x + p * in,
                              (double *)a->out + p * out, a->argmax + p * out);
    }
}

void mg_maxpool_back_task(void *args, size_t begin, size_t end)
{
    mg_maxpool_back_args *a = (mg_maxpool_back_args *)args;
    for (size_t p = begin; p < end; p++) {
        if (a->dtype == MG_F32)
            maxpool_back_plane_f32(a, p);
        else
            maxpool_back_plane_f64(a, p);
    }
}
