/*
 * export.h -- tuned tables out of the database, for production builds and
 * for other ktune databases.
 *
 *   json  everything the importer (import.h) needs to rebuild the winners
 *         in another database (devices, problems, configs, the sweep with
 *         its provenance, the winning trial, baselines), plus what a third
 *         party needs to launch each winner (kernel names in launch order,
 *         compile defines, argument list, buffers, grid / block / dynamic
 *         shared memory for its shape, offline transform);
 *   c     one header (ktune_tuned.h): libktune's compiled-in table
 *         (include/ktune_builtin.h) of the devices and winners; libktune
 *         answers from it by the same chain (runtime/chain.h); compiles as
 *         C11 and C++;
 *   lib   (also "cuda") a folder that `make` turns into a library:
 *         libktune's own sources, the table, and one .cu per program the
 *         entries run (kernels renamed per program), compiled ahead of time
 *         by nvcc into cubins that the library loads: no NVRTC for shipped
 *         shapes. runtime/bundle.mk is its Makefile.
 *
 * An export is built in memory as a set of named files, so the CLI writes
 * them to disk and the server sends them.
 */
#ifndef KT_EXPORT_H
#define KT_EXPORT_H

#include <jansson.h>
#include <stddef.h>

#include "../db/store.h"
#include "../util/err.h"

#define EXPORT_FORMAT_NAME "ktune-export"
#define EXPORT_FORMAT_VERSION 1

enum export_format { EXPORT_JSON = 0, EXPORT_C, EXPORT_CUDA };
/* "json", "c", "lib" or "cuda" -> 0 and *out; -1 otherwise. */
int export_format_parse(const char *name, enum export_format *out);

struct export_filter {
	const char *device;	/* uuid, id or name; NULL: all */
	const char *family;	/* NULL: all */
};

struct export_file {
	char name[128];		/* "ktune_tuned.h", "ktune_e3_dense.cu", "export.json" */
	char *data;		/* owned, NUL-terminated */
	size_t len;
};

struct export_bundle {
	int n;
	struct export_file *files;
};
void export_bundle_release(struct export_bundle *b);

/* The export as a JSON document (owned by the caller). */
int export_json(struct store *st, const struct export_filter *f, json_t **out,
		struct kt_err *err);
/* The files of an export in the given format. */
int export_build(struct store *st, enum export_format fmt, const struct export_filter *f,
		 struct export_bundle *out, struct kt_err *err);
/* json and c: one file written to path ("-": stdout); lib: a directory
 * (created) holding every file, in folders. */
int export_bundle_write(const struct export_bundle *b, enum export_format fmt,
			const char *path, struct kt_err *err);

#endif
