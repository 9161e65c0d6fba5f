/* A small classifier's repro gradients in one call (truetrain/training/native_net.py).
 *
 * On the digits models every tensor is a few thousand elements and a step's time went to
 * Python and dispatch: autograd nodes, weight quantising, a dozen small torch calls per
 * layer. Here one call runs the whole of what ops.conv, ops.linear, ops.loss and GradBook
 * do for a batch in one piece on the small C route, by calling the same kernels in the same
 * order with the same operands:
 *
 *   forward, each conv layer: the map's patches (tt_im2col), then as a dense layer with a
 *     ReLU, then 2x2 max pooling (tt_pool); the map flattened in (C, H, W) order;
 *   each dense layer j: W quantised per row (tt_quantize, as intgemm.quantize(W.T, 0)),
 *     tt_small_linear (x quantised per row, exact product, rounding, + bias, ReLU but on
 *     the last layer);
 *   loss: tt_softmax_xent on the logits;
 *   backward, last layer first: the gradient times the layer's ReLU mask + 0.0
 *     (intgemm_fused._apply_mask), tt_small_weight_grad (dW, db, each rounded once), then,
 *     but for the first layer, the input gradient: tt_small_linear of the gradient and W
 *     quantised per column (intgemm.quantize(W, 0)), no bias; through a conv layer's
 *     pooling and patches by tt_unpool and tt_col2im.
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
void tt_im2col(const float *a, int64_t b, int64_t h, int64_t w, int64_t c, int64_t k, float *out);
void tt_col2im(const float *d, int64_t b, int64_t h, int64_t w, int64_t c, int64_t k, float *out);
void tt_pool(const float *a, int64_t b, int64_t h, int64_t w, int64_t c, float *out, float *mask);
void tt_unpool(const float *g, const float *mask, int64_t b, int64_t h2, int64_t w2, int64_t c, float *out);

#define MAX_LAYERS 64

static int64_t panels(int64_t k, int64_t n) { return k * ((n + 15) / 16) * 16; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* One product layer (a conv layer's patches or a dense layer): rows m by k inputs to n
 * outputs, its ReLU, and for a conv layer the map (h, w, c) it reads and its pooling. */
typedef struct {
    int64_t m, k, n, h, w, c, conv, relu, bits_b;
    double *wq, *xq;
    float *wdown, *xdown, *act, *mask, *cols, *pooled, *pmask;
} layer;

/* A bump allocator over the caller's scratch (NULL bases: sizes only). */
typedef struct { double *d; float *f; int64_t nd, nf; } arena;
static double *take_d(arena *A, int64_t n) { double *p = A->d ? A->d + A->nd : 0; A->nd += n; return p; }
static float *take_f(arena *A, int64_t n) { float *p = A->f ? A->f + A->nf : 0; A->nf += n; return p; }

/* The net's layers from plan = [convs, dense, kernel, m, (c, h, w, o) per conv, widths
 * (dense + 1), bits_b per layer], their buffers taken from A; then work space (doubles),
 * two gradient buffers and the small buffers. Returns the number of layers, or -1. */
static int lay_out(const int64_t *plan, arena *A, layer *L, double **work, float **g, float **small) {
    const int64_t convs = plan[0], dense = plan[1], k = plan[2], m = plan[3];
    const int64_t *conv = plan + 4, *widths = conv + 4 * convs, *bits_b = widths + dense + 1;
    if (convs < 0 || dense < 1 || convs + dense > MAX_LAYERS) return -1;
    int64_t wk = 0, gmax = 0, smax = m;
    for (int64_t j = 0; j < convs + dense; j++) {
        layer *l = L + j;
        const int is_conv = j < convs;
        const int64_t *s = conv + 4 * j;
        l->conv = is_conv; l->bits_b = bits_b[j];
        l->h = is_conv ? s[1] : 1; l->w = is_conv ? s[2] : 1; l->c = is_conv ? s[0] : 0;
        l->m = m * l->h * l->w;
        l->k = is_conv ? s[0] * k * k : widths[j - convs];
        l->n = is_conv ? s[3] : widths[j - convs + 1];
        l->relu = j < convs + dense - 1;
        const int64_t mm = l->m, kk = l->k, n = l->n;
        l->wq = take_d(A, n * kk); l->xq = take_d(A, mm * kk);
        l->wdown = take_f(A, max64(n, kk)); l->xdown = take_f(A, mm);
        l->act = take_f(A, mm * n); l->mask = take_f(A, mm * n);
        l->cols = is_conv ? take_f(A, mm * kk) : 0;
        l->pooled = is_conv ? take_f(A, mm * n / 4) : 0; l->pmask = is_conv ? take_f(A, mm * n) : 0;
        wk = max64(wk, mm * n + panels(kk, n));                      /* forward */
        wk = max64(wk, mm * n + 2 * kk * n + panels(mm, n) + 2 * n);  /* weight gradient */
        wk = max64(wk, mm * n + mm * kk + panels(n, kk));             /* input gradient */
        gmax = max64(gmax, mm * max64(n, kk));
        smax = max64(smax, max64(mm, 3 * max64(n, kk)));
    }
    *work = take_d(A, wk);
    g[0] = take_f(A, gmax); g[1] = take_f(A, gmax);
    *small = take_f(A, smax);  /* an input gradient's row scales, or a weight gradient's column maxima and scales */
    return (int)(convs + dense);
}

