/* A small repro linear map in one call each way (truetrain/training/native_linear.py).
 *
 * On the digits models a linear map's tensors are a few thousand elements, so a step's
 * time goes to dispatch: quantise, product, rounding and bias were four torch calls or
 * more each way. Here each direction is one call: the exact float64 product of the
 * quantised integers (every product and partial sum an integer below 2**53, so exact in
 * any order, any vector width, any split over threads: the float64 route's values), then
 * the exact power-of-two scalings and the one rounding of ExactSum.finish, then the bias
 * in float32, as GemmEngine.matmul does them.
 */
#include <stdint.h>
#include <stdlib.h>

#include "exact_common.h"

int tt_quantize(const float *x, int64_t rows, int64_t cols, int dim, int bits,
                const float *amax, double *q64, float *down);
int tt_grad_columns(const float *g, int64_t rows, int64_t cols, const float *sa, int bits,
                    int bits_b, float *cmax, double *q64, float *down, double *sb, double *down_b);

typedef double v8d __attribute__((vector_size(64)));
typedef double v8du __attribute__((vector_size(64), aligned(8)));

/* Exact sums of products of float64 integers: every product and partial sum is an integer
 * below 2**53, so a fused multiply-add rounds nothing either and any order gives the same
 * values; contraction is allowed here (and only here) for speed. */
#define EXACT_FMA __attribute__((optimize("fp-contract=fast"))) static inline

/* One block of R rows (a0 + r * sai; a block of only ``rows`` repeats its last row, whose
 * extra sums are not stored) by V * 8 packed columns of bv, summed over k. */
EXACT_FMA void block(const double *a0, int64_t sai, int64_t rows, int64_t sap, const v8du *bv, int64_t k,
                     int R, int V, v8d *acc) {
    int64_t off[8];
    for (int r = 0; r < R; r++) off[r] = (r < rows ? r : rows - 1) * sai;
    for (int t = 0; t < R * V; t++) acc[t] = (v8d){0};
    for (int64_t p = 0; p < k; p++) {
        v8d bb[2];
        for (int v = 0; v < V; v++) bb[v] = bv[p * V + v];
        for (int r = 0; r < R; r++) {
            const double ar = a0[off[r] + p * sap];
            for (int v = 0; v < V; v++) acc[r * V + v] += ar * bb[v];
        }
    }
}

/* c (m, n) = a (m, k) @ b (k, n) for float64 integers whose partial sums are exact:
 * a[i, p] = a[i * sai + p * sap], b[p, j] = b[p * sbp + j * sbj]; c contiguous. bp is
 * scratch for k * ceil(n / 16) * 16 doubles (b in panels of 16 columns, or 8 when n <= 8,
 * zero-padded). Blocks of 8 rows by 16 columns (by 8 for narrow b): 16 (8) independent sums.
 * Sums start from +0.0, so a zero sum is +0.0 (as the float64 route's + 0.0 makes it). */
EXACT_FMA void exact_mm(const double *a, int64_t sai, int64_t sap, const double *b, int64_t sbp, int64_t sbj,
                     int64_t m, int64_t k, int64_t n, double *c, double *bp) {
    const int V = n <= 8 ? 1 : 2, R = 8, W = 8 * V;
    const int64_t nb = (n + W - 1) / W;
    for (int64_t jb = 0; jb < nb; jb++)
        for (int64_t p = 0; p < k; p++)
            for (int64_t jj = 0; jj < W; jj++) {
                int64_t j = jb * W + jj;
                bp[(jb * k + p) * W + jj] = j < n ? b[p * sbp + j * sbj] : 0.0;
            }
    const int64_t blocks = (m + R - 1) / R;
#pragma omp parallel for schedule(static) if (m * k * n >= (1 << 20))
    for (int64_t ib = 0; ib < blocks; ib++) {
        const int64_t i0 = ib * R, rows = m - i0 < R ? m - i0 : R;
        for (int64_t jb = 0; jb < nb; jb++) {
            const v8du *bv = (const v8du *)(bp + jb * k * W);
            v8d acc[16];
            if (V == 2) block(a + i0 * sai, sai, rows, sap, bv, k, 8, 2, acc);
            else block(a + i0 * sai, sai, rows, sap, bv, k, 8, 1, acc);
            for (int64_t r = 0; r < rows; r++) {
                const double *src = (const double *)&acc[r * V];
                for (int64_t jj = 0; jj < W && jb * W + jj < n; jj++) c[(i0 + r) * n + jb * W + jj] = src[jj];
            }
        }
    }
}

