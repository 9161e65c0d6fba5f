/* Attention's batched exact products in one call (truetrain/training/native_planes.py).
 *
 * native_planes.bmm_exact quantises both operands to the int8 planes of the 2-limb route
 * (the digits hi, lo of q = 128 hi + lo, and hi + lo), takes one int8 product per sequence
 * and plane, and combines the three with one rounding (tt_combine). This kernel takes the
 * same planes and gives the same float32 bits in one call: it rebuilds each q (|q| <= 2**13)
 * as an int16, forms the exact integer sums S = sum_k qa qb in int64 (int16 x int16 products
 * summed in int32 lanes for at most 16 terms, |partial| < 2**31, then widened), and rounds
 * float32(double(S) * rs[i] * cs[j]) as tt_combine does. tt_combine's Karatsuba sum
 * (p0 2**14 + p1 + (m01 - p0 - p1) 2**7) is S exactly in float64 for k <= 2**16, the caller's
 * bound, so the rounded values are the same. Integer sums are exact in any order, so the
 * vector path (AVX-512 VNNI) and the portable one give the same bits (the self-test runs
 * both), and k pairs where a tile of rows is all zero (a causal mask's) are skipped.
 *
 * Sequences are split over `nt` OpenMP threads (torch's thread count): a sequence's output
 * depends on that sequence only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>
#define TT_BMM_VNNI 1
#else
#define TT_BMM_VNNI 0
#endif

#define BMM_MR 8   /* rows of a tile (tile_vnni names each) */
#define BMM_NR 32  /* columns of a tile: two vectors of 16 int32 lanes */
#define BMM_KB 15  /* pairs of k summed in int32 before widening: 30 products of at most 2**26 each */

/* strides in elements of a planes view (batch, plane, row, col) */
typedef struct { int64_t b, p, r, c; } planes_strides;

/* rows of the left operand of sequence b as int16 (m x kp, row-major; the padding stays 0) */
static void pack_left(const int8_t *x, const planes_strides *s, int64_t b, int64_t m, int64_t k, int64_t kp,
                      int16_t *a) {
    const int8_t *base = x + b * s->b;
    if (s->r <= s->c) {  /* a transposed view: walk down its columns */
        for (int64_t c = 0; c < k; c++) {
            const int8_t *hi = base + c * s->c;
            for (int64_t i = 0; i < m; i++) a[i * kp + c] = (int16_t)(hi[i * s->r] * 128 + hi[i * s->r + s->p]);
        }
        return;
    }
    for (int64_t i = 0; i < m; i++) {
        const int8_t *hi = base + i * s->r;
        for (int64_t c = 0; c < k; c++) a[i * kp + c] = (int16_t)(hi[c * s->c] * 128 + hi[c * s->c + s->p]);
    }
}

/* the right operand of sequence b in the column panels of the products (the padding stays 0) */
static void pack_right(const int8_t *x, const planes_strides *s, int64_t b, int64_t k, int64_t n, int64_t kp,
                       int16_t *bp) {
    const int8_t *base = x + b * s->b;
    if (s->r < s->c) {  /* a transposed view: walk down its columns, a k pair at a time */
        for (int64_t j = 0; j < n; j++) {
            int16_t *dst = bp + (j / BMM_NR) * kp * BMM_NR + 2 * (j % BMM_NR);
            const int8_t *hi = base + j * s->c, *lo = hi + s->p;
            int64_t c = 0;
            for (; c + 1 < k; c += 2) {
                const int16_t v0 = (int16_t)(hi[c * s->r] * 128 + lo[c * s->r]);
                const int16_t v1 = (int16_t)(hi[(c + 1) * s->r] * 128 + lo[(c + 1) * s->r]);
                dst[c * BMM_NR] = v0;
                dst[c * BMM_NR + 1] = v1;
            }
            if (c < k) dst[c * BMM_NR] = (int16_t)(hi[c * s->r] * 128 + lo[c * s->r]);
        }
        return;
    }
    for (int64_t c = 0; c < k; c++) {
        int16_t *pair = bp + (c >> 1) * 2 * BMM_NR + (c & 1);
        const int8_t *hi = base + c * s->r;
        for (int64_t t = 0; t * BMM_NR < n; t++) {
            const int64_t j1 = (t + 1) * BMM_NR < n ? (t + 1) * BMM_NR : n;
            int16_t *dst = pair + t * kp * BMM_NR - 2 * t * BMM_NR;
            for (int64_t j = t * BMM_NR; j < j1; j++) dst[2 * j] = (int16_t)(hi[j * s->c] * 128 + hi[j * s->c + s->p]);
        }
    }
}

