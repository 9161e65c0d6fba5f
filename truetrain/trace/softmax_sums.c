/* The causal softmax's exact row sums, an application of their own in a step's program
 * (truetrain/trace/kinds_lm.py): the engine's tt_softmax_causal (chain_kernels.c, included
 * whole, so that its exp_block is the one compiled here with the engine's flags) up to its
 * sum, which is kept rather than divided by. kinds_lm.py checks it against the eager ops
 * (attention.softmax_causal's float64 exps and unit_row_sum) before using it. */
#include "chain_kernels.c"

struct sums_args { const float *s; int64_t t; int k; const double *coeffs; double *out; };

/* row r's sum, as tt_softmax_causal forms it (e: scratch for t doubles) */
static void row_sum(const void *a, int64_t r, double *e) {
    const struct sums_args *x = a;
    const int64_t t = x->t, i = r % t, n = i + 1; /* positions 0..i are seen */
    const float *z = x->s + r * t;
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        double v = (double)z[j];
        if (v != v || v > mx) mx = (mx != mx) ? mx : v;
    }
    for (int64_t j = 0; j < n; j++) e[j] = (double)z[j] - mx;
    exp_block(e, n, x->coeffs);
    double masked = -INFINITY - mx;
    exp_block(&masked, 1, x->coeffs);
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) sum += nearbyint(e[j] * ldexp(1.0, x->k));
    sum += (double)(t - n) * nearbyint(masked * ldexp(1.0, x->k));
    x->out[r] = (sum + 0.0) * ldexp(1.0, -x->k);
}

/* the row sums of (rows, t) scores into out (rows doubles), over nt threads (the engine's
 * rows_mt); -1 without memory */
int tt_softmax_row_sums(const float *s, int64_t rows, int64_t t, int k, const double *coeffs, double *out, int nt) {
    const struct sums_args a = {s, t, k, coeffs, out};
    return rows_mt(row_sum, &a, rows, t, nt);
}
