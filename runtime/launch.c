/*
 * launch.c -- libktune on the GPU: the caller's context, the binaries of a
 * call (shipped, cached on disk, or compiled by NVRTC once) loaded per
 * context, and the launches themselves.
 *
 * A call is warm in a context once its kernels are loaded there; a warm
 * call takes the table's lock only to find its entry and to give it back
 * (callcache.h bounds the entries; retired ones are freed when no call is
 * in flight), then builds its arguments and tensor maps on the stack and
 * enqueues its launches: no synchronization, no allocation on the device,
 * no compile, so it may be captured into a CUDA graph. Building a call (planning, compiling,
 * loading) is serialized by the table's build lock and refused while the
 * stream captures (cuModuleLoadData and NVRTC do not belong in a graph).
 */
#include "rt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jit_one.h"

struct rt_mod {
	char *id;
	CUmodule mod;
	char prefix[32];
	struct rt_mod *next;
};

struct rt_ctx {
	CUcontext ctx;
	struct chain_device dev;
	char uuid[64];
	struct rt_mod *mods;
	struct rt_cache calls;
	struct rt_ctx *next;
};

static int cu_fail(const struct ktune_table *t, CUresult r, const char *what)
{
	char desc[256];

	cu_api_describe(&t->api, r, desc, sizeof(desc));
	return rt_fail(KTUNE_ERROR_CUDA, "%s: %s", what, desc);
}

/* Loads the driver once per table. Callers hold t->lock. */
static int api_ready(struct ktune_table *t)
{
	struct kt_err err = { 0 };
	CUresult r;

	if (t->api_state == 0) {
		if (cu_api_load(&t->api, &err) < 0) {
			t->api_state = -1;
			snprintf(t->api_why, sizeof(t->api_why), "%s", err.msg);
		} else if ((r = t->api.Init(0)) != CUDA_SUCCESS) {
			t->api_state = -1;
			cu_api_describe(&t->api, r, t->api_why, sizeof(t->api_why));
		} else {
			t->api_state = 1;
		}
	}
	if (t->api_state < 0)
		return rt_fail(KTUNE_ERROR_NO_GPU, "no GPU: %s", t->api_why);
	return KTUNE_OK;
}

/* Device 0's primary context, retained once per table. */
static int dev0_ctx(struct ktune_table *t, CUcontext *ctx)
{
	CUdevice dev;
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&t->lock);
	if (!t->dev0 && (r = t->api.DeviceGet(&dev, 0)) == CUDA_SUCCESS)
		r = t->api.DevicePrimaryCtxRetain(&t->dev0, dev);
	*ctx = t->dev0;
	pthread_mutex_unlock(&t->lock);
	if (r != CUDA_SUCCESS) {
		char desc[256];

		cu_api_describe(&t->api, r, desc, sizeof(desc));
		return rt_fail(KTUNE_ERROR_NO_GPU, "no context is current and device 0's cannot be had: %s",
			       desc);
	}
	return KTUNE_OK;
}

/* The stream's context (the current one for the NULL stream), made
 * current for this call when it is not: *pushed says to pop it.
 * The NULL stream on a thread where no context is current means what it
 * means to the CUDA runtime there: cudaGetDevice() answers 0 on such a
 * thread, so device 0's primary context. Frameworks reach this case: a
 * thread whose current device is already 0 by default never calls
 * cudaSetDevice (PyTorch's autograd threads), and the runtime API binds
 * the context only at that thread's first runtime call. */
