/* 2-D max pooling with the position of each maximum, and its gradient.
 *
 * A window's maximum is its first NaN if it holds one, else its first largest value, in
 * row-major order (NumPy's argmax rule); window positions outside the image are skipped,
 * and a window with none inside gives -inf and argmax -1.  The gradient adds dy of every
 * window, in row-major window order, to the input element its argmax names.
 */
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "layers.h"

/* The output columns x in [lo, hi) whose input column x*s - p + j lies in [0, w). */
static void columns(size_t w, size_t ow, size_t s, size_t p, size_t j, size_t *lo, size_t *hi)
{
    ptrdiff_t first = (ptrdiff_t)j - (ptrdiff_t)p;
    ptrdiff_t a = first >= 0 ? 0 : (-first + (ptrdiff_t)s - 1) / (ptrdiff_t)s;
    ptrdiff_t last = (ptrdiff_t)w - 1 - first;
    ptrdiff_t b = last < 0 ? 0 : last / (ptrdiff_t)s + 1;
    if (b > (ptrdiff_t)ow)
        b = (ptrdiff_t)ow;
    if (a > b)
        a = b;
    *lo = (size_t)a, *hi = (size_t)b;
}

/* Each output row starts at (-inf, -1); the window's taps are then applied in row-major
 * order, each to the whole row of outputs at once and without branches, so the compiler
 * vectorizes it: a tap wins when nothing won yet, when it is larger, or when it is the
 * first NaN.  The rows are short (56 outputs for ResNet's 3x3 stride-2 pooling), so what
 * is around a tap costs as much as the tap: the plane is one function, the taps inlined
 * into it, and each tap column's range of outputs is found once a plane, not once a row
 * (3x3 stride-2 on (16, 64, 112, 112), one thread: 36 -> 28 ms; the SSE2 path below for
 * that window, 26 ms, on a machine at load 20). */
#define MG_POOL_KW 32       /* taps per window row whose ranges are kept; wider: per row */

