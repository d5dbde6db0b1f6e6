/*
 * api.c -- include/ktune.h's calls: each builds its rt_shape and buffer
 * list and hands them to launch.c. The buffer lists follow each family's
 * buffers() (kernels/): inputs and outputs in order.
 */
#include "rt.h"

#include <stdio.h>
#include <string.h>

int rt_run(struct ktune_table *t, const struct rt_shape *s, void *const *user, int nuser,
	   const void *prepared, int64_t prepared_bytes, void *ws, int64_t ws_bytes,
	   ktune_stream stream);
int rt_prepare(struct ktune_table *t, const struct kt_family *f, const struct kt_shape *s,
	       void *const *user, int nuser, void *prepared, int64_t prepared_bytes,
	       ktune_stream stream);

#define NEED_TABLE(t)                                                            \
	do {                                                                     \
		if (!(t))                                                        \
			return rt_fail(KTUNE_ERROR_INVALID, "%s: table is NULL", \
				       __func__);                                \
	} while (0)

static int has_prepared(const struct kt_family *f)
{
	return f->prepare_plan != NULL;
}

/* rt_choose for shape s, its choice into *choice and its workspace size into
 * *ws_bytes (either may be NULL): KTUNE_OK or rt_choose's error. */
static int choose(ktune_table *t, const struct rt_shape *s, ktune_stream stream,
		  ktune_choice *choice, int64_t *ws_bytes)
{
	struct rt_call *c;
	int rc;

	/* an rt_call is large: off the stack */
	if (!(c = malloc(sizeof(*c))))
		return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
	if ((rc = rt_choose(t, s, stream, c)) == KTUNE_OK) {
		if (choice)
			*choice = c->choice;
		if (ws_bytes)
			*ws_bytes = (int64_t)c->ws_bytes;
	}
	free(c);
	return rc;
}

int ktune_choose(ktune_table *t, const char *family, const char *shape, ktune_stream stream,
		 ktune_choice *out)
{
	struct rt_shape s;
	int rc;

	NEED_TABLE(t);
	if (!out)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_choose: out is NULL");
	memset(out, 0, sizeof(*out));
	if ((rc = rt_shape_parse(family, shape, &s)) != KTUNE_OK)
		return rc;
	return choose(t, &s, stream, out, NULL);
}

int ktune_workspace_size(ktune_table *t, const char *family, const char *shape,
			 ktune_stream stream, int64_t *bytes)
{
	ktune_choice ch;
	int rc;

	if (!bytes)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_workspace_size: bytes is NULL");
	*bytes = 0;
	if ((rc = ktune_choose(t, family, shape, stream, &ch)) == KTUNE_OK)
		*bytes = ch.workspace_bytes;
	return rc;
}

int ktune_run(ktune_table *t, const char *family, const char *shape, void *const *buffers,
	      int32_t nbuffers, void *workspace, int64_t workspace_bytes, ktune_stream stream)
{
	struct rt_shape s;
	int rc, prep;

	NEED_TABLE(t);
	if ((rc = rt_shape_parse(family, shape, &s)) != KTUNE_OK)
		return rc;
	if (!buffers || nbuffers < 0)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_run: no buffers");
	prep = has_prepared(s.fam);
	if (prep && nbuffers < 1)
		return rt_fail(KTUNE_ERROR_INVALID, "%s: the prepared buffer comes last", s.fam->name);
	return rt_run(t, &s, buffers, nbuffers - prep, prep ? buffers[nbuffers - 1] : NULL,
		      prep ? INT64_MAX : 0, workspace, workspace_bytes, stream);
}

/* ---- linear families ---- */

static int ws_size(ktune_table *t, const char *family, const int64_t *dims, int n,
		   ktune_stream stream, int64_t *bytes)
{
	struct rt_shape s;
	int rc;

	NEED_TABLE(t);
	if (!bytes)
		return rt_fail(KTUNE_ERROR_INVALID, "%s_workspace_size: bytes is NULL", family);
	*bytes = 0;
	if ((rc = rt_shape_dims(family, dims, n, &s)) != KTUNE_OK)
		return rc;
	return choose(t, &s, stream, NULL, bytes);
}

