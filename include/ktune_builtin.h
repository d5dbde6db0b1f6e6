/*
 * ktune_builtin.h -- the layout of a compiled-in tuned table, for the code
 * `ktune export --format lib` generates (ktune_table.c in the bundle) and
 * libktune reads (ktune_open_builtin). Users of a bundle need only
 * ktune.h and the bundle's ktune_tuned.h.
 *
 * The same data as the JSON export's devices and entries, plus the
 * bundle's cubins: one per program, keyed by its identity ("<template>
 * <arch> <define> <define> ...", defines in the plan's order), whose
 * kernels carry `prefix` before the template's names (unique names per
 * program, so that the sources also link into one binary).
 */
#ifndef KTUNE_BUILTIN_H
#define KTUNE_BUILTIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KTUNE_BUILTIN_VERSION 1

struct ktune_builtin_device {
	const char *name;	/* "NVIDIA H200" */
	const char *uuid;	/* "GPU-..." (NULL: unknown) */
	const char *arch;	/* "sm_90" */
	int32_t sms;
	int64_t l2_bytes;
	int32_t smem_optin;
};

struct ktune_builtin_entry {
	int32_t device;		/* index into devices */
	const char *family;
	const char *shape;	/* shape key */
	const char *config;	/* config key */
	double median_us;
};

struct ktune_builtin_binary {
	const char *program;	/* identity, see above */
	const char *prefix;	/* "ktune_p3_" */
	const unsigned char *data;	/* cubin (ELF) or fatbin */
	int64_t len;
};

struct ktune_builtin {
	int32_t version;	/* KTUNE_BUILTIN_VERSION */
	int32_t ndevices;
	const struct ktune_builtin_device *devices;
	int32_t nentries;
	const struct ktune_builtin_entry *entries;
	int32_t nbinaries;
	/* pointers: each program's record is defined beside its cubin */
	const struct ktune_builtin_binary *const *binaries;
};

#ifdef __cplusplus
}
#endif

#endif
