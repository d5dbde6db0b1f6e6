/*
 * fuzz_shape.c -- libFuzzer target: the text a user gives for a shape, a
 * config and a nearest-shape limit, on every family. Byte 0 picks the
 * family, byte 1 what the rest is:
 *   0  a shape key ("tokens=1024,in=4096,out=4096")
 *   1  a config key ("variant=...,BLOCK_M=128,...")
 *   2  a max_distance ("2.5", "inf")
 *   3  a shape as JSON (an object of dims, or a key string)
 * Whatever parses must give a canonical key that parses back to the same
 * thing (a mismatch aborts, which libFuzzer reports as a crash).
 *
 * Built and run by tools/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/family.h"
#include "server/lookup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct kt_family *f;
	struct kt_err err = { 0 };
	char *text, key[1024], again[1024];
	int mode;

	if (size < 2)
		return 0;
	f = kt_family_at(data[0] % kt_family_count());
	mode = data[1] % 4;
	if (!(text = malloc(size - 1)))
		abort();
	memcpy(text, data + 2, size - 2);
	text[size - 2] = 0;
	if (mode == 0 || mode == 3) {
		struct kt_shape s, s2;
		int rc;

		if (mode == 0) {
			rc = kt_shape_parse(f, text, &s, &err);
		} else {
			json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);

			rc = j ? lookup_shape_from_json(f, j, &s, &err) : -1;
			json_decref(j);
		}
		if (rc == 0) {
			kt_shape_key(f, &s, key, sizeof(key));
			if (kt_shape_parse(f, key, &s2, &err) != 0 ||
			    (kt_shape_key(f, &s2, again, sizeof(again)), strcmp(key, again) != 0))
				abort();
			json_decref(famjson_shape(f, &s));
		}
	} else if (mode == 1) {
		struct kt_config c, c2;

		if (kt_config_parse(f, text, &c, &err) == 0) {
			kt_config_key(f, &c, key, sizeof(key));
			if (kt_config_parse(f, key, &c2, &err) != 0 ||
			    (kt_config_key(f, &c2, again, sizeof(again)), strcmp(key, again) != 0))
				abort();
			json_decref(famjson_config(f, &c));
		}
	} else {
		double d;

		if (lookup_max_distance_parse(text, &d, &err) == 0 && !(d >= 0))
			abort();
	}
	free(text);
	return 0;
}
