/*
 * callcache.c -- the bounded per-context call cache (callcache.h): a hash of
 * keys to calls plus a list in publication order, the oldest retired first.
 */
#include "callcache.h"

#include <stdlib.h>
#include <string.h>

static unsigned bucket_of(const char *s)
{
	unsigned h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h % RT_CACHE_BUCKETS;
}

struct rt_call *rt_cache_find(const struct rt_cache *c, const char *key, unsigned gen)
{
	const struct rt_cache_entry *e;

	for (e = c->bucket[bucket_of(key)]; e; e = e->next)
		if (e->generation == gen && strcmp(e->key, key) == 0)
			return e->call;
	return NULL;
}

/* Takes the oldest entry out of the hash and the order list. */
static struct rt_cache_entry *take_oldest(struct rt_cache *c)
{
	struct rt_cache_entry *e = c->oldest, **p;

	for (p = &c->bucket[bucket_of(e->key)]; *p != e; p = &(*p)->next)
		;
	*p = e->next;
	c->oldest = e->newer;
	if (c->oldest)
		c->oldest->older = NULL;
	else
		c->newest = NULL;
	e->next = e->newer = e->older = NULL;
	c->n--;
	return e;
}

int rt_cache_put(struct rt_cache *c, const char *key, unsigned gen, struct rt_call *call,
		 struct rt_cache_entry **retired)
{
	struct rt_cache_entry *e = calloc(1, sizeof(*e));
	unsigned b = bucket_of(key);
	int cap = c->cap > 0 ? c->cap : RT_CACHE_CAP;

	if (!e || !(e->key = strdup(key))) {
		free(e);
		return -1;
	}
	while (c->n >= cap && c->oldest) {
		struct rt_cache_entry *old = take_oldest(c);

		old->next = *retired;
		*retired = old;
	}
	e->generation = gen;
	e->call = call;
	e->next = c->bucket[b];
	c->bucket[b] = e;
	e->older = c->newest;
	if (c->newest)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
	c->n++;
	return 0;
}

void rt_cache_free_list(struct rt_cache_entry *list)
{
	while (list) {
		struct rt_cache_entry *next = list->next;

		free(list->call);
		free(list->key);
		free(list);
		list = next;
	}
}

void rt_cache_clear(struct rt_cache *c)
{
	struct rt_cache_entry *all = NULL;

	while (c->oldest) {
		struct rt_cache_entry *e = take_oldest(c);

		e->next = all;
		all = e;
	}
	rt_cache_free_list(all);
}

/* Appends list b to list a (both linked through `next`). */
static struct rt_cache_entry *concat(struct rt_cache_entry *a, struct rt_cache_entry *b)
{
	struct rt_cache_entry *e = a;

	if (!a)
		return b;
	while (e->next)
		e = e->next;
	e->next = b;
	return a;
}

int rt_reclaim_enter(struct rt_reclaim *r)
{
	int slot = (int)(r->epoch & 1u);

	r->inside[slot]++;
	return slot;
}

struct rt_cache_entry **rt_reclaim_list(struct rt_reclaim *r)
{
	return &r->retired[r->epoch & 1u];
}

struct rt_cache_entry *rt_reclaim_leave(struct rt_reclaim *r, int slot)
{
	struct rt_cache_entry *done = NULL;
	int k;

	r->inside[slot]--;
	/* at most twice: with no one inside, both epochs' lists go */
	for (k = 0; k < 2; k++) {
		int prev = (int)((r->epoch + 1u) & 1u);

		if (r->inside[prev] != 0)
			break;
		done = concat(done, r->retired[prev]);
		r->retired[prev] = NULL;
		r->epoch++;
	}
	return done;
}

struct rt_cache_entry *rt_reclaim_all(struct rt_reclaim *r)
{
	struct rt_cache_entry *all = concat(r->retired[0], r->retired[1]);

	r->retired[0] = r->retired[1] = NULL;
	return all;
}