static int ctx_enter(struct ktune_table *t, ktune_stream stream, CUcontext *ctx, int *pushed)
{
	CUcontext cur = NULL;
	CUresult r;
	int rc;

	*pushed = 0;
	*ctx = NULL;
	if ((r = t->api.CtxGetCurrent(&cur)) != CUDA_SUCCESS)
		return cu_fail(t, r, "cuCtxGetCurrent");
	if (stream) {
		if ((r = t->api.StreamGetCtx((CUstream)stream, ctx)) != CUDA_SUCCESS)
			return cu_fail(t, r, "cuStreamGetCtx (is the stream valid?)");
	} else if (cur) {
		*ctx = cur;
	} else if ((rc = dev0_ctx(t, ctx)) != KTUNE_OK) {
		return rc;
	}
	if (!*ctx)
		return rt_fail(KTUNE_ERROR_NO_GPU,
			       "no CUDA context is current on this thread: make a device current "
			       "first (cudaSetDevice, torch.cuda.set_device, cuCtxSetCurrent) or pass "
			       "a stream");
	if (*ctx != cur) {
		if ((r = t->api.CtxPushCurrent(*ctx)) != CUDA_SUCCESS)
			return cu_fail(t, r, "cuCtxPushCurrent");
		*pushed = 1;
	}
	return KTUNE_OK;
}

static void ctx_leave(struct ktune_table *t, int pushed)
{
	CUcontext popped;

	if (pushed)
		t->api.CtxPopCurrent(&popped);
}

/* The device of the current context, read once: name, uuid (as ktune
 * records it), arch, resources. */
static int device_read(struct ktune_table *t, struct chain_device *d, char uuid[64])
{
	CUdevice dev;
	CUuuid u;
	CUresult r;
	int major = 0, minor = 0, sms = 0, smem = 0, l2 = 0;
	const unsigned char *b = (const unsigned char *)u.bytes;

	memset(d, 0, sizeof(*d));
	uuid[0] = 0;
	if ((r = t->api.CtxGetDevice(&dev)) != CUDA_SUCCESS)
		return cu_fail(t, r, "cuCtxGetDevice");
	if ((r = t->api.DeviceGetName(d->name, (int)sizeof(d->name) - 1, dev)) != CUDA_SUCCESS ||
	    (r = t->api.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
					   dev)) != CUDA_SUCCESS ||
	    (r = t->api.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
					   dev)) != CUDA_SUCCESS ||
	    (r = t->api.DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)) !=
		    CUDA_SUCCESS ||
	    (r = t->api.DeviceGetAttribute(&smem,
					   CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
					   dev)) != CUDA_SUCCESS ||
	    (r = t->api.DeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev)) !=
		    CUDA_SUCCESS)
		return cu_fail(t, r, "reading the device's properties");
	if (t->api.DeviceGetUuid(&u, dev) == CUDA_SUCCESS)
		snprintf(uuid, 64,
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
			 b[13], b[14], b[15]);
	snprintf(d->arch, sizeof(d->arch), "sm_%d%d", major, minor);
	d->sms = sms;
	d->smem_optin = smem;
	d->l2_bytes = l2;
	return KTUNE_OK;
}

/* The context's state, made on first use. Callers hold t->lock and have
 * entered ctx. */
static int ctx_state(struct ktune_table *t, CUcontext ctx, struct rt_ctx **out)
{
	struct rt_ctx *c;
	int rc;

	for (c = t->ctxs; c; c = c->next)
		if (c->ctx == ctx) {
			*out = c;
			return KTUNE_OK;
		}
	if (!(c = calloc(1, sizeof(*c))))
		return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
	if ((rc = device_read(t, &c->dev, c->uuid)) != KTUNE_OK) {
		free(c);
		return rc;
	}
	c->ctx = ctx;
	c->next = t->ctxs;
	t->ctxs = c;
	*out = c;
	return KTUNE_OK;
}

static struct rt_mod *mod_find(struct rt_ctx *c, const char *id)
{
	struct rt_mod *m;

	for (m = c->mods; m; m = m->next)
		if (strcmp(m->id, id) == 0)
			return m;
	return NULL;
}

static int mkdirs(const char *path)
{
	char buf[1024];
	char *p;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -1;
	for (p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(buf, 0777) != 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static unsigned char *file_read(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	unsigned char *data = NULL;
	long n;

	if (!fp)
		return NULL;
	if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) > 0 && fseek(fp, 0, SEEK_SET) == 0 &&
	    (data = malloc((size_t)n)) && fread(data, 1, (size_t)n, fp) == (size_t)n) {
		*len = (size_t)n;
	} else {
		free(data);
		data = NULL;
	}
	fclose(fp);
	return data;
}

