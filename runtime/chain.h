/*
 * chain.h -- the best config for (device, family, shape) in a table of tuned
 * entries: the lookup chain that `ktune best`, the HTTP routes and libktune
 * all answer with. Pure: plain data in, an answer out; no store, no driver.
 *
 *   exact    the shape was tuned on the asked device: its entry; else on
 *            another device of its model (same name, compared
 *            case-insensitively, and same arch: the other GPUs of a
 *            multi-GPU host): the fastest of those;
 *   nearest  among the shapes tuned on the asked device alone, with the
 *            same structural dims (family->dims[i].structural), the closest
 *            in log-distance over the other dims whose config passes
 *            family->check() for the asked shape on the target, if within
 *            the query's limit;
 *   arch     exact then nearest over the other devices of the arch,
 *            siblings included (exact: the fastest; nearest: the closest);
 *   default  family->default_config() for the shape and target.
 *
 * An arch is compared without a trailing "a": sm_90 and sm_90a are one
 * (sm_90a is what one compiles for on an sm_90 device). The distance limit:
 * a config tuned for 16 tokens is no answer for 16384; a nearest shape past
 * the limit does not answer, and the answer names the closest one passed
 * over (skipped). Ties are broken by table order.
 */
#ifndef KT_CHAIN_H
#define KT_CHAIN_H

#include "../kernels/family.h"
#include "../util/err.h"

/* The nearest-shape limit unless a query asks for another: a factor of 8 in
 * one dim (ln 8; 16 and 1024 tokens are ln 64 apart), inclusive. */
#define CHAIN_MAX_DISTANCE 2.0794415416798357

struct chain_device {
	char name[128];		/* "NVIDIA H200" */
	char arch[16];		/* "sm_90" */
	int sms;		/* 0 when unknown */
	long l2_bytes;
	int smem_optin;
};

struct chain_entry {
	const struct kt_family *fam;
	struct kt_shape shape;
	struct kt_config cfg;
	int device;		/* index into the table's devices */
	double median_us;	/* what "fastest" compares */
};

struct chain_table {
	int ndevices;
	const struct chain_device *devices;
	int nentries;
	const struct chain_entry *entries;
};

enum chain_match { CHAIN_EXACT = 0, CHAIN_NEAREST, CHAIN_ARCH, CHAIN_DEFAULT };
const char *chain_match_name(enum chain_match m);

struct chain_query {
	const struct kt_family *fam;
	struct kt_shape shape;
	int device;		/* index of the asked device, or -1: none (arch) */
	const char *arch;	/* used when device is -1; NULL: "sm_90" */
	double max_distance;	/* CHAIN_MAX_DISTANCE; 0 exact only; INFINITY none */
	/* the device's real properties (a GPU the caller holds) override the
	 * table's when set: sms, smem and L2 of the target checked against */
	const struct chain_device *actual;
};

struct chain_answer {
	enum chain_match match;
	int entry;		/* index of the answering entry; -1: default */
	double distance;	/* log-distance to its shape (0: exact, default) */
	struct kt_config cfg;
	char arch[16];		/* the asked device's arch, or the query's */
	struct kt_target target;	/* what check() was asked for */
	int skipped;		/* the closest valid shape past the limit; -1 none */
	double skipped_distance;
};

/* 0 with *a filled; -1 with KT_ENOTFOUND (no default for the shape) or
 * KT_EINVAL (an arch kernels/ does not know). */
int chain_best(const struct chain_table *t, const struct chain_query *q,
	       struct chain_answer *a, struct kt_err *err);

/* The log-distance between two shapes over the non-structural dims, or -1
 * when a structural dim differs. */
double chain_distance(const struct kt_family *f, const struct kt_shape *a,
		      const struct kt_shape *b);
/* Within limit, with the slack that makes a ratio of exactly 8 count as
 * ln 8 whatever the rounding of the two logs. */
int chain_within(double distance, double limit);
/* 1 when two arch names are one architecture ("sm_90" and "sm_90a"). */
int chain_arch_same(const char *a, const char *b);
/* The compile target of an arch on a device: its sm_90a features on
 * sm_90, and the device's shared memory, SMs and L2 where known (d may be
 * NULL). -1 with KT_EINVAL for an arch kernels/ does not know. */
int chain_target(const char *arch, const struct chain_device *d, struct kt_target *out,
		 struct kt_err *err);

#endif