/* ExactSum.finish (row scale, factor 1, column scale; either may be missing) and then
 * + bias in float32, when given: out[i, j] = float32(s * row[i] * col[j]) + bias[j]. With
 * a mask, then a ReLU as intgemm_fused._relu takes it: mask = (v > 0), out = v * mask + 0. */
static void finish_bias(const double *s, int64_t m, int64_t n, const float *row, const float *col,
                        const float *bias, float *out, float *mask) {
    for (int64_t i = 0; i < m; i++) {
        const double r = row ? (double)row[i] : 1.0;
        for (int64_t j = 0; j < n; j++) {
            double t = s[i * n + j] * r;
            float v = col ? (float)(t * (double)col[j]) : (float)t;
            if (bias) v = v + bias[j];
            if (mask) {
                float keep = v > 0.0f ? 1.0f : 0.0f;
                mask[i * n + j] = keep;
                v = v * keep + 0.0f;
            }
            out[i * n + j] = v;
        }
    }
}


/* GemmEngine.matmul(quantize(x, 1), w, bias) for float32 x (m, k) contiguous and a right
 * operand's integers w (k, n) (strides swp, swj) with column scales wdown (or NULL): y (m,
 * n) float32 (and its ReLU, with mask: see finish_bias), and x's integers xq (m, k) and
 * row scales xdown for the backward. scratch:
 * m * n + k * ceil(n / 16) * 16 doubles. Returns 0, or -1 when tt_quantize fails. */
int tt_small_linear(const float *x, int64_t m, int64_t k, int64_t n, int bits, const double *w, int64_t swp,
                    int64_t swj, const float *wdown, const float *bias, double *xq, float *xdown,
                    double *scratch, float *y, float *mask) {
    if (tt_quantize(x, m, k, 1, bits, NULL, xq, xdown) != 0) return -1;
    exact_mm(xq, k, 1, w, swp, swj, m, k, n, scratch, scratch + m * n);
    finish_bias(scratch, m, n, xdown, wdown, bias, y, mask);
    return 0;
}

/* GradBook.linear's one-slice C route, product included: g (m, n) the output gradient,
 * xq (m, k) the forward's integers with row scales sa. Writes the weight gradient dw (n,
 * k), rounded once (the transpose of what engine.matmul(qa.transposed(), g quantised)
 * gives), and the bias gradient db (n): the sums sb of tt_grad_columns times their scales
 * down_b, rounded once (as GradBook.result rounds a "columns" part). scratch: 2 * n floats
 * in cmax; m * n + k * n + m * ceil(n / 16) * 16 + k * n + 2 * n doubles, and down (n floats). */
int tt_small_weight_grad(const float *g, int64_t m, int64_t n, const float *sa, int bits, int bits_b,
                         const double *xq, int64_t k, float *cmax, float *down, double *scratch,
                         float *db, float *dw) {
    double *gq = scratch, *s = scratch + m * n, *sb = s + k * n + m * ((n + 15) / 16) * 16, *down_b = sb + n;
    float *dwt = (float *)(down_b + n);
    if (tt_grad_columns(g, m, n, sa, bits, bits_b, cmax, gq, down, sb, down_b) != 0) return -1;
    exact_mm(xq, 1, k, gq, n, 1, k, m, n, s, s + k * n);
    finish_bias(s, k, n, NULL, down, NULL, dwt, NULL);
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < n; j++) dw[j * k + i] = dwt[i * n + j];
    for (int64_t j = 0; j < n; j++) db[j] = (float)((sb[j] + 0.0) * down_b[j]);
    return 0;
}
