/* BatchNorm's element-wise maps per channel of (outer, C, inner) data, with the arithmetic
 * order of minigluon_ext/src/batchnorm.c (each step rounded to T, no fused multiply-add):
 *
 *   forward:  out = (x - mean[c]) * scale[c] + shift[c]
 *   backward: out = (dy * a[c] + (x - mean[c]) * b[c]) + k[c]
 *
 * The per-channel sums (statistics; the gradient's sum dy and sum dy * (x - mean)) add in
 * double, as batchnorm.c does, but in another order: equal to its sums up to rounding.
 * One thread sums one (c, i) position over a segment of the outer axis, so consecutive
 * threads read consecutive addresses; gpu_layers.py sums the (segment, C, inner) partial
 * sums with CuPy, and picks the segments so that there are threads enough for a GPU.
 */

#define MG_BATCHNORM(T, SUF)                                                                \
    MG_KERNEL batch_norm_forward_##SUF(const T *x, const T *mean, const T *scale,          \
                                       const T *shift, T *out, long long channels,         \
                                       long long inner, long long n)                       \
    {                                                                                       \
        MG_FOR(i, n)                                                                        \
        {                                                                                   \
            long long at, c;                                                                \
            mg_divmod(mg_divmod(i, inner, &at), channels, &c);                              \
            out[i] = (x[i] - mean[c]) * scale[c] + shift[c];                                \
        }                                                                                   \
    }                                                                                       \
    MG_KERNEL batch_norm_backward_##SUF(const T *x, const T *dy, const T *mean, const T *a, \
                                        const T *b, const T *k, T *out, long long channels, \
                                        long long inner, long long n)                      \
    {                                                                                       \
        MG_FOR(i, n)                                                                        \
        {                                                                                   \
            long long at, c;                                                                \
            mg_divmod(mg_divmod(i, inner, &at), channels, &c);                              \
            out[i] = (dy[i] * a[c] + (x[i] - mean[c]) * b[c]) + k[c];                       \
        }                                                                                   \
    }

/* Over outer positions [seg * seg_len, ...) of column (c, i), with d = x - mean[c] in double:
 * with_dy = 0: s1 = sum d, s2 = sum d * d;  with_dy = 1: s1 = sum dy, s2 = sum dy * d. */
#define MG_BATCHNORM_SUMS(T, SUF)                                                           \
    MG_KERNEL batch_norm_partial_sums_##SUF(const T *x, const T *dy, const double *mean,    \
                                            double *s1, double *s2, int with_dy,            \
                                            long long outer, long long channels,            \
                                            long long inner, long long seg_len,             \
                                            long long items)                                \
    {                                                                                       \
        long long plane = channels * inner;                                                 \
        MG_FOR(item, items)                                                                 \
        {                                                                                   \
            long long ci, i, seg = mg_divmod(item, plane, &ci);                             \
            long long c = mg_divmod(ci, inner, &i);                                         \
            long long end = (seg + 1) * seg_len < outer ? (seg + 1) * seg_len : outer;      \
            double m = mean[c], a = 0, b = 0;                                               \
            for (long long o = seg * seg_len; o < end; o++) {                               \
                double d = (double)x[o * plane + ci] - m;                                   \
                double g = with_dy ? (double)dy[o * plane + ci] : d;                        \
                a += g;                                                                     \
                b += g * d;                                                                 \
            }                                                                               \
            s1[item] = a;                                                                   \
            s2[item] = b;                                                                   \
        }                                                                                   \
    }

MG_BATCHNORM(float, f32)
MG_BATCHNORM(double, f64)
MG_BATCHNORM_SUMS(float, f32)
MG_BATCHNORM_SUMS(double, f64)
