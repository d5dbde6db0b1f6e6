/*
 * fleet.h -- several sweeps over several GPUs of one host.
 *
 * One thread per GPU, each with its own isolated worker process and its own
 * store connection (SQLite WAL: one writer at a time, readers never blocked),
 * takes the next problem from a shared queue and sweeps it on its GPU, so
 * the work is shared problem by problem and every sweep keeps one device's
 * provenance. A GPU that cannot be opened, or whose worker gives up, is
 * taken out and the problem it held goes back to the queue for the others.
 */
#ifndef KT_FLEET_H
#define KT_FLEET_H

#include "sweep.h"

#define FLEET_MAX_DEVICES 16

struct fleet_item {
	const char *family;	/* borrowed */
	const char *shape;	/* borrowed */
	const char *label;	/* e.g. a workload id; may be NULL */
	/* results */
	int done;		/* 1: swept (summary valid) */
	int device;		/* ordinal that swept it */
	struct sweep_summary sum;
	struct kt_err err;	/* set when it failed on every device */
};

struct fleet_report {
	int ndevices;
	int devices[FLEET_MAX_DEVICES];
	int failed[FLEET_MAX_DEVICES];	/* 1: taken out */
	char why[FLEET_MAX_DEVICES][512];
	int swept[FLEET_MAX_DEVICES];	/* problems each device finished */
	double wall_s;
};

/* Parses "all" (probes ordinals 0.. with real workers until one fails) or
 * "0,1,3". Returns the count, or -1 with err. */
int fleet_parse_devices(const char *spec, const struct worker_opts *wo, int out[FLEET_MAX_DEVICES],
			struct kt_err *err);

/* Sweeps every item on the given devices. base gives every option but the
 * family, shape and device; its progress callback is not used (sweeps run
 * side by side): item_done, when set, is called (under a lock) as each item
 * finishes or fails. Returns 0 when every item was swept, -1 with err when
 * some could not be (each item's err says why). */
int fleet_run(const struct sweep_opts *base, const int *devices, int ndevices,
	      struct fleet_item *items, int nitems, struct fleet_report *rep,
	      void (*item_done)(const struct fleet_item *it, int device, void *arg), void *arg,
	      struct kt_err *err);

#endif
