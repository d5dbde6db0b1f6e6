/*
 * jit.c -- the tuner's NVRTC compile pool: many programs at once, one per
 * thread. Compiling one program (and its cache key) is runtime/jit_one.c,
 * shared with libktune.
 */
#include "jit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct jit_pool {
	struct jit_job *jobs;
	int n;
	atomic_int next;
};

static void *jit_pool_thread(void *arg)
{
	struct jit_pool *pool = arg;
	int i;

	while ((i = atomic_fetch_add(&pool->next, 1)) < pool->n) {
		struct jit_job *j = &pool->jobs[i];
		struct kt_err e = { 0 };

		j->failed = 0;
		j->err_msg[0] = 0;
		if (jit_compile(j->prog, j->arch, &j->res, &e) != 0) {
			j->failed = 1;
			snprintf(j->err_msg, sizeof(j->err_msg), "%s", e.msg);
		}
	}
	return NULL;
}

void jit_compile_all(struct jit_job *jobs, int n, int threads)
{
	struct jit_pool pool = { jobs, n, 0 };
	pthread_t tid[64];
	int started = 0, i;

	if (threads <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);

		threads = c > 0 ? (int)c : 1;
	}
	if (threads > 64)
		threads = 64;
	if (threads > n)
		threads = n;
	for (i = 1; i < threads; i++)
		if (pthread_create(&tid[started], NULL, jit_pool_thread, &pool) == 0)
			started++;
	/* The calling thread works too, so a failed pthread_create only slows
	 * the batch down. */
	jit_pool_thread(&pool);
	for (i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
}