#define DEFINE_MAXPOOL(T, SUF)                                                              \
    static inline void tap_##SUF(const T *restrict src, size_t step, T *restrict m,         \
                                 int32_t *restrict am, size_t n, int32_t at)                \
    {                                                                                       \
        for (size_t k = 0; k < n; k++) {                                                    \
            T v = src[k * step];                                                            \
            int take = (am[k] < 0) | (v > m[k]) | ((v != v) & (m[k] == m[k]));             \
            m[k] = take ? v : m[k];                                                         \
            am[k] = take ? at + (int32_t)(k * step) : am[k];                                \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    MG_CLONES static void maxpool_plane_##SUF(const mg_window *g, const T *x, T *out,       \
                                              int32_t *am)                                  \
    {                                                                                       \
        size_t lo[MG_POOL_KW], hi[MG_POOL_KW];                                              \
        for (size_t j = 0; j < g->kw && j < MG_POOL_KW; j++)                                \
            columns(g->w, g->ow, g->sw, g->pw, j, &lo[j], &hi[j]);                          \
        for (size_t y = 0; y < g->oh; y++) {                                                \
            T *m = out + y * g->ow;                                                         \
            int32_t *a = am + y * g->ow;                                                    \
            for (size_t k = 0; k < g->ow; k++)                                              \
                m[k] = (T)-INFINITY, a[k] = -1;                                             \
            for (size_t i = 0; i < g->kh; i++) {                                            \
                ptrdiff_t r = (ptrdiff_t)(y * g->sh + i) - (ptrdiff_t)g->ph;                \
                if (r < 0 || r >= (ptrdiff_t)g->h)                                          \
                    continue;                                                               \
                for (size_t j = 0; j < g->kw; j++) {                                        \
                    size_t l, h;                                                            \
                    if (j < MG_POOL_KW)                                                     \
                        l = lo[j], h = hi[j];                                               \
                    else                                                                    \
                        columns(g->w, g->ow, g->sw, g->pw, j, &l, &h);                      \
                    if (l >= h)                                                             \
                        continue;                                                           \
                    size_t c = l * g->sw + j - g->pw;                                       \
                    tap_##SUF(x + (size_t)r * g->w + c, g->sw, m + l, a + l, h - l,         \
                              (int32_t)((size_t)r * g->w + c));                             \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void maxpool_back_plane_##SUF(mg_maxpool_back_args *a, size_t p)                 \
    {                                                                                       \
        const T *dy = (const T *)a->dy + p * a->out_size;                                   \
        const int32_t *am = a->argmax + p * a->out_size;                                    \
        T *dx = (T *)a->dx + p * a->in_size;                                                \
        memset(dx, 0, a->in_size * sizeof(T));                                              \
        for (size_t o = 0; o < a->out_size; o++) {                                          \
            if (am[o] < 0)                                                                  \
                continue;                                                                   \
            if ((size_t)am[o] >= a->in_size) {                                              \
                __atomic_store_n(&a->bad, 1, __ATOMIC_RELAXED);                             \
                continue;                                                                   \
            }                                                                               \
            dx[am[o]] = dx[am[o]] + dy[o];                                                  \
        }                                                                                   \
    }

DEFINE_MAXPOOL(float, f32)
DEFINE_MAXPOOL(double, f64)

#if defined(__SSE2__)
/* The common 2x2 stride-2 unpadded float32 window, four outputs at a time with SSE2:
 * the scalar form of the NaN-aware rule compiles to branches that random data mispredicts
 * (2.6 ms for LeNet's first pooling), this form to masks (about 30x less). A tap v replaces
 * the best so far b when !(v <= b) and b is not NaN: v > b, or v is the first NaN. */
static inline void take_f32(__m128 v, __m128i at, __m128 *best, __m128i *arg)
{
    __m128 take = _mm_and_ps(_mm_cmpnle_ps(v, *best), _mm_cmpord_ps(*best, *best));
    *best = _mm_or_ps(_mm_and_ps(take, v), _mm_andnot_ps(take, *best));
    __m128i t = _mm_castps_si128(take);
    *arg = _mm_or_si128(_mm_and_si128(t, at), _mm_andnot_si128(t, *arg));
}

static void maxpool_row_2x2_f32(const float *r0, const float *r1, float *m, int32_t *am,
                                size_t n, int32_t base, int32_t w)
{
    size_t k = 0;
    for (; k + 4 <= n; k += 4) {
        __m128 a = _mm_loadu_ps(r0 + 2 * k), b = _mm_loadu_ps(r0 + 2 * k + 4);
        __m128 c = _mm_loadu_ps(r1 + 2 * k), d = _mm_loadu_ps(r1 + 2 * k + 4);
        __m128i left = _mm_add_epi32(_mm_set1_epi32(base + 2 * (int32_t)k),
                                     _mm_setr_epi32(0, 2, 4, 6));
        __m128 best = _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));   /* even columns */
        __m128i arg = left;
        take_f32(_mm_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)),
                 _mm_add_epi32(left, _mm_set1_epi32(1)), &best, &arg);
        take_f32(_mm_shuffle_ps(c, d, _MM_SHUFFLE(2, 0, 2, 0)),
                 _mm_add_epi32(left, _mm_set1_epi32(w)), &best, &arg);
        take_f32(_mm_shuffle_ps(c, d, _MM_SHUFFLE(3, 1, 3, 1)),
                 _mm_add_epi32(left, _mm_set1_epi32(w + 1)), &best, &arg);
        _mm_storeu_ps(m + k, best);
        _mm_storeu_si128((__m128i *)(am + k), arg);
    }
    for (; k < n; k++) {   /* the last n % 4 outputs, one at a time */
        float v[4] = {r0[2 * k], r0[2 * k + 1], r1[2 * k], r1[2 * k + 1]};
        int32_t at[4] = {0, 1, w, w + 1}, t = 0;
        for (int i = 1; i < 4; i++)
            if (!(v[i] <= v[t]) && v[t] == v[t])
                t = i;
        m[k] = v[t], am[k] = base + 2 * (int32_t)k + at[t];
    }
}

/* True when the window is 2x2, stride 2, unpadded, so all four taps lie in the image. */
static int plain_2x2(const mg_window *g)
{
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 &&
           2 * g->oh <= g->h && 2 * g->ow <= g->w && g->h * g->w <= INT32_MAX;
}

static void maxpool_plane_2x2_f32(const mg_window *g, const float *x, float *out, int32_t *am)
{
    for (size_t y = 0; y < g->oh; y++)
        maxpool_row_2x2_f32(x + 2 * y * g->w, x + (2 * y + 1) * g->w, out + y * g->ow,
                            am + y * g->ow, g->ow, (int32_t)(2 * y * g->w), (int32_t)g->w);
}

/* ResNet's 3x3 stride-2 float32 window (padded or not), four outputs at a time with SSE2
 * where all three columns of each window lie in the image, one at a time at the edges.
 * For outputs k..k+3 of a row, p = the row + 2k - pw: the three taps are p[0,2,4,6],
 * p[1,3,5,7] and p[2,4,6,8], taken from loads of p[0..3], p[4..7], p[2..5] and p[5..8]
 * (nothing past p[8], the last tap, is read). */
static int plain_3x3s2(const mg_window *g)
{
    return g->kh == 3 && g->kw == 3 && g->sh == 2 && g->sw == 2 && g->h * g->w <= INT32_MAX;
}

static void maxpool_edge_3x3s2_f32(const mg_window *g, const float *x, const ptrdiff_t *rows,
                                   int nrows, size_t k, float *m, int32_t *am)
{
    int first = 1;
    for (int i = 0; i < nrows; i++)
        for (int j = 0; j < 3; j++) {
            ptrdiff_t c = (ptrdiff_t)(2 * k + j) - (ptrdiff_t)g->pw;
            if (c < 0 || c >= (ptrdiff_t)g->w)
                continue;
            size_t at = (size_t)rows[i] * g->w + (size_t)c;
            float v = x[at];
            if (first || (!(v <= *m) && *m == *m))
                *m = v, *am = (int32_t)at, first = 0;
        }
    if (first)
        *m = -INFINITY, *am = -1;
}

