/*
 * launch.c -- a config's launch recipe at a shape as JSON (launch.h): what
 * the JSON export carries per entry and GET /v1/best per answer.
 */
#include "launch.h"

#include "../kernels/family.h"

static const char *const role_names[] = { "input", "output", "scratch" };
static const char *const dtype_names[] = { "bf16", "f32", "i32" };

static json_t *launch_json(const struct kt_plan *p, const struct kt_launch *l)
{
	json_t *args = json_array();
	int i;

	for (i = 0; i < l->nargs; i++) {
		const struct kt_arg *a = &l->args[i];

		switch (a->kind) {
		case KT_ARG_BUF:
			json_array_append_new(args, json_pack("{s:s,s:i}", "buf", "", "index", a->buf));
			break;
		case KT_ARG_I32:
			json_array_append_new(args, json_pack("{s:I}", "i32", (json_int_t)a->i));
			break;
		case KT_ARG_I64:
			json_array_append_new(args, json_pack("{s:I}", "i64", (json_int_t)a->i));
			break;
		case KT_ARG_F32:
			json_array_append_new(args, json_pack("{s:f}", "f32", (double)a->f));
			break;
		case KT_ARG_TMAP: {
			/* The map is built at run time over the buffer's device
			 * pointer (libktune does it, runtime/launch.c): what is
			 * exported is its description, with every setting a
			 * runner of its own needs. */
			const struct kt_tmap *t = &a->tmap;
			int r = t->rank < 1 ? 1 : t->rank > 3 ? 3 : t->rank, k;
			json_t *dims = json_array(), *strides = json_array(), *box = json_array();

			for (k = 0; k < r; k++) {
				json_array_append_new(dims, json_integer((json_int_t)t->dims[k]));
				json_array_append_new(strides, json_integer((json_int_t)t->strides[k]));
				json_array_append_new(box, json_integer(t->box[k]));
			}
			/* "buf_index", not "index": "index" marks a pointer arg. */
			json_array_append_new(args, json_pack(
				"{s:{s:i,s:i,s:o,s:o,s:o,s:i,s:s,s:s,s:s,s:s,s:i},s:s}", "tmap",
				"buf_index", a->buf, "rank", t->rank, "dims", dims, "strides_elems",
				strides, "box", box, "swizzle", t->swizzle,
				"dtype", "the buffer's (bf16, or fp32 for fp32 scratch)",
				"l2_promotion", "128B", "oob_fill", "none (zeros)",
				"interleave", "none", "element_strides", 1, "comment",
				"TMA tensor map (CUtensorMap, 128 bytes by value) over buffer buf_index, "
				"built with cuTensorMapEncodeTiled at each call (strides in bytes = "
				"strides_elems x the element size); libktune does it"));
			break;
		}
		}
	}
	(void)p;
	/* "cooperative": the kernel's CTAs wait for each other; a runner must
	 * launch it with cuLaunchCooperativeKernel (or cuLaunchKernelEx with
	 * CU_LAUNCH_ATTRIBUTE_COOPERATIVE), or it may hang */
	/* "pdl": may go out with programmatic dependent launch (cuLaunchKernelEx,
	 * CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): the kernel
	 * waits for the previous one itself, so it is a speed hint only */
	return json_pack("{s:s,s:i,s:[i,i,i],s:[i,i,i],s:i,s:b,s:b,s:o}", "kernel", l->kernel,
			 "program", l->program, "grid", l->grid[0], l->grid[1], l->grid[2],
			 "block", l->block[0], l->block[1], l->block[2], "smem", l->smem,
			 "cooperative", l->cooperative != 0, "pdl", l->pdl != 0, "args", args);
}

json_t *launch_plan_json(const struct kt_family *f, const struct kt_shape *s,
			 const struct kt_config *c, const struct kt_target *tgt,
			 struct kt_err *err)
{
	struct kt_buf bufs[KT_MAX_BUFS];
	struct kt_plan p;
	json_t *o, *progs, *jb, *prep, *launch;
	char arch[24];
	int nb, i, k;

	if (f->plan(f, s, c, tgt, &p, err) < 0)
		return NULL;
	nb = f->buffers ? f->buffers(f, s, c, bufs) : 0;
	kt_target_arch(tgt, arch, sizeof(arch));
	progs = json_array();
	for (i = 0; i < p.nprograms; i++) {
		json_t *defs = json_array(), *opts = json_array();

		json_array_append_new(opts, json_sprintf("--gpu-architecture=%s", arch));
		json_array_append_new(opts, json_string("-std=c++17"));
		for (k = 0; k < p.programs[i].ndefines; k++) {
			json_array_append_new(defs, json_string(p.programs[i].defines[k]));
			json_array_append_new(opts, json_sprintf("-D%s", p.programs[i].defines[k]));
		}
		json_array_append_new(progs, json_pack("{s:s,s:s,s:o,s:o}", "template",
			p.programs[i].tpl, "arch", arch, "defines", defs, "options", opts));
	}
	jb = json_array();
	for (i = 0; i < nb; i++)
		json_array_append_new(jb, json_pack("{s:s,s:s,s:s,s:I}", "name", bufs[i].name,
			"role", role_names[bufs[i].role], "dtype", dtype_names[bufs[i].dtype],
			"elems", (json_int_t)bufs[i].elems));
	prep = json_array();
	launch = json_array();
	for (i = 0; i < p.nprep; i++)
		json_array_append_new(prep, launch_json(&p, &p.prep[i]));
	for (i = 0; i < p.nlaunch; i++)
		json_array_append_new(launch, launch_json(&p, &p.launch[i]));
	/* Name the buffer arguments, so a reader needs no index table. */
	for (k = 0; k < 2; k++) {
		json_t *arr = k ? launch : prep, *l;
		size_t li;

		json_array_foreach(arr, li, l) {
			json_t *a;
			size_t ai;

			json_array_foreach(json_object_get(l, "args"), ai, a) {
				json_t *ix = json_object_get(a, "index");

				if (ix && json_integer_value(ix) < nb)
					json_object_set_new(a, "buf",
						json_string(bufs[json_integer_value(ix)].name));
			}
		}
	}
	o = json_pack("{s:s,s:o,s:o,s:o,s:o,s:s}", "target", arch, "programs", progs,
		      "buffers", jb, "prep", prep, "launches", launch, "transform", p.transform);
	return o;
}
