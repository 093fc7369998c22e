/* The Winograd F(MxM, 3x3) transforms for one element type and tile size; winograd.c
 * includes this file once per (type, M) with T (the type), M (2 or 4), BT and AT (the
 * transform matrices of winograd.c) and F(name) (the name suffix) defined.  A = M + 2 is the
 * input tile size; a tile's transform has A*A elements, kept in A*A planes.
 *
 * The arithmetic of one tile is written once (the *_tile functions: matrix products with
 * constant matrices, zero entries skipped, terms added in ascending order) and used by
 * three loops that the compiler turns into SIMD code across tiles (`#pragma GCC ivdep`:
 * the planes never overlap the scratch buffers):
 *   - wide images (tw >= WIDE tiles per row): per (sample, channel) plane, through a
 *     zero-bordered copy of it, one tile row at a time;
 *   - planes of at least PLANE_TILES tiles: per (sample, channel) plane, blocks of BLOCK
 *     consecutive tiles gathered into one array per tile element, through a zero-bordered
 *     plane (a copy of the image or output plane, or the sum of the input adjoint);
 *   - smaller images: per channel, blocks of BLOCK consecutive tiles (of all samples),
 *     gathered the same way, with a bounds check per value.
 */
#define A (M + 2)
#define P (A * A)
/* the per-tile loops must vanish into straight code for the loop over tiles to vectorize */
#define UNROLL _Pragma("GCC unroll 64")

/* ---- the arithmetic of one tile, each operation rounded as written ---------------------- */

/* out[i][j] = sum over k of L[i][k] * in[k][j] (L = BT: rows, L = B = BT^T: ...) */
#define MATMUL_LEFT(out, coef, in, rows, inner, cols)                                       \
    _Pragma("GCC unroll 8") for (int i = 0; i < (rows); i++)                                \
        _Pragma("GCC unroll 8") for (int j = 0; j < (cols); j++) {                          \
            T acc = 0;                                                                      \
            int first = 1;                                                                  \
            _Pragma("GCC unroll 8") for (int k = 0; k < (inner); k++) {                     \
                if (coef(i, k) == 0)                                                        \
                    continue;                                                               \
                T term = (T)coef(i, k) * (in)[k][j];                                        \
                acc = first ? term : acc + term;                                            \
                first = 0;                                                                  \
            }                                                                               \
            (out)[i][j] = acc;                                                              \
        }

#define MATMUL_RIGHT(out, in, coef, rows, inner, cols)                                      \
    _Pragma("GCC unroll 8") for (int i = 0; i < (rows); i++)                                \
        _Pragma("GCC unroll 8") for (int j = 0; j < (cols); j++) {                          \
            T acc = 0;                                                                      \
            int first = 1;                                                                  \
            _Pragma("GCC unroll 8") for (int k = 0; k < (inner); k++) {                     \
                if (coef(k, j) == 0)                                                        \
                    continue;                                                               \
                T term = (in)[i][k] * (T)coef(k, j);                                        \
                acc = first ? term : acc + term;                                            \
                first = 0;                                                                  \
            }                                                                               \
            (out)[i][j] = acc;                                                              \
        }

#define BT_(i, k) BT[i][k]
#define B_(k, j) BT[j][k]  /* B = BT^T, as the right factor */
#define Bl_(i, k) BT[k][i] /* B as the left factor */
#define BTr_(k, j) BT[k][j]
#define AT_(i, k) AT[i][k]
#define A_(k, j) AT[j][k]
#define Al_(i, k) AT[k][i]
#define ATr_(k, j) AT[k][j]

static inline void F(input_tile)(const T d[A][A], T v[P])
{
    T t[A][A], o[A][A];
    MATMUL_LEFT(t, BT_, d, A, A, A)
    MATMUL_RIGHT(o, t, B_, A, A, A)
    UNROLL
    for (int q = 0; q < P; q++)
        v[q] = o[q / A][q % A];
}

static inline void F(output_tile)(const T m[P], T y[M][M])
{
    T in[A][A], s[M][A];
    UNROLL
    for (int q = 0; q < P; q++)
        in[q / A][q % A] = m[q];
    MATMUL_LEFT(s, AT_, in, M, A, A)
    MATMUL_RIGHT(y, s, A_, M, A, M)
}

