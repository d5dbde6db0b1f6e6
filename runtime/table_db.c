/*
 * table_db.c -- libktune_db (include/ktune_db.h): a table from the store's
 * winners, through db/store.h, so that this file and the store are all
 * that needs SQLite.
 */
#include "../include/ktune_db.h"

#include <stdlib.h>
#include <string.h>

#include "../db/store.h"
#include "rt.h"

int ktune_open_db(const char *path, ktune_table **out)
{
	struct store *st = NULL;
	struct store_device *devs = NULL;
	struct store_winner *w = NULL;
	struct kt_err err = { 0 };
	struct ktune_table *t = NULL;
	int ndev = 0, n = 0, i, k, rc;

	if (!out)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_open_db: out is NULL");
	*out = NULL;
	if (!path)
		return rt_fail(KTUNE_ERROR_INVALID, "ktune_open_db: no path");
	if (store_open(path, STORE_RO, &st, &err) < 0 ||
	    store_devices_list(st, &devs, &ndev, &err) < 0 ||
	    store_winners_list(st, NULL, NULL, NULL, &w, &n, &err) < 0) {
		rc = err.code == KT_ENOTFOUND || err.code == KT_EIO ? KTUNE_ERROR_NOT_FOUND
								     : KTUNE_ERROR_BAD_TABLE;
		rc = rt_fail(rc, "%s: %s", path, err.msg);
		goto out;
	}
	if ((rc = rt_table_new(&t)) != KTUNE_OK)
		goto out;
	for (i = 0; i < ndev; i++)
		if ((rc = rt_table_add_device(t, devs[i].name, devs[i].uuid, devs[i].arch, devs[i].sms,
					      devs[i].l2_bytes, devs[i].smem_optin)) != KTUNE_OK)
			goto out;
	for (i = 0; i < n; i++) {
		for (k = 0; k < ndev && devs[k].id != w[i].device_id; k++)
			;
		if ((rc = rt_table_add_entry(t, k < ndev ? k : -1, w[i].family, w[i].shape_key,
					     w[i].config_key, w[i].median_us)) != KTUNE_OK)
			goto out;
	}
	*out = t;
	t = NULL;
	rt_ok();
out:
	if (t)
		rt_table_free(t);
	for (i = 0; i < n; i++)
		store_winner_release(&w[i]);
	free(w);
	free(devs);
	store_close(st);
	return rc;
}
