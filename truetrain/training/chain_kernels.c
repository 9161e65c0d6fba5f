/* Exact float64 chains of the transformer's repro ops, for CPUs (truetrain/training/native_chains.py).
 *
 * Each function computes what the eager torch ops of ops/elementwise.py and ops/attention.py
 * compute, bit for bit: GELU and its gradient (the project's erf table and exp), attention's
 * causal softmax and its gradient, and the batched quantising and rounding around attention's
 * exact products. Every operation is an IEEE-rounded + - * / or exact (scaling by powers of
 * two, round-to-nearest-even, data movement); the build forbids contraction and fast-math,
 * and the loader self-tests every kernel against its torch twin before use.
 *
 * Loops run over blocks of BLK values, one operation of the chain at a time, so that the
 * compiler vectorises them; rows [lo, hi) let the caller split one tensor across threads
 * (every value depends on its own row only, so the split does not change a bit).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define BLK 64

static const double LOG2E_C = 1.4426950408889634, LN2_HI_C = 6.93147180369123816490e-01,
                    LN2_LO_C = 1.90821492927058770002e-10;

/* repro_ops.exp64 of m values, in place: clamp, Cody-Waite, degree-10 polynomial, 2**n
 * from bits; below -708 gives 0, above 709 inf, NaN stays NaN */
static void exp_block(double *x, int64_t m, const double *coeffs) {
    for (int64_t j = 0; j < m; j++) {
        double v = x[j];
        double xc = v < -708.0 ? -708.0 : (v > 709.0 ? 709.0 : v);
        double n = nearbyint(xc * LOG2E_C);
        double r = (xc - n * LN2_HI_C) - n * LN2_LO_C;
        double p = r * coeffs[0] + coeffs[1];
        for (int c = 2; c < 11; c++) p = p * r + coeffs[c];
        int64_t bits = ((int64_t)n + 1023) << 52;
        double two;
        memcpy(&two, &bits, 8);
        double out = p * two;
        out = v < -708.0 ? 0.0 : out;
        out = v > 709.0 ? INFINITY : out;
        x[j] = v != v ? v : out;
    }
}

/* repro_special.erf64 of s * v[j] for m values: the Taylor row of the nearest table point
 * (step 1/16, `deg` + 1 coefficients a row), 1 from 6 on, odd, NaN kept */
