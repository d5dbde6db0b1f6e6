#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int kt_err_set(struct kt_err *e, enum kt_errcode code, const char *fmt, ...)
{
	va_list ap;

	if (!e || e->code != KT_OK)
		return -1;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -1;
}

void kt_err_clear(struct kt_err *e)
{
	if (e)
		memset(e, 0, sizeof(*e));
}

const char *kt_errcode_name(enum kt_errcode code)
{
	switch (code) {
	case KT_OK: return "ok";
	case KT_EINVAL: return "invalid_argument";
	case KT_ENOTFOUND: return "not_found";
	case KT_ECONFLICT: return "conflict";
	case KT_ETOOBIG: return "too_large";
	case KT_EAUTH: return "unauthorized";
	case KT_EDB: return "database_error";
	case KT_ECORRUPT: return "corrupt_database";
	case KT_ESCHEMA: return "schema_too_new";
	case KT_EIO: return "io_error";
	case KT_ENOGPU: return "no_gpu";
	case KT_ECUDA: return "cuda_error";
	case KT_ECOMPILE: return "compile_error";
	case KT_EINTERNAL: return "internal_error";
	}
	return "unknown";
}

int kt_errcode_http(enum kt_errcode code)
{
	switch (code) {
	case KT_OK: return 200;
	case KT_EINVAL: return 400;
	case KT_EAUTH: return 401;
	case KT_ENOTFOUND: return 404;
	case KT_ECONFLICT: return 409;
	case KT_ETOOBIG: return 413;
	case KT_ENOGPU: return 503;
	case KT_ESCHEMA: return 409;
	default: return 500;
	}
}
