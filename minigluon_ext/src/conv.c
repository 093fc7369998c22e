/* Convolution columns: im2col, col2im and the axis swap between (N, F, P) and (F, N, P).
 *
 * Column layout: row (c, i, j) of the (C*kh*kw, N*oh*ow) matrix holds, at column
 * (n, y, x), image[n, c, y*sh - ph + i*dh, x*sw - pw + j*dw], or 0 where that falls in the
 * padding.  One matmul W (F, C*kh*kw) @ cols then gives every sample's output at once.
 *
 * col2im sums, for each image element, the column entries that im2col copied from it, in
 * tap order (i, j) = (0, 0), (0, 1), ...: the element starts at 0 and each tap is added,
 * rounded to the dtype, as in the loop `for tap: image[tap's slice] += cols[tap]`.
 */
#include "layers.h"

/* The output positions x in [lo, hi) whose input column x*s - p + t*d lies in [0, size). */
static void valid_range(size_t size, size_t out, size_t s, size_t p, size_t t, size_t d,
                        size_t *lo, size_t *hi)
{
    ptrdiff_t first = (ptrdiff_t)t * (ptrdiff_t)d - (ptrdiff_t)p; /* input of position 0 */
    ptrdiff_t a = first >= 0 ? 0 : (-first + (ptrdiff_t)s - 1) / (ptrdiff_t)s;
    ptrdiff_t last = (ptrdiff_t)size - 1 - first; /* positions x with x*s <= last */
    ptrdiff_t b = last < 0 ? 0 : last / (ptrdiff_t)s + 1;
    if (b > (ptrdiff_t)out)
        b = (ptrdiff_t)out;
    if (a > b)
        a = b;
    *lo = (size_t)a;
    *hi = (size_t)b;
}

/* The input row of output row y for tap i, or -1 in the padding. */
static inline ptrdiff_t input_row(const mg_window *g, size_t y, size_t i)
{
    ptrdiff_t r = (ptrdiff_t)(y * g->sh + i * g->dh) - (ptrdiff_t)g->ph;
    return r >= 0 && r < (ptrdiff_t)g->h ? r : -1;
}

