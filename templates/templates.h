/*
 * templates.h -- the CUDA C++ templates embedded in the binary at build time
 * (tools/embed.c generates the table from the files listed in
 * templates/module.mk). A template is compiled with NVRTC; its parameters
 * are -D macros, its kernels extern "C".
 */
#ifndef KT_TEMPLATES_H
#define KT_TEMPLATES_H

#include <stddef.h>

struct kt_template {
	const char *name;	/* "gemm" for templates/gemm.cu */
	const char *path;	/* path in the source tree */
	const char *text;	/* NUL-terminated */
	size_t len;
};

/* Terminated by an entry with name == NULL. */
extern const struct kt_template kt_templates[];

/* NULL when no template has that name. */
const struct kt_template *kt_template_find(const char *name);

#endif
