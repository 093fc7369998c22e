/* Batch normalization per channel of (outer, C, inner) data: statistics, the normalizing
 * map, and the sums and map of its gradient; optionally followed by relu or clip in the
 * same pass (activation.h), forward and backward.
 *
 * Reductions accumulate in double: for each contiguous run of a channel, LANES lane sums
 * (lane k takes elements k, k+LANES, ...) are added into the channel's LANES accumulators,
 * which are summed in order at the end.  They are not bit-identical to NumPy's pairwise
 * sums, only close to the exact value (far closer than float32 sums).  The statistics take
 * one pass: the sums of x - K and (x - K)^2 for K the channel's first value, so that the
 * squares do not cancel when the mean is far from 0.  The element-wise maps round every
 * step to the data's dtype in the order written, with no fused multiply-add, as NumPy
 * evaluates the same expressions.
 *
 * The fused kernels (mg_bn_train_task, mg_bn_apply_task, mg_bn_grad_task) do one channel
 * at a time, all of its passes together: a channel of a zoo model's map (at most a few
 * hundred KiB) stays in the core's cache between them, so the data is read from memory
 * once.  The activation's gradient factor is recomputed from x, which gives the same bits
 * as the forward's output (no contraction), instead of reading that output again.
 */
#include <math.h>

#include "activation.h"
#include "layers.h"

#define LANES 8

/* Per activation ACT: the forward of a run, the gradient's two sums, its map with batch
 * statistics, and its map with given statistics; VALUE is the output for y = the
 * normalized value, FACTOR the gradient factor at y. */
#define DEFINE_BN_ACT(T, SUF, ACT, VALUE, FACTOR)                                           \
    MG_CLONES static void fwd_##ACT##_##SUF(const T *restrict x, T *restrict out, size_t n, \
                                            T m, T a, T b, T lo, T hi)                      \
    {                                                                                       \
        for (size_t i = 0; i < n; i++) {                                                    \
            T y = (x[i] - m) * a + b;                                                       \
            out[i] = VALUE;                                                                 \
        }                                                                                   \
    }                                                                                       \
    /* a1[k] += sum of g, a2[k] += sum of g * (x - md) over lane k, g = dy * factor */      \
    MG_CLONES static void sums_##ACT##_##SUF(const T *x, const T *dy, size_t n, T m, T a,   \
                                             T b, T lo, T hi, double md, double *a1,        \
                                             double *a2)                                    \
    {                                                                                       \
        double s1[LANES] = {0}, s2[LANES] = {0};                                            \
        size_t i = 0;                                                                       \
        for (; i + LANES <= n; i += LANES)                                                  \
            for (int k = 0; k < LANES; k++) {                                               \
                T y = (x[i + k] - m) * a + b;                                               \
                double g = (double)(dy[i + k] * (FACTOR));                                  \
                s1[k] += g;                                                                 \
                s2[k] += g * ((double)x[i + k] - md);                                       \
            }                                                                               \
        for (; i < n; i++) {                                                                \
            T y = (x[i] - m) * a + b;                                                       \
            double g = (double)(dy[i] * (FACTOR));                                          \
            s1[i % LANES] += g;                                                             \
            s2[i % LANES] += g * ((double)x[i] - md);                                       \
        }                                                                                   \
        for (int k = 0; k < LANES; k++) {                                                   \
            a1[k] += s1[k];                                                                 \
            a2[k] += s2[k];                                                                 \
        }                                                                                   \
    }                                                                                       \
    MG_CLONES static void back_##ACT##_##SUF(const T *restrict x, const T *restrict dy,     \
                                             T *restrict out, size_t n, T m, T a, T b,      \
                                             T lo, T hi, T bb, T kk)                        \
    {                                                                                       \
        for (size_t i = 0; i < n; i++) {                                                    \
            T y = (x[i] - m) * a + b;                                                       \
            T g = dy[i] * (FACTOR);                                                         \
            out[i] = (g * a + (x[i] - m) * bb) + kk;                                        \
        }                                                                                   \
    }                                                                                       \
    MG_CLONES static void scale_##ACT##_##SUF(const T *restrict x, const T *restrict dy,    \
                                              T *restrict out, size_t n, T m, T a, T b,     \
                                              T lo, T hi)                                   \
    {                                                                                       \
        for (size_t i = 0; i < n; i++) {                                                    \
            T y = (x[i] - m) * a + b;                                                       \
            out[i] = (dy[i] * (FACTOR)) * a;                                                \
        }                                                                                   \
    }

