/* ReLU and its gradient with minigluon_ext/src/relu.c's (NumPy's) exact results:
 * relu(x) = x where x > 0 or x is NaN, else +0 (np.maximum(x, 0));
 * grad = dy * 1 where x > 0, else dy * 0 (a product, so -0 and NaN come out as in NumPy).
 */

#define MG_RELU(T, SUF)                                                                     \
    MG_KERNEL relu_##SUF(const T *x, T *out, long long n)                                   \
    {                                                                                       \
        MG_FOR(i, n)                                                                        \
        {                                                                                   \
            T v = x[i];                                                                     \
            out[i] = (v > 0 || v != v) ? v : (T)0;                                          \
        }                                                                                   \
    }                                                                                       \
    MG_KERNEL relu_backward_##SUF(const T *x, const T *dy, T *out, long long n)            \
    {                                                                                       \
        MG_FOR(i, n)                                                                        \
        {                                                                                   \
            out[i] = dy[i] * (x[i] > 0 ? (T)1 : (T)0);                                      \
        }                                                                                   \
    }

MG_RELU(float, f32)
MG_RELU(double, f64)
