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
 * The fused kernels (mg_bn_train_task, mg_bn_apply_task, mg_bn_grad_task) do one block
 * of channels at a time (BLOCK_BYTES below), all of its passes together: a block (a zoo
 * channel is at most 800 KiB) stays in the core's cache between them, so the data is read
 * from memory once.  The activation's gradient factor is recomputed from x, which gives
 * the same bits as the forward's output (no contraction), instead of reading that output
 * again.
 */
#include <math.h>

#include "activation.h"
#include "layers.h"

#define LANES 8
/* Channels are taken in blocks of about BLOCK_BYTES of data (a map's channels side by
 * side, each of its rows in memory order): a channel of a small map is only a few short
 * runs, spread over the whole array, which the hardware prefetcher cannot follow alone
 * (16 x 960 x 7 x 7: the sums took 5x the time of the same data as one contiguous run).
 * Each channel still adds its runs in the order o = 0, 1, ..., so the bits do not depend
 * on the blocks or on the threads. */
#define BLOCK_BYTES (256 * 1024)
#define MAX_BLOCK 64

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
    /* per channel of the block [c0, c0 + nb): mean[j] and biased var[j], in double */      \
    static void stats_##SUF(const mg_bn_args *s, size_t c0, size_t nb, double *mean,        \
                            double *var)                                                    \
    {                                                                                       \
        const T *x = (const T *)s->x;                                                       \
        size_t count = s->outer * s->inner;                                                 \
        double K[MAX_BLOCK], acc1[MAX_BLOCK][LANES] = {{0}}, acc2[MAX_BLOCK][LANES] = {{0}}; \
        for (size_t j = 0; j < nb; j++) {                                                   \
            /* inf - inf would turn an infinite mean into NaN */                            \
            K[j] = count ? (double)x[(c0 + j) * s->inner] : 0;                              \
            K[j] = isfinite(K[j]) ? K[j] : 0;                                               \
        }                                                                                   \
        for (size_t o = 0; o < s->outer; o++)                                               \
            for (size_t j = 0; j < nb; j++)                                                 \
                shifted_##SUF(x + (o * s->c + c0 + j) * s->inner, s->inner, K[j], acc1[j],  \
                              acc2[j]);                                                     \
        for (size_t j = 0; j < nb; j++) {                                                   \
            double t1 = 0, t2 = 0;                                                          \
            for (int q = 0; q < LANES; q++) {                                               \
                t1 += acc1[j][q];                                                           \
                t2 += acc2[j][q];                                                           \
            }                                                                               \
            double d = count ? t1 / (double)count : 0;                                      \
            double v = count ? t2 / (double)count - d * d : 0;                              \
            mean[j] = K[j] + d;                                                             \
            var[j] = v < 0 ? 0 : v; /* rounding only; NaN stays */                          \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* the gradient sums of the block (g = dy * act'(y) from the params m, a, b), added    \
     * to per-channel totals t1[j] (sum g) and t2[j] (sum g * (x - m)) */                   \
    static void grad_sums_##SUF(const mg_bn_args *s, size_t c0, size_t nb, const T *m,     \
                                const T *a, const T *b, double *t1, double *t2)             \
    {                                                                                       \
        const T *x = (const T *)s->x, *dy = (const T *)s->dy;                               \
        T lo = (T)s->lo, hi = (T)s->hi;                                                     \
        double acc1[MAX_BLOCK][LANES] = {{0}}, acc2[MAX_BLOCK][LANES] = {{0}};              \
        for (size_t o = 0; o < s->outer; o++)                                               \
            for (size_t j = 0; j < nb; j++) {                                               \
                size_t at = (o * s->c + c0 + j) * s->inner;                                 \
                ACT_CALL(SUF, sums, s->act, x + at, dy + at, s->inner, m[j], a[j], b[j],    \
                         lo, hi, (double)m[j], acc1[j], acc2[j]);                           \
            }                                                                               \
        for (size_t j = 0; j < nb; j++) {                                                   \
            t1[j] = t2[j] = 0;                                                              \
            for (int q = 0; q < LANES; q++) {                                               \
                t1[j] += acc1[j][q];                                                        \
                t2[j] += acc2[j][q];                                                        \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* out = act((x - m) * a + b) over the block, the runs in memory order */               \
    static void apply_##SUF(const mg_bn_args *s, size_t c0, size_t nb, const T *m,         \
                            const T *a, const T *b)                                         \
    {                                                                                       \
        T lo = (T)s->lo, hi = (T)s->hi;                                                     \
        for (size_t o = 0; o < s->outer; o++)                                               \
            for (size_t j = 0; j < nb; j++) {                                               \
                size_t at = (o * s->c + c0 + j) * s->inner;                                 \
                ACT_CALL(SUF, fwd, s->act, (const T *)s->x + at, (T *)s->out + at,          \
                         s->inner, m[j], a[j], b[j], lo, hi);                               \
            }                                                                               \
    }                                                                                       \
                                                                                            \
    /* the four kernels of batch_norm_stats/forward/sums/backward, one block */             \
    static void block_##SUF(const mg_bn_args *s, size_t c0, size_t nb, int kind)            \
    {                                                                                       \
        const T *x = (const T *)s->x, *dy = (const T *)s->dy;                               \
        const T *mean = (const T *)s->mean + c0, *a = (const T *)s->a + c0;                 \
        const T *b = (const T *)s->b + c0, *k = (const T *)s->k + c0;                       \
        T zero[MAX_BLOCK] = {0};                                                            \
        if (kind == 0)                                                                      \
            stats_##SUF(s, c0, nb, s->s1 + c0, s->s2 + c0);                                 \
        else if (kind == 1)                                                                 \
            apply_##SUF(s, c0, nb, mean, a, b); /* s->act is none there */                  \
        else if (kind == 2)                                                                 \
            grad_sums_##SUF(s, c0, nb, mean, zero, zero, s->s1 + c0, s->s2 + c0);           \
        else /* dy * a + (x - mean) * b + k: the none activation's map with a for g */     \
            for (size_t o = 0; o < s->outer; o++)                                           \
                for (size_t j = 0; j < nb; j++) {                                           \
                    size_t at = (o * s->c + c0 + j) * s->inner;                             \
                    back_none_##SUF(x + at, dy + at, (T *)s->out + at, s->inner, mean[j],   \
                                    a[j], 0, 0, 0, b[j], k[j]);                             \
                }                                                                           \
    }                                                                                       \
                                                                                            \
    /* batch statistics, the params NumPy would compute from them, then the output */       \
    static void train_##SUF(const mg_bn_args *s, size_t c0, size_t nb)                      \
    {                                                                                       \
        T *p = (T *)s->p;                                                                   \
        size_t C = s->c;                                                                    \
        stats_##SUF(s, c0, nb, s->s1 + c0, s->s2 + c0);                                     \
        for (size_t c = c0; c < c0 + nb; c++) {                                             \
            /* as ops_nn: inv_std = 1 / sqrt(var + eps), scale = inv_std * gamma, each    \
             * step rounded to T, eps too (NumPy 2 casts a Python float to the dtype) */    \
            T inv = (T)1 / SQRT((T)s->s2[c] + (T)s->eps);                                   \
            p[c] = (T)s->s1[c];                                                             \
            p[C + c] = s->gamma ? inv * ((const T *)s->gamma)[c] : inv;                     \
            p[3 * C + c] = inv;                                                             \
        }                                                                                   \
        apply_##SUF(s, c0, nb, p + c0, p + C + c0, p + 2 * C + c0);                         \
    }                                                                                       \
                                                                                            \
    /* the sums of g = dy * act'(y), then dx: with batch statistics (their gradient       \
     * included, coefficients as ops_nn computes them in double) or given ones */           \
    static void grad_##SUF(const mg_bn_args *s, size_t c0, size_t nb, int batch_stats)      \
    {                                                                                       \
        const T *p = (const T *)s->p, *x = (const T *)s->x, *dy = (const T *)s->dy;         \
        size_t C = s->c;                                                                    \
        const T *m = p + c0, *a = p + C + c0, *b = p + 2 * C + c0, *inv = p + 3 * C + c0;   \
        T lo = (T)s->lo, hi = (T)s->hi, bb[MAX_BLOCK], kk[MAX_BLOCK];                       \
        grad_sums_##SUF(s, c0, nb, m, a, b, s->s1 + c0, s->s2 + c0);                        \
        double count = (double)(s->outer * s->inner);                                       \
        for (size_t j = 0; j < nb; j++) {                                                   \
            double sd = (double)a[j], id = (double)inv[j];                                  \
            bb[j] = (T)(-(sd * id * id * s->s2[c0 + j] / count));                           \
            kk[j] = (T)(-(sd * s->s1[c0 + j] / count));                                     \
        }                                                                                   \
        for (size_t o = 0; o < s->outer; o++)                                               \
            for (size_t j = 0; j < nb; j++) {                                               \
                size_t at = (o * C + c0 + j) * s->inner;                                    \
                T *out = (T *)s->out + at;                                                  \
                if (batch_stats)                                                            \
                    ACT_CALL(SUF, back, s->act, x + at, dy + at, out, s->inner, m[j], a[j], \
                             b[j], lo, hi, bb[j], kk[j]);                                   \
                else                                                                        \
                    ACT_CALL(SUF, scale, s->act, x + at, dy + at, out, s->inner, m[j],      \
                             a[j], b[j], lo, hi);                                           \
            }                                                                               \
    }