/* The float64 and float32 scratch sizes of tt_net_grads for a plan (-1: a bad plan). */
int tt_net_scratch(const int64_t *plan, int64_t *doubles, int64_t *floats) {
    arena A = {0, 0, 0, 0};
    layer L[MAX_LAYERS];
    double *work;
    float *g[2], *small;
    if (lay_out(plan, &A, L, &work, g, &small) < 0) return -1;
    *doubles = A.nd; *floats = A.nf;
    return 0;
}

/* ops.repro_gradients of an ImageNet (see lay_out for the plan; bits_b per layer:
 * repro_ops.operand_bits of its rows) on a batch x (m, features; a sample in (C, H, W)
 * order) with int64 labels, in one piece: weights w[j] (n, k) and biases b[j] (n) float32
 * contiguous (convs first); bits the operand bits, xent_k and coeffs softmax_xent's. Writes
 * dw[j] (n, k), db[j] (n), and per row sumexp and target. Returns 0; -1: a bad plan or no
 * memory for a quantiser's scratch; -2: a label outside [0, classes) (nothing is done then). */
int tt_net_grads(const int64_t *plan, int bits, const float *x, const int64_t *labels, const float *const *w,
                 const float *const *b, int xent_k, const double *coeffs, double *dscratch, float *fscratch,
                 float *const *dw, float *const *db, double *sumexp, double *target) {
    arena A = {dscratch, fscratch, 0, 0};
    layer L[MAX_LAYERS];
    double *work;
    float *gb[2], *small;
    const int layers = lay_out(plan, &A, L, &work, gb, &small);
    const int64_t convs = plan[0], kernel = plan[2], m = plan[3];
    if (layers < 0) return -1;
    const int64_t classes = L[layers - 1].n;
    for (int64_t i = 0; i < m; i++)
        if (labels[i] < 0 || labels[i] >= classes) return -2;
    const float *in = x;
    for (int j = 0; j < layers; j++) {
        layer *l = L + j;
        if (l->conv) {
            const float *map = in;
            if (j == 0 && l->c > 1) {  /* the rows (C, H, W) as an (H, W, C) map */
                const int64_t hw = l->h * l->w;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t p = 0; p < hw; p++)
                        for (int64_t ch = 0; ch < l->c; ch++)
                            gb[0][(i * hw + p) * l->c + ch] = in[(i * l->c + ch) * hw + p];
                map = gb[0];
            }
            tt_im2col(map, m, l->h, l->w, l->c, kernel, l->cols);
            in = l->cols;
        }
        if (tt_quantize(w[j], l->n, l->k, 1, bits, 0, l->wq, l->wdown) != 0) return -1;
        if (tt_small_linear(in, l->m, l->k, l->n, bits, l->wq, 1, l->k, l->wdown, b[j], l->xq, l->xdown, work,
                            l->act, l->relu ? l->mask : 0) != 0)
            return -1;
        in = l->act;
        if (l->conv) {
            tt_pool(l->act, m, l->h, l->w, l->n, l->pooled, l->pmask);
            in = l->pooled;
            if (j == convs - 1) {  /* flattened in (C, H, W) order */
                const int64_t hw = l->h * l->w / 4, c = l->n;
                float *flat = gb[1];
                for (int64_t i = 0; i < m; i++)
                    for (int64_t p = 0; p < hw; p++)
                        for (int64_t ch = 0; ch < c; ch++) flat[(i * c + ch) * hw + p] = in[(i * hw + p) * c + ch];
                in = flat;
            }
        }
    }
    float *g = gb[0], *spare = gb[1];
    if (tt_softmax_xent(in, labels, m, classes, (double)m, xent_k, coeffs, work, g, sumexp, target) != 0)
        return -2;
    for (int j = layers - 1; j >= 0; j--) {
        layer *l = L + j;
        const int64_t mm = l->m, n = l->n, k = l->k;
        if (l->conv) {  /* g: the pooled map's gradient, (H/2, W/2, C) per row; flattened after the last conv */
            const int64_t hw = l->h * l->w / 4;
            if (j == convs - 1) {
                for (int64_t i = 0; i < m; i++)
                    for (int64_t p = 0; p < hw; p++)
                        for (int64_t ch = 0; ch < n; ch++) spare[(i * hw + p) * n + ch] = g[(i * n + ch) * hw + p];
                float *t = g; g = spare; spare = t;
            }
            tt_unpool(g, l->pmask, m, l->h / 2, l->w / 2, n, spare);
            float *t = g; g = spare; spare = t;
        }
        if (l->relu)
            for (int64_t i = 0; i < mm * n; i++) g[i] = g[i] * l->mask[i] + 0.0f;
        if (tt_small_weight_grad(g, mm, n, l->xdown, bits, (int)l->bits_b, l->xq, k, small, small + 2 * n, work,
                                 db[j], dw[j]) != 0)
            return -1;
        if (j == 0) break;
        /* the input gradient: W quantised per column (over its rows), into W's integers' place */
        if (tt_quantize(w[j], n, k, 0, bits, 0, l->wq, l->wdown) != 0) return -1;
        if (tt_small_linear(g, mm, n, k, bits, l->wq, k, 1, l->wdown, 0, work, small, work + mm * n,
                            l->conv ? l->cols : spare, 0) != 0)
            return -1;
        if (l->conv) {
            tt_col2im(l->cols, m, l->h, l->w, l->c, kernel, spare);
        }
        float *t = g; g = spare; spare = t;
    }
    return 0;
}
