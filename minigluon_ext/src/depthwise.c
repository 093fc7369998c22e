/* Depthwise 2-D convolution (num_group == channels), forward and both gradients, direct.
 *
 * Output channel f = c*m + k (m output channels per input channel) reads only input
 * channel c, with its own kh x kw filter w[f].  The grouped columns path runs that as C
 * matmuls of one row each, which BLAS does slowly; here each plane is a few passes over
 * data in cache.
 *
 * Every sum follows one order, so the NumPy fallback gives the same bits:
 *  - forward: out[y][x] starts at 0, each tap (i, j) in row-major order adds
 *    w[f][i][j] * xpad[y*sh + i*dh][x*sw + j*dw] (xpad: the image in a zero border), each
 *    product and each sum rounded; the bias is added last.
 *  - data gradient: dx[r][q] starts at 0; for k = 0..m-1 and each tap in row-major order it
 *    adds w[c*m+k][i][j] * up[r + ph - i*dh][q + pw - j*dw], where up is dy[c*m+k] spread
 *    out by the stride (up[y*sh][x*sw] = dy[y][x], zeros between and outside).
 *  - weight gradient: per tap, the products dy * xpad of one output row are summed in 8
 *    lanes of the dtype, the rows' sums in double (like batch_norm_sums, it is compared
 *    with NumPy's float64 sum by tolerance, not bits).
 * Padding zeros take part in the products, as in the columns path.
 */
#include <stdlib.h>

#include "layers.h"

/* A plane of zeros with `src` (rows x cols, row length `cols`) written into it at
 * (top, left), every sy-th row and sx-th column; parts falling outside are dropped. */
#define DEFINE_SPREAD(T, SUF)                                                               \
    static void spread_##SUF(T *grid, size_t gh, size_t gw, const T *src, size_t rows,      \
                             size_t cols, ptrdiff_t top, ptrdiff_t left, size_t sy,         \
                             size_t sx)                                                     \
    {                                                                                       \
        memset(grid, 0, gh * gw * sizeof(T));                                               \
        for (size_t y = 0; y < rows; y++) {                                                 \
            ptrdiff_t a = top + (ptrdiff_t)(y * sy);                                        \
            if (a < 0 || a >= (ptrdiff_t)gh)                                                \
                continue;                                                                   \
            T *dst = grid + (size_t)a * gw;                                                 \
            for (size_t x = 0; x < cols; x++) {                                             \
                ptrdiff_t b = left + (ptrdiff_t)(x * sx);                                   \
                if (b >= 0 && b < (ptrdiff_t)gw)                                            \
                    dst[b] = src[y * cols + x];                                             \
            }                                                                               \
        }                                                                                   \
    }

/* out (oh x ow) = out (or 0 when `first`) + sum over taps (i, j), row-major, of
 * k[i*kw + j] * grid[y*sy + rows[i]][x*sx + cols[j]].  The 3x3 kernels of stride 1 and 2
 * (MobileNet's) keep the sum in a register; other windows add one tap at a time to the
 * row, which gives every element the same sequence of roundings. */
