/* One GRU step's update, forward and backward, in one pass over the gates.
 *
 * Unfused, a step is a dozen operators (reshapes, splits, two sigmoids, a tanh, products
 * and sums), each a Python call, a pass over (N, H) arrays and a tape node.  Here a row n
 * of the two gate projections (MXNet's order: reset, update, new; h2h holds its bias)
 * and the previous state h give
 *   r = sigmoid(x_r + y_r), z = sigmoid(x_z + y_z), n = tanh(x_n + r*y_n)
 *   h' = (1 - z)*n + z*h
 * and keep (r, z, n, y_n) for the backward, which from dh' gives the gradients of the
 * two projections (they differ in the new gate: dy_n = dx_n * r) and of h.
 */
#include "layers.h"
#include "rnn_math.h"

#define DEFINE_GRU(T, SUF, TANH)                                                            \
    MG_NO_TRAP MG_CLONES static void gru_forward_row_##SUF(                                 \
        size_t hd, const T *restrict x, const T *restrict y, const T *restrict h,           \
        T *restrict act, T *restrict out)                                                   \
    {                                                                                       \
        for (size_t k = 0; k < hd; k++) {                                                   \
            T r = sigmoid_##SUF(x[k] + y[k]);                                               \
            T z = sigmoid_##SUF(x[hd + k] + y[hd + k]);                                     \
            T hn = y[2 * hd + k];                                                           \
            T n = TANH(x[2 * hd + k] + r * hn);                                             \
            act[k] = r;                                                                     \
            act[hd + k] = z;                                                                \
            act[2 * hd + k] = n;                                                            \
            act[3 * hd + k] = hn;                                                           \
            out[k] = ((T)1 - z) * n + z * h[k];                                             \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    MG_NO_TRAP MG_CLONES static void gru_backward_row_##SUF(                                \
        size_t hd, const T *restrict act, const T *restrict h, const T *restrict dout,      \
        T *restrict dx, T *restrict dy, T *restrict dh)                                     \
    {                                                                                       \
        for (size_t k = 0; k < hd; k++) {                                                   \
            T r = act[k], z = act[hd + k], n = act[2 * hd + k], hn = act[3 * hd + k];       \
            T d = dout[k];                                                                  \
            T dn = d * ((T)1 - z) * ((T)1 - n * n);                                         \
            T dr = dn * hn * r * ((T)1 - r);                                                \
            T dz = d * (h[k] - n) * z * ((T)1 - z);                                         \
            dx[k] = dr;                                                                     \
            dx[hd + k] = dz;                                                                \
            dx[2 * hd + k] = dn;                                                            \
            dy[k] = dr;                                                                     \
            dy[hd + k] = dz;                                                                \
            dy[2 * hd + k] = dn * r;                                                        \
            dh[k] = d * z;                                                                  \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void gru_row_##SUF(const mg_gru_args *a, size_t n)                               \
    {                                                                                       \
        size_t hd = a->hidden, gates = 3 * hd, saved = 4 * hd, state = n * hd;              \
        const T *h = (const T *)a->h + state;                                               \
        if (!a->dout) {                                                                     \
            gru_forward_row_##SUF(hd, (const T *)a->i2h + n * gates,                        \
                                  (const T *)a->h2h + n * gates, h,                         \
                                  (T *)a->act + n * saved, (T *)a->out + state);            \
            return;                                                                         \
        }                                                                                   \
        gru_backward_row_##SUF(hd, (const T *)a->act + n * saved, h,                        \
                               (const T *)a->dout + state, (T *)a->di2h + n * gates,        \
                               (T *)a->dh2h + n * gates, (T *)a->dh + state);               \
    }

DEFINE_GRU(float, f32, tanh_f32)
DEFINE_GRU(double, f64, tanh_f64)

void mg_gru_task(void *args, size_t begin, size_t end)
{
    const mg_gru_args *a = (const mg_gru_args *)args;
    for (size_t n = begin; n < end; n++) {
        if (a->dtype == MG_F32)
            gru_row_f32(a, n);
        else
            gru_row_f64(a, n);
    }
}
