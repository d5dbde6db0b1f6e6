/*
 * import.h -- load a JSON export (export.h, format "ktune-export" version 1)
 * into a store: devices, problems, configs, one sweep per entry with its
 * provenance, the winning trial, its retime and its baselines.
 *
 * The whole document is validated before anything is written, so a bad
 * file writes nothing. Importing the same file twice adds nothing: an
 * entry whose sweep (same device, problem, strategy, options) already has
 * the winning config is skipped. This is how a machine without a GPU
 * serves the project's own H200 results (data/h200-results.json).
 */
#ifndef KT_IMPORT_H
#define KT_IMPORT_H

#include <jansson.h>
#include <stddef.h>

#include "../db/store.h"
#include "../util/err.h"

struct import_stats {
	int devices;		/* device rows upserted */
	int entries;		/* entries in the document */
	int entries_added;	/* winners written */
	int entries_skipped;	/* already present */
};

int import_json(struct store *st, json_t *doc, struct import_stats *stats,
		struct kt_err *err);
/* KT_EINVAL for text that is not JSON or not an export. */
int import_json_text(struct store *st, const char *text, size_t len,
		     struct import_stats *stats, struct kt_err *err);
int import_json_file_stats(struct store *st, const char *path, struct import_stats *stats,
			   struct kt_err *err);
/* Reads and checks the export at path without touching any database, so
 * that a command can refuse a bad file before it creates one: *doc gets
 * the document (the caller drops it) for import_json(). */
int import_json_file_load(const char *path, json_t **doc, struct kt_err *err);
int import_json_file(struct store *st, const char *path, struct kt_err *err);

#endif