#define DEFINE_GATHER(T, SUF)                                                               \
    MG_CLONES static void row3_s1_##SUF(T *restrict o, const T *restrict r0,                \
                                        const T *restrict r1, const T *restrict r2,         \
                                        const size_t *c, const T *k, size_t n, int first)   \
    {                                                                                       \
        const T *a0 = r0 + c[0], *a1 = r0 + c[1], *a2 = r0 + c[2];                          \
        const T *b0 = r1 + c[0], *b1 = r1 + c[1], *b2 = r1 + c[2];                          \
        const T *d0 = r2 + c[0], *d1 = r2 + c[1], *d2 = r2 + c[2];                          \
        for (size_t x = 0; x < n; x++) {                                                    \
            T s = first ? (T)0 : o[x];                                                      \
            s = s + k[0] * a0[x];                                                           \
            s = s + k[1] * a1[x];                                                           \
            s = s + k[2] * a2[x];                                                           \
            s = s + k[3] * b0[x];                                                           \
            s = s + k[4] * b1[x];                                                           \
            s = s + k[5] * b2[x];                                                           \
            s = s + k[6] * d0[x];                                                           \
            s = s + k[7] * d1[x];                                                           \
            s = s + k[8] * d2[x];                                                           \
            o[x] = s;                                                                       \
        }                                                                                   \
    }                                                                                       \
    MG_CLONES static void row3_s2_##SUF(T *restrict o, const T *restrict r0,                \
                                        const T *restrict r1, const T *restrict r2,         \
                                        const size_t *c, const T *k, size_t n, int first)   \
    {                                                                                       \
        const T *a0 = r0 + c[0], *a1 = r0 + c[1], *a2 = r0 + c[2];                          \
        const T *b0 = r1 + c[0], *b1 = r1 + c[1], *b2 = r1 + c[2];                          \
        const T *d0 = r2 + c[0], *d1 = r2 + c[1], *d2 = r2 + c[2];                          \
        for (size_t x = 0; x < n; x++) {                                                    \
            T s = first ? (T)0 : o[x];                                                      \
            s = s + k[0] * a0[2 * x];                                                       \
            s = s + k[1] * a1[2 * x];                                                       \
            s = s + k[2] * a2[2 * x];                                                       \
            s = s + k[3] * b0[2 * x];                                                       \
            s = s + k[4] * b1[2 * x];                                                       \
            s = s + k[5] * b2[2 * x];                                                       \
            s = s + k[6] * d0[2 * x];                                                       \
            s = s + k[7] * d1[2 * x];                                                       \
            s = s + k[8] * d2[2 * x];                                                       \
            o[x] = s;                                                                       \
        }                                                                                   \
    }                                                                                       \
    MG_CLONES static void tap_##SUF(T *restrict o, const T *restrict src, T wt, size_t n,   \
                                    size_t s)                                               \
    {                                                                                       \
        for (size_t x = 0; x < n; x++)                                                      \
            o[x] = o[x] + wt * src[x * s];                                                  \
    }                                                                                       \
    static void gather_##SUF(const T *grid, size_t gw, T *out, size_t oh, size_t ow,        \
                             size_t sy, size_t sx, size_t kh, size_t kw,                    \
                             const size_t *rows,                                            \
                             const size_t *cols, const T *k, int first)                     \
    {                                                                                       \
        int fast = kh == 3 && kw == 3 && (sx == 1 || sx == 2);                              \
        for (size_t y = 0; y < oh; y++) {                                                   \
            T *o = out + y * ow;                                                            \
            const T *top = grid + y * sy * gw;                                              \
            if (fast) {                                                                     \
                (sx == 1 ? row3_s1_##SUF : row3_s2_##SUF)(o, top + rows[0] * gw,            \
                    top + rows[1] * gw, top + rows[2] * gw, cols, k, ow, first);            \
                continue;                                                                   \
            }                                                                               \
            if (first)                                                                      \
                memset(o, 0, ow * sizeof(T));                                               \
            for (size_t i = 0; i < kh; i++)                                                 \
                for (size_t j = 0; j < kw; j++)                                             \
                    tap_##SUF(o, top + rows[i] * gw + cols[j], k[i * kw + j], ow, sx);      \
        }                                                                                   \
    }

/* sums[t] += the sum over x < n of dy[x] * row_t[x*s], one row's products for each tap t:
 * summed in 8 lanes of T (so a float32 partial sum spans one row, not a whole plane), then
 * added to the double totals.  The 3x3 version reads dy once for all nine taps. */
