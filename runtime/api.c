/*
 * api.c -- include/ktune.h: errors, tables, and the family calls.
 * (Being written: the calls answer KTUNE_ERROR_INTERNAL until then.)
 */
#include "../include/ktune.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

int ktune_api_version(void)
{
	return KTUNE_API_VERSION;
}

const char *ktune_status_name(int status)
{
	static const char *const names[] = {
		"KTUNE_OK", "KTUNE_ERROR_INVALID", "KTUNE_ERROR_NOT_FOUND",
		"KTUNE_ERROR_BAD_TABLE", "KTUNE_ERROR_UNSUPPORTED", "KTUNE_ERROR_NO_GPU",
		"KTUNE_ERROR_CUDA", "KTUNE_ERROR_COMPILE", "KTUNE_ERROR_CAPTURE",
		"KTUNE_ERROR_WORKSPACE", "KTUNE_ERROR_INTERNAL",
	};

	if (status < 0 || status >= (int)(sizeof(names) / sizeof(names[0])))
		return "KTUNE_ERROR_UNKNOWN";
	return names[status];
}

const char *ktune_last_error(void)
{
	return last_error;
}
