/* One LSTM step's cell update, forward and backward, in one pass over the gates.
 *
 * Unfused, a step is a dozen operators (add, split, three sigmoids, two tanh, products,
 * sum), each a Python call and a pass over (N, 4H) or (N, H) arrays, and as many tape
 * nodes; the language model runs it 70 times a batch.  Here a row n of the two gate
 * projections (MXNet's order: input, forget, candidate, output) gives
 *   i = sigmoid(a_i), f = sigmoid(a_f), g = tanh(a_g), o = sigmoid(a_o),   a = i2h + h2h
 *   c' = f*c + i*g,  h = o*tanh(c')
 * and keeps (i, f, g, o) for the backward, which from dh and dc' gives the gradient of
 * the pre-activations (for i2h and h2h alike) and of c.
 *
 * The activations (exact for float64, vectorizable polynomials for float32) are in
 * rnn_math.h, shared with gru.c.
 */
#include "layers.h"
#include "rnn_math.h"

#define DEFINE_LSTM(T, SUF, TANH)                                                           \
    MG_NO_TRAP MG_RNN_CLONES static void forward_row_##SUF(size_t hd, const T *restrict x,                  \
                                            const T *restrict y, const T *restrict c,       \
                                            T *restrict act, T *restrict h,                 \
                                            T *restrict cn)                                 \
    {                                                                                       \
        for (size_t k = 0; k < hd; k++) {                                                   \
            T i = sigmoid_##SUF(x[k] + y[k]);                                               \
            T f = sigmoid_##SUF(x[hd + k] + y[hd + k]);                                     \
            T g = TANH(x[2 * hd + k] + y[2 * hd + k]);                                      \
            T o = sigmoid_##SUF(x[3 * hd + k] + y[3 * hd + k]);                             \
            T next = f * c[k] + i * g;                                                      \
            act[k] = i;                                                                     \
            act[hd + k] = f;                                                                \
            act[2 * hd + k] = g;                                                            \
            act[3 * hd + k] = o;                                                            \
            cn[k] = next;                                                                   \
            h[k] = o * TANH(next);                                                          \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    MG_NO_TRAP MG_RNN_CLONES static void backward_row_##SUF(size_t hd, const T *restrict act,               \
                                             const T *restrict c, const T *restrict cn,     \
                                             const T *restrict dh, const T *restrict dcn,   \
                                             T *restrict da, T *restrict dc)                \
    {                                                                                       \
        for (size_t k = 0; k < hd; k++) {                                                   \
            T i = act[k], f = act[hd + k], g = act[2 * hd + k], o = act[3 * hd + k];        \
            T t = TANH(cn[k]);                                                              \
            T dct = dcn[k] + dh[k] * o * ((T)1 - t * t);                                    \
            da[k] = dct * g * i * ((T)1 - i);                                               \
            da[hd + k] = dct * c[k] * f * ((T)1 - f);                                       \
            da[2 * hd + k] = dct * i * ((T)1 - g * g);                                      \
            da[3 * hd + k] = dh[k] * t * o * ((T)1 - o);                                    \
            dc[k] = dct * f;                                                                \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void lstm_row_##SUF(const mg_lstm_args *a, size_t n)                             \
    {                                                                                       \
        size_t hd = a->hidden, row = 4 * hd, first = n * hd, second = (a->n + n) * hd;      \
        const T *c = (const T *)a->c + first;                                               \
        if (!a->dout) {                                                                     \
            forward_row_##SUF(hd, (const T *)a->i2h + n * row, (const T *)a->h2h + n * row, \
                              c, (T *)a->act + n * row, (T *)a->out + first,                \
                              (T *)a->out + second);                                        \
            return;                                                                         \
        }                                                                                   \
        backward_row_##SUF(hd, (const T *)a->act + n * row, c, (const T *)a->out + second,  \
                           (const T *)a->dout + first, (const T *)a->dout + second,         \
                           (T *)a->da + n * row, (T *)a->dc + first);                       \
    }

DEFINE_LSTM(float, f32, tanh_f32)
DEFINE_LSTM(double, f64, tanh_f64)

void mg_lstm_forward_rows(int dtype, size_t rows, size_t hd, const void *x, const void *y,
                          const void *c, void *act, void *h, void *cn)
{
    for (size_t r = 0; r < rows; r++) {
        size_t g = r * 4 * hd, s = r * hd;
        if (dtype == MG_F32)
            forward_row_f32(hd, (const float *)x + g, (const float *)y + g, (const float *)c + s,
                            (float *)act + g, (float *)h + s, (float *)cn + s);
        else
            forward_row_f64(hd, (const double *)x + g, (const double *)y + g,
                            (const double *)c + s, (double *)act + g, (double *)h + s,
                            (double *)cn + s);
    }
}

void mg_lstm_backward_rows(int dtype, size_t rows, size_t hd, const void *act, const void *c,
                           const void *cn, const void *dh, const void *dcn, void *da, void *dc)
{
    for (size_t r = 0; r < rows; r++) {
        size_t g = r * 4 * hd, s = r * hd;
        if (dtype == MG_F32)
            backward_row_f32(hd, (const float *)act + g, (const float *)c + s,
                             (const float *)cn + s, (const float *)dh + s,
                             (const float *)dcn + s, (float *)da + g, (float *)dc + s);
        else
            backward_row_f64(hd, (const double *)act + g, (const double *)c + s,
                             (const double *)cn + s, (const double *)dh + s,
                             (const double *)dcn + s, (double *)da + g, (double *)dc + s);
    }
}

void mg_lstm_task(void *args, size_t begin, size_t end)
{
    const mg_lstm_args *a = (const mg_lstm_args *)args;
    for (size_t n = begin; n < end; n++) {
        if (a->dtype == MG_F32)
            lstm_row_f32(a, n);
        else
            lstm_row_f64(a, n);
    }
}
