/*
 * hash.h -- 128-bit FNV-1a content hash for cache keys (compiled binaries,
 * template text). Not cryptographic: it names content, it does not guard it.
 */
#ifndef KT_HASH_H
#define KT_HASH_H

#include <stddef.h>

struct kt_hash {
	unsigned __int128 h;
};

void kt_hash_init(struct kt_hash *h);
void kt_hash_update(struct kt_hash *h, const void *data, size_t len);
/* Adds a string and its terminating NUL, so ("ab","c") != ("a","bc"). */
void kt_hash_str(struct kt_hash *h, const char *s);
/* 32 lower-case hex digits and a NUL. */
void kt_hash_hex(const struct kt_hash *h, char out[33]);

#endif