/* Best effort: a cache that cannot be written only costs a compile. The
 * name is unique to this process and thread until the rename. */
static void file_write(const char *dir, const char *name, const void *data, size_t len)
{
	char path[1200], tmp[1300];
	FILE *fp;
	int ok;

	if (mkdirs(dir) != 0)
		return;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.%ld.%p.tmp", path, (long)getpid(), (void *)&ok);
	if (!(fp = fopen(tmp, "wb")))
		return;
	ok = fwrite(data, 1, len, fp) == len;
	ok = fclose(fp) == 0 && ok;
	if (!ok || rename(tmp, path) != 0)
		remove(tmp);
}

/* A program's binary for arch: shipped with the table, else from the disk
 * cache, else compiled with NVRTC (and cached). *owned is what to free. */
static int binary_get(struct ktune_table *t, const struct kt_program *p, const char *arch,
		      const unsigned char **data, size_t *len, unsigned char **owned,
		      const char **prefix)
{
	const struct rt_bin *b = rt_bin_find(t, p, arch);
	struct jit_result r;
	struct kt_err err = { 0 };
	char key[33], name[64], path[1200];

	*owned = NULL;
	*prefix = "";
	if (b) {
		*data = b->data;
		*len = b->len;
		*prefix = b->prefix;
		return KTUNE_OK;
	}
	if (jit_key(p, arch, key, &err) < 0)
		return rt_fail_err(&err);
	snprintf(name, sizeof(name), "%s.cubin", key);
	if (t->cache_dir[0]) {
		snprintf(path, sizeof(path), "%s/%s", t->cache_dir, name);
		if ((*owned = file_read(path, len))) {
			*data = *owned;
			return KTUNE_OK;
		}
	}
	if (!t->nvrtc)
		return rt_fail(KTUNE_ERROR_COMPILE,
			       "program %s for %s is neither shipped nor cached, and NVRTC is off "
			       "(option nvrtc)", p->tpl, arch);
	if (jit_compile(p, arch, &r, &err) < 0)
		return rt_fail(KTUNE_ERROR_COMPILE, "%s", err.msg);
	if (!r.ok) {
		const char *log = r.log ? r.log : "";
		size_t n = strlen(log);

		rt_fail(KTUNE_ERROR_COMPILE, "NVRTC rejected %s for %s: %s", p->tpl, arch,
			n > 600 ? log + n - 600 : log);
		jit_result_release(&r);
		return KTUNE_ERROR_COMPILE;
	}
	if (t->cache_dir[0])
		file_write(t->cache_dir, name, r.cubin, r.cubin_len);
	*owned = r.cubin;
	*data = r.cubin;
	*len = r.cubin_len;
	r.cubin = NULL;
	jit_result_release(&r);
	return KTUNE_OK;
}

/* Loads what call c needs into context x (current): its modules, its
 * functions and their attributes. capturing: nothing may be loaded. */