static void erf_block(const double *v, double s, int64_t m, const double *table, int deg, double *y) {
    double h[BLK], a[BLK], p[BLK];
    int64_t idx[BLK];
    for (int64_t j = 0; j < m; j++) {
        a[j] = fabs(v[j] * s);
        double c = a[j] > 6.0 ? 6.0 : a[j];
        c = c != c ? 0.0 : c;
        double i = nearbyint(c * 16.0);
        h[j] = c - i * (1.0 / 16.0);
        idx[j] = (int64_t)i * (deg + 1);
    }
    if (deg == 7) {  /* the project's degree: each value's Horner steps in registers */
        int64_t j = 0;
#ifdef __AVX512F__
        /* 8 values at a time: their 8 table rows (8 coefficients each) loaded whole and
         * transposed, so lane v of c[k] is value v's coefficient k (vector gathers are slower
         * on Zen 4); then the same products and sums, lane by lane */
        const __m512i lo2 = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
        const __m512i hi2 = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
        const __m512i lo4 = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0);
        const __m512i hi4 = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
        for (; j + 8 <= m; j += 8) {
            __m512d r[8], t[8], c[8];
            for (int v = 0; v < 8; v++) r[v] = _mm512_loadu_pd(table + idx[j + v]);
            for (int v = 0; v < 8; v += 2) {  /* pairs: (r0[k], r1[k]) interleaved */
                t[v] = _mm512_unpacklo_pd(r[v], r[v + 1]);
                t[v + 1] = _mm512_unpackhi_pd(r[v], r[v + 1]);
            }
            /* t0 = r0/r1 at k 0,2,4,6; t1 = k 1,3,5,7; t2, t3 the same for r2/r3; ... */
            __m512d u[8];
            u[0] = _mm512_permutex2var_pd(t[0], lo2, t[2]); u[1] = _mm512_permutex2var_pd(t[1], lo2, t[3]);
            u[2] = _mm512_permutex2var_pd(t[0], hi2, t[2]); u[3] = _mm512_permutex2var_pd(t[1], hi2, t[3]);
            u[4] = _mm512_permutex2var_pd(t[4], lo2, t[6]); u[5] = _mm512_permutex2var_pd(t[5], lo2, t[7]);
            u[6] = _mm512_permutex2var_pd(t[4], hi2, t[6]); u[7] = _mm512_permutex2var_pd(t[5], hi2, t[7]);
            c[0] = _mm512_permutex2var_pd(u[0], lo4, u[4]); c[4] = _mm512_permutex2var_pd(u[0], hi4, u[4]);
            c[1] = _mm512_permutex2var_pd(u[1], lo4, u[5]); c[5] = _mm512_permutex2var_pd(u[1], hi4, u[5]);
            c[2] = _mm512_permutex2var_pd(u[2], lo4, u[6]); c[6] = _mm512_permutex2var_pd(u[2], hi4, u[6]);
            c[3] = _mm512_permutex2var_pd(u[3], lo4, u[7]); c[7] = _mm512_permutex2var_pd(u[3], hi4, u[7]);
            const __m512d hj = _mm512_loadu_pd(h + j);
            __m512d acc = c[7];
            for (int k = 6; k >= 0; k--) acc = _mm512_add_pd(_mm512_mul_pd(acc, hj), c[k]);
            _mm512_storeu_pd(p + j, acc);
        }
#endif
        for (; j < m; j++) {
            const double *row = table + idx[j], hj = h[j];
            double r = row[7];
            r = r * hj + row[6]; r = r * hj + row[5]; r = r * hj + row[4]; r = r * hj + row[3];
            r = r * hj + row[2]; r = r * hj + row[1]; r = r * hj + row[0];
            p[j] = r;
        }
    } else {
        for (int64_t j = 0; j < m; j++) p[j] = table[idx[j] + deg];
        for (int k = deg - 1; k >= 0; k--)
            for (int64_t j = 0; j < m; j++) p[j] = p[j] * h[j] + table[idx[j] + k];
    }
    for (int64_t j = 0; j < m; j++) {
        double x = v[j] * s;
        double r = a[j] >= 6.0 ? 1.0 : p[j];
        r = x != x ? x : r;
        y[j] = copysign(r, x);
    }
}

/* elementwise.gelu_forward for [lo:hi], float32(x * (0.5 * (1 + erf(x / sqrt 2)))), and the
 * slope its backward multiplies the gradient by, kept (float64 Phi(x) + x * phi(x), as
 * elementwise.gelu_backward forms it) */
void tt_gelu_slope(const float *x, int64_t lo, int64_t hi, const double *table, int deg, const double *coeffs,
                   double inv_sqrt2, double inv_sqrt_2pi, float *out, double *slope) {
    double v[BLK], e[BLK], q[BLK];
    for (int64_t i = lo; i < hi; i += BLK) {
        int64_t m = hi - i < BLK ? hi - i : BLK;
        for (int64_t j = 0; j < m; j++) {
            v[j] = (double)x[i + j];
            q[j] = -0.5 * (v[j] * v[j]);
        }
        erf_block(v, inv_sqrt2, m, table, deg, e);
        exp_block(q, m, coeffs);
        for (int64_t j = 0; j < m; j++) {
            double cdf = 0.5 * (1.0 + e[j]);
            out[i + j] = (float)(v[j] * cdf);
            slope[i + j] = cdf + v[j] * (q[j] * inv_sqrt_2pi);
        }
    }
}

/* float32(g * slope) for [lo:hi]: GELU's input gradient from the kept slope */
void tt_times_slope(const float *g, const double *slope, int64_t lo, int64_t hi, float *out) {
    for (int64_t i = lo; i < hi; i++) out[i] = (float)((double)g[i] * slope[i]);
}

