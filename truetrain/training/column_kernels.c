/* GradBook.columns of a batch in one piece, for CPUs (truetrain/training/native_chains.py):
 * the column maxima of |v|, their power-of-two scales and the exact float64 column sums of
 * the rounded values, split over threads by chunks of columns (a column's sum depends on
 * that column only, and its integers sum exactly in any order). Built with the chains. */
#include <stdint.h>
#include <string.h>
#include <math.h>

#define BLK 64
#define CHUNK(total, per) (((total) + (per) - 1) / (per))

/* GradBook.columns for one slice, columns [lo, hi) of (rows, cols): the column maxima of |v|
 * (NaN sticky), repro_ops.power_scales at `bits`, and the float64 column sums of
 * round(v * up) (integers: exact in any order); rows are read in order, `scratch` holds
 * hi - lo floats */
void tt_column_sums(const float *v, int64_t rows, int64_t cols, int64_t lo, int64_t hi, int bits, float *scratch,
                    double *sums, double *down) {
    const int64_t n = hi - lo;
    float *m = scratch;
    double *up = sums + lo;  /* the scales up first, then the sums over them */
    if (n == BLK) {  /* a whole chunk: the maxima stay in registers across the rows */
        float mb[BLK] = {0.0f};
        for (int64_t i = 0; i < rows; i++) {
            const float *row = v + i * cols + lo;
            for (int j = 0; j < BLK; j++) {
                float a = fabsf(row[j]);
                mb[j] = (a != a || a > mb[j]) ? a : mb[j];
            }
        }
        memcpy(m, mb, sizeof(mb));
    } else {
        for (int64_t j = 0; j < n; j++) m[j] = 0.0f;
        for (int64_t i = 0; i < rows; i++) {
            const float *row = v + i * cols + lo;
            for (int64_t j = 0; j < n; j++) {
                float a = fabsf(row[j]);
                m[j] = (a != a || a > m[j]) ? a : m[j];
            }
        }
    }
    for (int64_t j = 0; j < n; j++) {
        const double tiny = 0x1p-960;
        double mm = (double)m[j] < tiny ? tiny : (double)m[j];
        int64_t u;
        memcpy(&u, &mm, 8);
        int64_t field = u & 0x7FF0000000000000LL, shift = (int64_t)(bits - 1) << 52;
        int64_t ub = (2046LL << 52) + shift - field, db = field - shift;
        memcpy(&up[j], &ub, 8);
        memcpy(&down[lo + j], &db, 8);
    }
    double acc[BLK];
    for (int64_t j0 = 0; j0 < n; j0 += BLK) {
        const int64_t w = n - j0 < BLK ? n - j0 : BLK;
        for (int64_t j = 0; j < w; j++) acc[j] = 0.0;
        for (int64_t i = 0; i < rows; i++) {
            const float *row = v + i * cols + lo + j0;
            for (int64_t j = 0; j < w; j++) acc[j] += nearbyint((double)row[j] * up[j0 + j]);
        }
        for (int64_t j = 0; j < w; j++) up[j0 + j] = acc[j];
    }
}

/* tt_column_sums of all columns, in chunks of BLK columns (each column's sum depends on that
 * column only); scratch holds cols floats */
void tt_column_sums_mt(const float *v, int64_t rows, int64_t cols, int bits, float *scratch, double *sums,
                       double *down, int nt) {
    #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && cols > BLK && rows * cols > (1 << 15))
    for (int64_t c = 0; c < CHUNK(cols, BLK); c++) {
        const int64_t lo = c * BLK, hi = lo + BLK < cols ? lo + BLK : cols;
        tt_column_sums(v, rows, cols, lo, hi, bits, scratch + lo, sums, down);
    }
}
