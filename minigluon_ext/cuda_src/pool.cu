/* 2-D max, average and sum pooling of (planes, h, w) maps, and their gradients.
 *
 * Max pooling follows minigluon_ext/src/maxpool.c bit for bit: a window's maximum is its
 * first NaN, else its first largest value, in row-major order; positions outside the image
 * are skipped, a window with none gives `lowest` (-inf) and argmax -1; argmax = y*w + x in
 * the plane.  Its gradient adds dy, in row-major window order, to the element argmax names.
 *
 * Average pooling divides a window's sum (row-major, positions inside the image) by its
 * size as MXNet counts it (minigluon/ndarray/ops_pooling.py's _avg_divisor): the window
 * clipped to the padded image, or to the image itself without count_include_pad.  Sum
 * pooling (divide = 0) does not divide.
 *
 * One thread per output element in the forward passes; the gradients gather per input
 * element over the windows that hold it, in window order, so they need no atomics and give
 * the scattering loop's bits.
 */

/* The first and last window o (clipped to [0, out)) whose k taps, from o*s - p, cover y. */
MG_DEVICE int mg_first_window(int y, int k, int s, int p)
{
    int t = y + p - k + 1;
    return t <= 0 ? 0 : (t + s - 1) / s;
}

MG_DEVICE int mg_last_window(int y, int s, int p, int out)
{
    int o = (y + p) / s;
    return o < out - 1 ? o : out - 1;
}

/* The size of window o along one axis, as MXNet's average pooling counts it. */
MG_DEVICE int mg_window_count(int o, int k, int s, int p, int size, int include_pad)
{
    int start = o * s - p, end = start + k;
    end = end < size + p ? end : size + p;
    if (!include_pad) {
        start = start > 0 ? start : 0;
        end = end < size ? end : size;
    }
    return end - start;
}