#define DEFINE_IM2COL(T, SUF)                                                               \
    /* rows are short (a feature map's width): a loop beats memcpy's call; stride 2 (the  \
     * downsampling layers and the 7x7 stem) gets its own loop, which vectorizes */          \
    MG_CLONES static void copy_run_##SUF(T *restrict dst, const T *restrict src, size_t n,  \
                                         size_t step)                                       \
    {                                                                                       \
        if (step == 1)                                                                      \
            for (size_t k = 0; k < n; k++)                                                  \
                dst[k] = src[k];                                                            \
        else if (step == 2)                                                                 \
            for (size_t k = 0; k < n; k++)                                                  \
                dst[k] = src[2 * k];                                                        \
        else                                                                                \
            for (size_t k = 0; k < n; k++)                                                  \
                dst[k] = src[k * step];                                                     \
    }                                                                                       \
                                                                                            \
    static void im2col_row_##SUF(const mg_window *g, const T *x, T *dst, size_t r)          \
    {                                                                                       \
        size_t j = r % g->kw, i = r / g->kw % g->kh, c = r / (g->kw * g->kh);              \
        size_t lo, hi;                                                                      \
        valid_range(g->w, g->ow, g->sw, g->pw, j, g->dw, &lo, &hi);                         \
        ptrdiff_t x0 = (ptrdiff_t)(lo * g->sw + j * g->dw) - (ptrdiff_t)g->pw;              \
        for (size_t n = 0; n < g->n; n++) {                                                 \
            const T *plane = x + (n * g->c + c) * g->h * g->w;                              \
            for (size_t y = 0; y < g->oh; y++, dst += g->ow) {                              \
                ptrdiff_t row = input_row(g, y, i);                                         \
                if (row < 0) {                                                              \
                    memset(dst, 0, g->ow * sizeof(T));                                      \
                    continue;                                                               \
                }                                                                           \
                const T *src = plane + (size_t)row * g->w;                                  \
                for (size_t k = 0; k < lo; k++)                                             \
                    dst[k] = 0;                                                             \
                if (hi > lo)                                                                \
                    copy_run_##SUF(dst + lo, src + x0, hi - lo, g->sw);                     \
                for (size_t k = hi; k < g->ow; k++)                                         \
                    dst[k] = 0;                                                             \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    MG_CLONES static void add_run_##SUF(T *restrict dst, const T *restrict src, size_t n,   \
                                        size_t step)                                        \
    {                                                                                       \
        if (step == 1)                                                                      \
            for (size_t k = 0; k < n; k++)                                                  \
                dst[k] = dst[k] + src[k];                                                   \
        else                                                                                \
            for (size_t k = 0; k < n; k++)                                                  \
                dst[k * step] = dst[k * step] + src[k];                                     \
    }                                                                                       \
                                                                                            \
    static void col2im_plane_##SUF(const mg_window *g, const T *cols, T *x, size_t item)    \
    {                                                                                       \
        size_t c = item / g->n, n = item % g->n, taps = g->kh * g->kw;                      \
        size_t width = g->n * g->oh * g->ow;                                                \
        T *plane = x + (n * g->c + c) * g->h * g->w;                                        \
        memset(plane, 0, g->h * g->w * sizeof(T));                                          \
        for (size_t t = 0; t < taps; t++) {                                                 \
            size_t i = t / g->kw, j = t % g->kw, lo, hi;                                    \
            const T *src = cols + (c * taps + t) * width + n * g->oh * g->ow;               \
            valid_range(g->w, g->ow, g->sw, g->pw, j, g->dw, &lo, &hi);                     \
            ptrdiff_t x0 = (ptrdiff_t)(lo * g->sw + j * g->dw) - (ptrdiff_t)g->pw;          \
            for (size_t y = 0; y < g->oh; y++) {                                            \
                ptrdiff_t row = input_row(g, y, i);                                         \
                if (row >= 0 && hi > lo)                                                    \
                    add_run_##SUF(plane + (size_t)row * g->w + x0, src + y * g->ow + lo,    \
                                  hi - lo, g->sw);                                          \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void swap01_##SUF(const mg_swap_args *s, size_t begin, size_t end)              \
    {                                                                                       \
        const T *src = (const T *)s->src, *bias = (const T *)s->bias;                       \
        T *dst = (T *)s->dst;                                                               \
        for (size_t item = begin; item < end; item++) {                                     \
            size_t b = item / s->a, a = item % s->a;                                        \
            const T *in = src + (a * s->b + b) * s->r;                                      \
            T *out = dst + item * s->r;                                                     \
            if (bias) {                                                                     \
                T v = bias[a];                                                              \
                for (size_t k = 0; k < s->r; k++)                                           \
                    out[k] = in[k] + v;                                                     \
            } else {                                                                        \
                memcpy(out, in, s->r * sizeof(T));                                          \
            }                                                                               \
        }                                                                                   \
    }

DEFINE_IM2COL(float, f32)
DEFINE_IM2COL(double, f64)

void mg_im2col_task(void *args, size_t begin, size_t end)
{
    const mg_cols_args *a = (const mg_cols_args *)args;
    size_t width = a->g.n * a->g.oh * a->g.ow;
    for (size_t r = begin; r < end; r++) {
        if (a->dtype == MG_F32)
            im2col_row_f32(&a->g, (const float *)a->src, (float *)a->dst + r * width, r);
        else
            im2col_row_f64(&a->g, (const double *)a->src, (double *)a->dst + r * width, r);
    }
}

void mg_col2im_task(void *args, size_t begin, size_t end)
{
    const mg_cols_args *a = (const mg_cols_args *)args;
    for (size_t item = begin; item < end; item++) {
        if (a->dtype == MG_F32)
            col2im_plane_f32(&a->g, (const float *)a->src, (float *)a->dst, item);
        else
            col2im_plane_f64(&a->g, (const double *)a->src, (double *)a->dst, item);
    }
}

void mg_swap01_task(void *args, size_t begin, size_t end)
{
    const mg_swap_args *s = (const mg_swap_args *)args;
    if (s->dtype == MG_F32)
        swap01_f32(s, begin, end);
    else
        swap01_f64(s, begin, end);
}
