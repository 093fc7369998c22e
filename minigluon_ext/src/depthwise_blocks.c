/* Depthwise convolution on small planes: eight planes at a time, one vector lane each.
 *
 * On 7x7 and 14x14 maps (MobileNet-v2's last stages) the plane-by-plane kernels of
 * depthwise.c spend their time around the arithmetic: a padded copy per plane, and rows of
 * 7 or 14 values, shorter than or just over one 8-wide vector, so the row loops run their
 * scalar remainders (the filter gradient also folds 9 x 8 lanes into double per row).
 * Here eight planes (consecutive filters, or channels for the data gradient) are laid
 * into one scratch grid of 8-wide vectors, value (y, x) of plane l at grid[y*gw + x][l].
 * Every tap of every output is then one vector multiply and one add for all eight planes,
 * whatever the row length, stride or dilation; the price is the copy in and out, which
 * the plane kernels pay too (their padded copy).
 *
 * Each lane computes what depthwise.c computes for its plane, in the same order (see the
 * top of depthwise.c), so the forward and the data gradient give the same bits as both
 * depthwise.c and the NumPy fallback.  One exception: with a stride over 1 the data
 * gradient skips the taps that would read the zeros between the spread-out dy values (3
 * of 4 for stride 2); adding w * 0 to a sum that starts at +0 never changes it, so the
 * bits are the same while w is finite (an infinite w times those zeros gave NaN there).
 * The filter gradient sums the products of up to RUN outputs per tap in the dtype (one
 * lane per filter), then adds these sums in double; unlike depthwise.c's row sums, which
 * fold 9 x 8 lanes per output row, that costs little on any plane, so it serves large
 * maps too (docs/minigluon_ext.md).
 */
#include <stdlib.h>

#include "layers.h"

#define LANES 8
/* the filter gradient sums at most this many outputs' products in the dtype, then in
 * double: a float32 partial sum never spans more, whatever the plane */
#define RUN 64

typedef float v8_f32 __attribute__((vector_size(LANES * sizeof(float))));
typedef double v8_f64 __attribute__((vector_size(LANES * sizeof(double))));

/* The taps of one image row (or column) that meet a dy value in the data gradient: for
 * a stride over 1, most taps of the spread-out dy read the zeros between its values. */
typedef struct {
    size_t count;
    size_t tap[MG_DW_MAX_SIDE]; /* kernel row (column) i, ascending */
    size_t at[MG_DW_MAX_SIDE];  /* the dy row (column) it meets */
} hits;

/* One kind's pass: planes of rows x cols laid into a gh x gw grid of vectors at (top,
 * left), every sy-th row and sx-th column (the stride, when dy is spread for the data
 * gradient); plane rows [y0, y1) and columns [x0, x1) land inside it, the rest is dropped.
 * The sums give oh x ow outputs, output (y, x) reading the grid at (y*ry, x*rx) plus the
 * taps' offsets.  `direct` (the data gradient with a stride over 1): dy is laid in as it
 * is, and each image value sums only the taps in its row's and column's hits. */
typedef struct {
    size_t gh, gw, rows, cols, sy, sx, y0, y1, x0, x1;
    ptrdiff_t top, left;
    size_t oh, ow, ry, rx, taps, kw;
    size_t off[MG_DW_BLOCK_MAX_TAPS]; /* in vectors, row-major tap order */
    int direct;
    hits *row_hits, *col_hits;        /* oh and ow of them, when direct */
} plan;

/* The plane indices [lo, hi) of `count` values placed at start + k*step that fall in
 * [0, size). */
static void inside(ptrdiff_t start, size_t step, size_t count, size_t size, size_t *lo,
                   size_t *hi)
{
    ptrdiff_t s = (ptrdiff_t)step, first = start < 0 ? (-start + s - 1) / s : 0;
    ptrdiff_t last = ((ptrdiff_t)size - 1 - start) < 0 ? -1 : ((ptrdiff_t)size - 1 - start) / s;
    *lo = (size_t)first;
    *hi = last + 1 < (ptrdiff_t)count ? (size_t)(last + 1) : count;
    if (*hi < *lo)
        *hi = *lo;
}