DEFINE_BN(float, f32, sqrtf)
DEFINE_BN(double, f64, sqrt)

/* Channels per block: as many as keep a block's data of one array within BLOCK_BYTES
 * (a channel of a big map is a block alone), at most MAX_BLOCK. */
static size_t block_size(const mg_bn_args *s)
{
    size_t bytes = s->outer * s->inner * (s->dtype == MG_F32 ? sizeof(float) : sizeof(double));
    size_t nb = bytes ? BLOCK_BYTES / bytes : MAX_BLOCK;
    return nb < 1 ? 1 : nb > MAX_BLOCK ? MAX_BLOCK : nb;
}

/* fn(s, first channel, channels) over the blocks of [begin, end) */
#define OVER_BLOCKS(FN, ...)                                                                \
    do {                                                                                    \
        const mg_bn_args *s = (const mg_bn_args *)args;                                     \
        size_t nb = block_size(s);                                                          \
        for (size_t c0 = begin; c0 < end; c0 += nb) {                                       \
            size_t n = end - c0 < nb ? end - c0 : nb;                                       \
            if (s->dtype == MG_F32)                                                         \
                FN##_f32(s, c0, n, ##__VA_ARGS__);                                          \
            else                                                                            \
                FN##_f64(s, c0, n, ##__VA_ARGS__);                                          \
        }                                                                                   \
    } while (0)

