/* The root of a tensor's tree in one call (truetrain/trace/roots.py): keccak256 of each
 * 256-byte chunk, leaf nodes keccak256(0x00 || leaf), zero padding nodes up to a power of
 * two, inner nodes keccak256(0x01 || left || right): MerkleCommitment's tree, as
 * truetrain/numerics/tensor_merkle.py builds it. Keccak-f[1600] on a little-endian host
 * (roots.py checks the roots against the Python tree before using it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const uint64_t RC[24] = {
    0x0000000000000001ULL, 0x0000000000008082ULL, 0x800000000000808aULL, 0x8000000080008000ULL,
    0x000000000000808bULL, 0x0000000080000001ULL, 0x8000000080008081ULL, 0x8000000000008009ULL,
    0x000000000000008aULL, 0x0000000000000088ULL, 0x0000000080008009ULL, 0x000000008000000aULL,
    0x000000008000808bULL, 0x800000000000008bULL, 0x8000000000008089ULL, 0x8000000000008003ULL,
    0x8000000000008002ULL, 0x8000000000000080ULL, 0x000000000000800aULL, 0x800000008000000aULL,
    0x8000000080008081ULL, 0x8000000000008080ULL, 0x0000000080000001ULL, 0x8000000080008008ULL};
static const int ROT[24] = {1, 3, 6, 10, 15, 21, 28, 36, 45, 55, 2, 14, 27, 41, 56, 8, 25, 43, 62, 18, 39, 61, 20, 44};
static const int PI[24] = {10, 7, 11, 17, 18, 3, 5, 16, 8, 21, 24, 4, 15, 23, 19, 13, 12, 2, 20, 14, 22, 9, 6, 1};

/* eight keccak256 states at once, one lane a message (the GCC vector type becomes AVX-512
 * or two AVX2 registers with -march=native): the leaves and the nodes of a level are
 * independent hashes of one length, so eight go through each permutation together */
typedef uint64_t v8 __attribute__((vector_size(64)));

#define ROL8(x, n) (((x) << (n)) | ((x) >> (64 - (n))))

/* Keccak-f[1600] on eight states, every loop but the rounds' unrolled (the lanes' indices
 * and rotations constants, so the state stays in registers and each rotation is one
 * instruction) */
static void keccak_f8(v8 st[25]) {
    v8 bc[5], t;
    for (int r = 0; r < 24; ++r) {
#pragma GCC unroll 5
        for (int i = 0; i < 5; ++i) bc[i] = st[i] ^ st[i + 5] ^ st[i + 10] ^ st[i + 15] ^ st[i + 20];
#pragma GCC unroll 5
        for (int i = 0; i < 5; ++i) {
            t = bc[(i + 4) % 5] ^ ROL8(bc[(i + 1) % 5], 1);
#pragma GCC unroll 5
            for (int j = 0; j < 25; j += 5) st[j + i] ^= t;
        }
        t = st[1];
#pragma GCC unroll 24
        for (int i = 0; i < 24; ++i) {
            v8 keep = st[PI[i]];
            st[PI[i]] = ROL8(t, ROT[i]);
            t = keep;
        }
#pragma GCC unroll 5
        for (int j = 0; j < 25; j += 5) {
#pragma GCC unroll 5
            for (int i = 0; i < 5; ++i) bc[i] = st[j + i];
#pragma GCC unroll 5
            for (int i = 0; i < 5; ++i) st[j + i] ^= (~bc[(i + 1) % 5]) & bc[(i + 2) % 5];
        }
        st[0] ^= RC[r];
    }
}

/* keccak256 of eight messages of `len` bytes (len < 272) */
static void keccak256_x8(const uint8_t *const in[8], size_t len, uint8_t *const out[8]) {
    uint8_t buf[8][272];
    const size_t blocks = len / 136 + 1;
    for (int l = 0; l < 8; ++l) {
        memset(buf[l], 0, blocks * 136);
        memcpy(buf[l], in[l], len);
        buf[l][len] ^= 0x01;
        buf[l][blocks * 136 - 1] ^= 0x80;
    }
    v8 st[25];
    memset(st, 0, sizeof st);
    for (size_t b = 0; b < blocks; ++b) {
        for (int w = 0; w < 17; ++w) {
            v8 x;
            for (int l = 0; l < 8; ++l) {
                uint64_t word;
                memcpy(&word, buf[l] + b * 136 + 8 * w, 8);
                x[l] = word;
            }
            st[w] ^= x;
        }
        keccak_f8(st);
    }
    for (int l = 0; l < 8; ++l)
        for (int w = 0; w < 4; ++w) {
            uint64_t word = st[w][l];
            memcpy(out[l] + 8 * w, &word, 8);
        }
}

