/* A small MLP's repro gradients in one call (truetrain/training/native_mlp.py).
 *
 * On the digits MLP every tensor is a few thousand elements and a step's time went to
 * Python and dispatch: autograd nodes, weight quantising, a dozen small torch calls per
 * layer. Here one call runs the whole of what ops.linear, ops.loss and GradBook do for a
 * batch in one piece on the small C route, by calling the same kernels in the same order
 * with the same operands:
 *
 *   forward, each layer j: W quantised per row (tt_quantize, as intgemm.quantize(W.T, 0)),
 *     tt_small_linear (x quantised per row, exact product, rounding, + bias, ReLU but on
 *     the last layer);
 *   loss: tt_softmax_xent on the logits;
 *   backward, last layer first: the gradient times the layer's ReLU mask + 0.0
 *     (intgemm_fused._apply_mask), tt_small_weight_grad (dW, db, each rounded once), then,
 *     but for the first layer, the input gradient: tt_small_linear of the gradient and W
 *     quantised per column (intgemm.quantize(W, 0)), no bias.
 *
 * So the bits are the small C route's (and hence every route's).
 */
#include <stdint.h>

int tt_quantize(const float *x, int64_t rows, int64_t cols, int dim, int bits, const float *amax, double *q64,
                float *down);
int tt_softmax_xent(const float *logits, const int64_t *labels, int64_t rows, int64_t classes, double total_rows,
                    int k, const double *coeffs, double *e, float *grad, double *sumexp, double *target);
int tt_small_linear(const float *x, int64_t m, int64_t k, int64_t n, int bits, const double *w, int64_t swp,
                    int64_t swj, const float *wdown, const float *bias, double *xq, float *xdown, double *scratch,
                    float *y, float *mask);
int tt_small_weight_grad(const float *g, int64_t m, int64_t n, const float *sa, int bits, int bits_b,
                         const double *xq, int64_t k, float *cmax, float *down, double *scratch, float *db,
                         float *dw);

#define MAX_LAYERS 64

