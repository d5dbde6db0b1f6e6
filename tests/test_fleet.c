/*
 * test_fleet.c -- several devices of one host (CPU test devices, so it runs
 * on CI): problems shared between them, a device that fails taken out and
 * its work redone on the others, one database.
 */
#include <stdlib.h>
#include <string.h>

#include "db/store.h"
#include "testutil.h"
#include "tuner/fleet.h"

static void base_opts(struct sweep_opts *o, const char *db)
{
	sweep_opts_default(o);
	o->db_path = db;
	o->threads = 1;
	o->timeout_s = 5;
	o->worker.exe = kt_test_ktune();
	o->worker.backend = WORKER_BACKEND_CPU;
}

static void test_parse_devices(void)
{
	struct worker_opts wo;
	int d[FLEET_MAX_DEVICES];
	struct kt_err e = { 0 };

	worker_opts_default(&wo);
	wo.exe = kt_test_ktune();
	wo.backend = WORKER_BACKEND_CPU;
	CU_ASSERT_EQUAL(fleet_parse_devices("0,2", &wo, d, &e), 2);
	CU_ASSERT_EQUAL(d[1], 2);
	CU_ASSERT_EQUAL(fleet_parse_devices("1,1", &wo, d, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(fleet_parse_devices("zero", &wo, d, &e), -1);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(fleet_parse_devices("0,", &wo, d, &e), 1);
	/* "all" probes real workers: three CPU test devices here. */
	setenv("KTUNE_CPU_DEVICES", "3", 1);
	CU_ASSERT_EQUAL(fleet_parse_devices("all", &wo, d, &e), 3);
	setenv("KTUNE_CPU_DEVICES", "0", 1);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(fleet_parse_devices("all", &wo, d, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_ENOGPU);
	setenv("KTUNE_CPU_DEVICES", "2", 1);
}

static void test_share_and_take_out(void)
{
	const char *db = kt_test_path("fleet.db");
	const char *shapes[] = { "n=1024", "n=2048", "n=4096", "n=8192", "n=16384" };
	struct fleet_item items[5];
	struct fleet_report rep;
	struct sweep_opts o;
	struct kt_err e = { 0 };
	int devs[3] = { 0, 1, 7 };	/* 7 does not exist: taken out */
	int i, total = 0;
	struct store *st = NULL;
	struct store_sweep *sw = NULL;
	int n = 0, uuid0 = 0, uuid1 = 0;

	setenv("KTUNE_CPU_DEVICES", "2", 1);
	memset(items, 0, sizeof(items));
	for (i = 0; i < 5; i++) {
		items[i].family = "selftest";
		items[i].shape = shapes[i];
	}
	base_opts(&o, db);
	CU_ASSERT_EQUAL_FATAL(fleet_run(&o, devs, 3, items, 5, &rep, NULL, NULL, &e), 0);
	CU_ASSERT_EQUAL(rep.failed[2], 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(rep.why[2], "no CPU test device 7"));
	CU_ASSERT_EQUAL(rep.swept[2], 0);
	for (i = 0; i < 3; i++)
		total += rep.swept[i];
	CU_ASSERT_EQUAL(total, 5);
	for (i = 0; i < 5; i++) {
		CU_ASSERT_EQUAL(items[i].done, 1);
		CU_ASSERT(items[i].device == 0 || items[i].device == 1);
		CU_ASSERT(items[i].sum.best_us > 0);
	}
	/* One database, each sweep with its own device's provenance. */
	CU_ASSERT_EQUAL_FATAL(store_open(db, STORE_RO, &st, &e), 0);
	CU_ASSERT_EQUAL(store_sweeps_list(st, 0, &sw, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 5);
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(sw[i].status, STORE_SWEEP_DONE);
		uuid0 += strstr(sw[i].provenance_json, "\"CPU-0\"") != NULL;
		uuid1 += strstr(sw[i].provenance_json, "\"CPU-1\"") != NULL;
		store_sweep_release(&sw[i]);
	}
	free(sw);
	store_close(st);
	CU_ASSERT_EQUAL(uuid0 + uuid1, 5);
	CU_ASSERT(uuid0 >= 1 && uuid1 >= 1);
}

static void test_no_device_left(void)
{
	struct fleet_item item;
	struct fleet_report rep;
	struct sweep_opts o;
	struct kt_err e = { 0 };
	int devs[2] = { 8, 9 };

	memset(&item, 0, sizeof(item));
	item.family = "selftest";
	item.shape = "n=64";
	base_opts(&o, kt_test_path("none.db"));
	CU_ASSERT_EQUAL(fleet_run(&o, devs, 2, &item, 1, &rep, NULL, NULL, &e), -1);
	CU_ASSERT_EQUAL(item.done, 0);
	CU_ASSERT_EQUAL(rep.failed[0] + rep.failed[1], 2);
	CU_ASSERT_EQUAL(e.code, KT_ENOGPU);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("several devices (CPU test devices)", NULL, NULL);
	CU_add_test(s, "--devices parsing and probing all", test_parse_devices);
	CU_add_test(s, "problems shared, a failing device taken out", test_share_and_take_out);
	CU_add_test(s, "no device left: every problem reported", test_no_device_left);
	return kt_test_main();
}
