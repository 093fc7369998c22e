/* One LSTM layer's recurrence over a whole sequence, for one block of batch rows, without
 * coming back to Python between steps.
 *
 * Driven from Python, each step was a product through NumPy, a copy of its transposed
 * result, a cell kernel behind its argument checks and two slice assignments: about 90 us
 * a step of Python holding the GIL, against 135 us for the step's product (the language
 * model's 16 rows of 256 x 1024 on one core), so two row blocks on two threads waited for
 * each other's Python.  Here a block runs all T steps with the GIL released.
 *
 * The products go through the cblas gemm of the BLAS NumPy loaded (OpenBLAS), whose
 * address Python looks up (minigluon_ext/blas.py), on whatever thread count BLAS has: the
 * caller holds it at one (ndarray/one_blas_thread.py).  Layouts, as this OpenBLAS runs
 * them fastest on one core (16 rows, us a product): the forward computes wh @ h^T, (4H,
 * rows), 135 against 204 for h @ wh^T, and transposes it (a few us); the backward dh =
 * da @ wh directly (128).
 */
#include <stdlib.h>

#include "layers.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

typedef void (*sgemm64)(int, int, int, int64_t, int64_t, int64_t, float, const float *,
                        int64_t, const float *, int64_t, float, float *, int64_t);
typedef void (*dgemm64)(int, int, int, int64_t, int64_t, int64_t, double, const double *,
                        int64_t, const double *, int64_t, double, double *, int64_t);
typedef void (*sgemm32)(int, int, int, int, int, int, float, const float *, int,
                        const float *, int, float, float *, int);
typedef void (*dgemm32)(int, int, int, int, int, int, double, const double *, int,
                        const double *, int, double, double *, int);

/* c (m, n) = op(a) op(b), row-major, op(a) (m, k) and op(b) (k, n) */
static void gemm(const mg_lstm_seq_args *s, int ta, int tb, size_t m, size_t n, size_t k,
                 const void *a, size_t lda, const void *b, size_t ldb, void *c, size_t ldc)
{
    void *fn = s->gemm.fn;
    if (s->dtype == MG_F32 && s->gemm.ilp64)
        ((sgemm64)fn)(ROW_MAJOR, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    else if (s->dtype == MG_F32)
        ((sgemm32)fn)(ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b,
                      (int)ldb, 0.0f, c, (int)ldc);
    else if (s->gemm.ilp64)
        ((dgemm64)fn)(ROW_MAJOR, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
    else
        ((dgemm32)fn)(ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, 1.0, a, (int)lda, b,
                      (int)ldb, 0.0, c, (int)ldc);
}

/* dst (rows, cols) = src (cols, rows)^T, in tiles that stay in the L1 cache */
#define TILE 16
#define DEFINE_TRANSPOSE(T, SUF)                                                             \
    static void transpose_##SUF(const T *restrict src, size_t cols, size_t rows,             \
                                T *restrict dst)                                             \
    {                                                                                        \
        for (size_t j0 = 0; j0 < cols; j0 += TILE)                                           \
            for (size_t r = 0; r < rows; r++) {                                              \
                size_t j1 = j0 + TILE < cols ? j0 + TILE : cols;                             \
                for (size_t j = j0; j < j1; j++)                                             \
                    dst[r * cols + j] = src[j * rows + r];                                   \
            }                                                                                \
    }
DEFINE_TRANSPOSE(float, f32)
DEFINE_TRANSPOSE(double, f64)

static void transpose(int dtype, const void *src, size_t cols, size_t rows, void *dst)
{
    if (dtype == MG_F32)
        transpose_f32(src, cols, rows, dst);
    else
        transpose_f64(src, cols, rows, dst);
}

/* out[k] = a[k] + b[k] */
#define DEFINE_ADD(T, SUF)                                                                   \
    MG_CLONES static void add_##SUF(const T *restrict a, const T *restrict b, size_t n,      \
                                    T *restrict out)                                         \
    {                                                                                        \
        for (size_t k = 0; k < n; k++)                                                       \
            out[k] = a[k] + b[k];                                                            \
    }
