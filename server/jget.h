/* jget.h -- lenient field reads of a JSON object, for documents checked
 * before use (an export being imported, the export's own JSON): a missing
 * or mistyped field reads as "" or 0. */
#ifndef KTUNE_SERVER_JGET_H
#define KTUNE_SERVER_JGET_H

#include <jansson.h>

static inline const char *jget_str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

static inline double jget_num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_number(v) ? json_number_value(v) : 0;
}

#endif