static inline void F(output_adjoint_tile)(const T g[M][M], T dm[P])
{
    T r[A][M], o[A][A];
    MATMUL_LEFT(r, Al_, g, A, M, M)
    MATMUL_RIGHT(o, r, ATr_, A, M, A)
    UNROLL
    for (int q = 0; q < P; q++)
        dm[q] = o[q / A][q % A];
}

static inline void F(input_adjoint_tile)(const T v[P], T dd[A][A])
{
    T in[A][A], r[A][A];
    UNROLL
    for (int q = 0; q < P; q++)
        in[q / A][q % A] = v[q];
    MATMUL_LEFT(r, Bl_, in, A, A, A)
    MATMUL_RIGHT(dd, r, BTr_, A, A, A)
}

/* ---- SIMD loops over tiles: tile k's values at base[p][k] (or in rows at M*k + j) ------- */

/* v[p][k] from the A rows at p0 (cols apart): tile k reads columns M*k .. M*k + A - 1. */
MG_CLONES static void F(input_rows)(const T *p0, size_t cols, size_t n, T *const *v)
{
#pragma GCC ivdep
    for (size_t k = 0; k < n; k++) {
        T d[A][A], o[P];
        UNROLL
        for (int i = 0; i < A; i++)
            UNROLL
            for (int j = 0; j < A; j++)
                d[i][j] = p0[i * cols + M * k + j];
        F(input_tile)(d, o);
        UNROLL
        for (int p = 0; p < P; p++)
            v[p][k] = o[p];
    }
}

MG_CLONES static void F(input_soa)(T (*d)[BLOCK], size_t n, T *const *v)
{
#pragma GCC ivdep
    for (size_t k = 0; k < n; k++) {
        T t[A][A], o[P];
        UNROLL
        for (int q = 0; q < P; q++)
            t[q / A][q % A] = d[q][k];
        F(input_tile)(t, o);
        UNROLL
        for (int p = 0; p < P; p++)
            v[p][k] = o[p];
    }
}

/* Output rows y + i*cols at M*k + j (or y[M*i + j][k]) from m[p][k]. */
MG_CLONES static void F(output_rows)(const T *const *m, size_t n, T *y, size_t cols)
{
#pragma GCC ivdep
    for (size_t k = 0; k < n; k++) {
        T in[P], o[M][M];
        UNROLL
        for (int p = 0; p < P; p++)
            in[p] = m[p][k];
        F(output_tile)(in, o);
        UNROLL
        for (int i = 0; i < M; i++)
            UNROLL
            for (int j = 0; j < M; j++)
                y[i * cols + M * k + j] = o[i][j];
    }
}

MG_CLONES static void F(output_soa)(const T *const *m, size_t n, T (*y)[BLOCK])
{
#pragma GCC ivdep
    for (size_t k = 0; k < n; k++) {
        T in[P], o[M][M];
        UNROLL
        for (int p = 0; p < P; p++)
            in[p] = m[p][k];
        F(output_tile)(in, o);
        UNROLL
        for (int q = 0; q < M * M; q++)
            y[q][k] = o[q / M][q % M];
    }
}

/* dm[p][k] from output rows g + i*cols at M*k + j (or gathered e[M*i + j][k]). */
MG_CLONES static void F(output_adjoint_rows)(const T *g, size_t cols, size_t n, T *const *dm)
{
#pragma GCC ivdep
    for (size_t k = 0; k < n; k++) {
        T in[M][M], o[P];
        UNROLL
        for (int i = 0; i < M; i++)
            UNROLL
            for (int j = 0; j < M; j++)
                in[i][j] = g[i * cols + M * k + j];
        F(output_adjoint_tile)(in, o);
        UNROLL
        for (int p = 0; p < P; p++)
            dm[p][k] = o[p];
    }
}

MG_CLONES static void F(output_adjoint_soa)(T (*e)[BLOCK], size_t n, T *const *dm)
{
#pragma GCC ivdep
    for (size_t k = 0; k < n; k++) {
        T in[M][M], o[P];
        UNROLL
        for (int q = 0; q < M * M; q++)
            in[q / M][q % M] = e[q][k];
        F(output_adjoint_tile)(in, o);
        UNROLL
        for (int p = 0; p < P; p++)
            dm[p][k] = o[p];
    }
}

