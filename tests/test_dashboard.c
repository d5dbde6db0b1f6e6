/*
 * test_dashboard.c -- the dashboard at / rendered by headless Chromium
 * (Debian's `chromium`) against the real server: the winners table has the
 * fixture's rows, the sweeps table its sweeps, and both Chart.js charts
 * were drawn. The screenshot is kept as build/artifacts/dashboard.png.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/server.h"
#include "tests/server/fixture.h"
#include "tests/testutil.h"

#define CHROMIUM "/usr/bin/chromium"
#define CHARTJS "/usr/share/javascript/chart.js/chart.min.js"

static struct fx_result fx;
static struct server *srv;
static int port;

static int suite_init(void)
{
	struct serve_opts o;
	struct kt_err err = { 0 };
	const char *db = kt_test_path("dash.db");

	if (fx_build(db, &fx) < 0)
		return 1;
	memset(&o, 0, sizeof(o));
	o.db_path = db;
	o.listen = "127.0.0.1:0";
	o.threads = 2;
	o.quiet = 1;
	if (server_start(&o, &srv, &err) < 0) {
		fprintf(stderr, "server_start: %s\n", err.msg);
		return 1;
	}
	port = server_port(srv);
	return 0;
}

static int suite_clean(void)
{
	server_stop(srv);
	return 0;
}

/* build/artifacts next to the ktune binary under test. */
static const char *artifact_dir(void)
{
	static char dir[600];
	const char *bin = kt_test_ktune(), *slash = strrchr(bin, '/');

	snprintf(dir, sizeof(dir), "%.*s/artifacts", slash ? (int)(slash - bin) : 1, slash ? bin : ".");
	mkdir(dir, 0777);
	return dir;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (; (hay = strstr(hay, needle)); hay += strlen(needle))
		n++;
	return n;
}

/* 1 when the element whose tag holds `id` also holds `attr`. */
static int tag_has(const char *dom, const char *id, const char *attr)
{
	const char *p = strstr(dom, id), *start, *end;

	if (!p)
		return 0;
	for (start = p; start > dom && *start != '<'; start--)
		;
	if (!(end = strchr(p, '>')))
		return 0;
	for (p = start; p + strlen(attr) <= end; p++)
		if (strncmp(p, attr, strlen(attr)) == 0)
			return 1;
	return 0;
}

static void test_dom(void)
{
	char url[64], *out = NULL, *tb;
	char *argv[] = { CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
			 "--disable-dev-shm-usage", "--no-first-run", "--virtual-time-budget=15000",
			 "--dump-dom", url, NULL };
	int rc, i;

	if (access(CHROMIUM, X_OK) != 0 || access(CHARTJS, R_OK) != 0) {
		CU_FAIL("chromium and libjs-chart.js are needed (apt-get install chromium libjs-chart.js)");
		return;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	rc = kt_test_exec(argv, NULL, &out, 120);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	/* the page's script finished without an error */
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "data-state=\"ready\""));
	/* the winners table: one row per winner, with the device and shape */
	tb = strstr(out, "id=\"winners\"");
	CU_ASSERT_PTR_NOT_NULL_FATAL(tb);
	for (i = 0; i < FX_NPROBLEMS; i++)
		CU_ASSERT_PTR_NOT_NULL(strstr(tb, fx_problems[i].shape));
	/* configs are shown with zero-width spaces after the commas */
	{
		char *r = tb, *w = tb;

		for (; *r; r++) {
			if (strncmp(r, "\xe2\x80\x8b", 3) == 0) {
				r += 2;
				continue;
			}
			*w++ = *r;
		}
		*w = 0;
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(tb, fx.winner_key[0]));
	CU_ASSERT(count(strstr(out, "id=\"winners\""), "<tr>") >= FX_NPROBLEMS + 1);
	/* the sweeps table and both charts */
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "id=\"sweeps\""));
	CU_ASSERT(tag_has(out, "id=\"speedup-chart\"", "data-rendered=\"1\""));
	CU_ASSERT(tag_has(out, "id=\"time-chart\"", "data-rendered=\"1\""));
	/* the time chart plotted the newest sweep's two ok trials */
	CU_ASSERT(tag_has(out, "id=\"time-chart\"", "data-points=\"2\""));
	/* no message in the page's error line */
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "<div id=\"msg\"></div>"));
	if (!strstr(out, "data-state=\"ready\""))
		fprintf(stderr, "%s\n", out);
	free(out);
}

static void test_screenshot(void)
{
	char url[64], shot[700], arg[720], *out = NULL;
	char *argv[] = { CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
			 "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
			 "--window-size=1400,2400", "--virtual-time-budget=15000", arg, url, NULL };
	struct stat sb;
	FILE *fp;
	unsigned char magic[8];

	if (access(CHROMIUM, X_OK) != 0) {
		CU_FAIL("chromium is needed (apt-get install chromium)");
		return;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	snprintf(shot, sizeof(shot), "%s/dashboard.png", artifact_dir());
	unlink(shot);
	snprintf(arg, sizeof(arg), "--screenshot=%s", shot);
	CU_ASSERT_EQUAL(kt_test_exec(argv, NULL, &out, 120), 0);
	free(out);
	CU_ASSERT_EQUAL_FATAL(stat(shot, &sb), 0);
	CU_ASSERT(sb.st_size > 10000);	/* a page with two charts, not a blank one */
	fp = fopen(shot, "rb");
	CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
	CU_ASSERT_EQUAL(fread(magic, 1, 8, fp), 8);
	fclose(fp);
	CU_ASSERT_EQUAL(memcmp(magic, "\x89PNG\r\n\x1a\n", 8), 0);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("dashboard", suite_init, suite_clean);
	CU_add_test(s, "chromium renders the winners, sweeps and both charts", test_dom);
	CU_add_test(s, "screenshot kept as build/artifacts/dashboard.png", test_screenshot);
	return kt_test_main();
}
