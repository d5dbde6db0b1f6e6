/*
 * json_min.h -- a small strict JSON reader for libktune's tables.
 *
 * libktune reads `ktune export --format json` without jansson, so that the
 * shared library links nothing but libc (Debian's libjansson.a is not
 * position-independent, and the GPU machines have no jansson). RFC 8259
 * values; strings are unescaped to UTF-8 (\u escapes included); numbers are
 * kept as doubles. Depth is capped; errors say where.
 *
 * A parsed document owns every node; jm_free() releases it all.
 */
#ifndef KT_JSON_MIN_H
#define KT_JSON_MIN_H

#include <stddef.h>

enum jm_type { JM_NULL = 0, JM_FALSE, JM_TRUE, JM_NUMBER, JM_STRING, JM_ARRAY, JM_OBJECT };

struct jm_node {
	enum jm_type type;
	double num;		/* JM_NUMBER */
	char *str;		/* JM_STRING (NUL-terminated); an object member's key */
	char *key;		/* set for the members of an object */
	int n;			/* JM_ARRAY, JM_OBJECT: children */
	struct jm_node **kids;
};

/* Parses len bytes; NULL with a message in why (line and column) when the
 * text is not one JSON value. */
struct jm_node *jm_parse(const char *text, size_t len, char *why, size_t whylen);
void jm_free(struct jm_node *n);

/* The member of an object by key (NULL: absent or not an object). */
const struct jm_node *jm_get(const struct jm_node *obj, const char *key);
/* A member's string / number, or def when absent or of another type. */
const char *jm_str(const struct jm_node *obj, const char *key, const char *def);
double jm_num(const struct jm_node *obj, const char *key, double def);

#endif
