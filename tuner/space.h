/*
 * space.h -- the candidates of one sweep: every config of a family's space
 * that its constraints accept for a shape on a target, pruned before
 * anything is compiled. A struct space owns its array; space_release()
 * frees it.
 */
#ifndef KT_SPACE_H
#define KT_SPACE_H

#include "../kernels/family.h"

struct space {
	struct kt_config *cfg;	/* valid configs, in the family's order */
	long n;
	long visited;		/* configs looked at, valid or not */
	long pruned;		/* rejected by check() */
};

/* Fills sp with the valid configs (planted variants too when with_planted). */
int space_build(const struct kt_family *f, const struct kt_shape *s,
		const struct kt_target *tgt, int with_planted, struct space *sp,
		struct kt_err *err);
void space_release(struct space *sp);

/* Parses list, comma-separated variant names of f ("tcmix_ws,naive_ws"),
 * into a mask of variant indexes; an unknown or empty name is an error
 * naming f's variants. */
int space_variant_mask(const struct kt_family *f, const char *list, unsigned *mask,
		       struct kt_err *err);
/* Keeps the configs of sp whose variant is in mask (planted ones too). */
void space_keep_variants(const struct kt_family *f, struct space *sp, unsigned mask);

/* Keeps the configs of sp named by keys[0..n-1] (config keys as `ktune
 * best` prints them, in any order; planted ones are kept too). A key that
 * does not parse, or names a config outside sp (check()'s reason when the
 * family refuses it at s on tgt), is an error and sp is left as it was.
 * ident gets a short name of the kept set ("<count>/<hash>", independent
 * of the keys' order and spelling) for the sweep's identity. */
int space_keep_configs(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_target *tgt, struct space *sp, const char *const *keys,
		       int n, char *ident, size_t identlen, struct kt_err *err);

#endif
