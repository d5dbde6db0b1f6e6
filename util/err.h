/*
 * err.h -- errors as data.
 *
 * A struct kt_err is owned by the caller, filled by the first function that
 * fails and read by whoever reports it: the CLI prints it, the server turns it
 * into a JSON body with an HTTP status, the sweep stores it with the trial.
 * Nothing below main() calls exit().
 */
#ifndef KT_ERR_H
#define KT_ERR_H

#include <stddef.h>

enum kt_errcode {
	KT_OK = 0,
	KT_EINVAL,	/* bad input from a user: shape, flag, JSON body (HTTP 400) */
	KT_ENOTFOUND,	/* unknown family, sweep, route, nothing tuned (HTTP 404) */
	KT_ECONFLICT,	/* state forbids it: sweep already running (HTTP 409) */
	KT_ETOOBIG,	/* body or input over its cap (HTTP 413) */
	KT_EAUTH,	/* missing or wrong token (HTTP 401) */
	KT_EDB,		/* SQLite failed (HTTP 500) */
	KT_ECORRUPT,	/* database file not a ktune database, or damaged */
	KT_ESCHEMA,	/* database from a newer ktune */
	KT_EIO,		/* file or pipe I/O failed */
	KT_ENOGPU,	/* no driver or no device (HTTP 503) */
	KT_ECUDA,	/* a driver call failed */
	KT_ECOMPILE,	/* NVRTC rejected a program */
	KT_EINTERNAL,	/* a bug (HTTP 500) */
};

struct kt_err {
	enum kt_errcode code;
	char msg[512];
};

/* Sets *e (when e is not NULL) unless it already holds an error, so the
 * first, most specific failure wins. Returns -1 for `return kt_err_set(...)`. */
int kt_err_set(struct kt_err *e, enum kt_errcode code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void kt_err_clear(struct kt_err *e);
const char *kt_errcode_name(enum kt_errcode code);
/* The HTTP status that a server answers for this code. */
int kt_errcode_http(enum kt_errcode code);

#endif