static void maxpool_plane_3x3s2_f32(const mg_window *g, const float *x, float *out,
                                    int32_t *am)
{
    /* outputs [xa, xb) have all three columns inside: 2k - pw >= 0, 2k - pw + 2 < w */
    size_t xa = (g->pw + 1) / 2;
    size_t xb = g->w + g->pw >= 3 ? (g->w + g->pw - 3) / 2 + 1 : 0;
    if (xb > g->ow)
        xb = g->ow;
    if (xa > xb)
        xa = xb;
    for (size_t y = 0; y < g->oh; y++) {
        ptrdiff_t rows[3];
        int nrows = 0;
        for (int i = 0; i < 3; i++) {
            ptrdiff_t r = (ptrdiff_t)(2 * y + i) - (ptrdiff_t)g->ph;
            if (r >= 0 && r < (ptrdiff_t)g->h)
                rows[nrows++] = r;
        }
        float *m = out + y * g->ow;
        int32_t *a = am + y * g->ow;
        size_t k = 0;
        for (; k < xa; k++)
            maxpool_edge_3x3s2_f32(g, x, rows, nrows, k, m + k, a + k);
        for (; nrows > 0 && k + 4 <= xb; k += 4) {
            __m128 best = _mm_setzero_ps();
            __m128i arg = _mm_setzero_si128();
            for (int i = 0; i < nrows; i++) {
                int32_t base = (int32_t)((size_t)rows[i] * g->w + 2 * k - g->pw);
                const float *p = x + base;
                __m128 A = _mm_loadu_ps(p), B = _mm_loadu_ps(p + 4);
                __m128 C = _mm_loadu_ps(p + 2), D = _mm_loadu_ps(p + 5);
                __m128i at = _mm_add_epi32(_mm_set1_epi32(base), _mm_setr_epi32(0, 2, 4, 6));
                __m128 t0 = _mm_shuffle_ps(A, B, _MM_SHUFFLE(2, 0, 2, 0));
                if (i == 0)
                    best = t0, arg = at;
                else
                    take_f32(t0, at, &best, &arg);
                take_f32(_mm_shuffle_ps(A, B, _MM_SHUFFLE(3, 1, 3, 1)),
                         _mm_add_epi32(at, _mm_set1_epi32(1)), &best, &arg);
                take_f32(_mm_shuffle_ps(C, D, _MM_SHUFFLE(3, 1, 2, 0)),
                         _mm_add_epi32(at, _mm_set1_epi32(2)), &best, &arg);
            }
            _mm_storeu_ps(m + k, best);
            _mm_storeu_si128((__m128i *)(a + k), arg);
        }
        for (; k < g->ow; k++)
            maxpool_edge_3x3s2_f32(g, x, rows, nrows, k, m + k, a + k);
    }
}
#else
static int plain_2x2(const mg_window *g) { (void)g; return 0; }
static int plain_3x3s2(const mg_window *g) { (void)g; return 0; }
#define maxpool_plane_2x2_f32 maxpool_plane_f32
#define maxpool_plane_3x3s2_f32 maxpool_plane_f32
#endif

void mg_maxpool_task(void *args, size_t begin, size_t end)
{
    const mg_maxpool_args *a = (const mg_maxpool_args *)args;
    size_t in = a->g.h * a->g.w, out = a->g.oh * a->g.ow;
    int f32 = a->dtype == MG_F32;
    int fast2 = f32 && plain_2x2(&a->g), fast3 = f32 && !fast2 && plain_3x3s2(&a->g);
    for (size_t p = begin; p < end; p++) {
        if (fast2)
            maxpool_plane_2x2_f32(&a->g, (const float *)a->x + p * in,
                                  (float *)a->out + p * out, a->argmax + p * out);
        else if (fast3)
            maxpool_plane_3x3s2_f32(&a->g, (const float *)a->x + p * in,
                                    (float *)a->out + p * out, a->argmax + p * out);
        else if (a->dtype == MG_F32)
            maxpool_plane_f32(&a->g, (const float *)a->x + p * in, (float *)a->out + p * out,
                              a->argmax + p * out);
        else
            maxpool_plane_f64(&a->g, (const double *)a->x + p * in,
                              (double *)a->out + p * out, a->argmax + p * out);
    }
}

void mg_maxpool_back_task(void *args, size_t begin, size_t end)
{
    mg_maxpool_back_args *a = (mg_maxpool_back_args *)args;
    for (size_t p = begin; p < end; p++) {
        if (a->dtype == MG_F32)
            maxpool_back_plane_f32(a, p);
        else
            maxpool_back_plane_f64(a, p);
    }
}
