#include "templates.h"

#include <string.h>

const struct kt_template *kt_template_find(const char *name)
{
	const struct kt_template *t;

	for (t = kt_templates; name && t->name; t++)
		if (strcmp(t->name, name) == 0)
			return t;
	return NULL;
}