/* dd[A*i + j][k] from v[p][k]. */
MG_CLONES static void F(input_adjoint_soa)(const T *const *v, size_t n, T *const *dd)
{
#pragma GCC ivdep
    for (size_t k = 0; k < n; k++) {
        T in[P], o[A][A];
        UNROLL
        for (int p = 0; p < P; p++)
            in[p] = v[p][k];
        F(input_adjoint_tile)(in, o);
        UNROLL
        for (int q = 0; q < P; q++)
            dd[q][k] = o[q / A][q % A];
    }
}

/* Add dd[A*i + j][k] to rows p0 + i*cols at column M*k + j.  Columns 2.. of every tile go in
 * before columns 0, 1 of the next one (the two it overlaps), so each element receives its
 * tiles in tile order. */
MG_CLONES static void F(add_rows)(T *p0, size_t cols, size_t n, T *const *dd)
{
    UNROLL
    for (int i = 0; i < A; i++) {
        T *row = p0 + i * cols;
        UNROLL
        for (int j = 2; j < A; j++) {
            const T *src = dd[A * i + j];
#pragma GCC ivdep
            for (size_t k = 0; k < n; k++)
                row[M * k + j] = row[M * k + j] + src[k];
        }
        UNROLL
        for (int j = 0; j < 2; j++) {
            const T *src = dd[A * i + j];
#pragma GCC ivdep
            for (size_t k = 0; k < n; k++)
                row[M * k + j] = row[M * k + j] + src[k];
        }
    }
}

/* ---- plane bookkeeping ----------------------------------------------------------------- */

/* The P plane pointers at tile t of channel c. */
static void F(planes_at)(const mg_wino_args *a, const void *base, size_t c, size_t t, T **out)
{
    size_t stride = a->c * a->t, at = c * a->t + t;
    UNROLL
    for (int p = 0; p < P; p++)
        out[p] = (T *)base + p * stride + at;
}

/* The sample of tile t, and the corner of its window: input (r0, c0) with `pad`, else output. */
static void F(corner)(const mg_wino_args *a, size_t t, int pad, size_t *n, ptrdiff_t *r0,
                      ptrdiff_t *c0)
{
    size_t per = a->th * a->tw, rem = t % per;
    *n = t / per;
    *r0 = (ptrdiff_t)(M * (rem / a->tw)) - (pad ? (ptrdiff_t)a->ph : 0);
    *c0 = (ptrdiff_t)(M * (rem % a->tw)) - (pad ? (ptrdiff_t)a->pw : 0);
}

/* ---- the four transforms of one channel ------------------------------------------------ */

/* Big planes on the SIMD loop over tiles: one zero-bordered copy of each (sample, channel)
 * plane, then every tile's values gathered from it without bounds checks (per tile, the
 * checks cost more than the transform); the values, hence the bits, are the same. */
static void F(input_planes)(const mg_wino_args *a, size_t c, T (*d)[BLOCK], T *pad)
{
    T *v[P];
    size_t rows = M * a->th + 2, cols = M * a->tw + 2, per = a->th * a->tw;
    for (size_t n = 0; n < a->n; n++) {
        const T *x = (const T *)a->src + (n * a->c + c) * a->h * a->w;
        TYPED(pad_plane)(x, a->h, a->w, a->ph, a->pw, rows, cols, pad);
        for (size_t t0 = 0; t0 < per; t0 += BLOCK) {
            size_t nb = per - t0 < BLOCK ? per - t0 : BLOCK;
            for (size_t k = 0; k < nb; k++) {
                const T *p0 = pad + M * ((t0 + k) / a->tw) * cols + M * ((t0 + k) % a->tw);
                UNROLL
                for (int i = 0; i < A; i++)
                    UNROLL
                    for (int j = 0; j < A; j++)
                        d[A * i + j][k] = p0[i * cols + j];
            }
            F(planes_at)(a, a->dst, c, n * per + t0, v);
            F(input_soa)(d, nb, v);
        }
    }
}