static int run_dims(ktune_table *t, const char *family, const int64_t *dims, int n,
		    void *const *user, int nuser, const void *prepared, int64_t prepared_bytes,
		    void *ws, int64_t ws_bytes, ktune_stream stream)
{
	struct rt_shape s;
	int rc;

	NEED_TABLE(t);
	if ((rc = rt_shape_dims(family, dims, n, &s)) != KTUNE_OK)
		return rc;
	return rt_run(t, &s, user, nuser, prepared, prepared_bytes, ws, ws_bytes, stream);
}

int ktune_dense_workspace_size(ktune_table *t, int64_t tokens, int64_t in, int64_t out,
			       ktune_stream stream, int64_t *bytes)
{
	int64_t d[3] = { tokens, in, out };

	return ws_size(t, "dense", d, 3, stream, bytes);
}

int ktune_dense(ktune_table *t, const void *x, const void *w, void *y, int64_t tokens,
		int64_t in, int64_t out, void *workspace, int64_t workspace_bytes,
		ktune_stream stream)
{
	int64_t d[3] = { tokens, in, out };
	void *u[3] = { (void *)x, (void *)w, y };

	return run_dims(t, "dense", d, 3, u, 3, NULL, 0, workspace, workspace_bytes, stream);
}

int ktune_lowrank_workspace_size(ktune_table *t, int64_t tokens, int64_t in, int64_t out,
				 int64_t rank, ktune_stream stream, int64_t *bytes)
{
	int64_t d[4] = { tokens, in, out, rank };

	return ws_size(t, "lowrank", d, 4, stream, bytes);
}

int ktune_lowrank(ktune_table *t, const void *x, const void *v, const void *u, void *y,
		  int64_t tokens, int64_t in, int64_t out, int64_t rank, void *workspace,
		  int64_t workspace_bytes, ktune_stream stream)
{
	int64_t d[4] = { tokens, in, out, rank };
	void *b[4] = { (void *)x, (void *)v, (void *)u, y };

	return run_dims(t, "lowrank", d, 4, b, 4, NULL, 0, workspace, workspace_bytes, stream);
}

/* ---- prepared weights ---- */

static int prepared_size(const char *family, int64_t in, int64_t out, int64_t blocks,
			 int64_t rank, int64_t *bytes, struct rt_shape *s)
{
	int64_t d[5] = { 1, in, out, blocks, rank };
	struct kt_target tgt;
	size_t total;
	int rc;

	if (!bytes)
		return rt_fail(KTUNE_ERROR_INVALID, "%s_prepared_size: bytes is NULL", family);
	*bytes = 0;
	if ((rc = rt_shape_dims(family, d, 5, s)) != KTUNE_OK)
		return rc;
	/* the prepared layout is the same on every target */
	kt_target_named("sm_90a", &tgt);
	if ((rc = rt_prepared_layout(s->fam, &s->shape, &tgt, NULL, NULL, NULL, NULL, &total)) !=
	    KTUNE_OK)
		return rc;
	*bytes = (int64_t)total;
	rt_ok();
	return KTUNE_OK;
}

static int prepare(ktune_table *t, const char *family, void *const *user, int nuser,
		   void *prepared, int64_t prepared_bytes, int64_t in, int64_t out,
		   int64_t blocks, int64_t rank, ktune_stream stream)
{
	struct rt_shape s;
	int64_t need;
	int rc;

	NEED_TABLE(t);
	if ((rc = prepared_size(family, in, out, blocks, rank, &need, &s)) != KTUNE_OK)
		return rc;
	if (!prepared || prepared_bytes < need)
		return rt_fail(KTUNE_ERROR_WORKSPACE,
			       "%s_prepare: the prepared buffer holds %lld bytes, it needs %lld",
			       family, (long long)(prepared ? prepared_bytes : 0), (long long)need);
	return rt_prepare(t, s.fam, &s.shape, user, nuser, prepared, prepared_bytes, stream);
}