/* the k pairs [first, last) outside which every row of each tile of BMM_MR packed rows is
 * zero (a causal mask's zeros): their products add nothing to the exact sums, so they are
 * skipped; an all-zero tile gets an empty range */
static void nonzero_pairs(const int16_t *a, int64_t mp, int64_t kp, int64_t *first, int64_t *last) {
    for (int64_t t = 0; t < mp / BMM_MR; t++) {
        int64_t lo = kp, hi = 0;
        for (int64_t r = 0; r < BMM_MR; r++) {
            const int16_t *row = a + (t * BMM_MR + r) * kp;
            int64_t c = 0;
            while (c < lo && row[c] == 0) c++;
            lo = c < lo ? c : lo;
            int64_t e = kp;
            while (e > hi && row[e - 1] == 0) e--;
            hi = e > hi ? e : hi;
        }
        first[t] = lo / 2;
        last[t] = lo < hi ? (hi + 1) / 2 : lo / 2;
    }
}

/* acc (BMM_MR x BMM_NR) = the exact sums over k pairs [q0, q1) of BMM_MR packed rows a (kp
 * int16 each) and one column panel (for each k pair, BMM_NR (k, k + 1) pairs of int16) */
static void tile_portable(const int16_t *a, int64_t kp, const int16_t *panel, int64_t q0, int64_t q1,
                          int64_t acc[BMM_MR][BMM_NR]) {
    for (int r = 0; r < BMM_MR; r++) {
        for (int j = 0; j < BMM_NR; j++) acc[r][j] = 0;
        for (int64_t q = q0; q < q1; q++) {
            const int64_t a0 = a[r * kp + 2 * q], a1 = a[r * kp + 2 * q + 1];
            const int16_t *pb = panel + q * 2 * BMM_NR;
            for (int j = 0; j < BMM_NR; j++) acc[r][j] += a0 * pb[2 * j] + a1 * pb[2 * j + 1];
        }
    }
}

#if TT_BMM_VNNI
/* dst[0:16] = (first ? 0 : dst[0:16]) + the 16 int32 sums, widened */
static inline void widen_add(int64_t *dst, __m512i sums, int first) {
    __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(sums));
    __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(sums, 1));
    if (!first) {
        lo = _mm512_add_epi64(_mm512_loadu_si512(dst), lo);
        hi = _mm512_add_epi64(_mm512_loadu_si512(dst + 8), hi);
    }
    _mm512_storeu_si512(dst, lo);
    _mm512_storeu_si512(dst + 8, hi);
}

/* tile_portable's sums by vpdpwssd (each int32 lane adds a0 b0 + a1 b1 per k pair), widened
 * to int64 every BMM_KB pairs */
static void tile_vnni(const int16_t *a, int64_t kp, const int16_t *panel, int64_t q0, int64_t q1,
                      int64_t acc[BMM_MR][BMM_NR]) {
    if (q0 >= q1) {
        memset(acc, 0, sizeof(int64_t) * BMM_MR * BMM_NR);
        return;
    }
    for (int64_t k0 = q0; k0 < q1; k0 += BMM_KB) {
        const int first = k0 == q0;
        const int64_t k1 = k0 + BMM_KB < q1 ? k0 + BMM_KB : q1;
        __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
                c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
        for (int64_t q = k0; q < k1; q++) {
            const int16_t *pb = panel + q * 2 * BMM_NR, *aq = a + 2 * q;
            const __m512i b0 = _mm512_loadu_si512(pb), b1 = _mm512_loadu_si512(pb + 32);
            __m512i x;
#define TT_ROW(r, lo, hi)                                                              \
            { int32_t w; memcpy(&w, aq + (r) * kp, 4); x = _mm512_set1_epi32(w); \
              lo = _mm512_dpwssd_epi32(lo, x, b0); hi = _mm512_dpwssd_epi32(hi, x, b1); }
            TT_ROW(0, c00, c01) TT_ROW(1, c10, c11) TT_ROW(2, c20, c21) TT_ROW(3, c30, c31)
            TT_ROW(4, c40, c41) TT_ROW(5, c50, c51) TT_ROW(6, c60, c61) TT_ROW(7, c70, c71)
#undef TT_ROW
        }
        widen_add(acc[0], c00, first); widen_add(acc[0] + 16, c01, first);
        widen_add(acc[1], c10, first); widen_add(acc[1] + 16, c11, first);
        widen_add(acc[2], c20, first); widen_add(acc[2] + 16, c21, first);
        widen_add(acc[3], c30, first); widen_add(acc[3] + 16, c31, first);
        widen_add(acc[4], c40, first); widen_add(acc[4] + 16, c41, first);
        widen_add(acc[5], c50, first); widen_add(acc[5] + 16, c51, first);
        widen_add(acc[6], c60, first); widen_add(acc[6] + 16, c61, first);
        widen_add(acc[7], c70, first); widen_add(acc[7] + 16, c71, first);
    }
}
#endif

