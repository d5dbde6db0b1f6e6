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
