/*
 * hash.h -- 128-bit FNV-1a content hash for cache keys (compiled binaries,
 * template text). Not cryptographic: it names content, it does not guard it.
 */
#ifndef KT_HASH_H
#define KT_HASH_H

#include <stddef.h>
#include <stdint.h>

struct kt_hash {
	unsigned __int128 h;
};

void kt_hash_init(struct kt_hash *h);
void kt_hash_update(struct kt_hash *h, const void *data, size_t len);
/* Adds a string and its terminating NUL, so ("ab","c") != ("a","bc"). */
void kt_hash_str(struct kt_hash *h, const char *s);
/* 32 lower-case hex digits and a NUL. */
void kt_hash_hex(const struct kt_hash *h, char out[33]);

/* SplitMix64's output function: a bijection of 64-bit words that gives
 * neighbouring inputs unrelated outputs. Inline: fills call it per element. */
static inline uint64_t kt_mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* SplitMix64's golden-ratio increment: its state after i steps from 0 is
 * i * KT_MIX64_STEP. */
#define KT_MIX64_STEP 0x9e3779b97f4a7c15ull

/* The next value of the SplitMix64 sequence whose state is *state. */
static inline uint64_t kt_splitmix64(uint64_t *state)
{
	return kt_mix64(*state += KT_MIX64_STEP);
}

#endif
