/*
 * callcache.h -- libktune's cache of planned calls in one context, bounded.
 *
 * A call is found by its key (family and runtime shape) and the table's
 * generation. At most `cap` calls are kept: publishing one more retires the
 * oldest, whose call moves to a retired list instead of being freed, because
 * callers use a call they found without holding the table's lock. A retired
 * call is freed once every caller that could have found it has left
 * (struct rt_reclaim, below). The bound matters for attention, whose token
 * count, part of the key, may change with every batch.
 *
 * Not locked here: the caller holds the table's lock around every call,
 * rt_reclaim's included.
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

/*
 * When a retired call may be freed: two epochs. A caller enters in the
 * current epoch and leaves from it; calls retired meanwhile wait on the
 * current epoch's list. The epoch moves on when no caller of the previous
 * one is left, and that previous epoch's list is freed then: whoever could
 * have found those calls entered before they were retired, so in that epoch
 * or earlier. Callers that keep overlapping (threads, streams) therefore
 * still free what was retired, one epoch behind, where a single count of
 * callers inside would wait for a moment with none.
 */
struct rt_reclaim {
	unsigned epoch;
	int inside[2];		/* callers inside, by epoch parity */
	struct rt_cache_entry *retired[2];	/* retired during each epoch */
};

/* A caller comes in: the slot to hand to rt_reclaim_leave. */
int rt_reclaim_enter(struct rt_reclaim *r);
/* Where calls retired now go (rt_cache_put's `retired`). */
struct rt_cache_entry **rt_reclaim_list(struct rt_reclaim *r);
/* A caller of slot leaves: returns what can be freed now (a list for
 * rt_cache_free_list, after the lock is dropped), or NULL. */
struct rt_cache_entry *rt_reclaim_leave(struct rt_reclaim *r, int slot);
/* Everything retired, whatever the epoch (for closing, with no caller
 * inside). */
struct rt_cache_entry *rt_reclaim_all(struct rt_reclaim *r);

#endif
