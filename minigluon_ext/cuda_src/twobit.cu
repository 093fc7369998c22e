/* 2-bit gradient compression with error feedback, the rule and bit layout of
 * minigluon_ext/src/quantize.c, so that a CPU server decodes a GPU worker's push:
 *
 *   r += g;  r >= t: code 0b11 (+t), r -= t;  r <= -t: code 0b10 (-t), r += t;  else 0b00.
 *
 * 16 codes fill one 32-bit word; value k of a word sits in byte k/4 at bit shift
 * 6 - 2*(k%4).  One thread makes one word (16 values), so no two threads write one word.
 * The word is stored as a little-endian uint32, as the host kernel stores its bytes.
 */

/* bit k -> bit 2k, for k < 16 */
MG_DEVICE unsigned int mg_spread16(unsigned int x)
{
    x = (x | (x << 8)) & 0x00ff00ffu;
    x = (x | (x << 4)) & 0x0f0f0f0fu;
    x = (x | (x << 2)) & 0x33333333u;
    x = (x | (x << 1)) & 0x55555555u;
    return x;
}

/* the codes of 16 values (masks of >= t and <= -t) in the MSB-first order of each byte */
MG_DEVICE unsigned int mg_twobit_word(unsigned int pos, unsigned int neg)
{
    unsigned int w = mg_spread16(pos) | (mg_spread16(pos | neg) << 1);
    w = ((w & 0x33333333u) << 2) | ((w >> 2) & 0x33333333u);
    w = ((w & 0x0f0f0f0fu) << 4) | ((w >> 4) & 0x0f0f0f0fu);
    return w;
}

#define MG_QUANTIZE(T, SUF)                                                                 \
    MG_KERNEL quantize_2bit_##SUF(const T *g, T *r, unsigned int *packed, T t, long long n) \
    {                                                                                       \
        MG_FOR(w, (n + 15) / 16)                                                            \
        {                                                                                   \
            unsigned int pos = 0, neg = 0;                                                  \
            long long base = w * 16;                                                        \
            for (int k = 0; k < 16 && base + k < n; k++) {                                  \
                T x = r[base + k] + g[base + k];                                            \
                unsigned int p = x >= t, q = x <= -t;                                       \
                r[base + k] = p ? x - t : (q ? x + t : x);                                  \
                pos |= p << k;                                                              \
                neg |= q << k;                                                              \
            }                                                                               \
            packed[w] = mg_twobit_word(pos, neg);                                           \
        }                                                                                   \
    }

/* out[i] = (or +=) the value of code i; codes 0b00 and 0b01 stand for 0 */
#define MG_DEQUANTIZE(T, SUF)                                                               \
    MG_KERNEL dequantize_2bit_##SUF(const unsigned char *packed, T *out, T t, int add,     \
                                    long long n)                                            \
    {                                                                                       \
        MG_FOR(i, n)                                                                        \
        {                                                                                   \
            unsigned int code = (packed[i / 4] >> (6 - 2 * (i % 4))) & 3u;                  \
            T v = code == 3u ? t : (code == 2u ? -t : (T)0);                                \
            out[i] = add ? out[i] + v : v;                                                  \
        }                                                                                   \
    }

MG_QUANTIZE(float, f32)
MG_QUANTIZE(double, f64)
MG_DEQUANTIZE(float, f32)
MG_DEQUANTIZE(double, f64)
