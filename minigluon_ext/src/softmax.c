/* Softmax along the last axis of (rows, width) data, and the softmax cross-entropy of one
 * picked class per row, forward and backward, a row at a time.
 *
 * Written with NumPy operators, log_softmax + pick and their backwards over the language
 * model's (1120, 10000) logits make about ten passes over 45 MB (max, subtract, exp, sum,
 * log, subtract; a zero array for pick's gradient, exp again, multiply, subtract), each on
 * one thread at about 8 ns an element.  Here a row (40 KB of float32: it stays in the
 * core's cache between passes) is read twice forward, for its max and then the sum of
 * exponentials, and once backward; rows are split over the layer pool (workers.c).
 *
 * With m the row's max, s = sum exp(x - m), y the forward's output:
 *   MG_SM_FORWARD       out = exp(x - m) / s
 *   MG_SM_LOG_FORWARD   out = (x - m) - log s
 *   MG_SM_BACKWARD      dx = (dy - sum(dy * y)) * y
 *   MG_SM_LOG_BACKWARD  dx = dy - exp(y) * sum(dy)
 *   MG_SM_CE_FORWARD    loss[r] = -((x[r, label[r]] - m) - log s); stats[r] = (m, log s)
 *   MG_SM_CE_BACKWARD   dx = (exp((x - m) - log s) - onehot(label[r])) * dloss[r]
 * Sums run in double over 8 partial sums, at least as exact as NumPy's pairwise float32
 * sums; float32 exponentials are rnn_math.h's exp_f32 (a few ulp from NumPy's, and they
 * vectorize), float64 ones libm's.  A NaN anywhere in a row makes the whole row NaN, as
 * in NumPy (the max skips it, but the sum of exponentials does not).
 */
#include "layers.h"
#include "rnn_math.h"

#define LANES 8    /* partial sums: independent adds the compiler may put in vectors */
#define BLOCK 512  /* exponentials a CE forward computes into a stack block, then sums */