#define DEFINE_DOT(T, SUF)                                                                  \
    static void lanes_to_##SUF(double *sums, T l[][8], size_t taps)                         \
    {                                                                                       \
        for (size_t t = 0; t < taps; t++)                                                   \
            sums[t] += (double)(((l[t][0] + l[t][1]) + (l[t][2] + l[t][3])) +               \
                                ((l[t][4] + l[t][5]) + (l[t][6] + l[t][7])));               \
    }                                                                                       \
    MG_CLONES static void dot_##SUF(double *sums, const T *restrict dy,                     \
                                    const T *restrict b,                                    \
                                    size_t n, size_t s)                                     \
    {                                                                                       \
        T l[1][8] = {{0}};                                                                  \
        size_t x = 0;                                                                       \
        for (; x + 8 <= n; x += 8)                                                          \
            for (size_t k = 0; k < 8; k++)                                                  \
                l[0][k] += dy[x + k] * b[(x + k) * s];                                      \
        for (size_t k = 0; x < n; x++, k = (k + 1) % 8)                                     \
            l[0][k] += dy[x] * b[x * s];                                                    \
        lanes_to_##SUF(sums, l, 1);                                                         \
    }                                                                                       \
    /* one tap of dot3 on 8 elements; S the column step, constant in each caller */         \
    static inline void lane8_##SUF(T *restrict l, const T *restrict dy,                     \
                                   const T *restrict b,                                     \
                                   size_t S)                                                \
    {                                                                                       \
        for (size_t k = 0; k < 8; k++)                                                      \
            l[k] += dy[k] * b[k * S];                                                       \
    }                                                                                       \
    MG_CLONES static void dot3_##SUF(double *sums, const T *restrict dy,                    \
                                     const T *restrict const *rows, const size_t *c,        \
                                     size_t n, size_t s)                                    \
    {                                                                                       \
        T l[9][8] = {{0}};                                                                  \
        const T *b[9];                                                                      \
        for (size_t t = 0; t < 9; t++)                                                      \
            b[t] = rows[t / 3] + c[t % 3];                                                  \
        size_t x = 0;                                                                       \
        if (s == 1)                                                                         \
            for (; x + 8 <= n; x += 8)                                                      \
                for (size_t t = 0; t < 9; t++)                                              \
                    lane8_##SUF(l[t], dy + x, b[t] + x, 1);                                 \
        else if (s == 2)                                                                    \
            for (; x + 8 <= n; x += 8)                                                      \
                for (size_t t = 0; t < 9; t++)                                              \
                    lane8_##SUF(l[t], dy + x, b[t] + 2 * x, 2);                             \
        for (size_t k = 0; x < n; x++, k = (k + 1) % 8)                                     \
            for (size_t t = 0; t < 9; t++)                                                  \
                l[t][k] += dy[x] * b[t][x * s];                                             \
        lanes_to_##SUF(sums, l, 9);                                                         \
    }

#define DEFINE_DEPTHWISE(T, SUF)                                                            \
    DEFINE_SPREAD(T, SUF)                                                                   \
    DEFINE_GATHER(T, SUF)                                                                   \
    DEFINE_DOT(T, SUF)                                                                      \
                                                                                            \
    static void forward_##SUF(mg_dw_args *a, T *grid, size_t item)                          \
    {                                                                                       \
        const mg_window *g = &a->g;                                                         \
        size_t f = item % a->f, n = item / a->f, c = f / a->m, taps = g->kh * g->kw;        \
        size_t gh = g->h + 2 * g->ph, gw = g->w + 2 * g->pw;                                \
        spread_##SUF(grid, gh, gw, (const T *)a->x + (n * g->c + c) * g->h * g->w, g->h,    \
                     g->w, (ptrdiff_t)g->ph, (ptrdiff_t)g->pw, 1, 1);                       \
        T *out = (T *)a->y + item * g->oh * g->ow;                                          \
        gather_##SUF(grid, gw, out, g->oh, g->ow, g->sh, g->sw, g->kh, g->kw, a->rows,      \
                     a->cols,                                                               \
                     (const T *)a->w + f * taps, 1);                                        \
        if (a->bias) {                                                                      \
            T b = ((const T *)a->bias)[f];                                                  \
            for (size_t p = 0; p < g->oh * g->ow; p++)                                      \
                out[p] = out[p] + b;                                                        \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void data_##SUF(mg_dw_args *a, T *grid, size_t item)                             \
    {                                                                                       \
        const mg_window *g = &a->g;                                                         \
        size_t c = item % g->c, n = item / g->c, taps = g->kh * g->kw;                      \
        size_t gh = g->h + (g->kh - 1) * g->dh, gw = g->w + (g->kw - 1) * g->dw;            \
        ptrdiff_t top = (ptrdiff_t)((g->kh - 1) * g->dh) - (ptrdiff_t)g->ph;                \
        ptrdiff_t left = (ptrdiff_t)((g->kw - 1) * g->dw) - (ptrdiff_t)g->pw;               \
        T *dx = (T *)a->x + item * g->h * g->w;                                             \
        for (size_t k = 0; k < a->m; k++) {                                                 \
            size_t f = c * a->m + k;                                                        \
            spread_##SUF(grid, gh, gw, (const T *)a->y + (n * a->f + f) * g->oh * g->ow,    \
                         g->oh, g->ow, top, left, g->sh, g->sw);                            \
            gather_##SUF(grid, gw, dx, g->h, g->w, 1, 1, g->kh, g->kw, a->back_rows,        \
                         a->back_cols, (const T *)a->w + f * taps, k == 0);                 \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void weight_##SUF(mg_dw_args *a, T *grid, size_t f)                              \
    {                                                                                       \
        const mg_window *g = &a->g;                                                         \
        size_t c = f / a->m, taps = g->kh * g->kw;                                          \
        size_t gh = g->h + 2 * g->ph, gw = g->w + 2 * g->pw;                                \
        double sums[MG_DW_MAX_TAPS] = {0};                                                  \
        for (size_t n = 0; n < g->n; n++) {                                                 \
            spread_##SUF(grid, gh, gw, (const T *)a->x + (n * g->c + c) * g->h * g->w,      \
                         g->h, g->w, (ptrdiff_t)g->ph, (ptrdiff_t)g->pw, 1, 1);             \
            const T *dy = (const T *)a->y + (n * a->f + f) * g->oh * g->ow;                 \
            for (size_t y = 0; y < g->oh; y++) {                                            \
                const T *rows[MG_DW_MAX_SIDE];                                              \
                for (size_t i = 0; i < g->kh; i++)                                          \
                    rows[i] = grid + (y * g->sh + a->rows[i]) * gw;                         \
                if (g->kh == 3 && g->kw == 3) {                                             \
                    dot3_##SUF(sums, dy + y * g->ow, rows, a->cols, g->ow, g->sw);          \
                    continue;                                                               \
                }                                                                           \
                for (size_t t = 0; t < taps; t++)                                           \
                    dot_##SUF(sums + t, dy + y * g->ow,                                     \
                              rows[t / g->kw] + a->cols[t % g->kw],                         \
                              g->ow, g->sw);                                                \
            }                                                                               \
        }                                                                                   \
        T *dw = (T *)a->w + f * taps;                                                       \
        for (size_t t = 0; t < taps; t++)                                                   \
            dw[t] = (T)sums[t];                                                             \
    }