static int call_load(struct ktune_table *t, struct rt_ctx *x, struct rt_call *c, int capturing)
{
	struct rt_mod *mods[KT_MAX_PROGRAMS] = { NULL };
	char id[KT_MAX_DEFINES * 48 + 128], name[KT_NAME_MAX + 32];
	CUresult r;
	int i, rc;

	for (i = 0; i < c->plan.nprograms; i++) {
		const unsigned char *data = NULL;
		unsigned char *owned = NULL, *copy;
		const char *prefix;
		size_t len = 0;
		struct rt_mod *m;

		rt_program_id(&c->plan.programs[i], c->arch, id, sizeof(id));
		if ((mods[i] = mod_find(x, id)))
			continue;
		if (capturing)
			return rt_fail(KTUNE_ERROR_CAPTURE,
				       "%s: not warm on this device and the stream is capturing a CUDA "
				       "graph: run the call once before capturing (it loads %s)",
				       c->shape.fam->name, c->plan.programs[i].tpl);
		if ((rc = binary_get(t, &c->plan.programs[i], c->arch, &data, &len, &owned,
				     &prefix)) != KTUNE_OK)
			return rc;
		if (!(m = calloc(1, sizeof(*m))) || !(m->id = strdup(id)) ||
		    !(copy = malloc(len))) {
			if (m)
				free(m->id);
			free(m);
			free(owned);
			return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
		}
		/* the driver wants an aligned ELF image */
		memcpy(copy, data, len);
		r = t->api.ModuleLoadData(&m->mod, copy);
		free(copy);
		free(owned);
		if (r != CUDA_SUCCESS) {
			free(m->id);
			free(m);
			return cu_fail(t, r, "cuModuleLoadData");
		}
		snprintf(m->prefix, sizeof(m->prefix), "%s", prefix);
		m->next = x->mods;
		x->mods = m;
		mods[i] = m;
	}
	for (i = 0; i < c->plan.nprep + c->plan.nlaunch; i++) {
		const struct kt_launch *l = i < c->plan.nprep ? &c->plan.prep[i]
							       : &c->plan.launch[i - c->plan.nprep];
		struct rt_mod *m = mods[l->program];

		if (!c->run[i])
			continue;
		snprintf(name, sizeof(name), "%s%s", m->prefix, l->kernel);
		if ((r = t->api.ModuleGetFunction(&c->fn[i], m->mod, name)) != CUDA_SUCCESS)
			return cu_fail(t, r, name);
		/* also below 48 KiB: static plus dynamic above it needs the opt-in */
		if (l->smem > 0 &&
		    (r = t->api.FuncSetAttribute(c->fn[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
						 (int)l->smem)) != CUDA_SUCCESS)
			return cu_fail(t, r, "setting the dynamic shared memory opt-in");
		/* clusters of more than 8 CTAs need this; a driver that does not
		 * know it fails only such a launch */
		if (c->target.sm >= 90 &&
		    (r = t->api.FuncSetAttribute(c->fn[i],
						 CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)) !=
			    CUDA_SUCCESS &&
		    r != CUDA_ERROR_INVALID_VALUE && r != CUDA_ERROR_NOT_SUPPORTED)
			return cu_fail(t, r, "allowing non-portable cluster sizes");
	}
	return KTUNE_OK;
}

/* The call for shape s in context x: the published one, or planned and
 * loaded now (serialized by t->build). */
static int call_get(struct ktune_table *t, struct rt_ctx *x, const struct rt_shape *s,
		    ktune_stream stream, struct rt_call **out)
{
	struct rt_call *c;
	CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
	unsigned gen;
	CUresult r;
	int rc;

	pthread_mutex_lock(&t->lock);
	gen = t->generation;
	c = rt_cache_find(&x->calls, s->key, gen);
	pthread_mutex_unlock(&t->lock);
	if (c) {
		*out = c;
		return KTUNE_OK;
	}
	if ((r = t->api.StreamIsCapturing((CUstream)stream, &cap)) != CUDA_SUCCESS)
		return cu_fail(t, r, "cuStreamIsCapturing");
	pthread_mutex_lock(&t->build);
	pthread_mutex_lock(&t->lock);
	c = rt_cache_find(&x->calls, s->key, gen);
	pthread_mutex_unlock(&t->lock);
	if (c) {
		pthread_mutex_unlock(&t->build);
		*out = c;
		return KTUNE_OK;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		pthread_mutex_unlock(&t->build);
		return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
	}
	if ((rc = rt_call_plan(t, s, &x->dev, x->uuid, c)) != KTUNE_OK ||
	    (rc = call_load(t, x, c, cap != CU_STREAM_CAPTURE_STATUS_NONE)) != KTUNE_OK) {
		free(c);
		pthread_mutex_unlock(&t->build);
		return rc;
	}
	c->choice.warm = 1;
	pthread_mutex_lock(&t->lock);
	rc = rt_cache_put(&x->calls, s->key, gen, c, rt_reclaim_list(&t->reclaim));
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_unlock(&t->build);
	if (rc != 0) {
		free(c);
		return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
	}
	*out = c;
	return KTUNE_OK;
}

/* Encodes map arg a of a launch over ptr (buffer b). */
static int tmap_encode(struct ktune_table *t, const struct kt_launch *l, int j,
		       const struct kt_buf *b, CUdeviceptr ptr, CUtensorMap *out)
{
	static const CUtensorMapDataType types[] = {
		[KT_BF16] = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
		[KT_F32] = CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
		[KT_I32] = CU_TENSOR_MAP_DATA_TYPE_INT32,
	};
	const struct kt_tmap *m = &l->args[j].tmap;
	cuuint64_t dims[3], strides[2];
	cuuint32_t box[3], estr[3] = { 1, 1, 1 };
	CUtensorMapSwizzle sw;
	CUresult r;
	int k;

	if (!t->api.TensorMapEncodeTiled)
		return rt_fail(KTUNE_ERROR_CUDA,
			       "%s: the NVIDIA driver has no cuTensorMapEncodeTiled (CUDA 12.0 or "
			       "newer needed)", l->kernel);
	for (k = 0; k < m->rank; k++) {
		dims[k] = (cuuint64_t)m->dims[k];
		box[k] = (cuuint32_t)m->box[k];
		if (k > 0)	/* bytes, for the driver */
			strides[k - 1] = (cuuint64_t)m->strides[k] * kt_dtype_size(b->dtype);
	}
	sw = m->swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B :
	     m->swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B :
	     m->swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_NONE;
	r = t->api.TensorMapEncodeTiled(out, types[b->dtype], (cuuint32_t)m->rank,
					(void *)(uintptr_t)ptr, dims, strides, box, estr,
					CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
					CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
					CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r != CUDA_SUCCESS) {
		char what[200];

		snprintf(what, sizeof(what), "cuTensorMapEncodeTiled (%s arg %d over '%s')", l->kernel,
			 j, b->name);
		return cu_fail(t, r, what);
	}
	return KTUNE_OK;
}

static int launch_one(struct ktune_table *t, const struct rt_call *c, int li,
		      const CUdeviceptr *ptrs, CUstream stream)
{
	const struct kt_launch *l = li < c->plan.nprep ? &c->plan.prep[li]
						       : &c->plan.launch[li - c->plan.nprep];
	union cu_arg vals[KT_MAX_ARGS];
	CUtensorMap maps[KT_MAX_ARGS];
	void *params[KT_MAX_ARGS + 1];
	CUresult r;
	int j, rc;

	for (j = 0; j < l->nargs; j++) {
		const struct kt_arg *a = &l->args[j];

		params[j] = &vals[j];
		switch (a->kind) {
		case KT_ARG_BUF:
			vals[j].p = ptrs[a->buf];
			break;
		case KT_ARG_I32:
			vals[j].i32 = (int)a->i;
			break;
		case KT_ARG_I64:
			vals[j].i64 = a->i;
			break;
		case KT_ARG_F32:
			vals[j].f = a->f;
			break;
		case KT_ARG_TMAP:
			/* by value: the driver copies the 128 bytes */
			if ((rc = tmap_encode(t, l, j, &c->bufs[a->buf], ptrs[a->buf], &maps[j])) !=
			    KTUNE_OK)
				return rc;
			params[j] = &maps[j];
			break;
		}
	}
	params[l->nargs] = NULL;
	/* a PDL kernel waits for its predecessor before touching memory
	 * (compiled with KT_PDL), whatever that predecessor is */
	r = cu_api_launch(&t->api, c->fn[li], l->grid, l->block, l->smem, stream, params,
			  l->cooperative, l->pdl && t->pdl);
	if (r != CUDA_SUCCESS) {
		char what[160];

		snprintf(what, sizeof(what), "launching %s of %s", l->kernel, c->shape.fam->name);
		return cu_fail(t, r, what);
	}
	return KTUNE_OK;
}

static int aligned(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

/* Binds the call's buffers and launches it. */
static int call_launch(struct ktune_table *t, const struct rt_call *c, void *const *user,
		       int nuser, const void *prepared, int64_t prepared_bytes, void *ws,
		       int64_t ws_bytes, ktune_stream stream)
{
	CUdeviceptr ptrs[KT_MAX_BUFS];
	CUresult r;
	int i, rc;

	if (nuser != c->nuser)
		return rt_fail(KTUNE_ERROR_INVALID, "%s: %d buffers given, the family takes %d",
			       c->shape.fam->name, nuser, c->nuser);
	if (c->ws_bytes && (!ws || ws_bytes < (int64_t)c->ws_bytes))
		return rt_fail(KTUNE_ERROR_WORKSPACE,
			       "%s: the workspace holds %lld bytes, the config needs %zu "
			       "(..._workspace_size)", c->shape.fam->name,
			       (long long)(ws ? ws_bytes : 0), c->ws_bytes);
	if (ws && !aligned(ws))
		return rt_fail(KTUNE_ERROR_INVALID, "%s: the workspace is not 16-byte aligned",
			       c->shape.fam->name);
	if (c->prep_bytes && (!prepared || prepared_bytes < (int64_t)c->prep_bytes))
		return rt_fail(KTUNE_ERROR_WORKSPACE,
			       "%s: the prepared buffer holds %lld bytes, it needs %zu "
			       "(..._prepared_size, then ..._prepare)", c->shape.fam->name,
			       (long long)(prepared ? prepared_bytes : 0), c->prep_bytes);
	if (prepared && !aligned(prepared))
		return rt_fail(KTUNE_ERROR_INVALID, "%s: the prepared buffer is not 16-byte aligned",
			       c->shape.fam->name);
	for (i = 0; i < c->nbufs; i++) {
		const struct rt_bind *b = &c->bind[i];

		switch (b->kind) {
		case RT_USER:
			if (!user[b->user] || !aligned(user[b->user]))
				return rt_fail(KTUNE_ERROR_INVALID, "%s: buffer '%s' is %s",
					       c->shape.fam->name, c->bufs[i].name,
					       user[b->user] ? "not 16-byte aligned" : "NULL");
			ptrs[i] = (CUdeviceptr)(uintptr_t)user[b->user];
			break;
		case RT_WS:
			ptrs[i] = (CUdeviceptr)((uintptr_t)ws + b->offset);
			break;
		case RT_PREP:
			ptrs[i] = (CUdeviceptr)((uintptr_t)prepared + b->offset);
			break;
		default:
			ptrs[i] = 0;
		}
	}
	for (i = 0; i < c->nbufs; i++)
		if (c->bind[i].kind == RT_WS && c->bufs[i].zeroed && c->bind[i].bytes &&
		    (r = t->api.MemsetD8Async(ptrs[i], 0, c->bind[i].bytes, (CUstream)stream)) !=
			    CUDA_SUCCESS)
			return cu_fail(t, r, "zeroing a counter buffer");
	for (i = 0; i < c->plan.nprep + c->plan.nlaunch; i++)
		if (c->run[i] && (rc = launch_one(t, c, i, ptrs, (CUstream)stream)) != KTUNE_OK)
			return rc;
	return KTUNE_OK;
}

/* A caller inside enter_call .. leave_call: whether it pushed a context,
 * and its reclaim slot. */
struct inside {
	int pushed;
	int slot;
};

/* Ends what enter_call began: the call it gave is no longer used by this
 * thread. Frees what the caches retired that no caller can hold any more. */
static void leave_call(struct ktune_table *t, const struct inside *in)
{
	struct rt_cache_entry *free_now;

	pthread_mutex_lock(&t->lock);
	free_now = rt_reclaim_leave(&t->reclaim, in->slot);
	pthread_mutex_unlock(&t->lock);
	rt_cache_free_list(free_now);
	ctx_leave(t, in->pushed);
}

/* The call of s in the stream's context, valid until the caller's
 * leave_call (with *in). */
static int enter_call(struct ktune_table *t, const struct rt_shape *s, ktune_stream stream,
		      struct rt_call **c, struct inside *in)
{
	CUcontext ctx;
	struct rt_ctx *x = NULL;
	int rc;

	in->pushed = 0;
	pthread_mutex_lock(&t->lock);
	rc = api_ready(t);
	pthread_mutex_unlock(&t->lock);
	if (rc != KTUNE_OK)
		return rc;
	if ((rc = ctx_enter(t, stream, &ctx, &in->pushed)) != KTUNE_OK)
		return rc;
	pthread_mutex_lock(&t->lock);
	rc = ctx_state(t, ctx, &x);
	in->slot = rt_reclaim_enter(&t->reclaim);
	pthread_mutex_unlock(&t->lock);
	if (rc == KTUNE_OK)
		rc = call_get(t, x, s, stream, c);
	if (rc != KTUNE_OK) {
		leave_call(t, in);
		in->pushed = 0;
	}
	return rc;
}

int rt_run(struct ktune_table *t, const struct rt_shape *s, void *const *user, int nuser,
	   const void *prepared, int64_t prepared_bytes, void *ws, int64_t ws_bytes,
	   ktune_stream stream)
{
	struct rt_call *c;
	struct inside in;
	int rc;

	if ((rc = enter_call(t, s, stream, &c, &in)) != KTUNE_OK)
		return rc;
	rc = call_launch(t, c, user, nuser, prepared, prepared_bytes, ws, ws_bytes, stream);
	leave_call(t, &in);
	if (rc == KTUNE_OK)
		rt_ok();
	return rc;
}

int rt_run_plan(struct ktune_table *t, const struct kt_family *f, const struct kt_plan *p,
		const struct kt_buf *bufs, int nbufs, const CUdeviceptr *ptrs, ktune_stream stream)
{
	struct rt_call *c;
	struct rt_ctx *x = NULL;
	CUcontext ctx;
	struct kt_err err = { 0 };
	int pushed, rc, i;

	pthread_mutex_lock(&t->lock);
	rc = api_ready(t);
	pthread_mutex_unlock(&t->lock);
	if (rc != KTUNE_OK)
		return rc;
	if (!(c = calloc(1, sizeof(*c))))
		return rt_fail(KTUNE_ERROR_INTERNAL, "out of memory");
	if ((rc = ctx_enter(t, stream, &ctx, &pushed)) != KTUNE_OK) {
		free(c);
		return rc;
	}
	pthread_mutex_lock(&t->lock);
	rc = ctx_state(t, ctx, &x);
	pthread_mutex_unlock(&t->lock);
	if (rc != KTUNE_OK)
		goto out;
	c->shape.fam = f;
	c->plan = *p;
	c->nbufs = nbufs;
	memcpy(c->bufs, bufs, (size_t)nbufs * sizeof(*bufs));
	if (chain_target(x->dev.arch, &x->dev, &c->target, &err) < 0) {
		rc = rt_fail_err(&err);
		goto out;
	}
	kt_target_arch(&c->target, c->arch, sizeof(c->arch));
	for (i = 0; i < p->nprep + p->nlaunch; i++)
		c->run[i] = 1;
	pthread_mutex_lock(&t->build);
	rc = call_load(t, x, c, 0);
	pthread_mutex_unlock(&t->build);
	for (i = 0; rc == KTUNE_OK && i < p->nprep + p->nlaunch; i++)
		rc = launch_one(t, c, i, ptrs, (CUstream)stream);
out:
	ctx_leave(t, pushed);
	free(c);
	return rc;
}

/* A device to plan for without a GPU: the "arch" option's target. */
static int offline_device(const struct ktune_table *t, struct chain_device *d)
{
	struct kt_target tg;
	size_t n;

	int i;

	memset(d, 0, sizeof(*d));
	if (!t->arch[0] || kt_target_named(t->arch, &tg) < 0)
		return -1;
	/* a device of the table named by option "device" (uuid, then name):
	 * its resources, so that the plan is the one it would run */
	for (i = 0; t->device[0] && t->uuids && i < t->ndevices; i++)
		if (strcmp(t->uuids[i], t->device) == 0 && chain_arch_same(t->devices[i].arch, t->arch)) {
			*d = t->devices[i];
			return 0;
		}
	for (i = 0; t->device[0] && i < t->ndevices; i++)
		if (strcasecmp(t->devices[i].name, t->device) == 0 &&
		    chain_arch_same(t->devices[i].arch, t->arch)) {
			*d = t->devices[i];
			return 0;
		}
	snprintf(d->name, sizeof(d->name), "%s", t->device);
	snprintf(d->arch, sizeof(d->arch), "%s", t->arch);
	n = strlen(d->arch);
	if (n && d->arch[n - 1] == 'a')
		d->arch[n - 1] = 0;
	d->smem_optin = tg.smem_optin;
	return 0;
}

int rt_choose(struct ktune_table *t, const struct rt_shape *s, ktune_stream stream,
	      struct rt_call *out)
{
	struct chain_device dev;
	struct rt_call *c;
	struct inside in;
	int rc;

	pthread_mutex_lock(&t->lock);
	rc = api_ready(t);
	pthread_mutex_unlock(&t->lock);
	if (rc == KTUNE_OK && (rc = enter_call(t, s, stream, &c, &in)) == KTUNE_OK) {
		*out = *c;
		leave_call(t, &in);
		rt_ok();
		return KTUNE_OK;
	}
	/* no driver, device or context: the "arch" option's target, if set */
	if (rc != KTUNE_ERROR_NO_GPU || !t->arch[0])
		return rc;
	if (offline_device(t, &dev) < 0)
		return rt_fail(KTUNE_ERROR_INVALID, "option arch '%s' is no known target", t->arch);
	if ((rc = rt_call_plan(t, s, &dev, NULL, out)) == KTUNE_OK)
		rt_ok();
	return rc;
}

/* Runs a prepare plan (prep launches only) in the stream's context. */
int rt_prepare(struct ktune_table *t, const struct kt_family *f, const struct kt_shape *s,
	       void *const *user, int nuser, void *prepared, int64_t prepared_bytes,
	       ktune_stream stream)
{
	struct rt_shape key;
	struct rt_call *c;
	struct inside in;
	int rc, i;

	/* the prepare plan as a call of its own, cached like any other */
	memset(&key, 0, sizeof(key));
	key.fam = f;
	key.shape = *s;
	snprintf(key.key, sizeof(key.key), "prepare %s", f->name);
	for (i = 0; i < f->ndims; i++)
		if (!(strcmp(f->dims[i].name, "tokens") == 0))
			snprintf(key.key + strlen(key.key), sizeof(key.key) - strlen(key.key),
				 " %s=%ld", f->dims[i].name, s->v[i]);
	key.prepare = 1;
	if ((rc = enter_call(t, &key, stream, &c, &in)) != KTUNE_OK)
		return rc;
	rc = call_launch(t, c, user, nuser, prepared, prepared_bytes, NULL, 0, stream);
	leave_call(t, &in);
	if (rc == KTUNE_OK)
		rt_ok();
	return rc;
}

void ktune_close(ktune_table *t)
{
	struct rt_ctx *x, *nx;

	if (!t)
		return;
	rt_cache_free_list(rt_reclaim_all(&t->reclaim));
	for (x = t->ctxs; x; x = nx) {
		struct rt_mod *m, *nm;

		nx = x->next;
		for (m = x->mods; m; m = nm) {
			nm = m->next;
			/* a context the caller destroyed took its modules along;
			 * unloading then fails harmlessly */
			if (t->api_state > 0)
				t->api.ModuleUnload(m->mod);
			free(m->id);
			free(m);
		}
		rt_cache_clear(&x->calls);
		free(x);
	}
	if (t->dev0) {
		CUdevice dev;

		if (t->api.DeviceGet(&dev, 0) == CUDA_SUCCESS)
			t->api.DevicePrimaryCtxRelease(dev);
	}
	rt_table_free(t);
}
