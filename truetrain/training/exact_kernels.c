/* Exact small-tensor kernels of repro mode, for CPUs (truetrain/training/native.py).
 *
 * Each function computes what a sequence of eager torch ops computes in intgemm.py, bit
 * for bit, in one pass and one call: on the demo models' small tensors the cost of a step
 * is the dispatch of many tiny ops, not the arithmetic. Every operation is exact (bit
 * manipulation of exponents, products by powers of two, round-to-nearest-even of exact
 * values) up to one IEEE rounding where the torch route rounds; build flags forbid
 * contraction and fast-math, and the loader self-tests every kernel against its torch twin
 * before use. Single-threaded: used only below the size where compiled kernels take over.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "exact_common.h"

/* intgemm.quantize on a contiguous (rows, cols) float32 x: per row (dim 1) or per column
 * (dim 0), with the given maxima (amax, one per row or column) or its own. Writes the
 * integers as float64 q64 (rows, cols) (exact; what the float64 route multiplies) and the
 * scales down (one per row or column). Returns 0, or -1 when scratch memory is short. */
int tt_quantize(const float *x, int64_t rows, int64_t cols, int dim, int bits,
                const float *amax, double *q64, float *down) {
    const float lo = -(float)(1 << bits), hi = (float)((1 << bits) - 1);
    if (dim == 1) {
        for (int64_t i = 0; i < rows; i++) {
            const float *row = x + i * cols;
            float m = 0.0f, up;
            if (amax) m = amax[i];
            else for (int64_t j = 0; j < cols; j++) m = amax_step(m, row[j]);
            pow2_scales(m, bits, &up, &down[i]);
            double *out = q64 + i * cols;
            for (int64_t j = 0; j < cols; j++) out[j] = (double)quantize_one(row[j], up, lo, hi);
        }
        return 0;
    }
    float *ups = malloc(sizeof(float) * (size_t)(cols > 0 ? cols : 1));
    if (!ups) return -1;
    if (amax) memcpy(ups, amax, sizeof(float) * (size_t)cols);
    else {
        for (int64_t j = 0; j < cols; j++) ups[j] = 0.0f;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) ups[j] = amax_step(ups[j], x[i * cols + j]);
    }
    for (int64_t j = 0; j < cols; j++) pow2_scales(ups[j], bits, &ups[j], &down[j]);
    for (int64_t i = 0; i < rows; i++) {
        const float *row = x + i * cols;
        double *out = q64 + i * cols;
        for (int64_t j = 0; j < cols; j++) out[j] = (double)quantize_one(row[j], ups[j], lo, hi);
    }
    free(ups);
    return 0;
}

/* ExactSum.finish for float64 sums s (m, n), contiguous: float32(s * (row[i] * factor) *
 * col[j]); a missing row scale counts as 1, a missing column scale skips that product.
 * Every product is by a power of two (exact); the cast is the one rounding. */
void tt_finish(const double *s, int64_t m, int64_t n, const float *row, double factor,
               const float *col, float *out) {
    for (int64_t i = 0; i < m; i++) {
        double r = row ? (double)row[i] * factor : factor;
        for (int64_t j = 0; j < n; j++) {
            double t = s[i * n + j] * r;
            out[i * n + j] = col ? (float)(t * (double)col[j]) : (float)t;
        }
    }
}

/* repro_ops._exp64_core's polynomial and 2**n, for one float64 already in [-708, 709] */
static const double LOG2E = 1.4426950408889634, LN2_HI = 6.93147180369123816490e-01,
                    LN2_LO = 1.90821492927058770002e-10;

static inline double pow2_bits(double n) {
    int64_t bits = ((int64_t)n + 1023) << 52;
    double out; memcpy(&out, &bits, 8); return out;
}

static inline double exp64_core(double x, const double *coeffs) {
    double n = nearbyint(x * LOG2E);
    double r = (x - n * LN2_HI) - n * LN2_LO;
    double p = r * coeffs[0] + coeffs[1];
    for (int c = 2; c < 11; c++) p = p * r + coeffs[c];
    return p * pow2_bits(n);
}

