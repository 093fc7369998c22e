/* Batch normalization per channel of (outer, C, inner) data: statistics, the normalizing
 * map, and the sums and map of its gradient.
 *
 * Reductions accumulate in double: for each contiguous run of a channel, 8 lane sums (lane
 * k takes elements k, k+8, ...) are added into the channel's 8 accumulators, which are
 * summed in order at the end.  They are not bit-identical to NumPy's pairwise sums, only
 * close to the exact value (far closer than float32 sums).  The
 * element-wise maps round every step to the data's dtype in the order written, with no
 * fused multiply-add, as NumPy evaluates the same expressions.
 */
#include "layers.h"

#define LANES 8

#define DEFINE_BN(T, SUF)                                                                   \
    /* acc[k] += the sum of f(element) over lane k of one run (elements k, k+8, ...), where \
     * f is x, (x - m)^2, or dy and dy * (x - m); lanes live in locals so they vectorize */ \
    MG_CLONES static void run_sum_##SUF(const T *x, size_t n, double *acc)                  \
    {                                                                                       \
        double s[LANES] = {0};                                                              \
        size_t i = 0;                                                                       \
        for (; i + LANES <= n; i += LANES)                                                  \
            for (int k = 0; k < LANES; k++)                                                 \
                s[k] += (double)x[i + k];                                                   \
        for (; i < n; i++)                                                                  \
            s[i % LANES] += (double)x[i];                                                   \
        for (int k = 0; k < LANES; k++)                                                     \
            acc[k] += s[k];                                                                 \
    }                                                                                       \
    MG_CLONES static void run_sq_##SUF(const T *x, size_t n, double m, double *acc)         \
    {                                                                                       \
        double s[LANES] = {0};                                                              \
        size_t i = 0;                                                                       \
        for (; i + LANES <= n; i += LANES)                                                  \
            for (int k = 0; k < LANES; k++) {                                               \
                double d = (double)x[i + k] - m;                                            \
                s[k] += d * d;                                                              \
            }                                                                               \
        for (; i < n; i++) {                                                                \
            double d = (double)x[i] - m;                                                    \
            s[i % LANES] += d * d;                                                          \
        }                                                                                   \
        for (int k = 0; k < LANES; k++)                                                     \
            acc[k] += s[k];                                                                 \
    }                                                                                       \
    MG_CLONES static void run_grad_##SUF(const T *x, const T *dy, size_t n, double m,       \
                                         double *a1, double *a2)                            \
    {                                                                                       \
        double s1[LANES] = {0}, s2[LANES] = {0};                                            \
        size_t i = 0;                                                                       \
        for (; i + LANES <= n; i += LANES)                                                  \
            for (int k = 0; k < LANES; k++) {                                               \
                double g = (double)dy[i + k];                                               \
                s1[k] += g;                                                                 \
                s2[k] += g * ((double)x[i + k] - m);                                        \
            }                                                                               \
        for (; i < n; i++) {                                                                \
            double g = (double)dy[i];                                                       \
            s1[i % LANES] += g;                                                             \
            s2[i % LANES] += g * ((double)x[i] - m);                                        \
        }                                                                                   \
        for (int k = 0; k < LANES; k++) {                                                   \
            a1[k] += s1[k];                                                                 \
            a2[k] += s2[k];                                                                 \
        }                                                                                   \
    }                                                                                       \
    MG_CLONES static void run_forward_##SUF(const T *restrict x, T *restrict out, size_t n, \
                                            T m, T a, T b)                                  \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            out[i] = (x[i] - m) * a + b;                                                    \
    }                                                                                       \
    MG_CLONES static void run_backward_##SUF(const T *restrict x, const T *restrict dy,     \
                                             T *restrict out, size_t n, T m, T a, T b, T k) \
    {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                      \
            out[i] = (dy[i] * a + (x[i] - m) * b) + k;                                      \
    }                                                                                       \
                                                                                            \
    static void channel_##SUF(const mg_bn_args *s, size_t c, int kind)                      \
    {                                                                                       \
        const T *x = (const T *)s->x, *dy = (const T *)s->dy;                               \
        const T *mean = (const T *)s->mean, *a = (const T *)s->a, *b = (const T *)s->b;     \
        const T *k = (const T *)s->k;                                                       \
        T *out = (T *)s->out;                                                               \
        double acc1[LANES] = {0}, acc2[LANES] = {0}, total1 = 0, total2 = 0, m = 0;         \
        if (kind == 0) { /* statistics: mean, then the squared deviations from it */        \
            for (size_t o = 0; o < s->outer; o++)                                           \
                run_sum_##SUF(x + (o * s->c + c) * s->inner, s->inner, acc1);               \
            for (int q = 0; q < LANES; q++)                                                 \
                total1 += acc1[q];                                                          \
            size_t count = s->outer * s->inner;                                             \
            m = count ? total1 / (double)count : 0;                                         \
            for (size_t o = 0; o < s->outer; o++)                                           \
                run_sq_##SUF(x + (o * s->c + c) * s->inner, s->inner, m, acc2);             \
            for (int q = 0; q < LANES; q++)                                                 \
                total2 += acc2[q];                                                          \
            s->s1[c] = m;                                                                   \
            s->s2[c] = count ? total2 / (double)count : 0;                                  \
        } else if (kind == 1) {                                                             \
            for (size_t o = 0; o < s->outer; o++) {                                         \
                size_t at = (o * s->c + c) * s->inner;                                      \
                run_forward_##SUF(x + at, out + at, s->inner, mean[c], a[c], b[c]);         \
            }                                                                               \
        } else if (kind == 2) {                                                             \
            for (size_t o = 0; o < s->outer; o++) {                                         \
                size_t at = (o * s->c + c) * s->inner;                                      \
                run_grad_##SUF(x + at, dy + at, s->inner, (double)mean[c], acc1, acc2);     \
            }                                                                               \
            for (int q = 0; q < LANES; q++) {                                               \
                total1 += acc1[q];                                                          \
                total2 += acc2[q];                                                          \
            }                                                                               \
            s->s1[c] = total1;                                                              \
            s->s2[c] = total2;                                                              \
        } else {                                                                            \
            for (size_t o = 0; o < s->outer; o++) {                                         \
                size_t at = (o * s->c + c) * s->inner;                                      \
                run_backward_##SUF(x + at, dy + at, out + at, s->inner, mean[c], a[c],      \
                                   b[c], k[c]);                                             \
            }                                                                               \
        }                                                                                   \
    }

DEFINE_BN(float, f32)
DEFINE_BN(double, f64)

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
