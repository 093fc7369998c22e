/* BatchNorm's element-wise maps per channel of (outer, C, inner) data, with the arithmetic
 * order of minigluon_ext/src/batchnorm.c (each step rounded to T, no fused multiply-add):
 *
 *   forward:  out = (x - mean[c]) * scale[c] + shift[c]
 *   backward: out = (dy * a[c] + (x - mean[c]) * b[c]) + k[c]
 *
 * The per-channel statistics and sums are CuPy reductions (gpu_layers.py), not kernels.
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

MG_BATCHNORM(float, f32)
MG_BATCHNORM(double, f64)