/* repro_ops.softmax_xent on contiguous float32 logits (rows, classes) and int64 labels:
 * writes the float32 gradient (rows, classes) divided by total_rows, and per row the
 * float64 sumexp and target (target logit minus the row max); k = 53 - ceil(log2(classes))
 * sets unit_row_sum's quantum; e is scratch for one row (classes doubles). Returns 0, or -1
 * for a label out of range (nothing is written then). */
int tt_softmax_xent(const float *logits, const int64_t *labels, int64_t rows, int64_t classes,
                    double total_rows, int k, const double *coeffs, double *e, float *grad,
                    double *sumexp, double *target) {
    for (int64_t i = 0; i < rows; i++)
        if (labels[i] < 0 || labels[i] >= classes) return -1;
    const double up = ldexp(1.0, k), down = ldexp(1.0, -k);
    for (int64_t i = 0; i < rows; i++) {
        const float *z = logits + i * classes;
        double mx = (double)z[0];
        for (int64_t j = 1; j < classes; j++) {
            double v = (double)z[j];
            if (v != v || v > mx) mx = (mx != mx) ? mx : v;
        }
        double s = 0.0;
        for (int64_t j = 0; j < classes; j++) {
            double d = (double)z[j] - mx;
            double dc = d < -708.0 ? -708.0 : d;
            e[j] = exp64_core(dc, coeffs);
            s += nearbyint(e[j] * up);
        }
        s = (s + 0.0) * down;
        sumexp[i] = s;
        target[i] = (double)z[labels[i]] - mx;
        for (int64_t j = 0; j < classes; j++) {
            double p = e[j] / s;
            if (j == labels[i]) p = p + -1.0;
            grad[i * classes + j] = (float)(p / total_rows);
        }
    }
    return 0;
}

/* repro_ops.power_scales for one float64 maximum: exponent-field arithmetic, NaN kept */
static inline void power_scales(double amax, int bits, double *up, double *down) {
    const double tiny = 0x1p-960;
    double m = amax < tiny ? tiny : amax;
    int64_t u; memcpy(&u, &m, 8);
    int64_t field = u & 0x7FF0000000000000LL, shift = (int64_t)(bits - 1) << 52;
    int64_t a = (2046LL << 52) + shift - field, b = field - shift;
    memcpy(up, &a, 8); memcpy(down, &b, 8);
}

/* ReproNet's weight- and bias-gradient column work for a one-slice batch, in one pass:
 * for G (rows, cols) and the forward's row scales sa (powers of two), G' = G * sa[:, None]
 * quantised per column with its own maxima (q64, down: what intgemm.quantize gives) and the
 * bias sums: float64 column sums of round(G * up_b) with up_b, down_b from the maxima of |G|
 * at bits_b (repro_ops.power_scales; +0.0 for a zero sum). cmax is scratch (2 * cols floats).
 * Returns 0. */
int tt_grad_columns(const float *g, int64_t rows, int64_t cols, const float *sa, int bits,
                    int bits_b, float *cmax, double *q64, float *down, double *sb, double *down_b) {
    const float lo = -(float)(1 << bits), hi = (float)((1 << bits) - 1);
    float *mgp = cmax, *mg = cmax + cols;
    for (int64_t j = 0; j < cols; j++) { mgp[j] = 0.0f; mg[j] = 0.0f; }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            float v = g[i * cols + j];
            mgp[j] = amax_step(mgp[j], v * sa[i]);
            mg[j] = amax_step(mg[j], v);
        }
    for (int64_t j = 0; j < cols; j++) {
        float up;
        pow2_scales(mgp[j], bits, &up, &down[j]);
        mgp[j] = up;
        power_scales((double)mg[j], bits_b, &sb[j], &down_b[j]);  /* sb holds the scale until the sums */
    }
    /* the column sums row by row (vectorised across columns): integers below 2**53, exact
     * in any order */
    double *upb = q64;  /* the first row of q64 as scratch for the scales (none: no sums) */
    for (int64_t j = 0; j < cols; j++) { if (rows > 0) upb[j] = sb[j]; sb[j] = 0.0; }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) sb[j] += nearbyint((double)g[i * cols + j] * upb[j]);
    for (int64_t j = 0; j < cols; j++) sb[j] = sb[j] + 0.0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            q64[i * cols + j] = (double)quantize_one(g[i * cols + j] * sa[i], mgp[j], lo, hi);
    return 0;
}