/* the layout's flags (roots.py): the data are 64-bit elements, two words each (high first),
 * else 32-bit words; their bits are integers, kept as they are, else floats whose NaNs are
 * made canonical */
enum { WIDE = 1, RAW = 2 };

/* chunk `c` of a tensor of `words` words in the canonical layout into `buf` (256 bytes):
 * each word big-endian, every float NaN canonical, zeros past the end */
static void load_chunk(const uint8_t *data, int64_t words, int mode, int64_t c, uint8_t *buf) {
    for (int w = 0; w < 64; ++w) {
        const int64_t k = 64 * c + w;
        uint32_t x = 0;
        if (k < words && !(mode & WIDE)) {
            memcpy(&x, data + 4 * k, 4);
            if (!(mode & RAW) && (x & 0x7FFFFFFFu) > 0x7F800000u) x = 0x7FC00000u;
        } else if (k < words) {
            uint64_t d;
            memcpy(&d, data + 8 * (k >> 1), 8);
            if (!(mode & RAW) && (d & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull) d = 0x7FF8000000000000ull;
            x = (k & 1) ? (uint32_t)d : (uint32_t)(d >> 32);
        }
        x = __builtin_bswap32(x);
        memcpy(buf + 4 * w, &x, 4);
    }
}

/* the root of a tensor of `words` words at `data` (native byte order, `mode`: WIDE | RAW)
 * into `out` (32 bytes); -1 without memory */
int tt_tensor_root(const uint8_t *data, int64_t words, int mode, uint8_t *out) {
    const int64_t chunks = (words + 63) / 64;
    int64_t width = 1;
    while (width < chunks) width <<= 1;
    uint8_t *nodes = calloc((size_t)width, 32), *next = calloc((size_t)(width > 1 ? width / 2 : 1), 32);
    if (!nodes || !next) {
        free(nodes);
        free(next);
        return -1;
    }
    const int64_t groups = (chunks + 7) / 8;
    for (int64_t g = 0; g < groups; ++g) {  /* leaves: keccak256(chunk), then H(0x00 || leaf) */
        uint8_t chunk[8][256], leaf[8][33], sink[8][32];
        const uint8_t *in[8];
        uint8_t *to[8];
        for (int l = 0; l < 8; ++l) {
            int64_t c = 8 * g + l;
            load_chunk(data, words, mode, c < chunks ? c : chunks - 1, chunk[l]);
            in[l] = chunk[l];
            leaf[l][0] = 0;
            to[l] = leaf[l] + 1;
        }
        keccak256_x8(in, 256, to);
        for (int l = 0; l < 8; ++l) {
            int64_t c = 8 * g + l;
            in[l] = leaf[l];
            to[l] = c < chunks ? nodes + 32 * c : sink[l];
        }
        keccak256_x8(in, 33, to);
    }
    for (; width > 1; width >>= 1) {  /* inner nodes: H(0x01 || left || right), level by level */
        const int64_t half = width / 2, pairs = (half + 7) / 8;
        for (int64_t g = 0; g < pairs; ++g) {
            uint8_t msg[8][65], sink[8][32];
            const uint8_t *in[8];
            uint8_t *to[8];
            for (int l = 0; l < 8; ++l) {
                int64_t i = 8 * g + l < half ? 8 * g + l : half - 1;
                msg[l][0] = 1;
                memcpy(msg[l] + 1, nodes + 64 * i, 64);
                in[l] = msg[l];
            }
            for (int l = 0; l < 8; ++l) to[l] = 8 * g + l < half ? next + 32 * (8 * g + l) : sink[l];
            keccak256_x8(in, 65, to);
        }
        uint8_t *swap = nodes;
        nodes = next;
        next = swap;
    }
    memcpy(out, nodes, 32);
    free(nodes);
    free(next);
    return 0;
}
