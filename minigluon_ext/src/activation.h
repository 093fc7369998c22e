/* The activations that follow a layer (relu.c on their own, batchnorm.c fused into the
 * normalization), one element at a time, with NumPy's exact results:
 * relu(x) = x where x > 0 or x is NaN, else +0 (np.maximum(x, 0));
 * its gradient factor is 1.0 where x > 0, else 0.0 (dy * (x > 0));
 * clip(x) = NumPy 2's np.clip(x, lo, hi): lo where x < lo, hi where x > hi, else x (NaN
 * kept, -0 kept against lo = +0); its gradient factor is 1.0 where lo <= x <= hi, else 0.0.
 */
#ifndef MG_ACTIVATION_H
#define MG_ACTIVATION_H

#include "mgext.h"

enum mg_act { MG_ACT_NONE = 0, MG_ACT_RELU = 1, MG_ACT_CLIP = 2 };

/* The factors are made from bits: a plain `x > 0 ? 1 : 0` lets the compiler turn dy * that
 * into a branch, which mispredicts on every other element and stops SIMD. */
#define MG_DEFINE_ACTIVATION(T, U, ONE)                                                     \
    static inline T mg_relu_##T(T x) { return (x > 0 || x != x) ? x : (T)0; }               \
    /* NumPy 2's order: lo only where x < lo, then hi only where that is > hi */            \
    static inline T mg_clip_##T(T x, T lo, T hi)                                            \
    {                                                                                       \
        T v = x < lo ? lo : x;                                                              \
        return v > hi ? hi : v;                                                             \
    }                                                                                       \
    static inline T mg_one_if_##T(T x)                                                      \
    {                                                                                       \
        U bits = (U)0 - (U)(x > 0);                                                         \
        bits &= ONE;                                                                        \
        T f;                                                                                \
        memcpy(&f, &bits, sizeof f);                                                        \
        return f;                                                                           \
    }                                                                                       \
    static inline T mg_one_within_##T(T x, T lo, T hi)                                      \
    {                                                                                       \
        U bits = (U)0 - (U)((x >= lo) & (x <= hi));                                         \
        bits &= ONE;                                                                        \
        T f;                                                                                \
        memcpy(&f, &bits, sizeof f);                                                        \
        return f;                                                                           \
    }

MG_DEFINE_ACTIVATION(float, uint32_t, 0x3f800000u)
MG_DEFINE_ACTIVATION(double, uint64_t, 0x3ff0000000000000ull)

#endif
