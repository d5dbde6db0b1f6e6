/* test_jit.c -- NVRTC compiles on the build machine (no GPU needed). */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tuner/jit.h"

static struct kt_program probe(const char *def)
{
	struct kt_program p;

	memset(&p, 0, sizeof(p));
	p.tpl = "probe";
	if (def) {
		snprintf(p.defines[0], sizeof(p.defines[0]), "%s", def);
		p.ndefines = 1;
	}
	return p;
}

static void test_compile_ok(void)
{
	const char *arches[] = { "sm_80", "sm_90", "sm_90a" };
	size_t i;

	for (i = 0; i < sizeof(arches) / sizeof(arches[0]); i++) {
		struct kt_program p = probe("PROBE_SCALE=3.0f");
		struct jit_result r;
		struct kt_err e = { 0 };

		CU_ASSERT_EQUAL_FATAL(jit_compile(&p, arches[i], &r, &e), 0);
		CU_ASSERT_EQUAL(r.ok, 1);
		CU_ASSERT(r.cubin_len > 64);
		CU_ASSERT(r.cubin && memcmp(r.cubin, "\177ELF", 4) == 0);
		CU_ASSERT_EQUAL(strlen(r.key), 32);
		jit_result_release(&r);
		CU_ASSERT_PTR_NULL(r.cubin);
	}
}

static void test_compile_error_keeps_log(void)
{
	struct kt_program p = probe("PROBE_BROKEN=1");
	struct jit_result r;
	struct kt_err e = { 0 };

	CU_ASSERT_EQUAL_FATAL(jit_compile(&p, "sm_90", &r, &e), 0);
	CU_ASSERT_EQUAL(r.ok, 0);
	CU_ASSERT_PTR_NULL(r.cubin);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r.log);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.log, "this_is_not_cuda"));
	jit_result_release(&r);
}

static void test_bad_input(void)
{
	struct kt_program p = probe(NULL);
	struct jit_result r;
	struct kt_err e = { 0 };

	p.tpl = "no_such_template";
	CU_ASSERT_EQUAL(jit_compile(&p, "sm_90", &r, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINTERNAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no_such_template"));

	p = probe(NULL);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(jit_compile(&p, "compute_90", &r, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(jit_compile(&p, "sm_9x", &r, &e), -1);
}

static void test_key(void)
{
	struct kt_program a = probe("PROBE_SCALE=2.0f"), b = probe("PROBE_SCALE=3.0f");
	char ka[33], ka2[33], kb[33], kc[33];
	struct kt_err e = { 0 };

	CU_ASSERT_EQUAL(jit_key(&a, "sm_90", ka, &e), 0);
	CU_ASSERT_EQUAL(jit_key(&a, "sm_90", ka2, &e), 0);
	CU_ASSERT_EQUAL(jit_key(&b, "sm_90", kb, &e), 0);
	CU_ASSERT_EQUAL(jit_key(&a, "sm_80", kc, &e), 0);
	CU_ASSERT_STRING_EQUAL(ka, ka2);
	CU_ASSERT_STRING_NOT_EQUAL(ka, kb);
	CU_ASSERT_STRING_NOT_EQUAL(ka, kc);
	CU_ASSERT_EQUAL(strlen(jit_templates_hash()), 32);
	CU_ASSERT(strchr(jit_nvrtc_version(), '.') != NULL);
}

static void test_pool(void)
{
	struct kt_program progs[6];
	struct jit_job jobs[6];
	int i;

	memset(jobs, 0, sizeof(jobs));
	for (i = 0; i < 6; i++) {
		char def[48];

		snprintf(def, sizeof(def), "PROBE_SCALE=%d.0f", i + 1);
		progs[i] = probe(i == 5 ? "PROBE_BROKEN=1" : def);
		jobs[i].prog = &progs[i];
		jobs[i].arch = i % 2 ? "sm_80" : "sm_90";
	}
	jit_compile_all(jobs, 6, 2);
	for (i = 0; i < 6; i++) {
		CU_ASSERT_EQUAL(jobs[i].failed, 0);
		CU_ASSERT_EQUAL(jobs[i].res.ok, i == 5 ? 0 : 1);
		jit_result_release(&jobs[i].res);
	}
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("jit (NVRTC, no GPU)", NULL, NULL);
	CU_add_test(s, "compiles for sm_80, sm_90, sm_90a", test_compile_ok);
	CU_add_test(s, "a compile error is an outcome with its log", test_compile_error_keeps_log);
	CU_add_test(s, "unknown template and bad arch are errors", test_bad_input);
	CU_add_test(s, "cache key follows options and arch", test_key);
	CU_add_test(s, "thread pool compiles a batch", test_pool);
	return kt_test_main();
}
