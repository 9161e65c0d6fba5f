/* Attention's batched exact products in one call (truetrain/training/native_planes.py).
 *
 * native_planes.bmm_exact at 2 limbs quantises both float32 operands (rows of the left, columns
 * of the right, each on its power-of-two scale, intgemm.quantize), splits each integer q
 * (|q| <= 2**13) into the int8 planes hi, lo, hi + lo (q = 128 hi + lo), takes one int8
 * product per sequence and plane, and combines the three with one rounding (tt_combine).
 * This kernel gives the same float32 bits in one call: it quantises as tt_quantize_planes
 * does (the same helpers; a row or column holding a NaN or inf gets the NaN scale whichever
 * NaN its maximum is, and its NaN values quantise to 0, as the planes hold them), keeps each
 * q as an int16, forms the exact integer sums S = sum_k qa qb in int64 (int16 x int16
 * products summed in int32 lanes for at most 30 terms, |partial| < 2**31, then widened),
 * and rounds float32(double(S) * rs[i] * cs[j]) as tt_combine does. tt_combine's Karatsuba
 * sum (p0 2**14 + p1 + (m01 - p0 - p1) 2**7) is S exactly in float64 for k <= 2**16, the
 * caller's bound, so the rounded values are the same. Integer sums are exact in any order,
 * so the vector path (AVX-512 VNNI) and the portable one give the same bits (the self-test
 * runs both), and k pairs where a tile of rows is all zero (a causal mask's) are skipped.
 *
 * Sequences are split over `nt` OpenMP threads (torch's thread count): a sequence's output
 * depends on that sequence only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "exact_common.h"

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>
#define TT_BMM_VNNI 1
#else
#define TT_BMM_VNNI 0
#endif

#define BMM_MR 8   /* rows of a tile (tile_vnni names each) */
#define BMM_NR 32  /* columns of a tile: two vectors of 16 int32 lanes */
#define BMM_KB 15  /* pairs of k summed in int32 before widening: 30 products of at most 2**26 each */

/* a float32 operand of nb (rows, cols) matrices: its base and element strides */
typedef struct { const float *x; int64_t b, r, c; } operand;

/* the largest magnitude's bits (non-negative floats order as integers; any NaN's are above
 * inf's, and pow2_scales reads only the exponent field) */
static inline int32_t magnitude(float v) { return f32_bits(v) & 0x7FFFFFFF; }

/* q of one value as the planes hold it: round(v * up) clamped (quantize_one), NaN as 0;
 * branch-free, so that the loops vectorise */
static inline int16_t quantize16(float v, float up, float lo, float hi) {
    float r = nearbyintf(v * up);
    r = r < lo ? lo : r;
    r = r > hi ? hi : r;
    return (int16_t)(r == r ? (int32_t)r : 0);
}

/* the scales of `lines` lines of `len` values (line i, value c at x[i * sl + c * sv]) from
 * their maxima: up[i] and down[i] as pow2_scales gives them; walks along the smaller stride;
 * m: scratch (lines) */
static void line_scales(const float *x, int64_t lines, int64_t len, int64_t sl, int64_t sv, int bits, int32_t *m,
                        float *up, float *down) {
    for (int64_t i = 0; i < lines; i++) m[i] = 0;
    if (sv <= sl)
        for (int64_t i = 0; i < lines; i++)
            for (int64_t c = 0; c < len; c++) {
                const int32_t a = magnitude(x[i * sl + c * sv]);
                m[i] = a > m[i] ? a : m[i];
            }
    else
        for (int64_t c = 0; c < len; c++)
            for (int64_t i = 0; i < lines; i++) {
                const int32_t a = magnitude(x[i * sl + c * sv]);
                m[i] = a > m[i] ? a : m[i];
            }
    for (int64_t i = 0; i < lines; i++) pow2_scales(bits_f32(m[i]), bits, &up[i], &down[i]);
}

/* the left operand of sequence b quantised per row: int16 rows (m x kp, row-major; the
 * padding stays 0) and the row scales down (m); mx, up: scratch (m); q: scratch (k x m int16) */
static void pack_left(const operand *s, int64_t b, int64_t m, int64_t k, int64_t kp, int bits, int16_t *a,
                      int32_t *mx, float *up, float *down, int16_t *q) {
    const float *x = s->x + b * s->b, lo = -(float)(1 << bits), hi = (float)((1 << bits) - 1);
    line_scales(x, m, k, s->r, s->c, bits, mx, up, down);
    if (s->c <= s->r) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t c = 0; c < k; c++) a[i * kp + c] = quantize16(x[i * s->r + c * s->c], up[i], lo, hi);
        return;
    }
    for (int64_t c = 0; c < k; c++)  /* columns lie contiguous: quantise each into a row of q, then transpose */
        for (int64_t i = 0; i < m; i++) q[c * m + i] = quantize16(x[i * s->r + c * s->c], up[i], lo, hi);
    for (int64_t i = 0; i < m; i++)
        for (int64_t c = 0; c < k; c++) a[i * kp + c] = q[c * m + i];
}

/* the right operand of sequence b quantised per column, in the column panels of the products
 * (panel t: for each k pair, BMM_NR (k, k + 1) pairs of int16; the padding stays 0), and the
 * column scales down (n); mx, up: scratch (n); q: scratch (kp x np int16) */
