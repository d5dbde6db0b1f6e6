#include "hash.h"

#include <string.h>

#define FNV128_PRIME ((((unsigned __int128)1) << 88) + 0x13b)

void kt_hash_init(struct kt_hash *h)
{
	h->h = ((unsigned __int128)0x6c62272e07bb0142ULL << 64) | 0x62b821756295c58dULL;
}

void kt_hash_update(struct kt_hash *h, const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t i;

	for (i = 0; i < len; i++) {
		h->h ^= p[i];
		h->h *= FNV128_PRIME;
	}
}

void kt_hash_str(struct kt_hash *h, const char *s)
{
	kt_hash_update(h, s, strlen(s) + 1);
}

void kt_hash_hex(const struct kt_hash *h, char out[33])
{
	static const char hex[] = "0123456789abcdef";
	unsigned __int128 v = h->h;
	int i;

	for (i = 31; i >= 0; i--) {
		out[i] = hex[(unsigned)(v & 0xf)];
		v >>= 4;
	}
	out[32] = 0;
}