/* repro_ops.tree_sum of buf[0:n] zero-padded to `width` (a power of two), pairwise */
static double tree_sum_row(double *buf, int64_t n, int64_t width) {
    for (int64_t j = n; j < width; j++) buf[j] = 0.0;
    /* ivdep: iteration j reads buf[2j], buf[2j + 1] and writes buf[j]; every value is read
     * before (or in the same vector step as) the later iteration that overwrites it, so
     * the vectorised loop forms the same pairs and the same sums */
    for (int64_t w = width; w > 1; w /= 2) {
        #pragma GCC ivdep
        for (int64_t j = 0; j < w / 2; j++) buf[j] = buf[2 * j] + buf[2 * j + 1];
    }
    return buf[0];
}

/* attention.softmax_causal for rows [lo, hi) of (N*T, T) scores: float64, the future
 * masked to -inf, exp64(z - row max), unit_row_sum's exact sum at quantum 2**-k, one
 * rounding of e / sum; e is scratch for one row (t doubles) */
void tt_softmax_causal(const float *s, int64_t lo, int64_t hi, int64_t t, int k, const double *coeffs,
                       double *e, float *out) {
    const double up = ldexp(1.0, k), down = ldexp(1.0, -k);
    for (int64_t r = lo; r < hi; r++) {
        const int64_t i = r % t, n = i + 1;  /* positions 0..i are seen */
        const float *z = s + r * t;
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; j++) {
            double v = (double)z[j];
            if (v != v || v > mx) mx = (mx != mx) ? mx : v;
        }
        for (int64_t j = 0; j < n; j++) e[j] = (double)z[j] - mx;
        exp_block(e, n, coeffs);
        double masked = -INFINITY - mx;  /* -inf, or NaN where the row max is NaN or -inf */
        exp_block(&masked, 1, coeffs);
        double sum = 0.0;
        for (int64_t j = 0; j < n; j++) sum += nearbyint(e[j] * up);
        sum += (double)(t - n) * nearbyint(masked * up);
        sum = (sum + 0.0) * down;
        float *o = out + r * t;
        for (int64_t j = 0; j < n; j++) o[j] = (float)(e[j] / sum);
        const float rest = (float)(masked / sum);
        for (int64_t j = n; j < t; j++) o[j] = rest;
    }
}

/* attention.softmax_backward for rows [lo, hi) of (rows, t): float32(p * (dp - tree_sum(dp * p)))
 * times the float32 scale; the row sum pairwise over the row zero-padded to `width` (a
 * power of two), as repro_ops.tree_sum; buf is scratch for one row (width doubles) */
void tt_softmax_backward(const float *p, const float *dp, int64_t lo, int64_t hi, int64_t t, int64_t width,
                         float scale, double *buf, float *out) {
    for (int64_t r = lo; r < hi; r++) {
        const float *pr = p + r * t, *dr = dp + r * t;
        for (int64_t j = 0; j < t; j++) buf[j] = (double)dr[j] * (double)pr[j];
        const double sum = tree_sum_row(buf, t, width);
        float *o = out + r * t;
        for (int64_t j = 0; j < t; j++) o[j] = (float)((double)pr[j] * ((double)dr[j] - sum)) * scale;
    }
}

/* ExactSum.finish of batched float64 sums (batch, m, n): float32(((s + 0) * row) * col) with
 * one row scale per (batch, row) and one column scale per (batch, column), powers of two */
void tt_finish_batched(const double *s, int64_t lo, int64_t hi, int64_t m, int64_t n, const float *row,
                       const float *col, float *out) {
    for (int64_t b = lo; b < hi; b++)
        for (int64_t i = 0; i < m; i++) {
            const double rs = (double)row[b * m + i];
            const double *si = s + (b * m + i) * n;
            const float *cb = col + b * n;
            float *o = out + (b * m + i) * n;
            for (int64_t j = 0; j < n; j++) o[j] = (float)(((si[j] + 0.0) * rs) * (double)cb[j]);
        }
}

int tt_quantize(const float *x, int64_t rows, int64_t cols, int dim, int bits, const float *amax, double *q64,
                float *down);

/* tt_quantize (own maxima) of batches [lo, hi) of a contiguous (batch, rows, cols) x: one
 * scale per row (dim 1) or per column (dim 0) of each batch. Returns 0, or -1 when
 * scratch memory is short. */
