/* Winograd F(2x2, 3x3) transforms for 3x3 convolutions with stride 1 (Lavin & Gray, 2015).
 *
 * Output tile (ty, tx) covers output rows 2ty, 2ty+1 and columns 2tx, 2tx+1; it reads the
 * 4x4 input tile whose corner is input (2ty - ph, 2tx - pw), zero outside the image.  Tiles
 * are numbered t = (n*th + ty)*tw + tx with th = ceil(oh/2), tw = ceil(ow/2), and a 4x4
 * transform lives in 16 planes: element (i, j) of tile t of channel c at [(4i + j), c, t].
 *
 *   input            V = B^T d B       (16, C, T) from the image
 *   output           Y = A^T M A       (16, F, T) to the output, + bias
 *   output adjoint   dM = A dY A^T     (16, F, T) from the output gradient
 *   input adjoint    dd = B dV B^T     (16, C, T) summed into the image gradient
 *
 * with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] and A^T = [1 1 1 0; 0 1 -1 -1].
 * Every sum is evaluated left to right as written below, rounded to the dtype at each step
 * (the NumPy fallback applies the same expressions to whole arrays).  The input adjoint
 * adds tiles into the gradient in tile order, each image element starting at 0.
 */
#include "layers.h"

/* The transforms run on one row of tiles at a time, BLOCK tiles at a time: the tiles' input
 * columns are split into even and odd ones first, so that every step below is a loop over
 * contiguous runs of tiles that the compiler turns into SIMD code. */
#define BLOCK 64

/* even[k] = row[2k + off], odd[k] = row[2k + 1 + off] for k < n, 0 outside [0, w) */
#define DEFINE_SPLIT(T, SUF)                                                                \
    static void split_##SUF(const T *row, ptrdiff_t w, ptrdiff_t off, size_t n, T *even,    \
                            T *odd)                                                         \
    {                                                                                       \
        for (size_t k = 0; k < n; k++) {                                                    \
            ptrdiff_t q = 2 * (ptrdiff_t)k + off;                                           \
            even[k] = row && q >= 0 && q < w ? row[q] : (T)0;                               \
            odd[k] = row && q + 1 >= 0 && q + 1 < w ? row[q + 1] : (T)0;                    \
        }                                                                                   \
    }

