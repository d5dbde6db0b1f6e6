#include "fleet.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../util/clock.h"

struct fleet {
	const struct sweep_opts *base;
	struct fleet_item *items;
	int nitems;
	struct fleet_report *rep;
	pthread_mutex_t mu;
	int *state;		/* per item: 0 queued, 1 taken, 2 finished */
	int alive;		/* devices still working */
	void (*item_done)(const struct fleet_item *it, int device, void *arg);
	void *arg;
};

struct fleet_thread {
	struct fleet *f;
	int slot;		/* index into rep->devices */
	pthread_t tid;
};

int fleet_parse_devices(const char *spec, const struct worker_opts *wo, int out[FLEET_MAX_DEVICES],
			struct kt_err *err)
{
	int n = 0;

	if (!spec || strcmp(spec, "all") == 0) {
		struct kt_err first = { 0 };

		/* Probe with real workers: the same path a sweep takes, so a
		 * GPU that cannot run a worker is not counted. */
		for (n = 0; n < FLEET_MAX_DEVICES; n++) {
			struct worker_opts o = *wo;
			struct worker *w = NULL;

			o.device = n;
			if (worker_start(&o, &w, n == 0 ? &first : &(struct kt_err){ 0 }) != 0)
				break;
			worker_stop(w);
			out[n] = n;
		}
		if (n == 0) {
			if (err)
				*err = first;
			return -1;
		}
		return n;
	}
	while (*spec) {
		char *end;
		long v = strtol(spec, &end, 10);
		int i;

		if (end == spec || v < 0 || v > 255 || (*end && *end != ','))
			return kt_err_set(err, KT_EINVAL, "--devices wants 'all' or ordinals like 0,1 "
					  "(at '%s')", spec);
		for (i = 0; i < n; i++)
			if (out[i] == v)
				return kt_err_set(err, KT_EINVAL, "device %ld listed twice", v);
		if (n == FLEET_MAX_DEVICES)
			return kt_err_set(err, KT_EINVAL, "at most %d devices", FLEET_MAX_DEVICES);
		out[n++] = (int)v;
		spec = *end ? end + 1 : end;
	}
	if (n == 0)
		return kt_err_set(err, KT_EINVAL, "--devices lists no device");
	return n;
}

/* Errors that say the device (or its worker), not the problem, is broken:
 * the problem goes back to the queue for another device. */
static int device_broken(const struct kt_err *e)
{
	return e->code == KT_ENOGPU || e->code == KT_ECUDA || e->code == KT_EIO;
}

static void *fleet_thread_main(void *arg)
{
	struct fleet_thread *t = arg;
	struct fleet *f = t->f;
	int dev = f->rep->devices[t->slot];

	for (;;) {
		struct sweep_opts o = *f->base;
		struct fleet_item *it = NULL;
		struct kt_err e = { 0 };
		int i, idx = -1, rc;

		pthread_mutex_lock(&f->mu);
		for (i = 0; i < f->nitems; i++)
			if (f->state[i] == 0) {
				f->state[i] = 1;
				idx = i;
				break;
			}
		pthread_mutex_unlock(&f->mu);
		if (idx < 0)
			break;
		it = &f->items[idx];
		o.family = it->family;
		o.shape = it->shape;
		o.worker.device = dev;
		o.progress = NULL;
		rc = sweep_run(&o, &it->sum, &e);
		pthread_mutex_lock(&f->mu);
		if (rc == 0) {
			it->done = 1;
			it->device = dev;
			kt_err_clear(&it->err);
			f->state[idx] = 2;
			f->rep->swept[t->slot]++;
		} else if (device_broken(&e)) {
			/* Take this GPU out; another one redoes the problem
			 * (its trials so far are kept and resumed there only
			 * if it is the same device, so it starts afresh). */
			f->rep->failed[t->slot] = 1;
			snprintf(f->rep->why[t->slot], sizeof(f->rep->why[t->slot]), "%s", e.msg);
			it->err = e;
			f->state[idx] = 0;
			f->alive--;
			pthread_mutex_unlock(&f->mu);
			fprintf(stderr, "ktune: device %d taken out: %s\n", dev, e.msg);
			break;
		} else {
			it->err = e;
			f->state[idx] = 2;
		}
		if (f->item_done)
			f->item_done(it, dev, f->arg);
		pthread_mutex_unlock(&f->mu);
		if (f->base->cancel && f->base->cancel(f->base->arg))
			break;
	}
	return NULL;
}

int fleet_run(const struct sweep_opts *base, const int *devices, int ndevices,
	      struct fleet_item *items, int nitems, struct fleet_report *rep,
	      void (*item_done)(const struct fleet_item *it, int device, void *arg), void *arg,
	      struct kt_err *err)
{
	struct fleet f;
	struct fleet_thread th[FLEET_MAX_DEVICES];
	double t0 = kt_clock_s();
	int i, started = 0, missing = 0, first_missing = -1;

	memset(rep, 0, sizeof(*rep));
	if (ndevices < 1 || ndevices > FLEET_MAX_DEVICES)
		return kt_err_set(err, KT_EINVAL, "between 1 and %d devices", FLEET_MAX_DEVICES);
	memset(&f, 0, sizeof(f));
	f.base = base;
	f.items = items;
	f.nitems = nitems;
	f.rep = rep;
	f.alive = ndevices;
	f.item_done = item_done;
	f.arg = arg;
	if (!(f.state = calloc(nitems > 0 ? nitems : 1, sizeof(int))))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	pthread_mutex_init(&f.mu, NULL);
	rep->ndevices = ndevices;
	for (i = 0; i < ndevices; i++)
		rep->devices[i] = devices[i];
	for (i = 0; i < nitems; i++) {
		items[i].done = 0;
		kt_err_clear(&items[i].err);
	}
	/* A device taken out leaves its problem queued; the survivors loop
	 * until the queue is empty, so run rounds until no thread is left
	 * with work or no device is alive. */
	for (;;) {
		int queued = 0;

		started = 0;
		for (i = 0; i < ndevices; i++) {
			if (rep->failed[i])
				continue;
			th[started].f = &f;
			th[started].slot = i;
			if (pthread_create(&th[started].tid, NULL, fleet_thread_main, &th[started]) == 0)
				started++;
		}
		for (i = 0; i < started; i++)
			pthread_join(th[i].tid, NULL);
		for (i = 0; i < nitems; i++)
			if (f.state[i] == 0)
				queued++;
		if (!queued || f.alive <= 0 || started == 0 ||
		    (base->cancel && base->cancel(base->arg)))
			break;
	}
	pthread_mutex_destroy(&f.mu);
	for (i = 0; i < nitems; i++)
		if (!items[i].done) {
			if (first_missing < 0)
				first_missing = i;
			missing++;
			if (!items[i].err.code)
				kt_err_set(&items[i].err, KT_ENOGPU, "no device left to sweep it");
		}
	free(f.state);
	rep->wall_s = kt_clock_s() - t0;
	if (missing)
		return kt_err_set(err, items[first_missing].err.code,
				  "%d of %d problems were not swept; the first (%s %s): %s", missing,
				  nitems, items[first_missing].family, items[first_missing].shape,
				  items[first_missing].err.msg);
	return 0;
}