void mg_bn_stats_task(void *args, size_t begin, size_t end) { OVER_BLOCKS(block, 0); }
void mg_bn_forward_task(void *args, size_t begin, size_t end) { OVER_BLOCKS(block, 1); }
void mg_bn_sums_task(void *args, size_t begin, size_t end) { OVER_BLOCKS(block, 2); }
void mg_bn_backward_task(void *args, size_t begin, size_t end) { OVER_BLOCKS(block, 3); }
void mg_bn_train_task(void *args, size_t begin, size_t end) { OVER_BLOCKS(train); }
void mg_bn_grad_task(void *args, size_t begin, size_t end) { OVER_BLOCKS(grad, 1); }
void mg_bn_grad_given_task(void *args, size_t begin, size_t end) { OVER_BLOCKS(grad, 0); }

void mg_bn_apply_task(void *args, size_t begin, size_t end)
{
    const mg_bn_args *s = (const mg_bn_args *)args;
    const void *p = s->p;
    size_t step = s->dtype == MG_F32 ? sizeof(float) : sizeof(double);
    const char *m = (const char *)p, *a = m + s->c * step, *b = m + 2 * s->c * step;
    size_t nb = block_size(s);
    for (size_t c0 = begin; c0 < end; c0 += nb) {
        size_t n = end - c0 < nb ? end - c0 : nb;
        if (s->dtype == MG_F32)
            apply_f32(s, c0, n, (const float *)m + c0, (const float *)a + c0,
                      (const float *)b + c0);
        else
            apply_f64(s, c0, n, (const double *)m + c0, (const double *)a + c0,
                      (const double *)b + c0);
    }
}