int ktune_monarch_prepared_size(ktune_table *t, int64_t in, int64_t out, int64_t blocks,
				int64_t rank, int64_t *bytes)
{
	struct rt_shape s;

	NEED_TABLE(t);
	return prepared_size("monarch", in, out, blocks, rank, bytes, &s);
}

int ktune_monarch_prepare(ktune_table *t, const void *w1, const void *w2, void *prepared,
			  int64_t prepared_bytes, int64_t in, int64_t out, int64_t blocks,
			  int64_t rank, ktune_stream stream)
{
	void *u[4] = { NULL, (void *)w1, (void *)w2, NULL };

	return prepare(t, "monarch", u, 4, prepared, prepared_bytes, in, out, blocks, rank,
		       stream);
}

int ktune_monarch_workspace_size(ktune_table *t, int64_t tokens, int64_t in, int64_t out,
				 int64_t blocks, int64_t rank, ktune_stream stream,
				 int64_t *bytes)
{
	int64_t d[5] = { tokens, in, out, blocks, rank };

	return ws_size(t, "monarch", d, 5, stream, bytes);
}

int ktune_monarch(ktune_table *t, const void *x, const void *w1, const void *w2,
		  const void *prepared, int64_t prepared_bytes, void *y, int64_t tokens,
		  int64_t in, int64_t out, int64_t blocks, int64_t rank, void *workspace,
		  int64_t workspace_bytes, ktune_stream stream)
{
	int64_t d[5] = { tokens, in, out, blocks, rank };
	void *u[4] = { (void *)x, (void *)w1, (void *)w2, y };

	return run_dims(t, "monarch", d, 5, u, 4, prepared, prepared_bytes, workspace, workspace_bytes, stream);
}

int ktune_monarch_bm_workspace_size(ktune_table *t, int64_t tokens, int64_t in, int64_t out,
				    int64_t blocks, int64_t rank, ktune_stream stream,
				    int64_t *bytes)
{
	int64_t d[5] = { tokens, in, out, blocks, rank };

	return ws_size(t, "monarch_bm", d, 5, stream, bytes);
}

int ktune_monarch_bm(ktune_table *t, const void *x, const void *w1, const void *w2,
		     const void *prepared, int64_t prepared_bytes, void *y, int64_t tokens,
		     int64_t in, int64_t out, int64_t blocks, int64_t rank, void *workspace,
		     int64_t workspace_bytes, ktune_stream stream)
{
	int64_t d[5] = { tokens, in, out, blocks, rank };
	void *u[4] = { (void *)x, (void *)w1, (void *)w2, y };

	return run_dims(t, "monarch_bm", d, 5, u, 4, prepared, prepared_bytes, workspace, workspace_bytes, stream);
}

int ktune_blast_prepared_size(ktune_table *t, int64_t in, int64_t out, int64_t blocks,
			      int64_t rank, int64_t *bytes)
{
	struct rt_shape s;

	NEED_TABLE(t);
	return prepared_size("blast", in, out, blocks, rank, bytes, &s);
}

int ktune_blast_prepare(ktune_table *t, const void *u, const void *v, const void *s,
			void *prepared, int64_t prepared_bytes, int64_t in, int64_t out,
			int64_t blocks, int64_t rank, ktune_stream stream)
{
	void *b[5] = { NULL, (void *)u, (void *)v, (void *)s, NULL };

	return prepare(t, "blast", b, 5, prepared, prepared_bytes, in, out, blocks, rank, stream);
}

int ktune_blast_workspace_size(ktune_table *t, int64_t tokens, int64_t in, int64_t out,
			       int64_t blocks, int64_t rank, ktune_stream stream, int64_t *bytes)
{
	int64_t d[5] = { tokens, in, out, blocks, rank };

	return ws_size(t, "blast", d, 5, stream, bytes);
}