#define DEFINE_SOFTMAX(T, SUF, EXP)                                                          \
    MG_NO_TRAP MG_CLONES static T row_max_##SUF(const T *restrict x, size_t n)              \
    {                                                                                        \
        T lane[LANES], m = -(T)INFINITY;                                                     \
        size_t k = 0;                                                                        \
        for (int j = 0; j < LANES; j++)                                                      \
            lane[j] = -(T)INFINITY;                                                          \
        for (; k + LANES <= n; k += LANES)                                                   \
            for (int j = 0; j < LANES; j++)                                                  \
                lane[j] = x[k + j] > lane[j] ? x[k + j] : lane[j];                           \
        for (; k < n; k++)                                                                   \
            m = x[k] > m ? x[k] : m;                                                         \
        for (int j = 0; j < LANES; j++)                                                      \
            m = lane[j] > m ? lane[j] : m;                                                   \
        return m;                                                                            \
    }                                                                                        \
                                                                                             \
    /* sum of a[k] (b == NULL) or of a[k] * b[k], in double */                               \
    MG_CLONES static double row_sum_##SUF(const T *restrict a, const T *restrict b,          \
                                          size_t n)                                          \
    {                                                                                        \
        double lane[LANES] = {0}, s = 0;                                                     \
        size_t k = 0;                                                                        \
        if (b) {                                                                             \
            for (; k + LANES <= n; k += LANES)                                               \
                for (int j = 0; j < LANES; j++)                                              \
                    lane[j] += (double)(a[k + j] * b[k + j]);                                \
            for (; k < n; k++)                                                               \
                s += (double)(a[k] * b[k]);                                                  \
        } else {                                                                             \
            for (; k + LANES <= n; k += LANES)                                               \
                for (int j = 0; j < LANES; j++)                                              \
                    lane[j] += (double)a[k + j];                                             \
            for (; k < n; k++)                                                               \
                s += (double)a[k];                                                           \
        }                                                                                    \
        for (int j = 0; j < LANES; j++)                                                      \
            s += lane[j];                                                                    \
        return s;                                                                            \
    }                                                                                        \
                                                                                             \
    /* e[k] = exp(x[k] - m) */                                                               \
    MG_NO_TRAP MG_CLONES static void row_exp_##SUF(const T *restrict x, size_t n, T m,       \
                                                   T *restrict e)                            \
    {                                                                                        \
        for (size_t k = 0; k < n; k++)                                                       \
            e[k] = EXP(x[k] - m);                                                            \
    }                                                                                        \
                                                                                             \
    /* s = sum exp(x - m) through a block on the stack; returns log s, sets *max = m */      \
    static T row_log_sum_##SUF(const T *x, size_t n, T *max)                                 \
    {                                                                                        \
        T e[BLOCK], m = row_max_##SUF(x, n);                                                 \
        double s = 0;                                                                        \
        for (size_t k = 0; k < n; k += BLOCK) {                                              \
            size_t len = n - k < BLOCK ? n - k : BLOCK;                                      \
            row_exp_##SUF(x + k, len, m, e);                                                 \
            s += row_sum_##SUF(e, NULL, len);                                                \
        }                                                                                    \
        *max = m;                                                                            \
        return (T)log(s);                                                                    \
    }                                                                                        \
                                                                                             \
    MG_NO_TRAP MG_CLONES static void row_forward_##SUF(const T *restrict x, size_t n,        \
                                                       int log_out, T *restrict out)         \
    {                                                                                        \
        T m = row_max_##SUF(x, n);                                                           \
        row_exp_##SUF(x, n, m, out);                                                         \
        T s = (T)row_sum_##SUF(out, NULL, n);                                                \
        if (log_out) {                                                                       \
            T logs = (T)log((double)s);                                                      \
            for (size_t k = 0; k < n; k++)                                                   \
                out[k] = (x[k] - m) - logs;                                                  \
        } else {                                                                             \
            for (size_t k = 0; k < n; k++)                                                   \
                out[k] = out[k] / s;                                                         \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    MG_NO_TRAP MG_CLONES static void row_backward_##SUF(const T *restrict y,                 \
                                                        const T *restrict dy, size_t n,      \
                                                        int log_out, T *restrict dx)         \
    {                                                                                        \
        if (log_out) {                                                                       \
            T sum = (T)row_sum_##SUF(dy, NULL, n);                                           \
            for (size_t k = 0; k < n; k++)                                                   \
                dx[k] = dy[k] - EXP(y[k]) * sum;                                             \
        } else {                                                                             \
            T dot = (T)row_sum_##SUF(dy, y, n);                                              \
            for (size_t k = 0; k < n; k++)                                                   \
                dx[k] = (dy[k] - dot) * y[k];                                                \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    MG_NO_TRAP MG_CLONES static void row_ce_backward_##SUF(const T *restrict x, size_t n,    \
                                                           const T *stats, int32_t label,    \
                                                           T g, T *restrict dx)              \
    {                                                                                        \
        T m = stats[0], logs = stats[1];                                                     \
        for (size_t k = 0; k < n; k++)                                                       \
            dx[k] = EXP((x[k] - m) - logs) * g;                                              \
        dx[label] = (EXP((x[label] - m) - logs) - (T)1) * g;                                 \
    }                                                                                        \
                                                                                             \
    static void softmax_row_##SUF(const mg_softmax_args *a, size_t r)                        \
    {                                                                                        \
        size_t n = a->width, at = r * n;                                                     \
        const T *x = (const T *)a->x + at;                                                   \
        T *stats = a->stats ? (T *)a->stats + 2 * r : NULL;                                  \
        switch (a->kind) {                                                                   \
        case MG_SM_FORWARD:                                                                  \
        case MG_SM_LOG_FORWARD:                                                              \
            row_forward_##SUF(x, n, a->kind == MG_SM_LOG_FORWARD, (T *)a->out + at);         \
            break;                                                                           \
        case MG_SM_BACKWARD:                                                                 \
        case MG_SM_LOG_BACKWARD:                                                             \
            row_backward_##SUF(x, (const T *)a->dy + at, n, a->kind == MG_SM_LOG_BACKWARD,   \
                               (T *)a->out + at);                                            \
            break;                                                                           \
        case MG_SM_CE_FORWARD: {                                                             \
            T m, logs = row_log_sum_##SUF(x, n, &m);                                         \
            stats[0] = m, stats[1] = logs;                                                   \
            ((T *)a->out)[r] = -((x[a->label[r]] - m) - logs);                               \
            break;                                                                           \
        }                                                                                    \
        default:                                                                             \
            row_ce_backward_##SUF(x, n, stats, a->label[r], ((const T *)a->dy)[r],           \
                                  (T *)a->out + at);                                         \
        }                                                                                    \
    }

DEFINE_SOFTMAX(float, f32, exp_f32)
DEFINE_SOFTMAX(double, f64, exp)

void mg_softmax_task(void *args, size_t begin, size_t end)
{
    const mg_softmax_args *a = (const mg_softmax_args *)args;
    for (size_t r = begin; r < end; r++) {
        if (a->dtype == MG_F32)
            softmax_row_f32(a, r);
        else
            softmax_row_f64(a, r);
    }
}
