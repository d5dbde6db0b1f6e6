/*
 * lookup.h -- the best config for (device, family, shape), with fallback.
 *
 * Used by `ktune best`, by the HTTP routes and by the export. The chain
 * itself is runtime/chain.h, which libktune answers with too; this module
 * keeps the store's winners as its table and resolves device names. The
 * chain, first that answers wins:
 *
 *   exact    the shape was tuned on this device: its winner; else it was
 *            tuned on another GPU of the same model (same name, compared
 *            case-insensitively, and same arch: the other GPUs of a
 *            multi-GPU host): the fastest of those. The answer's device
 *            is still the asked one; tuned.device_uuid says which GPU the
 *            entry was measured on;
 *   nearest  among shapes tuned on this device alone (not its siblings)
 *            for the family with the same structural dims
 *            (family->dims[i].structural), the one closest in log-distance
 *            over the other dims whose config passes family->check() for
 *            the asked shape on the device's target, if it is within the
 *            query's max_distance (LOOKUP_MAX_DISTANCE unless asked);
 *   arch     exact then nearest over the other devices of the device's
 *            architecture, siblings included (exact: the fastest of them;
 *            nearest: the closest);
 *   default  family->default_config() for the shape and target.
 *
 * The distance limit: a config tuned for 16 tokens is no answer for 16384
 * (Monarch's decode tile takes about four times its default's time there:
 * bench/results/lookup_far.json), and the defaults have rules per regime
 * that a far neighbour lacks. A nearest shape further away than the limit
 * does not answer; the answer names the closest one it passed over
 * (skipped_nearest), so that a caller sees what is tuned.
 *
 * Ties are broken by table order (device id, family, shape key), so the
 * exported header, which walks its entries in the same order, agrees.
 *
 * A struct lookup_table is a parsed copy of the store's winners. It is
 * looked at again only when the database changed (PRAGMA data_version), so
 * a server thread pays one cheap pragma per request. Then only the (device,
 * problem) pairs that can have changed are read again (store_marks: new
 * trials and baselines, sweeps begun, resumed or ended), a few index
 * lookups each, where computing every winner sorts every ok trial of the
 * database: 1.4 s at 500,000 trials, and a running sweep commits a trial
 * every second or so. A device added or changed, a sweep row gone, or more
 * than 256 changed pairs (an import, a merge) reload in full. Not
 * thread-safe: one table per thread (the server keeps one per pool thread).
 */
#ifndef KT_LOOKUP_H
#define KT_LOOKUP_H

#include <jansson.h>
#include <stdint.h>

#include "../db/store.h"
#include "../runtime/chain.h"
#include "../kernels/family.h"
#include "../tuner/famjson.h"
#include "../util/err.h"

struct lookup_entry {
	const struct kt_family *fam;
	struct kt_shape shape;
	struct kt_config cfg;
	int device;			/* index into table->devices */
	struct store_winner w;		/* owned */
};

struct lookup_table {
	int64_t data_version;		/* -1 before the first load */
	int nentries, cap;
	struct lookup_entry *entries;	/* cap allocated */
	int ndevices;
	struct store_device *devices;
	int skipped;			/* winners of unknown families or bad keys */
	struct store *dv_store;		/* the connection dv_stmt belongs to */
	struct sqlite3_stmt *dv_stmt;	/* PRAGMA data_version, kept prepared */
	int marked;			/* marks describe what the entries were read at */
	struct store_marks marks;
	long full_loads, pair_loads;	/* reloads in full; pairs read again */
	/* the same devices and entries as the lookup chain sees them
	 * (runtime/chain.h), index for index */
	struct chain_device *chain_devices;
	struct chain_entry *chain_entries;
};

void lookup_table_init(struct lookup_table *t);
/* Frees the entries; call before closing the store it was loaded from. */
void lookup_table_release(struct lookup_table *t);
/* Loads the winners of st, or does nothing when the database did not change
 * since the last load through this connection, or reads again only the
 * winners that can have changed (see above). */