/* For each image index r < n: the kernel indices i (ascending) with r + pad - i*dil a
 * multiple of the stride, and the dy index it gives, inside [0, dn). */
static void find_hits(hits *h, size_t n, size_t k, size_t stride, size_t pad, size_t dil,
                      size_t dn)
{
    for (size_t r = 0; r < n; r++) {
        h[r].count = 0;
        for (size_t i = 0; i < k; i++) {
            ptrdiff_t a = (ptrdiff_t)(r + pad) - (ptrdiff_t)(i * dil);
            if (a < 0 || a % (ptrdiff_t)stride || (size_t)a / stride >= dn)
                continue;
            h[r].tap[h[r].count] = i;
            h[r].at[h[r].count++] = (size_t)a / stride;
        }
    }
}

static size_t hits_bytes(const mg_dw_args *a)
{
    return a->kind == MG_DW_DATA ? (a->g.h + a->g.w) * sizeof(hits) : 0;
}

static void make_plan(plan *p, const mg_dw_args *a, hits *spare)
{
    const mg_window *g = &a->g;
    const size_t *rows = a->rows, *cols = a->cols;
    p->direct = a->kind == MG_DW_DATA && (g->sh > 1 || g->sw > 1);
    p->kw = g->kw;
    if (p->direct) {
        p->gh = g->oh, p->gw = g->ow, p->top = 0, p->left = 0;
        p->rows = g->oh, p->cols = g->ow, p->sy = 1, p->sx = 1;
        p->oh = g->h, p->ow = g->w, p->ry = 1, p->rx = 1;
        p->row_hits = spare, p->col_hits = spare + g->h;
        find_hits(p->row_hits, g->h, g->kh, g->sh, g->ph, g->dh, g->oh);
        find_hits(p->col_hits, g->w, g->kw, g->sw, g->pw, g->dw, g->ow);
    } else if (a->kind == MG_DW_DATA) {
        /* dy spread out by the stride, read with the flipped taps (depthwise.c's data_) */
        p->gh = g->h + (g->kh - 1) * g->dh, p->gw = g->w + (g->kw - 1) * g->dw;
        p->top = (ptrdiff_t)((g->kh - 1) * g->dh) - (ptrdiff_t)g->ph;
        p->left = (ptrdiff_t)((g->kw - 1) * g->dw) - (ptrdiff_t)g->pw;
        p->rows = g->oh, p->cols = g->ow, p->sy = g->sh, p->sx = g->sw;
        p->oh = g->h, p->ow = g->w, p->ry = 1, p->rx = 1;
        rows = a->back_rows, cols = a->back_cols;
    } else {
        p->gh = g->h + 2 * g->ph, p->gw = g->w + 2 * g->pw;
        p->top = (ptrdiff_t)g->ph, p->left = (ptrdiff_t)g->pw;
        p->rows = g->h, p->cols = g->w, p->sy = 1, p->sx = 1;
        p->oh = g->oh, p->ow = g->ow, p->ry = g->sh, p->rx = g->sw;
    }
    inside(p->top, p->sy, p->rows, p->gh, &p->y0, &p->y1);
    inside(p->left, p->sx, p->cols, p->gw, &p->x0, &p->x1);
    p->taps = g->kh * g->kw;
    for (size_t t = 0; t < p->taps; t++)
        p->off[t] = rows[t / g->kw] * p->gw + cols[t % g->kw];
}