int ktune_blast(ktune_table *t, const void *x, const void *u, const void *v, const void *s,
		const void *prepared, int64_t prepared_bytes, void *y, int64_t tokens,
		int64_t in, int64_t out, int64_t blocks, int64_t rank, void *workspace,
		int64_t workspace_bytes, ktune_stream stream)
{
	int64_t d[5] = { tokens, in, out, blocks, rank };
	void *b[5] = { (void *)x, (void *)u, (void *)v, (void *)s, y };

	return run_dims(t, "blast", d, 5, b, 5, prepared, prepared_bytes, workspace, workspace_bytes, stream);
}

/* ---- attention ---- */

int ktune_blockattn_workspace_size(ktune_table *t, int32_t backward, int64_t batch,
				   int64_t tokens, int64_t heads, int64_t head_dim,
				   int64_t block, int32_t rope, int64_t max_seqlen,
				   ktune_stream stream, int64_t *bytes)
{
	struct rt_shape s;
	int rc;

	NEED_TABLE(t);
	if (!bytes)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_blockattn_workspace_size: bytes is NULL");
	*bytes = 0;
	if ((rc = rt_shape_attn(backward != 0, batch, tokens, heads, head_dim, block, rope,
				max_seqlen, &s)) != KTUNE_OK)
		return rc;
	return choose(t, &s, stream, NULL, bytes);
}

/* Runs blockattn with the buffer list u[0..n-1], whose slot rope_at holds
 * the rope table: given exactly when rope is set, and dropped from the list
 * without rope (the kernels then take no table). */
static int attn_run(ktune_table *t, int backward, void **u, int n, int rope_at, int64_t batch,
		    int64_t tokens, int64_t heads, int64_t head_dim, int64_t block, int32_t rope,
		    int64_t max_seqlen, void *ws, int64_t ws_bytes, ktune_stream stream)
{
	struct rt_shape s;
	int rc, i;

	if ((rc = rt_shape_attn(backward, batch, tokens, heads, head_dim, block, rope, max_seqlen,
				&s)) != KTUNE_OK)
		return rc;
	if (!rope != !u[rope_at])
		return rt_fail(KTUNE_ERROR_INVALID, "blockattn_%s: rope %d %s a rope table",
			       backward ? "bwd" : "fwd", (int)rope, rope ? "needs" : "takes no");
	if (!rope) {
		for (i = rope_at; i + 1 < n; i++)
			u[i] = u[i + 1];
		n--;
	}
	return rt_run(t, &s, u, n, NULL, 0, ws, ws_bytes, stream);
}

int ktune_blockattn_fwd(ktune_table *t, const void *q, const void *k, const void *v, void *o,
			const int32_t *cu_seqlens, const void *rope_table, int64_t batch,
			int64_t tokens, int64_t heads, int64_t head_dim, int64_t block,
			int32_t rope, int64_t max_seqlen, void *workspace,
			int64_t workspace_bytes, ktune_stream stream)
{
	void *u[6] = { (void *)q, (void *)k, (void *)v, (void *)cu_seqlens, (void *)rope_table, o };

	NEED_TABLE(t);
	return attn_run(t, 0, u, 6, 4, batch, tokens, heads, head_dim, block, rope, max_seqlen,
			workspace, workspace_bytes, stream);
}

int ktune_blockattn_bwd(ktune_table *t, const void *q, const void *k, const void *v,
			const void *dout, void *dq, void *dk, void *dv,
			const int32_t *cu_seqlens, const void *rope_table, int64_t batch,
			int64_t tokens, int64_t heads, int64_t head_dim, int64_t block,
			int32_t rope, int64_t max_seqlen, void *workspace,
			int64_t workspace_bytes, ktune_stream stream)
{
	void *u[9] = { (void *)q, (void *)k, (void *)v, (void *)dout, (void *)cu_seqlens,
		       (void *)rope_table, dq, dk, dv };

	NEED_TABLE(t);
	return attn_run(t, 1, u, 9, 5, batch, tokens, heads, head_dim, block, rope, max_seqlen,
			workspace, workspace_bytes, stream);
}
