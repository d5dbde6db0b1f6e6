/*
 * check_table.c -- `make check` of a ktune export bundle (written there
 * from ktune's runtime/bundle_check.c): the library links, opens its
 * compiled-in table, and answers every entry as tuned (an exact match, the
 * entry's config) with every program of the call among its own cubins, so
 * that no shipped shape needs NVRTC. Plans for each entry's arch, so it
 * needs no GPU.
 */
#include <stdio.h>
#include <string.h>

#include "ktune_tuned.h"

int main(void)
{
	ktune_table *t = NULL;
	int i, bad = 0, rc;

	if ((rc = ktune_open_tuned(&t)) != KTUNE_OK) {
		fprintf(stderr, "ktune_open_tuned: %s: %s\n", ktune_status_name(rc), ktune_last_error());
		return 1;
	}
	for (i = 0; i < ktune_tuned.nentries; i++) {
		const struct ktune_builtin_entry *e = &ktune_tuned.entries[i];
		const struct ktune_builtin_device *d = &ktune_tuned.devices[e->device];
		ktune_choice c;
		char arch[24];

		snprintf(arch, sizeof(arch), "%s%s", d->arch, strcmp(d->arch, "sm_90") == 0 ? "a" : "");
		if (ktune_set_option(t, "arch", arch) != KTUNE_OK ||
		    ktune_set_option(t, "device", d->name) != KTUNE_OK ||
		    (rc = ktune_choose(t, e->family, e->shape, NULL, &c)) != KTUNE_OK) {
			fprintf(stderr, "entry %d (%s %s): %s\n", i, e->family, e->shape, ktune_last_error());
			bad++;
			continue;
		}
		if (strcmp(c.match, "exact") != 0 || strcmp(c.config, e->config) != 0 || !c.shipped) {
			fprintf(stderr, "entry %d (%s %s): %s %s, %s\n", i, e->family, e->shape, c.match,
				c.config, c.shipped ? "shipped" : "NOT every program shipped");
			bad++;
			continue;
		}
		printf("entry %d: %s %s -> %s (%d kernels, workspace %lld bytes)\n", i, e->family,
		       e->shape, c.config, (int)c.nkernels, (long long)c.workspace_bytes);
	}
	printf("%d of %d entries answered from the bundle's cubins\n", (int)ktune_tuned.nentries - bad,
	       (int)ktune_tuned.nentries);
	ktune_close(t);
	return bad != 0;
}
