/* The int8 route's passes around its products, for CPUs (truetrain/training/native_planes.py).
 *
 * Quantising to int8 planes (the balanced base-128 digits and their pair sums of
 * intgemm_fused.planes_stacked), the column maxima of a weight gradient, and the Karatsuba
 * combine with its one rounding: what intgemm_fused's compiled kernels compute, bit for bit,
 * in one pass each and without their per-call guards. Every operation is exact (exponent
 * bits, products by powers of two, round-to-nearest-even of exact values, integer digit
 * arithmetic) up to the one IEEE rounding the torch route takes; the build forbids
 * contraction and fast-math, and the loader self-tests every kernel against its torch twin.
 *
 * Work is split over `nt` OpenMP threads (the caller passes torch's thread count; the
 * runtime is torch's own libgomp): every output depends on its own row or column only, so
 * the split changes no bit.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "exact_common.h"

/* the planes of one quantised value r (an integer as float, or NaN: its row's scale is NaN,
 * so any integer does) at o[0], o[stride], ...: the digits, most significant first, then the
 * pair sums (intgemm_fused.digit_pairs) */
static inline void store_planes(float r, int limbs, int8_t *o, int64_t stride) {
    const int32_t q = r == r ? (int32_t)r : 0;
    if (limbs == 2) {
        const int32_t hi = (q + 64) >> 7, lo = q - hi * 128;
        o[0] = (int8_t)hi; o[stride] = (int8_t)lo; o[2 * stride] = (int8_t)(hi + lo);
        return;
    }
    const int32_t h1 = (q + 64) >> 7, d2 = q - h1 * 128;
    const int32_t d0 = (h1 + 64) >> 7, d1 = h1 - d0 * 128;
    o[0] = (int8_t)d0; o[stride] = (int8_t)d1; o[2 * stride] = (int8_t)d2;
    o[3 * stride] = (int8_t)(d0 + d1); o[4 * stride] = (int8_t)(d0 + d2); o[5 * stride] = (int8_t)(d1 + d2);
}

/* store_planes at 2 limbs, branch-free (vectorises) */
static inline void store_planes2(float r, int8_t *o, int64_t stride) {
    const int32_t q = r == r ? (int32_t)r : 0;
    const int32_t hi = (q + 64) >> 7, lo = q - hi * 128;
    o[0] = (int8_t)hi; o[stride] = (int8_t)lo; o[2 * stride] = (int8_t)(hi + lo);
}

static inline int plane_count(int limbs) { return limbs * (limbs + 1) / 2; }

#define COMBINE_BLK 256

/* max |x[j]| over n values, NaN sticky (the first NaN's magnitude), as amax_step in order:
 * the largest magnitude's bits, as integers (they order non-negative floats; a NaN's are
 * above inf's) */
static float row_amax(const float *x, int64_t n) {
    int32_t m = 0;
    for (int64_t j = 0; j < n; j++) {
        const int32_t a = f32_bits(x[j]) & 0x7FFFFFFF;
        m = a > m ? a : m;
    }
    if (m <= 0x7F800000) return bits_f32(m);
    for (int64_t j = 0; j < n; j++)
        if (x[j] != x[j]) return fabsf(x[j]);
    return bits_f32(m);
}

/* intgemm.quantize (and quantize_scaled_columns) of nb contiguous (rows, cols) float32
 * matrices to int8 planes. dim 1: one scale per row, planes (nb, rows, P, cols) (a left
 * operand's layout); dim 0: one per column, planes (nb, P, rows, cols). rscale (rows, or
 * NULL): each value is first multiplied by its row's float32 power of two (g * rows[:, None]).
 * amax (one per row or column, or NULL: their own maxima of the scaled values); down gets the
 * scales. Returns 0, or -1 when scratch memory is short. */
