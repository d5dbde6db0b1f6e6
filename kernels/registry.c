/*
 * registry.c -- every family ktune knows, by name and in listing order
 * (family.h's registry). Apart from family.c so that the helpers the
 * families call and the table that names the families are two files,
 * and no family file and family.c call each other.
 */
#include "family.h"

#include <string.h>

extern const struct kt_family dense_family;
extern const struct kt_family lowrank_family;
extern const struct kt_family monarch_family;	/* kernels/monarch.c */
extern const struct kt_family monarch_bm_family;
extern const struct kt_family blast_family;	/* kernels/blast.c */
extern const struct kt_family blockattn_fwd_family;	/* kernels/blockattn.c */
extern const struct kt_family blockattn_bwd_family;
extern const struct kt_family selftest_family;	/* kernels/selftest.c */

/* Listing order is presentation order; hidden families go last. */
static const struct kt_family *const registry[] = {
	&dense_family,
	&lowrank_family,
	&monarch_family,
	&monarch_bm_family,
	&blast_family,
	&blockattn_fwd_family,
	&blockattn_bwd_family,
	&selftest_family,
};

#define NREGISTRY ((int)(sizeof(registry) / sizeof(registry[0])))

const struct kt_family *kt_family_find(const char *name)
{
	int i;

	for (i = 0; name && i < NREGISTRY; i++)
		if (strcmp(registry[i]->name, name) == 0)
			return registry[i];
	return NULL;
}

int kt_family_count(void)
{
	return NREGISTRY;
}

const struct kt_family *kt_family_at(int i)
{
	return i >= 0 && i < NREGISTRY ? registry[i] : NULL;
}
