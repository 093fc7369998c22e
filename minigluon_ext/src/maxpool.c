/* 2-D max pooling with the position of each maximum, and its gradient.
 *
 * A window's maximum is its first NaN if it holds one, else its first largest value, in
 * row-major order (NumPy's argmax rule); window positions outside the image are skipped,
 * and a window with none inside gives -inf and argmax -1.  The gradient adds dy of every
 * window, in row-major window order, to the input element its argmax names.
 */
#include <math.h>

#include "layers.h"

/* The output columns x in [lo, hi) whose input column x*s - p + j lies in [0, w). */
static void columns(size_t w, size_t ow, size_t s, size_t p, size_t j, size_t *lo, size_t *hi)
{
    ptrdiff_t first = (ptrdiff_t)j - (ptrdiff_t)p;
    ptrdiff_t a = first >= 0 ? 0 : (-first + (ptrdiff_t)s - 1) / (ptrdiff_t)s;
    ptrdiff_t last = (ptrdiff_t)w - 1 - first;
    ptrdiff_t b = last < 0 ? 0 : last / (ptrdiff_t)s + 1;
    if (b > (ptrdiff_t)ow)
        b = (ptrdiff_t)ow;
    if (a > b)
        a = b;
    *lo = (size_t)a, *hi = (size_t)b;
}

/* Each output row starts at (-inf, -1); the window's taps are then applied in row-major
 * order, each to the whole row of outputs at once and without branches, so the compiler
 * vectorizes it: a tap wins when nothing won yet, when it is larger, or when it is the
 * first NaN. */
#define DEFINE_MAXPOOL(T, SUF)                                                              \
    MG_CLONES static void tap_##SUF(const T *restrict src, size_t step, T *restrict m,       \
                                    int32_t *restrict am, size_t n, int32_t at)             \
    {                                                                                       \
        for (size_t k = 0; k < n; k++) {                                                    \
            T v = src[k * step];                                                            \
            int take = (am[k] < 0) | (v > m[k]) | ((v != v) & (m[k] == m[k]));             \
            m[k] = take ? v : m[k];                                                         \
            am[k] = take ? at + (int32_t)(k * step) : am[k];                                \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void maxpool_plane_##SUF(const mg_window *g, const T *x, T *out, int32_t *am)    \
    {                                                                                       \
        for (size_t y = 0; y < g->oh; y++) {                                                \
            T *m = out + y * g->ow;                                                         \
            int32_t *a = am + y * g->ow;                                                    \
            for (size_t k = 0; k < g->ow; k++)                                              \
                m[k] = (T)-INFINITY, a[k] = -1;                                             \
            for (size_t i = 0; i < g->kh; i++) {                                            \
                ptrdiff_t r = (ptrdiff_t)(y * g->sh + i) - (ptrdiff_t)g->ph;                \
                if (r < 0 || r >= (ptrdiff_t)g->h)                                          \
                    continue;                                                               \
                for (size_t j = 0; j < g->kw; j++) {                                        \
                    size_t lo, hi;                                                          \
                    columns(g->w, g->ow, g->sw, g->pw, j, &lo, &hi);                        \
                    if (lo >= hi)                                                           \
                        continue;                                                           \
                    size_t c = lo * g->sw + j - g->pw;                                      \
                    tap_##SUF(x + (size_t)r * g->w + c, g->sw, m + lo, a + lo, hi - lo,     \
                              (int32_t)((size_t)r * g->w + c));                             \
                }                                                                           \
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
