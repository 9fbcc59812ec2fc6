// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the control layer (api_handle): every route with
 * an arbitrary method, path, body and credentials, as the REST front end
 * and the control socket hand them over.
 *
 * Input: one byte of credentials (bit 0 authorized, bit 1 a token is
 * set, bit 2 the control socket), then "METHOD\nPATH\nBODY"; a body that
 * is a JSON object is passed on, another body is no body.
 *
 * What must hold: a status between 100 and 599, always a document that
 * serialises (valid UTF-8), and an error document for every error.
 */
#include <string.h>

#include "api.h"
#include "fuzz_util.h"
#include "fuzz_manager.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct manager *m = fuzz_manager();
	const uint8_t *p = data + 1, *end = data + size;
	struct api_request req = { 0 };
	json_t *reply = NULL, *body;
	char *method, *path, *text;
	int status;

	if (size < 1)
		return 0;
	req.authorized = data[0] & 1;
	req.token_set = data[0] & 2;
	req.via_socket = data[0] & 4;
	method = take_line(&p, end);
	path = take_line(&p, end);
	body = p < end ? json_loadb((const char *)p, (size_t)(end - p),
				    JSON_REJECT_DUPLICATES, NULL)
		       : NULL;
	if (!json_is_object(body)) {
		json_decref(body);
		body = NULL;
	}
	req.method = method;
	req.path = path;
	req.body = body;

	status = api_handle(m, &req, &reply);
	check(status >= 100 && status <= 599, "status out of range");
	check(reply != NULL, "no reply document");
	text = json_dumps(reply, JSON_COMPACT | JSON_ENCODE_ANY);
	check(text != NULL, "the reply does not serialise");
	if (status >= 400) {
		json_t *e = json_object_get(reply, "error");

		check(json_is_string(json_object_get(e, "code")) &&
			      json_is_string(json_object_get(e, "message")),
		      "an error without code and message");
	}
	/* The cache key of the REST front end, for the same request. */
	if (!body) {
		uint64_t generation;

		(void)api_cacheable(m, method, path, &generation);
	}
	free(text);
	json_decref(reply);
	json_decref(body);
	free(method);
	free(path);
	return 0;
}
