/* The dense optimizer updates, one pass over the arrays, one item per element, with the
 * float operations of their NumPy forms in the same order, so a GPU step gives the bits a
 * CPU step gives (NVRTC runs with --fmad=false):
 *
 *   sgd:  minigluon_ext/src/sgd.c (the SGD optimizer, nd.sgd_update, nd.sgd_mom_update)
 *   adam: optimizer/adam.py's _step, as minigluon_ext/src/rows.c (and nd.adam_update)
 *   nag:  ndarray/ops_optimizer_mp.py's nag_mom_step (the NAG optimizer, nd.nag_mom_update)
 *
 * Scalars come in the arrays' dtype, rounded once on the host (NumPy's rule for a Python
 * float meeting a float32 array).  `clipping` (decided on the host, from clip in double
 * precision) clips g to [-clip, clip] as np.clip does (NaN kept).  `decay` says whether
 * wd * weight is added at all: the optimizers skip it when wd == 0, the nd.* operators
 * always add it, and the two differ for a non-finite weight (0 * inf) and in the sign of
 * a zero.  The other flags pick the one place where a NumPy form groups its operations
 * differently.
 */

/* g = clip(grad * rescale) (+ wd * w): SGD's and NAG's order (decay after clipping) */
#define MG_CLIPPED_THEN_DECAYED(T)                                                          \
    T g = grad[i] * rescale;                                                                \
    if (clipping)                                                                           \
        g = g < -clip ? -clip : (g > clip ? clip : g);                                      \
    if (decay)                                                                              \
        g = g + wd * w[i];

#define MG_SGD(T, SUF)                                                                      \
    MG_KERNEL sgd_update_##SUF(T *w, const T *grad, T *mom, T lr, T wd, T momentum,         \
                               T rescale, T clip, int clipping, int decay, int has_mom,     \
                               long long n)                                                 \
    {                                                                                       \
        MG_FOR(i, n)                                                                        \
        {                                                                                   \
            MG_CLIPPED_THEN_DECAYED(T)                                                      \
            if (has_mom) {                                                                  \
                T m = mom[i] * momentum;                                                    \
                m = m - lr * g;                                                             \
                mom[i] = m;                                                                 \
                w[i] = w[i] + m;                                                            \
            } else {                                                                        \
                w[i] = w[i] - lr * g;                                                       \
            }                                                                               \
        }                                                                                   \
    }

/* square_first: var + c2 * (g * g) (adam.py); else var + (c2 * g) * g (nd.adam_update) */
#define MG_ADAM(T, SUF, SQRT)                                                               \
    MG_KERNEL adam_update_##SUF(T *w, const T *grad, T *mean, T *var, T lr, T beta1,        \
                                T beta2, T c1, T c2, T eps, T wd, T rescale, T clip,        \
                                int clipping, int decay, int square_first, long long n)     \
    {                                                                                       \
        MG_FOR(i, n)                                                                        \
        {                                                                                   \
            T g = grad[i] * rescale;                                                        \
            if (decay)                                                                      \
                g = g + wd * w[i];                                                          \
            if (clipping)                                                                   \
                g = g < -clip ? -clip : (g > clip ? clip : g);                              \
            T m = mean[i] * beta1;                                                          \
            m = m + c1 * g;                                                                 \
            T v = var[i] * beta2;                                                           \
            v = v + (square_first ? c2 * (g * g) : (c2 * g) * g);                           \
            mean[i] = m;                                                                    \
            var[i] = v;                                                                     \
            w[i] = w[i] - (lr * m) / (SQRT(v) + eps);                                       \
        }                                                                                   \
    }

/* step_first: w + (momentum * mom - lr * g) (nag_mom_step); else
 * (w + momentum * mom) - lr * g (nd.nag_mom_update) */
#define MG_NAG(T, SUF)                                                                      \
    MG_KERNEL nag_mom_update_##SUF(T *w, const T *grad, T *mom, T lr, T wd, T momentum,     \
                                   T rescale, T clip, int clipping, int decay,              \
                                   int step_first, long long n)                             \
    {                                                                                       \
        MG_FOR(i, n)                                                                        \
        {                                                                                   \
            MG_CLIPPED_THEN_DECAYED(T)                                                      \
            T m = mom[i] * momentum;                                                        \
            m = m - lr * g;                                                                 \
            mom[i] = m;                                                                     \
            T ahead = momentum * m;                                                         \
            T lg = lr * g;                                                                  \
            w[i] = step_first ? w[i] + (ahead - lg) : (w[i] + ahead) - lg;                  \
        }                                                                                   \
    }

/* sgd_step's form (ndarray/ops_optimizer_mp.py: NAG without momentum, nd.mp_sgd_update,
 * nd.multi_*sgd_update): w = w * scale, then w - lr * clip(grad * rescale), with
 * scale = 1 - lr * wd rounded once from double on the host */
#define MG_SGD_SCALED(T, SUF)                                                               \
    MG_KERNEL sgd_scaled_update_##SUF(T *w, const T *grad, T lr, T scale, T rescale,        \
                                      T clip, int clipping, long long n)                    \
    {                                                                                       \
        MG_FOR(i, n)                                                                        \
        {                                                                                   \
            T g = grad[i] * rescale;                                                        \
            if (clipping)                                                                   \
                g = g < -clip ? -clip : (g > clip ? clip : g);                              \
            T x = w[i] * scale;                                                             \
            w[i] = x - lr * g;                                                              \
        }                                                                                   \
    }

MG_SGD(float, f32)
MG_SGD(double, f64)
MG_ADAM(float, f32, sqrtf)
MG_ADAM(double, f64, sqrt)
MG_NAG(float, f32)
MG_NAG(double, f64)
MG_SGD_SCALED(float, f32)
MG_SGD_SCALED(double, f64)