static void F(input_channel)(const mg_wino_args *a, size_t c, T *scratch)
{
    T *v[P];
    ptrdiff_t h = (ptrdiff_t)a->h, w = (ptrdiff_t)a->w;
    if (a->tw >= WIDE) {
        size_t rows = M * a->th + 2, cols = M * a->tw + 2;
        for (size_t n = 0; n < a->n; n++) {
            const T *x = (const T *)a->src + (n * a->c + c) * a->h * a->w;
            TYPED(pad_plane)(x, a->h, a->w, a->ph, a->pw, rows, cols, scratch);
            for (size_t ty = 0; ty < a->th; ty++) {
                F(planes_at)(a, a->dst, c, (n * a->th + ty) * a->tw, v);
                F(input_rows)(scratch + M * ty * cols, cols, a->tw, v);
            }
        }
        return;
    }
    T(*d)[BLOCK] = (T(*)[BLOCK])scratch;
    if (a->th * a->tw >= PLANE_TILES) {
        F(input_planes)(a, c, d, scratch + P * BLOCK);
        return;
    }
    for (size_t t0 = 0; t0 < a->t; t0 += BLOCK) {
        size_t nb = a->t - t0 < BLOCK ? a->t - t0 : BLOCK;
        for (size_t k = 0; k < nb; k++) {
            size_t n;
            ptrdiff_t r0, c0;
            F(corner)(a, t0 + k, 1, &n, &r0, &c0);
            const T *x = (const T *)a->src + (n * a->c + c) * a->h * a->w;
            UNROLL
            for (int i = 0; i < A; i++)
                UNROLL
                for (int j = 0; j < A; j++) {
                    ptrdiff_t r = r0 + i, q = c0 + j;
                    d[A * i + j][k] = r >= 0 && r < h && q >= 0 && q < w ? x[r * w + q] : (T)0;
                }
        }
        F(planes_at)(a, a->dst, c, t0, v);
        F(input_soa)(d, nb, v);
    }
}

/* Big planes on the SIMD loop over tiles: each block's outputs go to a plane of whole
 * tiles without bounds checks, cropped into the output plane once it is complete. */
static void F(output_planes)(const mg_wino_args *a, size_t f, T (*y)[BLOCK], T *whole)
{
    T *m[P];
    const T *bias = a->bias ? (const T *)a->bias + f : NULL;
    size_t cols = M * a->tw, per = a->th * a->tw;
    for (size_t n = 0; n < a->n; n++) {
        for (size_t t0 = 0; t0 < per; t0 += BLOCK) {
            size_t nb = per - t0 < BLOCK ? per - t0 : BLOCK;
            F(planes_at)(a, a->src, f, n * per + t0, m);
            F(output_soa)((const T *const *)m, nb, y);
            if (bias)
                UNROLL
                for (int q = 0; q < M * M; q++)
                    TYPED(add_bias)(y[q], nb, *bias);
            for (size_t k = 0; k < nb; k++) {
                T *o = whole + M * ((t0 + k) / a->tw) * cols + M * ((t0 + k) % a->tw);
                UNROLL
                for (int i = 0; i < M; i++)
                    UNROLL
                    for (int j = 0; j < M; j++)
                        o[i * cols + j] = y[M * i + j][k];
            }
        }
        T *dst = (T *)a->dst + (n * a->c + f) * a->oh * a->ow;
        for (size_t r = 0; r < a->oh; r++)
            memcpy(dst + r * a->ow, whole + r * cols, a->ow * sizeof(T));
    }
}

static void F(output_channel)(const mg_wino_args *a, size_t f, T *scratch)
{
    T *m[P];
    const T *bias = a->bias ? (const T *)a->bias + f : NULL;
    if (a->tw >= WIDE) {
        size_t cols = M * a->tw, whole = a->oh == M * a->th && a->ow == cols;
        for (size_t n = 0; n < a->n; n++) {
            T *y = (T *)a->dst + (n * a->c + f) * a->oh * a->ow;
            T *out = whole ? y : scratch; /* partial tiles: whole tiles aside, then crop */
            for (size_t ty = 0; ty < a->th; ty++) {
                F(planes_at)(a, a->src, f, (n * a->th + ty) * a->tw, m);
                F(output_rows)((const T *const *)m, a->tw, out + M * ty * cols, cols);
            }
            if (!whole)
                for (size_t r = 0; r < a->oh; r++)
                    memcpy(y + r * a->ow, scratch + r * cols, a->ow * sizeof(T));
            if (bias)
                TYPED(add_bias)(y, a->oh * a->ow, *bias);
        }
        return;
    }
    T(*y)[BLOCK] = (T(*)[BLOCK])scratch;
    if (a->th * a->tw >= PLANE_TILES) {
        F(output_planes)(a, f, y, scratch + P * BLOCK);
        return;
    }
    for (size_t t0 = 0; t0 < a->t; t0 += BLOCK) {
        size_t nb = a->t - t0 < BLOCK ? a->t - t0 : BLOCK;
        F(planes_at)(a, a->src, f, t0, m);
        F(output_soa)((const T *const *)m, nb, y);
        if (bias)
            UNROLL
            for (int q = 0; q < M * M; q++)
                TYPED(add_bias)(y[q], nb, *bias);
        for (size_t k = 0; k < nb; k++) {
            size_t n;
            ptrdiff_t r0, c0;
            F(corner)(a, t0 + k, 0, &n, &r0, &c0);
            T *o = (T *)a->dst + (n * a->c + f) * a->oh * a->ow + r0 * (ptrdiff_t)a->ow + c0;
            for (int i = 0; i < M && (size_t)r0 + i < a->oh; i++)
                for (int j = 0; j < M && (size_t)c0 + j < a->ow; j++)
                    o[i * (ptrdiff_t)a->ow + j] = y[M * i + j][k];
        }
    }
}