int lookup_table_load(struct lookup_table *t, struct store *st, struct kt_err *err);
/* Loads unconditionally (for stores whose data_version cannot be trusted). */
int lookup_table_reload(struct lookup_table *t, struct store *st, struct kt_err *err);

/* The nearest-shape limit unless a query asks for another: a factor of 8 in
 * one dim (ln 8; 16 and 1024 tokens are ln 64 apart), inclusive. The
 * exported header's KTUNE_MAX_DISTANCE defaults to the same value. */
#define LOOKUP_MAX_DISTANCE CHAIN_MAX_DISTANCE
/* Within limit, with the slack that makes a ratio of exactly 8 count as
 * ln 8 whatever the rounding of the two logs. */
int lookup_within(double distance, double limit);

enum lookup_match {
	LOOKUP_EXACT = 0,
	LOOKUP_NEAREST,
	LOOKUP_ARCH,
	LOOKUP_DEFAULT,
};
const char *lookup_match_name(enum lookup_match m);

struct lookup_query {
	const char *device;	/* uuid, id or name; NULL: the only device */
	const char *arch;	/* "sm_90": used when device is NULL or unknown */
	const struct kt_family *fam;
	struct kt_shape shape;
	/* nearest answers only within this log-distance when
	 * max_distance_set (0: exact only; INFINITY: no limit), else within
	 * LOOKUP_MAX_DISTANCE */
	int max_distance_set;
	double max_distance;
};

struct lookup_answer {
	enum lookup_match match;
	double distance;	/* log-distance to the tuned shape (0: exact/default) */
	struct kt_config cfg;
	const struct lookup_entry *src;	/* borrowed from the table; NULL: default */
	const struct store_device *device;	/* borrowed; NULL when unknown */
	char arch[16];
	struct kt_target target;	/* what check()/plan() were asked for */
	double floor_us;	/* roofline floor of the asked shape; 0: unknown */
	double max_distance;	/* the limit that applied */
	/* the closest valid shape past the limit, in the stage that would
	 * have answered with it (borrowed; NULL: none) */
	const struct lookup_entry *skipped;
	double skipped_distance;
};

/* 0 with *a filled; -1 with KT_ENOTFOUND (unknown device and no arch, no
 * default) or KT_EINVAL (several devices and none named). */
int lookup_best(const struct lookup_table *t, const struct lookup_query *q,
		struct lookup_answer *a, struct kt_err *err);

/* The log-distance between two shapes over the non-structural dims, or -1
 * when a structural dim differs. */
double lookup_distance(const struct kt_family *f, const struct kt_shape *a,
		       const struct kt_shape *b);
/* The compile target of a device row: its arch (with the sm_90a features
 * on sm_90), shared memory and SM count. -1 with KT_EINVAL for an arch that
 * kernels/ does not know. */
int lookup_device_target(const char *arch, const struct store_device *d,
			 struct kt_target *out, struct kt_err *err);

/* ---- JSON shared by the CLI, the routes and the export (shapes and configs:
 * famjson.h) ---- */
json_t *lookup_device_json(const struct store_device *d);
/* The answer: match, distance, config, measured times, floor, baselines,
 * speedups and the sweep's provenance. */
json_t *lookup_answer_json(const struct lookup_query *q, const struct lookup_answer *a);
/* Parses a max_distance argument: a number >= 0, or "inf" / "none" for no
 * limit. -1 with KT_EINVAL naming what is wrong. */
int lookup_max_distance_parse(const char *text, double *out, struct kt_err *err);
/* The same, into q's limit (max_distance_set); text NULL leaves q as it is. */
int lookup_query_max_distance(struct lookup_query *q, const char *text, struct kt_err *err);
/* Parses a JSON object of shape dims ({"tokens": 1024, ...}) or a key
 * string ("tokens=1024,..."). */
int lookup_shape_from_json(const struct kt_family *f, json_t *j, struct kt_shape *out,
			   struct kt_err *err);

#endif