DEFINE_ADD(float, f32)
DEFINE_ADD(double, f64)

static void add(int dtype, const void *a, const void *b, size_t n, void *out)
{
    if (dtype == MG_F32)
        add_f32(a, b, n, out);
    else
        add_f64(a, b, n, out);
}

/* the time index of the s-th step read */
static size_t step_at(const mg_lstm_seq_args *a, size_t s)
{
    return a->reverse ? a->steps - 1 - s : s;
}

/* byte offset of rows [lo, ...) of step t in a (T, N, width) array */
static size_t at(const mg_lstm_seq_args *a, size_t t, size_t width, size_t item)
{
    return ((t * a->n + a->lo) * width) * item;
}

int mg_lstm_sequence_forward(const mg_lstm_seq_args *a)
{
    size_t rows = a->hi - a->lo, hd = a->hidden, g = 4 * hd;
    size_t item = a->dtype == MG_F32 ? sizeof(float) : sizeof(double);
    char *work = malloc(2 * rows * g * item);
    if (!work)
        return -1;
    char *ph_t = work, *ph = work + rows * g * item;
    const char *px = a->px, *wh = a->wh;
    char *out = a->out, *act = a->act, *cseq = a->cseq;
    const char *h = (const char *)a->h0 + a->lo * hd * item;
    const char *c = (const char *)a->c0 + a->lo * hd * item;
    for (size_t s = 0; s < a->steps; s++) {
        size_t t = step_at(a, s);
        gemm(a, NO_TRANS, TRANS, g, rows, hd, wh, hd, h, hd, ph_t, rows);
        transpose(a->dtype, ph_t, g, rows, ph);
        char *h_new = out + at(a, t, hd, item), *c_new = cseq + at(a, t, hd, item);
        mg_lstm_forward_rows(a->dtype, rows, hd, px + at(a, t, g, item), ph, c,
                             act + at(a, t, g, item), h_new, c_new);
        h = h_new, c = c_new;
    }
    memcpy(out + at(a, a->steps, hd, item), c, rows * hd * item);
    free(work);
    return 0;
}

int mg_lstm_sequence_backward(const mg_lstm_seq_args *a)
{
    size_t rows = a->hi - a->lo, hd = a->hidden, g = 4 * hd;
    size_t item = a->dtype == MG_F32 ? sizeof(float) : sizeof(double), state = rows * hd * item;
    char *work = malloc(4 * state);
    if (!work)
        return -1;
    /* dh: the gradient reaching h from the later step; dsum adds the output's own */
    char *dh = work, *dsum = work + state, *dc = work + 2 * state, *dc_next = work + 3 * state;
    const char *dout = a->dout, *act = a->act, *cseq = a->cseq, *wh = a->wh;
    char *dpx = a->dpx;
    memset(dh, 0, state);
    memcpy(dc, dout + at(a, a->steps, hd, item), state);
    for (size_t s = a->steps; s-- > 0;) {
        size_t t = step_at(a, s);
        const char *c_prev = s ? cseq + at(a, step_at(a, s - 1), hd, item)
                               : (const char *)a->c0 + a->lo * hd * item;
        add(a->dtype, dout + at(a, t, hd, item), dh, rows * hd, dsum);
        char *da = dpx + at(a, t, g, item);
        mg_lstm_backward_rows(a->dtype, rows, hd, act + at(a, t, g, item), c_prev,
                              cseq + at(a, t, hd, item), dsum, dc, da, dc_next);
        char *swap = dc;
        dc = dc_next, dc_next = swap;
        gemm(a, NO_TRANS, NO_TRANS, rows, hd, g, da, g, wh, hd, dh, hd);
    }
    memcpy((char *)a->dh0 + a->lo * hd * item, dh, state);
    memcpy((char *)a->dc0 + a->lo * hd * item, dc, state);
    free(work);
    return 0;
}
