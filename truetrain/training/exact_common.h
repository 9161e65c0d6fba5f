/* Helpers shared by the exact C kernels (exact_kernels.c, plane_kernels.c): the scales and
 * the quantising of intgemm.py, bit for bit. */
#ifndef TT_EXACT_COMMON_H
#define TT_EXACT_COMMON_H
#include <stdint.h>
#include <string.h>
#include <math.h>

static inline int32_t f32_bits(float f) { int32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(int32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* intgemm.pow2_scales for one maximum: up, down = 2**-(E-bits-...) from the exponent field E
 * (clamped below at bits + 26); down is NaN when E is 255 (an inf or NaN in the row). */
static inline void pow2_scales(float amax, int bits, float *up, float *down) {
    int32_t field = (f32_bits(amax) >> 23) & 0xFF;  /* a NaN maximum may carry the sign bit */
    int32_t e = field < bits + 26 ? bits + 26 : field;
    *up = bits_f32((bits + 253 - e) << 23);
    *down = field == 255 ? bits_f32(0x7FC00000) : bits_f32((e - (bits - 1)) << 23);
}

/* max |v| with NaN sticky, as torch's abs().amax() */
static inline float amax_step(float m, float v) {
    float a = fabsf(v);
    return (a != a || a > m) ? a : m;
}

/* round(v * up) clamped to [-2**bits, 2**bits - 1]; NaN stays NaN (torch round_, clamp_) */
static inline float quantize_one(float v, float up, float lo, float hi) {
    float r = nearbyintf(v * up);
    if (r < lo) return lo;
    if (r > hi) return hi;
    return r;
}

#endif
