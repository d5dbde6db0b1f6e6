/*
 * callcache.h -- libktune's cache of planned calls in one context, bounded.
 *
 * A call is found by its key (family and runtime shape) and the table's
 * generation. At most `cap` calls are kept: publishing one more retires the
 * oldest, whose call moves to a retired list instead of being freed, because
 * callers use a call they found without holding the table's lock. The
 * caller frees a retired list (rt_cache_free_list) once no one can still
 * hold one of its calls (launch.c counts the callers inside). The bound
 * matters for attention, whose token count, part of the key, may change
 * with every batch.
 *
 * Not locked here: the caller holds the table's lock around every call.
 */
#ifndef KT_CALLCACHE_H
#define KT_CALLCACHE_H

#define RT_CACHE_BUCKETS 256
#define RT_CACHE_CAP 512	/* calls a context keeps */

struct rt_call;

struct rt_cache_entry {
	char *key;
	unsigned generation;
	struct rt_call *call;	/* owned */
	struct rt_cache_entry *next;	/* bucket chain, or the retired list */
	struct rt_cache_entry *newer, *older;	/* publication order */
};

struct rt_cache {
	struct rt_cache_entry *bucket[RT_CACHE_BUCKETS];
	struct rt_cache_entry *oldest, *newest;
	int n;
	int cap;		/* 0: RT_CACHE_CAP */
};

/* The call published under key for generation gen, or NULL. */
struct rt_call *rt_cache_find(const struct rt_cache *c, const char *key, unsigned gen);
/* Publishes call (owned by the cache from now on) under key and gen. Past
 * the cap, the oldest entries go onto *retired (a list through `next`) with
 * their calls. Returns 0, or -1 out of memory (call not taken). */
int rt_cache_put(struct rt_cache *c, const char *key, unsigned gen, struct rt_call *call,
		 struct rt_cache_entry **retired);
/* Frees a list of entries linked through `next` and their calls. */
void rt_cache_free_list(struct rt_cache_entry *list);
/* Frees every entry and call; the cache is empty after. */
void rt_cache_clear(struct rt_cache *c);

#endif