int tt_quantize_batched(const float *x, int64_t lo, int64_t hi, int64_t rows, int64_t cols, int dim, int bits,
                        double *q64, float *down) {
    const int64_t per = dim == 1 ? rows : cols;
    for (int64_t b = lo; b < hi; b++)
        if (tt_quantize(x + b * rows * cols, rows, cols, dim, bits, NULL, q64 + b * rows * cols, down + b * per))
            return -1;
    return 0;
}

/* repro_ops.sqrt64: x = m * 4**k exactly, the correctly rounded float32 root of float32(m),
 * two Newton steps in float64, times 2**k; zeros keep their sign, NaN for x < 0 */
static double sqrt64(double x) {
    if (x != x || x < 0.0) return NAN;
    if (x == 0.0 || x == INFINITY) return x;
    int e;
    double mant = frexp(x, &e);
    const int odd = e % 2 != 0;
    const double m = odd ? mant * 2.0 : mant;
    const int64_t half = (odd ? e - 1 : e) / 2;
    double y = (double)(float)sqrt((double)(float)m);
    y = (y + m / y) * 0.5;
    y = (y + m / y) * 0.5;
    int64_t bits = (half + 1023) << 52;
    double two;
    memcpy(&two, &bits, 8);
    return y * two;
}

/* elementwise.ln_forward for rows [lo, hi) of (rows, n): float32 y, float64 xhat and rstd;
 * buf is scratch for one row (width doubles) */
void tt_ln_forward(const float *x, int64_t lo, int64_t hi, int64_t n, int64_t width, const float *w,
                   const float *b, double eps, double *buf, float *y, double *xhat, double *rstd) {
    const double dn = (double)n;
    for (int64_t r = lo; r < hi; r++) {
        const float *xr = x + r * n;
        double *xh = xhat + r * n;
        for (int64_t j = 0; j < n; j++) buf[j] = (double)xr[j];
        const double mean = tree_sum_row(buf, n, width) / dn;
        for (int64_t j = 0; j < n; j++) xh[j] = (double)xr[j] - mean;
        for (int64_t j = 0; j < n; j++) buf[j] = xh[j] * xh[j];
        const double rs = 1.0 / sqrt64(tree_sum_row(buf, n, width) / dn + eps);
        rstd[r] = rs;
        for (int64_t j = 0; j < n; j++) {
            xh[j] = xh[j] * rs;
            y[r * n + j] = (float)(xh[j] * (double)w[j] + (double)b[j]);
        }
    }
}

/* elementwise.ln_backward for rows [lo, hi): float32 dx and g * xhat; buf is scratch for
 * two rows (2 * width doubles) */
void tt_ln_backward(const float *g, const double *xhat, const double *rstd, const float *w, int64_t lo, int64_t hi,
                    int64_t n, int64_t width, double *buf, float *dx, float *gx) {
    const double dn = (double)n;
    double *d = buf + width;
    for (int64_t r = lo; r < hi; r++) {
        const float *gr = g + r * n;
        const double *xh = xhat + r * n;
        for (int64_t j = 0; j < n; j++) d[j] = (double)gr[j] * (double)w[j];
        for (int64_t j = 0; j < n; j++) buf[j] = d[j];
        const double m1 = tree_sum_row(buf, n, width) / dn;
        for (int64_t j = 0; j < n; j++) buf[j] = d[j] * xh[j];
        const double m2 = tree_sum_row(buf, n, width) / dn;
        for (int64_t j = 0; j < n; j++) {
            dx[r * n + j] = (float)(((d[j] - m1) - xh[j] * m2) * rstd[r]);
            gx[r * n + j] = (float)((double)gr[j] * xh[j]);
        }
    }
}

/* The chains above split over `nt` OpenMP threads (torch's thread count; torch's own libgomp),
 * in chunks of rows or values: each value depends on its own row only, so no bit changes.
 * Each thread has its own scratch row. Return 0, or -1 when scratch memory is short. */
#define CHUNK(total, per) (((total) + (per) - 1) / (per))