#define DEFINE_WINOGRAD(T, SUF)                                                             \
    DEFINE_SPLIT(T, SUF)                                                                    \
                                                                                            \
    /* v = B^T d B for tiles [0, n) of one tile row; d[i][j][k] = column j of row i */      \
    MG_CLONES static void input_block_##SUF(T (*restrict e)[BLOCK + 1],                     \
                                            T (*restrict o)[BLOCK + 1],                     \
                                            T (*restrict v)[BLOCK], size_t n)               \
    {                                                                                       \
        for (size_t k = 0; k < n; k++) {                                                    \
            T d[4][4], t[4][4];                                                             \
            for (int i = 0; i < 4; i++) {                                                   \
                d[i][0] = e[i][k], d[i][1] = o[i][k];                                       \
                d[i][2] = e[i][k + 1], d[i][3] = o[i][k + 1];                               \
            }                                                                               \
            for (int j = 0; j < 4; j++) {                                                   \
                t[0][j] = d[0][j] - d[2][j];                                                \
                t[1][j] = d[1][j] + d[2][j];                                                \
                t[2][j] = d[2][j] - d[1][j];                                                \
                t[3][j] = d[1][j] - d[3][j];                                                \
            }                                                                               \
            for (int i = 0; i < 4; i++) {                                                   \
                v[4 * i + 0][k] = t[i][0] - t[i][2];                                        \
                v[4 * i + 1][k] = t[i][1] + t[i][2];                                        \
                v[4 * i + 2][k] = t[i][2] - t[i][1];                                        \
                v[4 * i + 3][k] = t[i][1] - t[i][3];                                        \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void input_plane_##SUF(const mg_wino_args *a, size_t item)                       \
    {                                                                                       \
        size_t c = item / a->n, n = item % a->n, stride = a->c * a->t;                      \
        const T *x = (const T *)a->src + (n * a->c + c) * a->h * a->w;                      \
        T *planes = (T *)a->dst + c * a->t + n * a->th * a->tw;                             \
        T e[4][BLOCK + 1], o[4][BLOCK + 1], v[16][BLOCK];                                   \
        for (size_t ty = 0; ty < a->th; ty++)                                               \
            for (size_t t0 = 0; t0 < a->tw; t0 += BLOCK) {                                  \
                size_t nb = a->tw - t0 < BLOCK ? a->tw - t0 : BLOCK;                        \
                for (int i = 0; i < 4; i++) {                                               \
                    ptrdiff_t r = (ptrdiff_t)(2 * ty + i) - (ptrdiff_t)a->ph;               \
                    const T *row = r >= 0 && r < (ptrdiff_t)a->h ? x + r * (ptrdiff_t)a->w  \
                                                                 : NULL;                    \
                    split_##SUF(row, (ptrdiff_t)a->w, (ptrdiff_t)(2 * t0) - (ptrdiff_t)a->pw, \
                                nb + 1, e[i], o[i]);                                        \
                }                                                                           \
                input_block_##SUF(e, o, v, nb);                                             \
                T *dst = planes + ty * a->tw + t0;                                          \
                for (int p = 0; p < 16; p++)                                                \
                    memcpy(dst + p * stride, v[p], nb * sizeof(T));                         \
            }                                                                               \
    }                                                                                       \
                                                                                            \
    /* y = A^T m A (+ bias) for tiles [0, n): y[2i + j][k] is output (i, j) of tile k */    \
    MG_CLONES static void output_block_##SUF(const T *restrict m, size_t stride,            \
                                             T (*restrict y)[BLOCK], size_t n, int has_bias,\
                                             T bias)                                        \
    {                                                                                       \
        for (size_t k = 0; k < n; k++) {                                                    \
            T s[2][4], r[2][2];                                                             \
            for (int j = 0; j < 4; j++) {                                                   \
                T m0 = m[j * stride + k], m1 = m[(4 + j) * stride + k];                     \
                T m2 = m[(8 + j) * stride + k], m3 = m[(12 + j) * stride + k];              \
                s[0][j] = (m0 + m1) + m2;                                                   \
                s[1][j] = (m1 - m2) - m3;                                                   \
            }                                                                               \
            for (int i = 0; i < 2; i++) {                                                   \
                r[i][0] = (s[i][0] + s[i][1]) + s[i][2];                                    \
                r[i][1] = (s[i][1] - s[i][2]) - s[i][3];                                    \
            }                                                                               \
            for (int q = 0; q < 4; q++)                                                     \
                y[q][k] = has_bias ? r[q / 2][q % 2] + bias : r[q / 2][q % 2];              \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void output_plane_##SUF(const mg_wino_args *a, size_t item)                      \
    {                                                                                       \
        size_t f = item / a->n, n = item % a->n, stride = a->c * a->t;                      \
        const T *planes = (const T *)a->src + f * a->t + n * a->th * a->tw;                 \
        T *out = (T *)a->dst + (n * a->c + f) * a->oh * a->ow;                              \
        const T *bias = (const T *)a->bias;                                                 \
        T y[4][BLOCK];                                                                      \
        for (size_t ty = 0; ty < a->th; ty++)                                               \
            for (size_t t0 = 0; t0 < a->tw; t0 += BLOCK) {                                  \
                size_t nb = a->tw - t0 < BLOCK ? a->tw - t0 : BLOCK;                        \
                output_block_##SUF(planes + ty * a->tw + t0, stride, y, nb, bias != NULL,   \
                                   bias ? bias[f] : (T)0);                                  \
                for (size_t i = 0; i < 2 && 2 * ty + i < a->oh; i++) {                      \
                    T *row = out + (2 * ty + i) * a->ow + 2 * t0;                           \
                    size_t cols = a->ow - 2 * t0 < 2 * nb ? a->ow - 2 * t0 : 2 * nb;        \
                    for (size_t q = 0; q < cols; q++)                                       \
                        row[q] = y[2 * i + q % 2][q / 2];                                   \
                }                                                                           \
            }                                                                               \
    }                                                                                       \
                                                                                            \
    /* dm = A g A^T for tiles [0, n); g[i][j][k] = output gradient (i, j) of tile k */      \
    MG_CLONES static void output_adjoint_block_##SUF(T (*restrict e)[BLOCK + 1],            \
                                                     T (*restrict o)[BLOCK + 1],            \
                                                     T (*restrict dm)[BLOCK], size_t n)     \
    {                                                                                       \
        for (size_t k = 0; k < n; k++) {                                                    \
            T g[2][2] = {{e[0][k], o[0][k]}, {e[1][k], o[1][k]}}, r[4][2];                  \
            for (int j = 0; j < 2; j++) {                                                   \
                r[0][j] = g[0][j];                                                          \
                r[1][j] = g[0][j] + g[1][j];                                                \
                r[2][j] = g[0][j] - g[1][j];                                                \
                r[3][j] = -g[1][j];                                                         \
            }                                                                               \
            for (int i = 0; i < 4; i++) {                                                   \
                dm[4 * i + 0][k] = r[i][0];                                                 \
                dm[4 * i + 1][k] = r[i][0] + r[i][1];                                       \
                dm[4 * i + 2][k] = r[i][0] - r[i][1];                                       \
                dm[4 * i + 3][k] = -r[i][1];                                                \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void output_adjoint_plane_##SUF(const mg_wino_args *a, size_t item)              \
    {                                                                                       \
        size_t f = item / a->n, n = item % a->n, stride = a->c * a->t;                      \
        const T *g = (const T *)a->src + (n * a->c + f) * a->oh * a->ow;                    \
        T *planes = (T *)a->dst + f * a->t + n * a->th * a->tw;                             \
        T e[2][BLOCK + 1], o[2][BLOCK + 1], dm[16][BLOCK];                                  \
        for (size_t ty = 0; ty < a->th; ty++)                                               \
            for (size_t t0 = 0; t0 < a->tw; t0 += BLOCK) {                                  \
                size_t nb = a->tw - t0 < BLOCK ? a->tw - t0 : BLOCK;                        \
                for (size_t i = 0; i < 2; i++) {                                            \
                    const T *row = 2 * ty + i < a->oh ? g + (2 * ty + i) * a->ow : NULL;    \
                    split_##SUF(row, (ptrdiff_t)a->ow, (ptrdiff_t)(2 * t0), nb, e[i], o[i]);\
                }                                                                           \
                output_adjoint_block_##SUF(e, o, dm, nb);                                   \
                T *dst = planes + ty * a->tw + t0;                                          \
                for (int p = 0; p < 16; p++)                                                \
                    memcpy(dst + p * stride, dm[p], nb * sizeof(T));                        \
            }                                                                               \
    }                                                                                       \
                                                                                            \
    /* dd = B dv B^T for tiles [0, n): dd[4i + j][k] = element (i, j) of tile k */          \
    MG_CLONES static void input_adjoint_block_##SUF(const T *restrict dv, size_t stride,    \
                                                    T (*restrict dd)[BLOCK], size_t n)      \
    {                                                                                       \
        for (size_t k = 0; k < n; k++) {                                                    \
            T r[4][4];                                                                      \
            for (int j = 0; j < 4; j++) {                                                   \
                T v0 = dv[j * stride + k], v1 = dv[(4 + j) * stride + k];                   \
                T v2 = dv[(8 + j) * stride + k], v3 = dv[(12 + j) * stride + k];            \
                r[0][j] = v0;                                                               \
                r[1][j] = (v1 - v2) + v3;                                                   \
                r[2][j] = (v1 + v2) - v0;                                                   \
                r[3][j] = -v3;                                                              \
            }                                                                               \
            for (int i = 0; i < 4; i++) {                                                   \
                dd[4 * i + 0][k] = r[i][0];                                                 \
                dd[4 * i + 1][k] = (r[i][1] - r[i][2]) + r[i][3];                           \
                dd[4 * i + 2][k] = (r[i][1] + r[i][2]) - r[i][0];                           \
                dd[4 * i + 3][k] = -r[i][3];                                                \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void input_adjoint_plane_##SUF(const mg_wino_args *a, size_t item)               \
    {                                                                                       \
        size_t c = item / a->n, n = item % a->n, stride = a->c * a->t;                      \
        const T *planes = (const T *)a->src + c * a->t + n * a->th * a->tw;                 \
        T *dx = (T *)a->dst + (n * a->c + c) * a->h * a->w;                                 \
        T dd[16][BLOCK];                                                                    \
        memset(dx, 0, a->h * a->w * sizeof(T));                                             \
        for (size_t ty = 0; ty < a->th; ty++)                                               \
            for (size_t t0 = 0; t0 < a->tw; t0 += BLOCK) {                                  \
                size_t nb = a->tw - t0 < BLOCK ? a->tw - t0 : BLOCK;                        \
                input_adjoint_block_##SUF(planes + ty * a->tw + t0, stride, dd, nb);        \
                for (int i = 0; i < 4; i++) {                                               \
                    ptrdiff_t r = (ptrdiff_t)(2 * ty + i) - (ptrdiff_t)a->ph;               \
                    if (r < 0 || r >= (ptrdiff_t)a->h)                                      \
                        continue;                                                           \
                    T *row = dx + r * (ptrdiff_t)a->w;                                      \
                    /* columns 2, 3 of a tile before columns 0, 1 of the next one: every    \
                     * element receives its tiles in tile order */                          \
                    static const int order[4] = {2, 3, 0, 1};                               \
                    for (int jj = 0; jj < 4; jj++) {                                        \
                        int j = order[jj];                                                  \
                        const T *src = dd[4 * i + j];                                       \
                        ptrdiff_t q0 = (ptrdiff_t)(2 * t0 + j) - (ptrdiff_t)a->pw;          \
                        for (size_t k = 0; k < nb; k++) {                                   \
                            ptrdiff_t q = q0 + 2 * (ptrdiff_t)k;                            \
                            if (q >= 0 && q < (ptrdiff_t)a->w)                              \
                                row[q] = row[q] + src[k];                                   \
                        }                                                                   \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
    }

DEFINE_WINOGRAD(float, f32)
DEFINE_WINOGRAD(double, f64)

#define DEFINE_TASK(NAME)                                                                   \
    void mg_wino_##NAME##_task(void *args, size_t begin, size_t end)                        \
    {                                                                                       \
        const mg_wino_args *a = (const mg_wino_args *)args;                                 \
        for (size_t item = begin; item < end; item++) {                                     \
            if (a->dtype == MG_F32)                                                         \
                NAME##_plane_f32(a, item);                                                  \
            else                                                                            \
                NAME##_plane_f64(a, item);                                                  \
        }                                                                                   \
    }

DEFINE_TASK(input)
DEFINE_TASK(output)
DEFINE_TASK(output_adjoint)
DEFINE_TASK(input_adjoint)
