/*
 * sources.h -- libktune's own sources, packed into ktune at build time
 * (tools/embed.c -r, the files RT_PACK lists in runtime/module.mk), so that
 * an export bundle builds the very runtime this ktune was built with.
 */
#ifndef KT_SOURCES_H
#define KT_SOURCES_H

#include <stddef.h>

struct kt_source {
	const char *path;	/* in the source tree: "runtime/api.c" */
	const char *text;	/* NUL-terminated */
	size_t len;
};

/* Terminated by an entry with path == NULL. */
extern const struct kt_source kt_runtime_sources[];

#endif