/* the three activations' run functions: the same arguments, picked by s->act */
#define ACT_CALL(SUF, FN, act, ...)                                                         \
    do {                                                                                    \
        if ((act) == MG_ACT_RELU)                                                           \
            FN##_relu_##SUF(__VA_ARGS__);                                                   \
        else if ((act) == MG_ACT_CLIP)                                                      \
            FN##_clip_##SUF(__VA_ARGS__);                                                   \
        else                                                                                \
            FN##_none_##SUF(__VA_ARGS__);                                                   \
    } while (0)

#define DEFINE_BN(T, SUF, SQRT)                                                             \
    DEFINE_BN_ACT(T, SUF, none, ((void)lo, (void)hi, y), ((void)y, (T)1))                   \
    DEFINE_BN_ACT(T, SUF, relu, ((void)lo, (void)hi, mg_relu_##T(y)),                       \
                  ((void)lo, (void)hi, mg_one_if_##T(y)))                                   \
    DEFINE_BN_ACT(T, SUF, clip, mg_clip_##T(y, lo, hi), mg_one_within_##T(y, lo, hi))       \
                                                                                            \
    /* a1[k] += sum of x - K, a2[k] += sum of (x - K)^2 over lane k of one run */           \
    MG_CLONES static void shifted_##SUF(const T *x, size_t n, double K, double *a1,         \
                                        double *a2)                                         \
    {                                                                                       \
        double s1[LANES] = {0}, s2[LANES] = {0};                                            \
        size_t i = 0;                                                                       \
        for (; i + LANES <= n; i += LANES)                                                  \
            for (int k = 0; k < LANES; k++) {                                               \
                double d = (double)x[i + k] - K;                                            \
                s1[k] += d;                                                                 \
                s2[k] += d * d;                                                             \
            }                                                                               \
        for (; i < n; i++) {                                                                \
            double d = (double)x[i] - K;                                                    \
            s1[i % LANES] += d;                                                             \
            s2[i % LANES] += d * d;                                                         \
        }                                                                                   \
        for (int k = 0; k < LANES; k++) {                                                   \
            a1[k] += s1[k];                                                                 \
            a2[k] += s2[k];                                                                 \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* the channel's mean and biased variance, in double */                                 \
    static void stats_##SUF(const mg_bn_args *s, size_t c, double *mean, double *var)       \
    {                                                                                       \
        const T *x = (const T *)s->x;                                                       \
        size_t count = s->outer * s->inner;                                                 \
        if (!count) {                                                                       \
            *mean = *var = 0;                                                               \
            return;                                                                         \
        }                                                                                   \
        double K = (double)x[c * s->inner], acc1[LANES] = {0}, acc2[LANES] = {0};           \
        double t1 = 0, t2 = 0;                                                              \
        if (!isfinite(K)) /* inf - inf would turn an infinite mean into NaN */             \
            K = 0;                                                                          \
        for (size_t o = 0; o < s->outer; o++)                                               \
            shifted_##SUF(x + (o * s->c + c) * s->inner, s->inner, K, acc1, acc2);          \
        for (int q = 0; q < LANES; q++) {                                                   \
            t1 += acc1[q];                                                                  \
            t2 += acc2[q];                                                                  \
        }                                                                                   \
        double d = t1 / (double)count, v = t2 / (double)count - d * d;                      \
        *mean = K + d;                                                                      \
        *var = v < 0 ? 0 : v; /* rounding only; NaN stays */                                \
    }                                                                                       \
                                                                                            \
    /* the four kernels of batch_norm_stats/forward/sums/backward, one channel */           \
    static void channel_##SUF(const mg_bn_args *s, size_t c, int kind)                      \
    {                                                                                       \
        const T *x = (const T *)s->x, *dy = (const T *)s->dy;                               \
        const T *mean = (const T *)s->mean, *a = (const T *)s->a, *b = (const T *)s->b;     \
        const T *k = (const T *)s->k;                                                       \
        T *out = (T *)s->out;                                                               \
        double acc1[LANES] = {0}, acc2[LANES] = {0}, total1 = 0, total2 = 0;                \
        if (kind == 0) {                                                                    \
            stats_##SUF(s, c, &s->s1[c], &s->s2[c]);                                        \
            return;                                                                         \
        }                                                                                   \
        for (size_t o = 0; o < s->outer; o++) {                                             \
            size_t at = (o * s->c + c) * s->inner;                                          \
            if (kind == 1)                                                                  \
                fwd_none_##SUF(x + at, out + at, s->inner, mean[c], a[c], b[c], 0, 0);      \
            else if (kind == 2)                                                             \
                sums_none_##SUF(x + at, dy + at, s->inner, 0, 0, 0, 0, 0,                   \
                                (double)mean[c], acc1, acc2);                               \
            else /* dy * a + (x - mean) * b + k: the none activation with a for g */       \
                back_none_##SUF(x + at, dy + at, out + at, s->inner, mean[c], a[c], 0, 0,   \
                                0, b[c], k[c]);                                             \
        }                                                                                   \
        if (kind == 2) {                                                                    \
            for (int q = 0; q < LANES; q++) {                                               \
                total1 += acc1[q];                                                          \
                total2 += acc2[q];                                                          \
            }                                                                               \
            s->s1[c] = total1;                                                              \
            s->s2[c] = total2;                                                              \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* out = act((x - mean) * scale + shift) for one channel, from the params rows */       \
    static void apply_##SUF(const mg_bn_args *s, size_t c)                                  \
    {                                                                                       \
        const T *p = (const T *)s->p;                                                       \
        T m = p[c], a = p[s->c + c], b = p[2 * s->c + c], lo = (T)s->lo, hi = (T)s->hi;     \
        for (size_t o = 0; o < s->outer; o++) {                                             \
            size_t at = (o * s->c + c) * s->inner;                                          \
            ACT_CALL(SUF, fwd, s->act, (const T *)s->x + at, (T *)s->out + at, s->inner,    \
                     m, a, b, lo, hi);                                                      \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* batch statistics, the params NumPy would compute from them, then the output */       \
    static void train_##SUF(const mg_bn_args *s, size_t c)                                  \
    {                                                                                       \
        T *p = (T *)s->p;                                                                   \
        stats_##SUF(s, c, &s->s1[c], &s->s2[c]);                                            \
        /* as ops_nn: inv_std = 1 / sqrt(var + eps), scale = inv_std * gamma, each step   \
         * rounded to T, eps too (NumPy 2 casts a Python float to the array's dtype) */     \
        T inv = (T)1 / SQRT((T)s->s2[c] + (T)s->eps);                                       \
        p[c] = (T)s->s1[c];                                                                 \
        p[s->c + c] = s->gamma ? inv * ((const T *)s->gamma)[c] : inv;                      \
        p[3 * s->c + c] = inv;                                                              \
        apply_##SUF(s, c);                                                                  \
    }                                                                                       \
                                                                                            \
    /* the sums of g = dy * act'(y), then dx: with batch statistics (their gradient       \
     * included, coefficients as ops_nn computes them in double) or given ones */           \
    static void grad_##SUF(const mg_bn_args *s, size_t c, int batch_stats)                  \
    {                                                                                       \
        const T *p = (const T *)s->p, *x = (const T *)s->x, *dy = (const T *)s->dy;         \
        T *out = (T *)s->out;                                                               \
        T m = p[c], a = p[s->c + c], b = p[2 * s->c + c], inv = p[3 * s->c + c];            \
        T lo = (T)s->lo, hi = (T)s->hi;                                                     \
        double acc1[LANES] = {0}, acc2[LANES] = {0}, t1 = 0, t2 = 0;                        \
        for (size_t o = 0; o < s->outer; o++) {                                             \
            size_t at = (o * s->c + c) * s->inner;                                          \
            ACT_CALL(SUF, sums, s->act, x + at, dy + at, s->inner, m, a, b, lo, hi,         \
                     (double)m, acc1, acc2);                                                \
        }                                                                                   \
        for (int q = 0; q < LANES; q++) {                                                   \
            t1 += acc1[q];                                                                  \
            t2 += acc2[q];                                                                  \
        }                                                                                   \
        s->s1[c] = t1;                                                                      \
        s->s2[c] = t2;                                                                      \
        double count = (double)(s->outer * s->inner), sd = (double)a, id = (double)inv;     \
        T bb = (T)(-(sd * id * id * t2 / count)), kk = (T)(-(sd * t1 / count));             \
        for (size_t o = 0; o < s->outer; o++) {                                             \
            size_t at = (o * s->c + c) * s->inner;                                          \
            if (batch_stats)                                                                \
                ACT_CALL(SUF, back, s->act, x + at, dy + at, out + at, s->inner, m, a, b,   \
                         lo, hi, bb, kk);                                                   \
            else                                                                            \
                ACT_CALL(SUF, scale, s->act, x + at, dy + at, out + at, s->inner, m, a, b,  \
                         lo, hi);                                                           \
        }                                                                                   \
    }

DEFINE_BN(float, f32, sqrtf)
DEFINE_BN(double, f64, sqrt)

static void channels(void *args, size_t begin, size_t end, int kind)
{
    const mg_bn_args *s = (const mg_bn_args *)args;
    for (size_t c = begin; c < end; c++) {
        if (s->dtype == MG_F32)
            channel_f32(s, c, kind);
        else
            channel_f64(s, c, kind);
    }
}

void mg_bn_stats_task(void *args, size_t begin, size_t end) { channels(args, begin, end, 0); }
void mg_bn_forward_task(void *args, size_t begin, size_t end) { channels(args, begin, end, 1); }
void mg_bn_sums_task(void *args, size_t begin, size_t end) { channels(args, begin, end, 2); }
void mg_bn_backward_task(void *args, size_t begin, size_t end) { channels(args, begin, end, 3); }

void mg_bn_train_task(void *args, size_t begin, size_t end)
{
    const mg_bn_args *s = (const mg_bn_args *)args;
    for (size_t c = begin; c < end; c++)
        (s->dtype == MG_F32 ? train_f32 : train_f64)(s, c);
}

void mg_bn_apply_task(void *args, size_t begin, size_t end)
{
    const mg_bn_args *s = (const mg_bn_args *)args;
    for (size_t c = begin; c < end; c++)
        (s->dtype == MG_F32 ? apply_f32 : apply_f64)(s, c);
}

static void grads(void *args, size_t begin, size_t end, int batch_stats)
{
    const mg_bn_args *s = (const mg_bn_args *)args;
    for (size_t c = begin; c < end; c++)
        (s->dtype == MG_F32 ? grad_f32 : grad_f64)(s, c, batch_stats);
}

void mg_bn_grad_task(void *args, size_t begin, size_t end) { grads(args, begin, end, 1); }
void mg_bn_grad_given_task(void *args, size_t begin, size_t end) { grads(args, begin, end, 0); }