DEFINE_DEPTHWISE(float, f32)
DEFINE_DEPTHWISE(double, f64)

/* The scratch plane one item needs: the padded image, or dy spread out for the data
 * gradient. */
static size_t grid_size(const mg_dw_args *a)
{
    const mg_window *g = &a->g;
    size_t pad = (g->h + 2 * g->ph) * (g->w + 2 * g->pw);
    size_t up = (g->h + (g->kh - 1) * g->dh) * (g->w + (g->kw - 1) * g->dw);
    return a->kind == MG_DW_DATA ? up : pad;
}

void mg_depthwise_task(void *args, size_t begin, size_t end)
{
    mg_dw_args *a = (mg_dw_args *)args;
    size_t item_bytes = a->dtype == MG_F32 ? sizeof(float) : sizeof(double);
    void *grid = malloc(grid_size(a) * item_bytes);
    if (!grid) {
        __atomic_store_n(&a->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (size_t item = begin; item < end; item++) {
        if (a->dtype == MG_F32) {
            if (a->kind == MG_DW_FORWARD)
                forward_f32(a, (float *)grid, item);
            else if (a->kind == MG_DW_DATA)
                data_f32(a, (float *)grid, item);
            else
                weight_f32(a, (float *)grid, item);
        } else {
            if (a->kind == MG_DW_FORWARD)
                forward_f64(a, (double *)grid, item);
            else if (a->kind == MG_DW_DATA)
                data_f64(a, (double *)grid, item);
            else
                weight_f64(a, (double *)grid, item);
        }
    }
    free(grid);
}

void mg_depthwise_offsets(mg_dw_args *a)
{
    const mg_window *g = &a->g;
    for (size_t i = 0; i < g->kh; i++) {
        a->rows[i] = i * g->dh;
        a->back_rows[i] = (g->kh - 1 - i) * g->dh;
    }
    for (size_t j = 0; j < g->kw; j++) {
        a->cols[j] = j * g->dw;
        a->back_cols[j] = (g->kw - 1 - j) * g->dw;
    }
}
