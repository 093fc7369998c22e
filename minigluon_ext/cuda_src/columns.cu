/* Convolution columns, the layout and sums of minigluon_ext/src/conv.c:
 *
 *   im2col: row (c, i, j) of the (C*kh*kw, N*oh*ow) columns holds, at column (n, y, x),
 *           image[n, c, y*sh - ph + i*dh, x*sw - pw + j*dw], or 0 in the padding.
 *   col2im: each image element starts at 0 and adds the column entries im2col copied from
 *           it, in tap order (0, 0), (0, 1), ..., each step rounded: conv.c's bits.
 *
 * One thread per output element, consecutive threads on consecutive addresses of what they
 * write (a column row; an image row).  col2im gathers instead of scattering, so it needs no
 * atomics and keeps the tap order.  Past the first split of the flat index (mg_divmod) the
 * arithmetic is int: the callers (minigluon_ext/gpu_layers.py) check that every factor fits
 * one, and 64-bit division is slow on a GPU.
 */

#define MG_IM2COL(T, SUF)                                                                   \
    MG_KERNEL im2col_##SUF(const T *x, T *cols, int n, int c, int h, int w, int kh, int kw,  \
                           int sh, int sw, int ph, int pw, int dh, int dw, int oh, int ow,  \
                           long long total)                                                 \
    {                                                                                       \
        long long width = (long long)n * oh * ow;                                           \
        MG_FOR(idx, total)                                                                  \
        {                                                                                   \
            long long col64, row = mg_divmod(idx, width, &col64);                           \
            int col = (int)col64;                                                           \
            int ox = col % ow, oy = col / ow % oh, s = col / ow / oh;                       \
            int j = (int)row % kw, i = (int)row / kw % kh, ch = (int)row / kw / kh;         \
            int y = oy * sh - ph + i * dh, xx = ox * sw - pw + j * dw;                      \
            int inside = y >= 0 && y < h && xx >= 0 && xx < w;                             \
            cols[idx] = inside ? x[(((long long)s * c + ch) * h + y) * w + xx] : (T)0;      \
        }                                                                                   \
    }

#define MG_COL2IM(T, SUF)                                                                   \
    MG_KERNEL col2im_##SUF(const T *cols, T *x, int n, int c, int h, int w, int kh, int kw,  \
                           int sh, int sw, int ph, int pw, int dh, int dw, int oh, int ow,  \
                           long long total)                                                 \
    {                                                                                       \
        long long width = (long long)n * oh * ow, area = (long long)h * w;                  \
        MG_FOR(idx, total)                                                                  \
        {                                                                                   \
            long long pos64, plane = mg_divmod(idx, area, &pos64);                          \
            int pos = (int)pos64;                                                           \
            int s = (int)plane / c, ch = (int)plane % c, yy = pos / w, xx = pos % w;        \
            const T *src = cols + (long long)s * oh * ow;                                   \
            T acc = (T)0;                                                                   \
            for (int i = 0; i < kh; i++) {                                                  \
                int ty = yy + ph - i * dh; /* oy * sh for the output row reading yy */      \
                if (ty < 0 || ty % sh != 0 || ty / sh >= oh)                                \
                    continue;                                                               \
                for (int j = 0; j < kw; j++) {                                              \
                    int tx = xx + pw - j * dw;                                              \
                    if (tx < 0 || tx % sw != 0 || tx / sw >= ow)                            \
                        continue;                                                           \
                    long long row = ((long long)ch * kh + i) * kw + j;                      \
                    acc = acc + src[row * width + (long long)(ty / sh) * ow + tx / sw];     \
                }                                                                           \
            }                                                                               \
            x[idx] = acc;                                                                   \
        }                                                                                   \
    }

MG_IM2COL(float, f32)
MG_IM2COL(double, f64)
MG_COL2IM(float, f32)
MG_COL2IM(double, f64)