#define DEFINE_BLOCKS(T, V, SUF)                                                            \
    /* The grid: zeros, with the `lanes` planes src[l] (rows x cols) laid in. */            \
    static void lay_##SUF(V *grid, const plan *p, const T *const *src, size_t lanes)        \
    {                                                                                       \
        memset(grid, 0, p->gh * p->gw * sizeof(V));                                         \
        for (size_t l = 0; l < lanes; l++)                                                  \
            for (size_t y = p->y0; y < p->y1; y++) {                                        \
                V *row = grid + (size_t)(p->top + (ptrdiff_t)(y * p->sy)) * p->gw;          \
                const T *s = src[l] + y * p->cols;                                          \
                for (size_t x = p->x0; x < p->x1; x++)                                      \
                    row[(size_t)(p->left + (ptrdiff_t)(x * p->sx))][l] = s[x];              \
            }                                                                               \
    }                                                                                       \
                                                                                            \
    /* acc[y*ow + x] = acc (or 0 when `first`) + sum over taps t, in order, of             \
     * wv[t] * grid[y*ry*gw + x*rx + off[t]]; the 3x3 window unrolled, its weights held in  \
     * registers. */                                                                        \
    MG_CLONES static void sums_##SUF(V *restrict acc, const V *restrict grid,               \
                                     const plan *p, const V *wv, int first)                 \
    {                                                                                       \
        size_t taps = p->taps;                                                              \
        for (size_t y = 0; y < p->oh; y++)                                                  \
            for (size_t x = 0; x < p->ow; x++) {                                            \
                const V *g = grid + y * p->ry * p->gw + x * p->rx;                          \
                V s = first ? (V){0} : acc[y * p->ow + x];                                  \
                if (taps == 9)                                                              \
                    for (size_t t = 0; t < 9; t++)                                          \
                        s = s + wv[t] * g[p->off[t]];                                       \
                else                                                                        \
                    for (size_t t = 0; t < taps; t++)                                       \
                        s = s + wv[t] * g[p->off[t]];                                       \
                acc[y * p->ow + x] = s;                                                     \
            }                                                                               \
    }                                                                                       \
                                                                                            \
    /* acc[r*ow + q] = acc (or 0 when `first`) + sum over the taps (i, j) in r's row hits  \
     * and q's column hits, in row-major order, of wv[i*kw + j] * dy[at_i*gw + at_j]. */   \
    MG_CLONES static void direct_sums_##SUF(V *restrict acc, const V *restrict dy,          \
                                            const plan *p, const V *wv, int first)          \
    {                                                                                       \
        for (size_t r = 0; r < p->oh; r++) {                                                \
            const hits *hr = &p->row_hits[r];                                               \
            for (size_t q = 0; q < p->ow; q++) {                                            \
                const hits *hq = &p->col_hits[q];                                           \
                V s = first ? (V){0} : acc[r * p->ow + q];                                  \
                for (size_t u = 0; u < hr->count; u++) {                                    \
                    const V *d = dy + hr->at[u] * p->gw, *k = wv + hr->tap[u] * p->kw;      \
                    for (size_t v = 0; v < hq->count; v++)                                  \
                        s = s + k[hq->tap[v]] * d[hq->at[v]];                               \
                }                                                                           \
                acc[r * p->ow + q] = s;                                                     \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* part[t] = sum over the outputs i in [from, to), in order, of dy[i] * grid[y*ry*gw +  \
     * x*rx + off[t]] with (y, x) output i's place: filter-gradient products per tap, per   \
     * lane. */                                                                            \
    MG_CLONES static void products_##SUF(V *restrict part, const V *restrict dy,            \
                                         const V *restrict grid, const plan *p, size_t from, \
                                         size_t to)                                         \
    {                                                                                       \
        size_t taps = p->taps, y = from / p->ow, x = from % p->ow;                          \
        for (size_t t = 0; t < taps; t++)                                                   \
            part[t] = (V){0};                                                               \
        for (size_t i = from; i < to; i++) {                                                \
            const V *g = grid + y * p->ry * p->gw + x * p->rx;                              \
            V d = dy[i];                                                                    \
            if (taps == 9)                                                                  \
                for (size_t t = 0; t < 9; t++)                                              \
                    part[t] = part[t] + d * g[p->off[t]];                                   \
            else                                                                            \
                for (size_t t = 0; t < taps; t++)                                           \
                    part[t] = part[t] + d * g[p->off[t]];                                   \
            if (++x == p->ow)                                                               \
                x = 0, y++;                                                                 \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* dst[l][i] = acc[i][l] (+ bias[l]) for the first `lanes` lanes. */                    \
    static void store_##SUF(T *const *dst, size_t lanes, const V *acc, size_t n,            \
                            const T *bias)                                                  \
    {                                                                                       \
        for (size_t l = 0; l < lanes; l++) {                                                \
            T *d = dst[l];                                                                  \
            if (bias)                                                                       \
                for (size_t i = 0; i < n; i++)                                              \
                    d[i] = acc[i][l] + bias[l];                                             \
            else                                                                            \
                for (size_t i = 0; i < n; i++)                                              \
                    d[i] = acc[i][l];                                                       \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* wv[t][l] = filter f0 + l*step's tap t, 0 past `lanes`. */                            \
    static void weights_##SUF(V *wv, const T *w, size_t f0, size_t step, size_t lanes,      \
                              size_t taps)                                                  \
    {                                                                                       \
        for (size_t t = 0; t < taps; t++) {                                                 \
            wv[t] = (V){0};                                                                 \
            for (size_t l = 0; l < lanes; l++)                                              \
                wv[t][l] = w[(f0 + l * step) * taps + t];                                   \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* Filters f0.. of sample n: outputs y, with the bias. */                               \
    static void forward_##SUF(const mg_dw_args *a, const plan *p, V *grid, V *acc,          \
                              size_t n, size_t f0, size_t lanes)                            \
    {                                                                                       \
        const mg_window *g = &a->g;                                                         \
        const T *src[LANES];                                                                \
        T *dst[LANES];                                                                      \
        V wv[MG_DW_BLOCK_MAX_TAPS];                                                         \
        for (size_t l = 0; l < lanes; l++) {                                                \
            size_t f = f0 + l;                                                              \
            src[l] = (const T *)a->x + (n * g->c + f / a->m) * g->h * g->w;                 \
            dst[l] = (T *)a->y + (n * a->f + f) * g->oh * g->ow;                            \
        }                                                                                   \
        lay_##SUF(grid, p, src, lanes);                                                     \
        weights_##SUF(wv, (const T *)a->w, f0, 1, lanes, p->taps);                          \
        sums_##SUF(acc, grid, p, wv, 1);                                                    \
        store_##SUF(dst, lanes, acc, g->oh * g->ow,                                         \
                    a->bias ? (const T *)a->bias + f0 : NULL);                              \
    }                                                                                       \
                                                                                            \
    /* Channels c0.. of sample n: the image gradient, filter c*m + k for k = 0..m-1. */     \
    static void data_##SUF(const mg_dw_args *a, const plan *p, V *grid, V *acc, size_t n,   \
                           size_t c0, size_t lanes)                                         \
    {                                                                                       \
        const mg_window *g = &a->g;                                                         \
        const T *src[LANES];                                                                \
        T *dst[LANES];                                                                      \
        V wv[MG_DW_BLOCK_MAX_TAPS];                                                         \
        for (size_t k = 0; k < a->m; k++) {                                                 \
            for (size_t l = 0; l < lanes; l++)                                              \
                src[l] = (const T *)a->y + (n * a->f + (c0 + l) * a->m + k) * g->oh * g->ow; \
            lay_##SUF(grid, p, src, lanes);                                                 \
            weights_##SUF(wv, (const T *)a->w, c0 * a->m + k, a->m, lanes, p->taps);        \
            (p->direct ? direct_sums_##SUF : sums_##SUF)(acc, grid, p, wv, k == 0);         \
        }                                                                                   \
        for (size_t l = 0; l < lanes; l++)                                                  \
            dst[l] = (T *)a->x + (n * g->c + c0 + l) * g->h * g->w;                         \
        store_##SUF(dst, lanes, acc, g->h * g->w, NULL);                                    \
    }                                                                                       \
                                                                                            \
    /* Filters f0..: their gradient over all samples; `dy` a scratch of oh*ow vectors. */   \
    static void weight_##SUF(const mg_dw_args *a, const plan *p, V *grid, V *dy,            \
                             size_t f0, size_t lanes)                                       \
    {                                                                                       \
        const mg_window *g = &a->g;                                                         \
        const T *src[LANES], *dsrc[LANES];                                                  \
        V part[MG_DW_BLOCK_MAX_TAPS];                                                       \
        double total[MG_DW_BLOCK_MAX_TAPS][LANES] = {{0}};                                  \
        size_t plane = g->oh * g->ow;                                                       \
        for (size_t n = 0; n < g->n; n++) {                                                 \
            for (size_t l = 0; l < lanes; l++) {                                            \
                src[l] = (const T *)a->x + (n * g->c + (f0 + l) / a->m) * g->h * g->w;      \
                dsrc[l] = (const T *)a->y + (n * a->f + f0 + l) * plane;                    \
            }                                                                               \
            lay_##SUF(grid, p, src, lanes);                                                 \
            for (size_t i = 0; i < plane; i++) {                                            \
                dy[i] = (V){0};                                                             \
                for (size_t l = 0; l < lanes; l++)                                          \
                    dy[i][l] = dsrc[l][i];                                                  \
            }                                                                               \
            for (size_t from = 0; from < plane; from += RUN) {                              \
                size_t to = from + RUN < plane ? from + RUN : plane;                        \
                products_##SUF(part, dy, grid, p, from, to);                                \
                for (size_t t = 0; t < p->taps; t++)                                        \
                    for (size_t l = 0; l < LANES; l++)                                      \
                        total[t][l] += (double)part[t][l];                                  \
            }                                                                               \
        }                                                                                   \
        for (size_t l = 0; l < lanes; l++)                                                  \
            for (size_t t = 0; t < p->taps; t++)                                            \
                ((T *)a->w)[(f0 + l) * p->taps + t] = (T)total[t][l];                       \
    }                                                                                       \
                                                                                            \
    static void task_##SUF(const mg_dw_args *a, const plan *p, V *grid, V *acc,             \
                           size_t begin, size_t end)                                        \
    {                                                                                       \
        size_t planes = a->kind == MG_DW_DATA ? a->g.c : a->f;                              \
        size_t blocks = (planes + LANES - 1) / LANES;                                       \
        for (size_t item = begin; item < end; item++) {                                     \
            size_t b = item % blocks, n = item / blocks, first = b * LANES;                 \
            size_t lanes = planes - first < LANES ? planes - first : LANES;                 \
            if (a->kind == MG_DW_FORWARD)                                                   \
                forward_##SUF(a, p, grid, acc, n, first, lanes);                            \
            else if (a->kind == MG_DW_DATA)                                                 \
                data_##SUF(a, p, grid, acc, n, first, lanes);                               \
            else                                                                            \
                weight_##SUF(a, p, grid, acc, first, lanes);                                \
        }                                                                                   \
    }

