/* Winograd F(MxM, 3x3) transforms for 3x3 convolutions with stride 1 (Lavin & Gray, 2015),
 * for output tiles of M = 2 or M = 4.
 *
 * Output tile (ty, tx) covers output rows M*ty .. M*ty + M-1 and the same columns from M*tx;
 * it reads the A x A input tile (A = M + 2) whose corner is input (M*ty - ph, M*tx - pw), zero
 * outside the image.  Tiles are numbered t = (n*th + ty)*tw + tx with th = ceil(oh/M),
 * tw = ceil(ow/M), and a tile's A x A transform lives in A*A planes: element (i, j) of
 * tile t of channel c at [A*i + j, c, t].
 *
 *   input            V = B^T d B       (A*A, C, T) from the image
 *   output           Y = A^T M A       (A*A, F, T) to the output, + bias
 *   output adjoint   dM = A dY A^T     (A*A, F, T) from the output gradient
 *   input adjoint    dd = B dV B^T     (A*A, C, T) summed into the image gradient
 *
 * with the matrices BT and AT below.  Every product is evaluated as a sum over the nonzero
 * entries in ascending order, left to right, each term (coefficient times value) and each
 * sum rounded to the dtype; the NumPy fallback evaluates the same sums on whole arrays.
 * The input adjoint adds tiles into the gradient in tile order, each element from 0.
 * The work items are channels (all samples of one); the code is in winograd_impl.h.
 */
#include <stdlib.h>

#include "layers.h"

#define BLOCK 64 /* tiles per SIMD loop on small images */
#define PLANE_TILES 16 /* tiles per plane from which the loop goes plane by plane */
#define WIDE (M == 2 ? 8 : 1 << 30) /* tiles per row from which F(2x2) goes row by row */

static const signed char BT2[4][4] = {
    {1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const signed char AT2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
static const signed char BT4[6][6] = {
    {4, 0, -5, 0, 1, 0}, {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
    {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const signed char AT4[4][6] = {
    {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

/* Helpers that depend on the type only. */
#define DEFINE_TYPED(T, SUF)                                                                \
    /* Copy an h x w plane into a zeroed rows x cols buffer at offset (ph, pw). */          \
    static void pad_plane_##SUF(const T *src, size_t h, size_t w, size_t ph, size_t pw,     \
                                size_t rows, size_t cols, T *pad)                           \
    {                                                                                       \
        memset(pad, 0, rows * cols * sizeof(T));                                            \
        for (size_t r = 0; r < h && ph + r < rows; r++)                                     \
            memcpy(pad + (ph + r) * cols + pw, src + r * w, w * sizeof(T));                 \
    }                                                                                       \
    MG_CLONES static void add_bias_##SUF(T *row, size_t n, T bias)                          \
    {                                                                                       \
        for (size_t k = 0; k < n; k++)                                                      \
            row[k] = row[k] + bias;                                                         \
    }

DEFINE_TYPED(float, f32)
DEFINE_TYPED(double, f64)

#define T float
#define TYPED(name) name##_f32
#define M 2
#define BT BT2
#define AT AT2
#define F(name) name##_f32_m2
#include "winograd_impl.h"
#undef M
#undef BT
#undef AT
#undef F
#define M 4
#define BT BT4
#define AT AT4
#define F(name) name##_f32_m4
#include "winograd_impl.h"
#undef M
#undef BT
#undef AT
#undef F
#undef T
#undef TYPED

#define T double
#define TYPED(name) name##_f64
#define M 2
#define BT BT2
#define AT AT2
#define F(name) name##_f64_m2
#include "winograd_impl.h"
#undef M
#undef BT
#undef AT
#undef F
#define M 4
#define BT BT4
#define AT AT4
#define F(name) name##_f64_m4
#include "winograd_impl.h"
#undef M
#undef BT
#undef AT
#undef F
#undef T
#undef TYPED

/* Scratch elements a task needs: A*A blocks of tiles and a padded plane. */
static size_t scratch_size(const mg_wino_args *a)
{
    size_t alpha = a->m + 2;
    return alpha * alpha * BLOCK + (a->m * a->th + 2) * (a->m * a->tw + 2);
}

#define DEFINE_TASK(NAME)                                                                   \
    void mg_wino_##NAME##_task(void *args, size_t begin, size_t end)                        \
    {                                                                                       \
        const mg_wino_args *a = (const mg_wino_args *)args;                                 \
        size_t item = a->dtype == MG_F32 ? sizeof(float) : sizeof(double);                  \
        void *pad = malloc(scratch_size(a) * item);                                         \
        if (!pad)                                                                           \
            abort(); /* some kilobytes: nothing sensible is left to do */                   \
        for (size_t c = begin; c < end; c++) {                                              \
            if (a->dtype == MG_F32 && a->m == 2)                                            \
                NAME##_channel_f32_m2(a, c, (float *)pad);                                  \
            else if (a->dtype == MG_F32)                                                    \
                NAME##_channel_f32_m4(a, c, (float *)pad);                                  \
            else if (a->m == 2)                                                             \
                NAME##_channel_f64_m2(a, c, (double *)pad);                                 \
            else                                                                            \
                NAME##_channel_f64_m4(a, c, (double *)pad);                                 \
        }                                                                                   \
        free(pad);                                                                          \
    }

DEFINE_TASK(input)
DEFINE_TASK(output)
DEFINE_TASK(output_adjoint)
DEFINE_TASK(input_adjoint)
