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
 * vector path (AVX-512 VNNI) and the portable one give the same bits; the self-test runs both.
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

#define BMM_MR 4   /* rows of a tile */
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
    if (s->r < s->c) {  /* a transposed view: walk down its columns */
        for (int64_t j = 0; j < n; j++) {
            int16_t *dst = bp + (j / BMM_NR) * kp * BMM_NR + 2 * (j % BMM_NR);
            const int8_t *hi = base + j * s->c;
            for (int64_t c = 0; c < k; c++)
                dst[(c >> 1) * 2 * BMM_NR + (c & 1)] = (int16_t)(hi[c * s->r] * 128 + hi[c * s->r + s->p]);
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

/* S (mp x np int64, row-major) = A (mp x kp, int16 row-major) @ B packed in column panels of
 * BMM_NR: panel t holds, for each k pair, BMM_NR (k, k + 1) pairs of int16. mp is a multiple of
 * BMM_MR, np of BMM_NR, kp even. */
static void products_portable(const int16_t *a, const int16_t *bp, int64_t mp, int64_t kp, int64_t np,
                              int64_t *s) {
    memset(s, 0, sizeof(int64_t) * (size_t)(mp * np));
    for (int64_t t = 0; t < np / BMM_NR; t++) {
        const int16_t *panel = bp + t * kp * BMM_NR;
        for (int64_t i = 0; i < mp; i++) {
            int64_t *row = s + i * np + t * BMM_NR;
            for (int64_t k = 0; k < kp; k += 2) {
                const int32_t a0 = a[i * kp + k], a1 = a[i * kp + k + 1];
                const int16_t *pb = panel + k * BMM_NR;
                for (int64_t j = 0; j < BMM_NR; j++)
                    row[j] += (int64_t)a0 * pb[2 * j] + (int64_t)a1 * pb[2 * j + 1];
            }
        }
    }
}

#if TT_BMM_VNNI
static inline void widen_add(int64_t *dst, __m512i acc) {
    __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(acc));
    __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(acc, 1));
    _mm512_storeu_si512(dst, _mm512_add_epi64(_mm512_loadu_si512(dst), lo));
    _mm512_storeu_si512(dst + 8, _mm512_add_epi64(_mm512_loadu_si512(dst + 8), hi));
}

/* products_portable's sums, by vpdpwssd: each int32 lane adds a0 b0 + a1 b1 per k pair */
static void products_vnni(const int16_t *a, const int16_t *bp, int64_t mp, int64_t kp, int64_t np, int64_t *s) {
    memset(s, 0, sizeof(int64_t) * (size_t)(mp * np));
    const int64_t pairs = kp / 2;
    for (int64_t t = 0; t < np / BMM_NR; t++) {
        const int16_t *panel = bp + t * kp * BMM_NR;
        for (int64_t i = 0; i < mp; i += BMM_MR) {
            const int16_t *a0 = a + i * kp;
            for (int64_t k0 = 0; k0 < pairs; k0 += BMM_KB) {
                const int64_t k1 = k0 + BMM_KB < pairs ? k0 + BMM_KB : pairs;
                __m512i c00 = _mm512_setzero_si512(), c01 = _mm512_setzero_si512();
                __m512i c10 = _mm512_setzero_si512(), c11 = _mm512_setzero_si512();
                __m512i c20 = _mm512_setzero_si512(), c21 = _mm512_setzero_si512();
                __m512i c30 = _mm512_setzero_si512(), c31 = _mm512_setzero_si512();
                for (int64_t q = k0; q < k1; q++) {
                    const int16_t *pb = panel + q * 2 * BMM_NR;
                    const __m512i b0 = _mm512_loadu_si512(pb), b1 = _mm512_loadu_si512(pb + 32);
                    int32_t w;
                    memcpy(&w, a0 + 2 * q, 4);
                    __m512i x = _mm512_set1_epi32(w);
                    c00 = _mm512_dpwssd_epi32(c00, x, b0); c01 = _mm512_dpwssd_epi32(c01, x, b1);
                    memcpy(&w, a0 + kp + 2 * q, 4);
                    x = _mm512_set1_epi32(w);
                    c10 = _mm512_dpwssd_epi32(c10, x, b0); c11 = _mm512_dpwssd_epi32(c11, x, b1);
                    memcpy(&w, a0 + 2 * kp + 2 * q, 4);
                    x = _mm512_set1_epi32(w);
                    c20 = _mm512_dpwssd_epi32(c20, x, b0); c21 = _mm512_dpwssd_epi32(c21, x, b1);
                    memcpy(&w, a0 + 3 * kp + 2 * q, 4);
                    x = _mm512_set1_epi32(w);
                    c30 = _mm512_dpwssd_epi32(c30, x, b0); c31 = _mm512_dpwssd_epi32(c31, x, b1);
                }
                int64_t *o = s + i * np + t * BMM_NR;
                widen_add(o, c00); widen_add(o + 16, c01);
                widen_add(o + np, c10); widen_add(o + np + 16, c11);
                widen_add(o + 2 * np, c20); widen_add(o + 2 * np + 16, c21);
                widen_add(o + 3 * np, c30); widen_add(o + 3 * np + 16, c31);
            }
        }
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
    const int64_t kp = (k + 1) / 2 * 2;
    int failed = 0;
    #pragma omp parallel num_threads(nt) if (nt > 1 && nb > 1)
    {
        int16_t *a = malloc(sizeof(int16_t) * (size_t)(mp * kp + kp * np + 1));
        int64_t *s = malloc(sizeof(int64_t) * (size_t)(mp * np));
        if (!a || !s) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(static)
        for (int64_t b = 0; b < nb; b++) {
            if (!a || !s) continue;
            int16_t *bp = a + mp * kp;
            memset(a, 0, sizeof(int16_t) * (size_t)(mp * kp + kp * np));
            pack_left(left, &ls, b, m, k, kp, a);
            pack_right(right, &rsd, b, k, n, kp, bp);
#if TT_BMM_VNNI
            if (!portable) products_vnni(a, bp, mp, kp, np, s);
            else
#endif
                products_portable(a, bp, mp, kp, np, s);
            const float *cb = cs + b * n;
            for (int64_t i = 0; i < m; i++) {
                const double rv = (double)rs[b * m + i];
                const int64_t *row = s + i * np;
                float *o = out + (b * m + i) * n;
                for (int64_t j = 0; j < n; j++) o[j] = (float)((double)row[j] * rv * (double)cb[j]);
            }
        }
        free(a);
        free(s);
    }
    return failed ? -1 : 0;
}