static int64_t panels(int64_t k, int64_t n) { return k * ((n + 15) / 16) * 16; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Where each layer's buffers lie in the caller's float64 and float32 scratch. */
typedef struct {
    double *wq[MAX_LAYERS], *xq[MAX_LAYERS], *work;
    float *wdown[MAX_LAYERS], *xdown[MAX_LAYERS], *act[MAX_LAYERS], *mask[MAX_LAYERS], *g[2], *small;
} layout;

/* Lays the buffers out from d and f (either may be NULL: sizes only); returns the doubles
 * and floats used in *nd and *nf. Per layer j (k = widths[j], n = widths[j + 1]): W's
 * integers (n * k; reused by the backward's per-column quantising), x's integers (m * k),
 * W's and x's scales, the output (m * n) and its ReLU mask; then shared work space. */
static void lay_out(int layers, const int64_t *widths, int64_t m, double *d, float *f, layout *L, int64_t *nd,
                    int64_t *nf) {
    int64_t od = 0, of = 0, work = 0, gmax = 0;
    for (int j = 0; j < layers; j++) {
        const int64_t k = widths[j], n = widths[j + 1];
        if (L) {
            L->wq[j] = d ? d + od : 0; L->xq[j] = d ? d + od + n * k : 0;
            L->wdown[j] = f ? f + of : 0; L->xdown[j] = f ? f + of + max64(n, k) : 0;
            L->act[j] = f ? f + of + max64(n, k) + m : 0; L->mask[j] = f ? f + of + max64(n, k) + m + m * n : 0;
        }
        od += n * k + m * k;
        of += max64(n, k) + m + 2 * m * n;
        work = max64(work, m * n + panels(k, n));                      /* forward */
        work = max64(work, m * n + 2 * k * n + panels(m, n) + 2 * n);  /* weight gradient */
        work = max64(work, m * n + m * k + panels(n, k));              /* input gradient */
        gmax = max64(gmax, m * max64(n, k));
    }
    if (L) {
        L->work = d ? d + od : 0;
        L->g[0] = f ? f + of : 0; L->g[1] = f ? f + of + gmax : 0; L->small = f ? f + of + 2 * gmax : 0;
    }
    int64_t wmax = 0;
    for (int j = 0; j <= layers; j++) wmax = max64(wmax, widths[j]);
    *nd = od + work;
    *nf = of + 2 * gmax + max64(m, 3 * wmax);  /* small: the input gradient's row scales, or a
                                                  weight gradient's column maxima and scales */
}

/* The float64 and float32 scratch sizes of tt_mlp_grads (-1: too many layers). */
int tt_mlp_scratch(int layers, const int64_t *widths, int64_t m, int64_t *doubles, int64_t *floats) {
    if (layers < 1 || layers > MAX_LAYERS) return -1;
    lay_out(layers, widths, m, 0, 0, 0, doubles, floats);
    return 0;
}

/* ops.repro_gradients of an MLP (Linear layers widths[0] -> ... -> widths[layers], ReLU
 * between) on a batch x (m, widths[0]) with int64 labels, in one piece: weights w[j]
 * (n, k) and biases b[j] (n) float32 contiguous; bits the operand bits, bits_b the bias
 * sums' (repro_ops.operand_bits(m, 0)), xent_k and coeffs softmax_xent's. Writes dw[j]
 * (n, k), db[j] (n), and per row sumexp and target. Returns 0; -1: no memory for a
 * quantiser's scratch; -2: a label outside [0, classes) (nothing else is done then). */
int tt_mlp_grads(int layers, const int64_t *widths, int64_t m, int bits, int bits_b, const float *x,
                 const int64_t *labels, const float *const *w, const float *const *b, double total_rows, int xent_k,
                 const double *coeffs, double *dscratch, float *fscratch, float *const *dw, float *const *db,
                 double *sumexp, double *target) {
    if (layers < 1 || layers > MAX_LAYERS) return -1;
    layout L;
    int64_t nd, nf;
    lay_out(layers, widths, m, dscratch, fscratch, &L, &nd, &nf);
    const int64_t classes = widths[layers];
    for (int64_t i = 0; i < m; i++)
        if (labels[i] < 0 || labels[i] >= classes) return -2;
    const float *in = x;
    for (int j = 0; j < layers; j++) {
        const int64_t k = widths[j], n = widths[j + 1];
        const int relu = j < layers - 1;
        if (tt_quantize(w[j], n, k, 1, bits, 0, L.wq[j], L.wdown[j]) != 0) return -1;
        if (tt_small_linear(in, m, k, n, bits, L.wq[j], 1, k, L.wdown[j], b[j], L.xq[j], L.xdown[j], L.work,
                            L.act[j], relu ? L.mask[j] : 0) != 0)
            return -1;
        in = L.act[j];
    }
    float *g = L.g[0], *spare = L.g[1];
    if (tt_softmax_xent(in, labels, m, classes, total_rows, xent_k, coeffs, L.work, g, sumexp, target) != 0)
        return -2;
    for (int j = layers - 1; j >= 0; j--) {
        const int64_t k = widths[j], n = widths[j + 1];
        if (j < layers - 1)
            for (int64_t i = 0; i < m * n; i++) g[i] = g[i] * L.mask[j][i] + 0.0f;
        if (tt_small_weight_grad(g, m, n, L.xdown[j], bits, bits_b, L.xq[j], k, L.small, L.small + 2 * n, L.work,
                                 db[j], dw[j]) != 0)
            return -1;
        if (j == 0) break;
        /* the input gradient: W quantised per column (over its rows), into W's integers' place */
        if (tt_quantize(w[j], n, k, 0, bits, 0, L.wq[j], L.wdown[j]) != 0) return -1;
        if (tt_small_linear(g, m, n, k, bits, L.wq[j], k, 1, L.wdown[j], 0, L.work, L.small, L.work + m * n,
                            spare, 0) != 0)
            return -1;
        float *t = g; g = spare; spare = t;
    }
    return 0;
}
