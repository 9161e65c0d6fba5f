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

static uint64_t rotl(uint64_t x, int n) { return (x << n) | (x >> (64 - n)); }

static void keccak_f(uint64_t st[25]) {
    uint64_t bc[5], t;
    for (int r = 0; r < 24; ++r) {
        for (int i = 0; i < 5; ++i) bc[i] = st[i] ^ st[i + 5] ^ st[i + 10] ^ st[i + 15] ^ st[i + 20];
        for (int i = 0; i < 5; ++i) {
            t = bc[(i + 4) % 5] ^ rotl(bc[(i + 1) % 5], 1);
            for (int j = 0; j < 25; j += 5) st[j + i] ^= t;
        }
        t = st[1];
        for (int i = 0; i < 24; ++i) {
            int j = PI[i];
            uint64_t keep = st[j];
            st[j] = rotl(t, ROT[i]);
            t = keep;
        }
        for (int j = 0; j < 25; j += 5) {
            for (int i = 0; i < 5; ++i) bc[i] = st[j + i];
            for (int i = 0; i < 5; ++i) st[j + i] ^= (~bc[(i + 1) % 5]) & bc[(i + 2) % 5];
        }
        st[0] ^= RC[r];
    }
}

/* keccak256 (Ethereum's: padding 0x01 ... 0x80, rate 136 bytes) */
static void keccak256(const uint8_t *in, size_t len, uint8_t out[32]) {
    uint64_t st[25] = {0};
    uint8_t *s = (uint8_t *)st;
    for (; len >= 136; in += 136, len -= 136) {
        for (int i = 0; i < 136; ++i) s[i] ^= in[i];
        keccak_f(st);
    }
    for (size_t i = 0; i < len; ++i) s[i] ^= in[i];
    s[len] ^= 0x01;
    s[135] ^= 0x80;
    keccak_f(st);
    memcpy(out, s, 32);
}

/* the root over `chunks` chunks of 256 bytes at `data` into `out` (32 bytes); -1 without memory */
int tt_tensor_root(const uint8_t *data, int64_t chunks, uint8_t *out) {
    int64_t width = 1;
    while (width < chunks) width <<= 1;
    uint8_t *nodes = calloc((size_t)width, 32);
    /* each level is written to the other buffer: in place, a thread's writes would race with
     * another's reads of the level below (nodes 2i, 2i + 1 lie in another thread's range) */
    uint8_t *next = calloc((size_t)(width > 1 ? width / 2 : 1), 32);
    if (!nodes || !next) {
        free(nodes);
        free(next);
        return -1;
    }
    uint8_t buf[65];
#pragma omp parallel for private(buf) schedule(static) if (chunks >= 4096)
    for (int64_t c = 0; c < chunks; ++c) {
        buf[0] = 0;
        keccak256(data + 256 * c, 256, buf + 1);
        keccak256(buf, 33, nodes + 32 * c);
    }
    for (; width > 1; width >>= 1) {
#pragma omp parallel for private(buf) schedule(static) if (width >= 8192)
        for (int64_t i = 0; i < width / 2; ++i) {
            buf[0] = 1;
            memcpy(buf + 1, nodes + 64 * i, 64);
            keccak256(buf, 65, next + 32 * i);
        }
        uint8_t *level = nodes;
        nodes = next;
        next = level;
    }
    memcpy(out, nodes, 32);
    free(nodes);
    free(next);
    return 0;
}
