/* Row kernels of a kvstore server's row_sparse keys: merging a round's pushed rows,
 * updating only the touched rows with SGD, and gathering the rows a pull asks for.
 *
 * A 10M x 64 float32 table touched at 1% a step is memory-bound on random rows.  The
 * NumPy path makes several passes per round (zero a buffer, scatter, gather, add, scatter
 * again for the merge; gather, step, scatter for the update); here each row is read and
 * written once, and the next rows are prefetched while one is worked on.  Results are
 * the NumPy path's bits: the same operations in the same order (-ffp-contract=off), and
 * the update calls sgd.c's own step on each row.  One thread: a server shares the host's
 * cores with its workers, and the GIL is released meanwhile (module.c).
 */
#include <math.h>
#include <stdlib.h>

#include "rows.h"

#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 8 /* rows: about a few hundred ns of latency hidden */
#endif

static void prefetch_row(const char *row, size_t bytes, int write)
{
    for (size_t at = 0; at < bytes; at += 64) {
        if (write)
            __builtin_prefetch(row + at, 1, 0);
        else
            __builtin_prefetch(row + at, 0, 0);
    }
}

/* ---- sum ---------------------------------------------------------------------------- */
#define DEFINE_ROW_ADD(T, SUF)                                                               \
    static void start_##SUF(T *restrict out, const T *restrict v, size_t n, int copy)       \
    {                                                                                        \
        const T zero = 0; /* 0 + v, not v: -0.0 becomes +0.0 as in the NumPy path */        \
        if (copy)                                                                            \
            memcpy(out, v, n * sizeof(T));                                                   \
        else                                                                                 \
            for (size_t e = 0; e < n; e++)                                                   \
                out[e] = zero + v[e];                                                        \
    }                                                                                        \
    static void add_##SUF(T *restrict out, const T *restrict v, size_t n)                   \
    {                                                                                        \
        for (size_t e = 0; e < n; e++)                                                       \
            out[e] = out[e] + v[e];                                                          \
    }

DEFINE_ROW_ADD(float, f32)
DEFINE_ROW_ADD(double, f64)

static void start_f16(uint16_t *out, const uint16_t *v, size_t n, int copy)
{
    if (copy) {
        memcpy(out, v, n * sizeof(uint16_t));
        return;
    }
    for (size_t e = 0; e < n; e++)
        out[e] = mg_f2h(0.0f + mg_h2f(v[e]));
}

static void add_f16(uint16_t *out, const uint16_t *v, size_t n)
{
    for (size_t e = 0; e < n; e++)
        out[e] = mg_f2h(mg_h2f(out[e]) + mg_h2f(v[e]));
}

static const size_t ITEM[3] = {2, 4, 8};

/* row `at` of part p's values */
static const char *part_row(const mg_rows_sum_args *a, size_t p, size_t at)
{
    return (const char *)a->values[p] + at * a->width * ITEM[a->dtype];
}

static void start_row(const mg_rows_sum_args *a, void *out, const void *v, int copy)
{
    if (a->dtype == MG_F32)
        start_f32(out, v, a->width, copy);
    else if (a->dtype == MG_F64)
        start_f64(out, v, a->width, copy);
    else
        start_f16(out, v, a->width, copy);
}

/* out[e] += v[e] for e < n, in `dtype` */
static void add_values(int dtype, void *out, const void *v, size_t n)
{
    if (dtype == MG_F32)
        add_f32(out, v, n);
    else if (dtype == MG_F64)
        add_f64(out, v, n);
    else
        add_f16(out, v, n);
}

static void add_row(const mg_rows_sum_args *a, void *out, const void *v)
{
    add_values(a->dtype, out, v, a->width);
}

size_t mg_rows_sum(const mg_rows_sum_args *a)
{
    size_t *at = calloc(a->parts ? a->parts : 1, sizeof(size_t));
    if (!at)
        return (size_t)-1;
    size_t bytes = a->width * ITEM[a->dtype], n = 0;
    for (;;) {
        /* the smallest id at the parts' heads; `first`, the lowest part holding it */
        int64_t id = INT64_MAX;
        size_t first = a->parts;
        for (size_t p = 0; p < a->parts; p++)
            if (at[p] < a->counts[p] && a->ids[p][at[p]] < id)
                id = a->ids[p][at[p]], first = p;
        if (first == a->parts)
            break;
        char *out = (char *)a->out + n * bytes;
        start_row(a, out, part_row(a, first, at[first]), first == 0);
        at[first]++;
        for (size_t p = first + 1; p < a->parts; p++)
            if (at[p] < a->counts[p] && a->ids[p][at[p]] == id)
                add_row(a, out, part_row(a, p, at[p]++));
        a->out_ids[n++] = id;
    }
    free(at);
    return n;
}

/* ---- add at ------------------------------------------------------------------------- */
int64_t mg_rows_add_at(int dtype, void *table, size_t rows, size_t width, const int64_t *ids,
                       size_t k, const void *values)
{
    for (size_t i = 0; i < k; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= rows)
            return (int64_t)i;
    size_t bytes = width * ITEM[dtype];
    char *dst = (char *)table;
    const char *src = (const char *)values;
    for (size_t i = 0; i < k; i++) {
        if (i + PREFETCH_AHEAD < k)
            prefetch_row(dst + (size_t)ids[i + PREFETCH_AHEAD] * bytes, bytes, 1);
        add_values(dtype, dst + (size_t)ids[i] * bytes, src + i * bytes, width);
    }
    return -1;
}