DEFINE_BLOCKS(float, v8_f32, f32)
DEFINE_BLOCKS(double, v8_f64, f64)

size_t mg_depthwise_block_items(const mg_dw_args *a)
{
    size_t planes = a->kind == MG_DW_DATA ? a->g.c : a->f;
    size_t blocks = (planes + LANES - 1) / LANES;
    return a->kind == MG_DW_WEIGHT ? blocks : a->g.n * blocks;
}

void mg_depthwise_block_task(void *args, size_t begin, size_t end)
{
    const mg_dw_args *a = (const mg_dw_args *)args;
    const mg_window *g = &a->g;
    size_t vec = a->dtype == MG_F32 ? sizeof(v8_f32) : sizeof(v8_f64);
    /* the grid (at most the padded image or the spread dy), the sums (or the filter
     * gradient's dy), then the data gradient's hits; vectors aligned for their loads */
    size_t grid = (g->h + 2 * g->ph) * (g->w + 2 * g->pw);
    if (a->kind == MG_DW_DATA) {
        size_t spread = (g->h + (g->kh - 1) * g->dh) * (g->w + (g->kw - 1) * g->dw);
        grid = spread > g->oh * g->ow ? spread : g->oh * g->ow; /* pads past the kernel */
    }
    size_t outs = a->kind == MG_DW_DATA ? g->h * g->w : g->oh * g->ow;
    void *scratch = NULL;
    if (posix_memalign(&scratch, 64, (grid + outs) * vec + hits_bytes(a)) != 0) {
        __atomic_store_n(&((mg_dw_args *)args)->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    plan p;
    make_plan(&p, a, (hits *)((char *)scratch + (grid + outs) * vec));
    if (a->dtype == MG_F32)
        task_f32(a, &p, (v8_f32 *)scratch, (v8_f32 *)scratch + grid, begin, end);
    else
        task_f64(a, &p, (v8_f64 *)scratch, (v8_f64 *)scratch + grid, begin, end);
    free(scratch);
}