/* Whether this build has the vector path (the self-test then checks both). */
int tt_bmm_vector_path(void) { return TT_BMM_VNNI; }

/* float32 out (nb, m, n) = the 2-limb route's rounding of the exact products of left planes
 * (nb, P, m, k) and right planes (nb, P, k, n), views with the given element strides (only
 * planes 0 and 1, the digits, are read), row scales rs (nb, m) and column scales cs (nb, n),
 * float32 powers of two or NaN. portable: skip the vector path. Returns 0, or -1 when scratch
 * memory is short. */
int tt_bmm_planes2(const int8_t *left, int64_t lb, int64_t lp, int64_t lr, int64_t lc, const int8_t *right,
                   int64_t rb, int64_t rp, int64_t rr, int64_t rc, int64_t nb, int64_t m, int64_t k, int64_t n,
                   const float *rs, const float *cs, float *out, int portable, int nt) {
    const planes_strides ls = {lb, lp, lr, lc}, rsd = {rb, rp, rr, rc};
    const int64_t mp = (m + BMM_MR - 1) / BMM_MR * BMM_MR, np = (n + BMM_NR - 1) / BMM_NR * BMM_NR;
    const int64_t kp = (k + 1) / 2 * 2, tiles = mp / BMM_MR;
    int failed = 0;
    #pragma omp parallel num_threads(nt) if (nt > 1 && nb > 1)
    {
        int16_t *a = malloc(sizeof(int16_t) * (size_t)(mp * kp + kp * np) + sizeof(int64_t) * (size_t)(2 * tiles));
        if (!a) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(static)
        for (int64_t b = 0; b < nb; b++) {
            if (!a) continue;
            int16_t *bp = a + mp * kp;
            int64_t *first = (int64_t *)(bp + kp * np), *last = first + tiles;
            if (mp != m || kp != k || np != n)  /* the padding */
                memset(a, 0, sizeof(int16_t) * (size_t)(mp * kp + kp * np));
            pack_left(left, &ls, b, m, k, kp, a);
            pack_right(right, &rsd, b, k, n, kp, bp);
            nonzero_pairs(a, mp, kp, first, last);
            const float *cb = cs + b * n;
            for (int64_t t = 0; t < tiles; t++) {
                const int64_t i0 = t * BMM_MR, rows = m - i0 < BMM_MR ? m - i0 : BMM_MR;
                for (int64_t j0 = 0; j0 < np; j0 += BMM_NR) {
                    int64_t acc[BMM_MR][BMM_NR];
                    const int16_t *panel = bp + j0 * kp;
#if TT_BMM_VNNI
                    if (!portable) tile_vnni(a + i0 * kp, kp, panel, first[t], last[t], acc);
                    else
#endif
                        tile_portable(a + i0 * kp, kp, panel, first[t], last[t], acc);
                    const int64_t cols = n - j0 < BMM_NR ? n - j0 : BMM_NR;
                    for (int64_t r = 0; r < rows; r++) {
                        const double rv = (double)rs[b * m + i0 + r];
                        float *o = out + (b * m + i0 + r) * n + j0;
                        for (int64_t j = 0; j < cols; j++) o[j] = (float)((double)acc[r][j] * rv * (double)cb[j0 + j]);
                    }
                }
            }
        }
        free(a);
    }
    return failed ? -1 : 0;
}
