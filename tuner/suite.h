/*
 * suite.h -- the named workloads of the development suite (docs/benchmarks.md):
 * "dense:4096x4096:N1024" -> family dense, shape tokens=1024,in=4096,out=4096.
 * The main job sweeps these; the bench script reports against them.
 */
#ifndef KT_SUITE_H
#define KT_SUITE_H

struct suite_workload {
	const char *id;		/* "lowrank:llama7b_qkvo:N1024" */
	const char *family;
	const char *shape;	/* canonical shape text */
	const char *peers;	/* comma-separated peer names (docs/benchmarks.md) */
};

/* Terminated by id == NULL. Workloads of families ktune does not have yet
 * are listed too: callers skip them with kt_family_find() == NULL. */
extern const struct suite_workload suite_dev[];
const struct suite_workload *suite_find(const char *id);

#endif