/* Big planes on the SIMD loop over tiles: dy copied into a plane of whole tiles (zeros
 * past its edge), then gathered without bounds checks. */
static void F(output_adjoint_planes)(const mg_wino_args *a, size_t f, T (*e)[BLOCK], T *whole)
{
    T *dm[P];
    size_t rows = M * a->th, cols = M * a->tw, per = a->th * a->tw;
    for (size_t n = 0; n < a->n; n++) {
        const T *g = (const T *)a->src + (n * a->c + f) * a->oh * a->ow;
        TYPED(pad_plane)(g, a->oh, a->ow, 0, 0, rows, cols, whole);
        for (size_t t0 = 0; t0 < per; t0 += BLOCK) {
            size_t nb = per - t0 < BLOCK ? per - t0 : BLOCK;
            for (size_t k = 0; k < nb; k++) {
                const T *p0 = whole + M * ((t0 + k) / a->tw) * cols + M * ((t0 + k) % a->tw);
                UNROLL
                for (int i = 0; i < M; i++)
                    UNROLL
                    for (int j = 0; j < M; j++)
                        e[M * i + j][k] = p0[i * cols + j];
            }
            F(planes_at)(a, a->dst, f, n * per + t0, dm);
            F(output_adjoint_soa)(e, nb, dm);
        }
    }
}

static void F(output_adjoint_channel)(const mg_wino_args *a, size_t f, T *scratch)
{
    T *dm[P];
    if (a->tw >= WIDE) {
        size_t cols = M * a->tw, whole = a->oh == M * a->th && a->ow == cols;
        for (size_t n = 0; n < a->n; n++) {
            const T *g = (const T *)a->src + (n * a->c + f) * a->oh * a->ow;
            if (!whole) {
                TYPED(pad_plane)(g, a->oh, a->ow, 0, 0, M * a->th, cols, scratch);
                g = scratch;
            }
            for (size_t ty = 0; ty < a->th; ty++) {
                F(planes_at)(a, a->dst, f, (n * a->th + ty) * a->tw, dm);
                F(output_adjoint_rows)(g + M * ty * cols, cols, a->tw, dm);
            }
        }
        return;
    }
    T(*e)[BLOCK] = (T(*)[BLOCK])scratch;
    if (a->th * a->tw >= PLANE_TILES) {
        F(output_adjoint_planes)(a, f, e, scratch + P * BLOCK);
        return;
    }
    for (size_t t0 = 0; t0 < a->t; t0 += BLOCK) {
        size_t nb = a->t - t0 < BLOCK ? a->t - t0 : BLOCK;
        for (size_t k = 0; k < nb; k++) {
            size_t n;
            ptrdiff_t r0, c0;
            F(corner)(a, t0 + k, 0, &n, &r0, &c0);
            const T *g = (const T *)a->src + (n * a->c + f) * a->oh * a->ow;
            UNROLL
            for (int i = 0; i < M; i++)
                UNROLL
                for (int j = 0; j < M; j++) {
                    size_t r = (size_t)r0 + i, q = (size_t)c0 + j;
                    e[M * i + j][k] = r < a->oh && q < a->ow ? g[r * a->ow + q] : (T)0;
                }
        }
        F(planes_at)(a, a->dst, f, t0, dm);
        F(output_adjoint_soa)(e, nb, dm);
    }
}

/* Big planes on the SIMD loop over tiles: each tile added, in tile order, to a zeroed
 * plane with a border (no bounds checks), whose inside is the image's gradient. */