static void pack_right(const operand *s, int64_t b, int64_t k, int64_t n, int64_t kp, int bits, int16_t *bp,
                       int32_t *mx, float *up, float *down, int16_t *q) {
    const float *x = s->x + b * s->b, lo = -(float)(1 << bits), hi = (float)((1 << bits) - 1);
    line_scales(x, n, k, s->c, s->r, bits, mx, up, down);
    if (s->r < s->c) {  /* columns lie contiguous: quantise each into a row of q, then deal its k pairs */
        for (int64_t j = 0; j < n; j++) {
            const float *col = x + j * s->c;
            int16_t *o = q + j * kp;
            for (int64_t c = 0; c < k; c++) o[c] = quantize16(col[c * s->r], up[j], lo, hi);
            if (k < kp) o[k] = 0;
        }
        if (n % BMM_NR)  /* the last panel's padding columns */
            memset(bp + (n / BMM_NR) * kp * BMM_NR, 0, sizeof(int16_t) * (size_t)(kp * BMM_NR));
        for (int64_t j = 0; j < n; j++) {
            int16_t *dst = bp + (j / BMM_NR) * kp * BMM_NR + 2 * (j % BMM_NR);
            for (int64_t c = 0; c < kp; c += 2) memcpy(dst + c * BMM_NR, q + j * kp + c, 2 * sizeof(int16_t));
        }
        return;
    }
    const int64_t np = (n + BMM_NR - 1) / BMM_NR * BMM_NR;
    for (int64_t c = 0; c < k; c++) {  /* rows lie contiguous: quantise each into a row of q */
        const float *row = x + c * s->r;
        int16_t *o = q + c * np;
        for (int64_t j = 0; j < n; j++) o[j] = quantize16(row[j * s->c], up[j], lo, hi);
        for (int64_t j = n; j < np; j++) o[j] = 0;
    }
    if (k < kp)
        for (int64_t j = 0; j < np; j++) q[k * np + j] = 0;
    for (int64_t t = 0; t < np / BMM_NR; t++)  /* then interleave the rows of each k pair */
        for (int64_t c = 0; c < kp; c += 2) {
            int16_t *dst = bp + t * kp * BMM_NR + c * BMM_NR;
            const int16_t *r0 = q + c * np + t * BMM_NR, *r1 = r0 + np;
            for (int64_t j = 0; j < BMM_NR; j++) {
                dst[2 * j] = r0[j];
                dst[2 * j + 1] = r1[j];
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
__attribute__((noinline)) static void tile_vnni(const int16_t *a, int64_t kp, const int16_t *panel, int64_t q0,
                                                int64_t q1, int64_t acc[BMM_MR][BMM_NR]) {
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

/* float32 out (nb, m, n) = native_planes.bmm_exact at 2 limbs (bits: operand_bits(2)) of
 * float32 a (nb, m, k) and b (nb, k, n), each at its element strides (batch, row, col).
 * portable: skip the vector path. Returns 0, or -1 when scratch memory is short. */
int tt_bmm_exact2(const float *ax, int64_t ab, int64_t ar, int64_t ac, const float *bx, int64_t bb, int64_t br,
                  int64_t bc, int64_t nb, int64_t m, int64_t k, int64_t n, int bits, float *out, int portable, int nt) {
    const operand sa = {ax, ab, ar, ac}, sb = {bx, bb, br, bc};
    const int64_t mp = (m + BMM_MR - 1) / BMM_MR * BMM_MR, np = (n + BMM_NR - 1) / BMM_NR * BMM_NR;
    const int64_t kp = (k + 1) / 2 * 2, tiles = mp / BMM_MR;
    /* scratch: the tiles' k ranges, the scales, the maxima, the packed operands, a transpose's */
    const int64_t spare = kp * np > k * m ? kp * np : k * m;
    const size_t longs = (size_t)(2 * tiles), floats = (size_t)(2 * (m + n));
    const size_t ints = (size_t)(mp * kp + kp * np + spare);
    int failed = 0;
    #pragma omp parallel num_threads(nt) if (nt > 1 && nb > 1)
    {
        int64_t *first = malloc(sizeof(int64_t) * longs + sizeof(float) * 2 * floats + sizeof(int16_t) * ints);
        if (!first) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(static)
        for (int64_t b = 0; b < nb; b++) {
            if (!first) continue;
            int64_t *last = first + tiles;
            float *rs = (float *)(first + longs), *cs = rs + m, *up = cs + n;
            int32_t *mx = (int32_t *)(rs + floats);
            int16_t *a = (int16_t *)(mx + floats), *bp = a + mp * kp;
            if (mp != m || kp != k)  /* the left operand's padding */
                memset(a, 0, sizeof(int16_t) * (size_t)(mp * kp));
            pack_left(&sa, b, m, k, kp, bits, a, mx, up, rs, bp + kp * np);
            pack_right(&sb, b, k, n, kp, bits, bp, mx, up, cs, bp + kp * np);
            nonzero_pairs(a, mp, kp, first, last);
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
                        const double rv = (double)rs[i0 + r];
                        float *o = out + (b * m + i0 + r) * n + j0;
                        for (int64_t j = 0; j < cols; j++) o[j] = (float)((double)acc[r][j] * rv * (double)cs[j0 + j]);
                    }
                }
            }
        }
        free(first);
    }
    return failed ? -1 : 0;
}