#define MG_MAXPOOL(T, SUF)                                                                  \
    MG_KERNEL max_pool2d_##SUF(const T *x, T *out, int *argmax, int h, int w, int kh, int kw, \
                               int sh, int sw, int ph, int pw, int oh, int ow, T lowest,    \
                               long long total)                                             \
    {                                                                                       \
        long long area = (long long)oh * ow;                                                \
        MG_FOR(idx, total)                                                                  \
        {                                                                                   \
            long long o64, plane = mg_divmod(idx, area, &o64);                              \
            int o = (int)o64, oy = o / ow, ox = o % ow;                                     \
            const T *src = x + plane * h * w;                                               \
            T m = lowest;                                                                   \
            int am = -1;                                                                    \
            for (int i = 0; i < kh; i++) {                                                  \
                int r = oy * sh - ph + i;                                                   \
                if (r < 0 || r >= h)                                                        \
                    continue;                                                               \
                for (int j = 0; j < kw; j++) {                                              \
                    int cc = ox * sw - pw + j;                                              \
                    if (cc < 0 || cc >= w)                                                  \
                        continue;                                                           \
                    T v = src[(long long)r * w + cc];                                       \
                    if (am < 0 || v > m || (v != v && m == m)) {                            \
                        m = v;                                                              \
                        am = r * w + cc;                                                    \
                    }                                                                       \
                }                                                                           \
            }                                                                               \
            out[idx] = m;                                                                   \
            argmax[idx] = am;                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* the gradient when the window is known: one thread per input element */               \
    MG_KERNEL max_pool2d_backward_##SUF(const T *dy, const int *argmax, T *dx, int h, int w, \
                                        int kh, int kw, int sh, int sw, int ph, int pw,     \
                                        int oh, int ow, long long total)                    \
    {                                                                                       \
        long long area = (long long)h * w;                                                  \
        MG_FOR(idx, total)                                                                  \
        {                                                                                   \
            long long pos64, plane = mg_divmod(idx, area, &pos64);                          \
            int pos = (int)pos64, y = pos / w, xx = pos % w;                                \
            const T *g = dy + plane * oh * ow;                                              \
            const int *am = argmax + plane * oh * ow;                                       \
            int y1 = mg_last_window(y, sh, ph, oh), x1 = mg_last_window(xx, sw, pw, ow);    \
            T acc = (T)0;                                                                   \
            for (int oy = mg_first_window(y, kh, sh, ph); oy <= y1; oy++)                   \
                for (int ox = mg_first_window(xx, kw, sw, pw); ox <= x1; ox++)              \
                    if (am[oy * ow + ox] == pos)                                            \
                        acc = acc + g[oy * ow + ox];                                        \
            dx[idx] = acc;                                                                  \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* the gradient from argmax alone (native's arguments): one thread per plane */         \
    MG_KERNEL max_pool2d_backward_planes_##SUF(const T *dy, const int *argmax, T *dx,       \
                                               long long in_size, long long out_size,       \
                                               long long planes)                            \
    {                                                                                       \
        MG_FOR(p, planes)                                                                   \
        {                                                                                   \
            T *d = dx + p * in_size;                                                        \
            for (long long k = 0; k < in_size; k++)                                         \
                d[k] = (T)0;                                                                \
            for (long long o = p * out_size; o < (p + 1) * out_size; o++)                   \
                if (argmax[o] >= 0 && argmax[o] < in_size)                                  \
                    d[argmax[o]] = d[argmax[o]] + dy[o];                                    \
        }                                                                                   \
    }

#define MG_AVGPOOL(T, SUF)                                                                  \
    MG_KERNEL avg_pool2d_##SUF(const T *x, T *out, int h, int w, int kh, int kw, int sh,     \
                               int sw, int ph, int pw, int oh, int ow, int include_pad,     \
                               int divide, long long total)                                 \
    {                                                                                       \
        long long area = (long long)oh * ow;                                                \
        MG_FOR(idx, total)                                                                  \
        {                                                                                   \
            long long o64, plane = mg_divmod(idx, area, &o64);                              \
            int o = (int)o64, oy = o / ow, ox = o % ow;                                     \
            const T *src = x + plane * h * w;                                               \
            T sum = (T)0;                                                                   \
            for (int i = 0; i < kh; i++) {                                                  \
                int r = oy * sh - ph + i;                                                   \
                if (r < 0 || r >= h)                                                        \
                    continue;                                                               \
                for (int j = 0; j < kw; j++) {                                              \
                    int cc = ox * sw - pw + j;                                              \
                    if (cc >= 0 && cc < w)                                                  \
                        sum = sum + src[(long long)r * w + cc];                             \
                }                                                                           \
            }                                                                               \
            T count = (T)(mg_window_count(oy, kh, sh, ph, h, include_pad) *                 \
                          mg_window_count(ox, kw, sw, pw, w, include_pad));                 \
            out[idx] = divide ? sum / count : sum;                                          \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    MG_KERNEL avg_pool2d_backward_##SUF(const T *dy, T *dx, int h, int w, int kh, int kw,   \
                                        int sh, int sw, int ph, int pw, int oh, int ow,     \
                                        int include_pad, int divide, long long total)       \
    {                                                                                       \
        long long area = (long long)h * w;                                                  \
        MG_FOR(idx, total)                                                                  \
        {                                                                                   \
            long long pos64, plane = mg_divmod(idx, area, &pos64);                          \
            int pos = (int)pos64, y = pos / w, xx = pos % w;                                \
            const T *g = dy + plane * oh * ow;                                              \
            int y1 = mg_last_window(y, sh, ph, oh), x1 = mg_last_window(xx, sw, pw, ow);    \
            T acc = (T)0;                                                                   \
            for (int oy = mg_first_window(y, kh, sh, ph); oy <= y1; oy++)                   \
                for (int ox = mg_first_window(xx, kw, sw, pw); ox <= x1; ox++) {            \
                    T v = g[oy * ow + ox];                                                  \
                    T count = (T)(mg_window_count(oy, kh, sh, ph, h, include_pad) *         \
                                  mg_window_count(ox, kw, sw, pw, w, include_pad));         \
                    acc = acc + (divide ? v / count : v);                                   \
                }                                                                           \
            dx[idx] = acc;                                                                  \
        }                                                                                   \
    }

MG_MAXPOOL(float, f32)
MG_MAXPOOL(double, f64)
MG_AVGPOOL(float, f32)
MG_AVGPOOL(double, f64)