static void F(input_adjoint_planes)(const mg_wino_args *a, size_t c, T *const *dd, T *pad)
{
    T *v[P];
    size_t rows = M * a->th + 2, cols = M * a->tw + 2, per = a->th * a->tw;
    for (size_t n = 0; n < a->n; n++) {
        memset(pad, 0, rows * cols * sizeof(T));
        for (size_t t0 = 0; t0 < per; t0 += BLOCK) {
            size_t nb = per - t0 < BLOCK ? per - t0 : BLOCK;
            F(planes_at)(a, a->src, c, n * per + t0, v);
            F(input_adjoint_soa)((const T *const *)v, nb, dd);
            for (size_t k = 0; k < nb; k++) {
                T *p0 = pad + M * ((t0 + k) / a->tw) * cols + M * ((t0 + k) % a->tw);
                UNROLL
                for (int i = 0; i < A; i++)
                    UNROLL
                    for (int j = 0; j < A; j++)
                        p0[i * cols + j] = p0[i * cols + j] + dd[A * i + j][k];
            }
        }
        T *x = (T *)a->dst + (n * a->c + c) * a->h * a->w;
        for (size_t r = 0; r < a->h; r++)
            memcpy(x + r * a->w, pad + (a->ph + r) * cols + a->pw, a->w * sizeof(T));
    }
}

static void F(input_adjoint_channel)(const mg_wino_args *a, size_t c, T *scratch)
{
    T *v[P], *dd[P];
    ptrdiff_t h = (ptrdiff_t)a->h, w = (ptrdiff_t)a->w;
    UNROLL
    for (int p = 0; p < P; p++)
        dd[p] = scratch + p * BLOCK;
    T *pad = scratch + P * BLOCK;
    if (a->tw >= WIDE) {
        size_t rows = M * a->th + 2, cols = M * a->tw + 2;
        for (size_t n = 0; n < a->n; n++) {
            T *x = (T *)a->dst + (n * a->c + c) * a->h * a->w;
            memset(pad, 0, rows * cols * sizeof(T));
            for (size_t ty = 0; ty < a->th; ty++)
                for (size_t t0 = 0; t0 < a->tw; t0 += BLOCK) {
                    size_t nb = a->tw - t0 < BLOCK ? a->tw - t0 : BLOCK;
                    F(planes_at)(a, a->src, c, (n * a->th + ty) * a->tw + t0, v);
                    F(input_adjoint_soa)((const T *const *)v, nb, dd);
                    F(add_rows)(pad + M * ty * cols + M * t0, cols, nb, dd);
                }
            for (size_t r = 0; r < a->h; r++)
                memcpy(x + r * a->w, pad + (a->ph + r) * cols + a->pw, a->w * sizeof(T));
        }
        return;
    }
    if (a->th * a->tw >= PLANE_TILES) {
        F(input_adjoint_planes)(a, c, dd, pad);
        return;
    }
    for (size_t n = 0; n < a->n; n++)
        memset((T *)a->dst + (n * a->c + c) * a->h * a->w, 0, a->h * a->w * sizeof(T));
    for (size_t t0 = 0; t0 < a->t; t0 += BLOCK) {
        size_t nb = a->t - t0 < BLOCK ? a->t - t0 : BLOCK;
        F(planes_at)(a, a->src, c, t0, v);
        F(input_adjoint_soa)((const T *const *)v, nb, dd);
        for (size_t k = 0; k < nb; k++) { /* tile by tile: in tile order */
            size_t n;
            ptrdiff_t r0, c0;
            F(corner)(a, t0 + k, 1, &n, &r0, &c0);
            T *x = (T *)a->dst + (n * a->c + c) * a->h * a->w;
            UNROLL
            for (int i = 0; i < A; i++)
                UNROLL
                for (int j = 0; j < A; j++) {
                    ptrdiff_t r = r0 + i, q = c0 + j;
                    if (r >= 0 && r < h && q >= 0 && q < w)
                        x[r * w + q] = x[r * w + q] + dd[A * i + j][k];
                }
        }
    }
}

#undef A
#undef P
#undef UNROLL
#undef MATMUL_LEFT
#undef MATMUL_RIGHT
#undef BT_
#undef B_
#undef Bl_
#undef BTr_
#undef AT_
#undef A_
#undef Al_
#undef ATr_