int tt_quantize_planes(const float *x, int64_t nb, int64_t rows, int64_t cols, int dim, int bits, int limbs,
                       const float *amax, const float *rscale, int8_t *planes, float *down, int nt) {
    const float lo = -(float)(1 << bits), hi = (float)((1 << bits) - 1);
    const int P = plane_count(limbs);
    if (dim == 1) {
        #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && nb * rows > 1)
        for (int64_t r = 0; r < nb * rows; r++) {
            const float *row = x + r * cols;
            float up;
            pow2_scales(amax ? amax[r] : row_amax(row, cols), bits, &up, &down[r]);
            int8_t *o = planes + r * P * cols;
            if (limbs == 2)
                for (int64_t j = 0; j < cols; j++) store_planes2(quantize_one(row[j], up, lo, hi), o + j, cols);
            else
                for (int64_t j = 0; j < cols; j++) store_planes(quantize_one(row[j], up, lo, hi), limbs, o + j, cols);
        }
        return 0;
    }
    float *ups = malloc(sizeof(float) * (size_t)(nb * cols > 0 ? nb * cols : 1));
    if (!ups) return -1;
    #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && nb > 1)
    for (int64_t b = 0; b < nb; b++) {
        float *m = ups + b * cols;
        const float *xb = x + b * rows * cols;
        if (amax) memcpy(m, amax + b * cols, sizeof(float) * (size_t)cols);
        else {
            for (int64_t j = 0; j < cols; j++) m[j] = 0.0f;
            for (int64_t i = 0; i < rows; i++) {
                const float s = rscale ? rscale[i] : 1.0f;
                for (int64_t j = 0; j < cols; j++) m[j] = amax_step(m[j], rscale ? xb[i * cols + j] * s : xb[i * cols + j]);
            }
        }
        for (int64_t j = 0; j < cols; j++) pow2_scales(m[j], bits, &m[j], &down[b * cols + j]);
    }
    const int64_t plane = rows * cols;
    #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && nb * rows > 1)
    for (int64_t r = 0; r < nb * rows; r++) {
        const int64_t b = r / rows, i = r % rows;
        const float *row = x + r * cols, *up = ups + b * cols;
        int8_t *o = planes + b * P * plane + i * cols;
        const float s = rscale ? rscale[i] : 1.0f;
        if (rscale && limbs == 2)
            for (int64_t j = 0; j < cols; j++) store_planes2(quantize_one(row[j] * s, up[j], lo, hi), o + j, plane);
        else if (limbs == 2)
            for (int64_t j = 0; j < cols; j++) store_planes2(quantize_one(row[j], up[j], lo, hi), o + j, plane);
        else if (rscale)
            for (int64_t j = 0; j < cols; j++) store_planes(quantize_one(row[j] * s, up[j], lo, hi), limbs, o + j, plane);
        else
            for (int64_t j = 0; j < cols; j++) store_planes(quantize_one(row[j], up[j], lo, hi), limbs, o + j, plane);
    }
    free(ups);
    return 0;
}

/* intgemm_fused._column_maxima of g (rows, cols) and float32 powers of two rscale (rows):
 * per column max |g * rscale[:, None]| and max |g| (NaN sticky). Columns split over threads. */
void tt_column_maxima(const float *g, int64_t rows, int64_t cols, const float *rscale, float *scaled,
                      float *plain, int nt) {
    const int64_t block = 64, blocks = (cols + block - 1) / block;
    #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && blocks > 1)
    for (int64_t c = 0; c < blocks; c++) {
        const int64_t j0 = c * block, j1 = j0 + block < cols ? j0 + block : cols;
        for (int64_t j = j0; j < j1; j++) { scaled[j] = 0.0f; plain[j] = 0.0f; }
        for (int64_t i = 0; i < rows; i++) {
            const float s = rscale[i];
            const float *row = g + i * cols;
            for (int64_t j = j0; j < j1; j++) {
                scaled[j] = amax_step(scaled[j], row[j] * s);
                plain[j] = amax_step(plain[j], row[j]);
            }
        }
    }
}

/* intgemm_fused._combine (and _combine_bias) of nb products: sums (nb, P, m, n) int32, the
 * plane products of intgemm_fused.combine_exact, into float32 (nb, m, n):
 * float32(double(S) * rs[i] * cs[j]) (+ bias[j] in float32). S is exact in int64 and, by
 * the caller's check, in float64; rs (nb, m), cs (nb, n) float32 powers of two or NULL (1). */
void tt_combine(const int32_t *sums, int64_t nb, int limbs, int64_t m, int64_t n, const float *rs,
                const float *cs, const float *bias, float *out, int nt) {
    const int P = plane_count(limbs);
    const int64_t plane = m * n;
    #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && nb * m > 1)
    for (int64_t r = 0; r < nb * m; r++) {
        const int64_t b = r / m, i = r % m;
        const int32_t *s0 = sums + b * P * plane + i * n;
        const float *cb = cs ? cs + b * n : NULL;
        const double rv = rs ? (double)rs[r] : 1.0;
        float *o = out + r * n;
        double t[COMBINE_BLK];
        for (int64_t j0 = 0; j0 < n; j0 += COMBINE_BLK) {
            const int64_t w = n - j0 < COMBINE_BLK ? n - j0 : COMBINE_BLK;
            const int32_t *a = s0 + j0;
            if (limbs == 2)  /* every term and partial sum below 2**53 (K <= 2**16): exact in float64 */
                for (int64_t j = 0; j < w; j++) {
                    const double p0 = a[j], p1 = a[plane + j], m01 = a[2 * plane + j];
                    t[j] = (p0 * 16384.0 + p1 + ((m01 - p0) - p1) * 128.0) * rv;
                }
            else
                for (int64_t j = 0; j < w; j++) {
                    const int64_t p0 = a[j], p1 = a[plane + j], p2 = a[2 * plane + j];
                    const int64_t m01 = a[3 * plane + j], m02 = a[4 * plane + j], m12 = a[5 * plane + j];
                    const int64_t acc = p0 * 268435456LL + p1 * 16384 + p2 + (m01 - p0 - p1) * 2097152
                                        + (m02 - p0 - p2) * 16384 + (m12 - p1 - p2) * 128;
                    t[j] = (double)acc * rv;
                }
            if (cb)
                for (int64_t j = 0; j < w; j++) t[j] = t[j] * (double)cb[j0 + j];
            if (bias)
                for (int64_t j = 0; j < w; j++) o[j0 + j] = (float)t[j] + bias[j0 + j];
            else
                for (int64_t j = 0; j < w; j++) o[j0 + j] = (float)t[j];
        }
    }
}