void tt_gelu_slope_mt(const float *x, int64_t n, const double *table, int deg, const double *coeffs,
                      double inv_sqrt2, double inv_sqrt_2pi, float *out, double *slope, int nt) {
    const int64_t per = 16 * BLK;
    #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && n > per)
    for (int64_t c = 0; c < CHUNK(n, per); c++)
        tt_gelu_slope(x, c * per, (c + 1) * per < n ? (c + 1) * per : n, table, deg, coeffs, inv_sqrt2,
                      inv_sqrt_2pi, out, slope);
}

void tt_times_slope_mt(const float *g, const double *slope, int64_t n, float *out, int nt) {
    const int64_t per = 64 * BLK;
    #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && n > per)
    for (int64_t c = 0; c < CHUNK(n, per); c++)
        tt_times_slope(g, slope, c * per, (c + 1) * per < n ? (c + 1) * per : n, out);
}

/* run fn(args, r, scratch) for rows [0, rows) over nt threads, each with its own scratch of
 * `len` doubles */
typedef void (*row_fn)(const void *args, int64_t r, double *scratch);

static int rows_mt(row_fn fn, const void *args, int64_t rows, int64_t len, int nt) {
    int failed = 0;
    #pragma omp parallel num_threads(nt) if (nt > 1 && rows > 1)
    {
        double *scratch = malloc(sizeof(double) * (size_t)(len > 0 ? len : 1));
        if (!scratch) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            if (scratch) fn(args, r, scratch);
        free(scratch);
    }
    return failed ? -1 : 0;
}

struct softmax_args { const float *s, *dp; int64_t t, width; int k; float scale; const double *coeffs; float *out; };

static void softmax_row(const void *a, int64_t r, double *e) {
    const struct softmax_args *x = a;
    tt_softmax_causal(x->s, r, r + 1, x->t, x->k, x->coeffs, e, x->out);
}

static void softmax_backward_row(const void *a, int64_t r, double *e) {
    const struct softmax_args *x = a;
    tt_softmax_backward(x->s, x->dp, r, r + 1, x->t, x->width, x->scale, e, x->out);
}

int tt_softmax_causal_mt(const float *s, int64_t rows, int64_t t, int k, const double *coeffs, float *out, int nt) {
    const struct softmax_args a = {s, NULL, t, 0, k, 0.0f, coeffs, out};
    return rows_mt(softmax_row, &a, rows, t, nt);
}

int tt_softmax_backward_mt(const float *p, const float *dp, int64_t rows, int64_t t, int64_t width, float scale,
                           float *out, int nt) {
    const struct softmax_args a = {p, dp, t, width, 0, scale, NULL, out};
    return rows_mt(softmax_backward_row, &a, rows, width, nt);
}

struct ln_args {
    const float *x, *w, *b; const double *xhat, *rstd; int64_t n, width; double eps;
    float *y, *dx; double *xhat_out, *rstd_out;
};

static void ln_forward_row(const void *a, int64_t r, double *buf) {
    const struct ln_args *v = a;
    tt_ln_forward(v->x, r, r + 1, v->n, v->width, v->w, v->b, v->eps, buf, v->y, v->xhat_out, v->rstd_out);
}

static void ln_backward_row(const void *a, int64_t r, double *buf) {
    const struct ln_args *v = a;
    tt_ln_backward(v->x, v->xhat, v->rstd, v->w, r, r + 1, v->n, v->width, buf, v->dx, v->y);
}

int tt_ln_forward_mt(const float *x, int64_t rows, int64_t n, int64_t width, const float *w, const float *b,
                     double eps, float *y, double *xhat, double *rstd, int nt) {
    const struct ln_args a = {x, w, b, NULL, NULL, n, width, eps, y, NULL, xhat, rstd};
    return rows_mt(ln_forward_row, &a, rows, width, nt);
}

/* (g, ..., dx, gx): g rides in x, gx in y */
int tt_ln_backward_mt(const float *g, const double *xhat, const double *rstd, const float *w, int64_t rows,
                      int64_t n, int64_t width, float *dx, float *gx, int nt) {
    const struct ln_args a = {g, w, NULL, xhat, rstd, n, width, 0.0, gx, dx, NULL, NULL};
    return rows_mt(ln_backward_row, &a, rows, 2 * width, nt);
}