/* ReproNet._im2col on a contiguous (b, h, w, c) float32 map: patches (b*h*w, c*k*k) in
 * Conv2d's feature order (c, kh, kw), zero ('same') padding. Data movement only. */
void tt_im2col(const float *a, int64_t b, int64_t h, int64_t w, int64_t c, int64_t k, float *out) {
    const int64_t p = k / 2, kk = k * k;
    for (int64_t n = 0; n < b; n++)
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++) {
                float *row = out + ((n * h + y) * w + x) * c * kk;
                for (int64_t ch = 0; ch < c; ch++)
                    for (int64_t i = 0; i < k; i++)
                        for (int64_t j = 0; j < k; j++) {
                            int64_t yy = y + i - p, xx = x + j - p;
                            row[ch * kk + i * k + j] = (yy >= 0 && yy < h && xx >= 0 && xx < w)
                                ? a[((n * h + yy) * w + xx) * c + ch] : 0.0f;
                        }
            }
}

/* ReproNet._col2im: the adjoint, each output the sum from +0.0 of its patch gradients in
 * the eager route's order (kernel offset i, then j). out is (b, h, w, c), contiguous. */
void tt_col2im(const float *d, int64_t b, int64_t h, int64_t w, int64_t c, int64_t k, float *out) {
    const int64_t p = k / 2, kk = k * k;
    for (int64_t n = 0; n < b; n++)
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++)
                for (int64_t ch = 0; ch < c; ch++) {
                    float acc = 0.0f;
                    for (int64_t i = 0; i < k; i++)
                        for (int64_t j = 0; j < k; j++) {
                            int64_t yy = y + p - i, xx = x + p - j;
                            if (yy >= 0 && yy < h && xx >= 0 && xx < w)
                                acc += d[(((n * h + yy) * w + xx) * c + ch) * kk + i * k + j];
                        }
                    out[((n * h + y) * w + x) * c + ch] = acc;
                }
}

/* ReproNet._pool: 2x2 max pooling of a (b, h, w, c) map (h, w even) with NaN propagating,
 * and the float32 0/1 mask (b, h/2, w/2, c, 4) of the first maximal position (dh*2 + dw). */
void tt_pool(const float *a, int64_t b, int64_t h, int64_t w, int64_t c, float *out, float *mask) {
    const int64_t h2 = h / 2, w2 = w / 2, row = w * c;
    for (int64_t n = 0; n < b; n++)
        for (int64_t y = 0; y < h2; y++)
            for (int64_t x = 0; x < w2; x++) {
                const float *p0 = a + ((n * h + 2 * y) * w + 2 * x) * c;
                int64_t o = ((n * h2 + y) * w2 + x) * c;
                for (int64_t ch = 0; ch < c; ch++, o++) {
                    const float v[4] = {p0[ch], p0[c + ch], p0[row + ch], p0[row + c + ch]};
                    float m = v[0];
                    for (int t = 1; t < 4; t++)
                        if (m == m && (v[t] != v[t] || v[t] > m)) m = v[t];
                    out[o] = m;
                    int found = 0;
                    for (int t = 0; t < 4; t++) {
                        int hit = !found && v[t] == m;
                        mask[o * 4 + t] = hit ? 1.0f : 0.0f;
                        found |= hit;
                    }
                }
            }
}

/* ReproNet._unpool: the pooled gradient g (b, h2, w2, c) times the mask, + 0.0, put back
 * at each window's positions of a (b, 2*h2, 2*w2, c) map. */
void tt_unpool(const float *g, const float *mask, int64_t b, int64_t h2, int64_t w2, int64_t c, float *out) {
    const int64_t h = 2 * h2, w = 2 * w2;
    for (int64_t n = 0; n < b; n++)
        for (int64_t y = 0; y < h2; y++)
            for (int64_t x = 0; x < w2; x++)
                for (int64_t ch = 0; ch < c; ch++) {
                    int64_t o = ((n * h2 + y) * w2 + x) * c + ch;
                    for (int t = 0; t < 4; t++)
                        out[((n * h + 2 * y + t / 2) * w + 2 * x + t % 2) * c + ch] = g[o] * mask[o * 4 + t] + 0.0f;
                }
}