/* ---- take --------------------------------------------------------------------------- */
int64_t mg_rows_take(const void *table, size_t rows, size_t row_bytes, const int64_t *ids,
                     size_t k, void *out)
{
    for (size_t i = 0; i < k; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= rows)
            return (int64_t)i;
    const char *src = (const char *)table;
    char *dst = (char *)out;
    for (size_t i = 0; i < k; i++) {
        if (i + PREFETCH_AHEAD < k)
            prefetch_row(src + (size_t)ids[i + PREFETCH_AHEAD] * row_bytes, row_bytes, 0);
        memcpy(dst + i * row_bytes, src + (size_t)ids[i] * row_bytes, row_bytes);
    }
    return -1;
}

/* ---- SGD on rows -------------------------------------------------------------------- */
int64_t mg_rows_sgd(const mg_sgd_args *step, void *w, void *mom, size_t rows, size_t width,
                    const int64_t *ids, size_t k, const void *grad)
{
    for (size_t i = 0; i < k; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= rows || (i && ids[i] <= ids[i - 1]))
            return (int64_t)i;
    size_t item = step->dtype == MG_F64 ? 8 : 4, bytes = width * item;
    size_t blocks = (width + MG_SGD_BLOCK - 1) / MG_SGD_BLOCK;
    mg_sgd_args row = *step;
    row.n = width;
    for (size_t i = 0; i < k; i++) {
        if (i + PREFETCH_AHEAD < k) {
            size_t ahead = (size_t)ids[i + PREFETCH_AHEAD] * bytes;
            prefetch_row((const char *)w + ahead, bytes, 1);
            if (mom)
                prefetch_row((const char *)mom + ahead, bytes, 1);
        }
        size_t at = (size_t)ids[i] * bytes;
        row.w = (char *)w + at;
        row.mom = mom ? (char *)mom + at : NULL;
        row.grad = (const char *)grad + i * bytes;
        mg_sgd_task(&row, 0, blocks);
    }
    return -1;
}

/* ---- Adam on rows ------------------------------------------------------------------- */
/* adam.py: g = grad*rescale (+ wd*w) clipped; mean = mean*b1 + (1-b1)*g;
 * var = var*b2 + (1-b2)*(g*g); w = w - (lr*mean) / (sqrt(var) + eps).  The Python scalars
 * act in the arrays' dtype (NumPy's rule for Python floats), 1 - b1 rounded once. */
#define DEFINE_ADAM_ROW(T, SUF, SQRT)                                                        \
    MG_CLONES static void adam_row_##SUF(const mg_adam_args *a, T *restrict w,              \
                                         T *restrict mean, T *restrict var,                 \
                                         const T *restrict grad, size_t n)                  \
    {                                                                                        \
        const T rescale = (T)a->rescale, wd = (T)a->wd, clip = (T)a->clip, lr = (T)a->lr;    \
        const T b1 = (T)a->beta1, b2 = (T)a->beta2, eps = (T)a->epsilon;                     \
        const T c1 = (T)(1.0 - a->beta1), c2 = (T)(1.0 - a->beta2);                          \
        const int clipping = a->clip > 0, decay = a->wd != 0;                                \
        for (size_t i = 0; i < n; i++) {                                                     \
            T g = grad[i] * rescale;                                                         \
            if (decay)                                                                       \
                g = g + wd * w[i];                                                           \
            if (clipping)                                                                    \
                g = g < -clip ? -clip : (g > clip ? clip : g);                               \
            T m = mean[i] * b1;                                                              \
            m = m + c1 * g;                                                                  \
            T v = var[i] * b2;                                                               \
            v = v + c2 * (g * g);                                                            \
            mean[i] = m, var[i] = v;                                                         \
            w[i] = w[i] - (lr * m) / (SQRT(v) + eps);                                        \
        }                                                                                    \
    }

DEFINE_ADAM_ROW(float, f32, sqrtf)
DEFINE_ADAM_ROW(double, f64, sqrt)

int64_t mg_rows_adam(const mg_adam_args *a, void *w, void *mean, void *var, size_t rows,
                     size_t width, const int64_t *ids, size_t k, const void *grad)
{
    for (size_t i = 0; i < k; i++)
        if (ids[i] < 0 || (uint64_t)ids[i] >= rows || (i && ids[i] <= ids[i - 1]))
            return (int64_t)i;
    size_t item = a->dtype == MG_F64 ? 8 : 4, bytes = width * item;
    for (size_t i = 0; i < k; i++) {
        size_t at = (size_t)ids[i] * bytes;
        char *wr = (char *)w + at, *mr = (char *)mean + at, *vr = (char *)var + at;
        const char *gr = (const char *)grad + i * bytes;
        if (a->dtype == MG_F64)
            adam_row_f64(a, (double *)wr, (double *)mr, (double *)vr, (const double *)gr, width);
        else
            adam_row_f32(a, (float *)wr, (float *)mr, (float *)vr, (const float *)gr, width);
    }
    return -1;
}
