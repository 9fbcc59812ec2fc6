// SPDX-License-Identifier: MIT
/*
 * librdmad's control requests: REQUEST / REPLY (rdmad_request()), the
 * event stream's subscription (rdmad_subscribe()) and a memory's fd
 * (MAP / MAPPED), on the connection of librdmad_conn.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "librdmad_internal.h"
#include "util.h"

/*
 * Send req and wait for its answer in ans, for at most timeout_ms (0:
 * no limit), as client_conn_send() and client_conn_await().
 */
static int exchange(struct rdmad *c, struct proto_msg *req, int timeout_ms,
		    struct proto_msg *ans)
{
	int r;

	proto_msg_init(ans);
	r = client_conn_send(c, req);
	if (r == 0)
		r = client_conn_set_timeout(c, timeout_ms);
	if (r == 0)
		r = client_conn_await(c, req->id, proto_type_name(req->type), ans);
	return r;
}

int rdmad_request(struct rdmad *c, const char *method, const char *path,
		  const char *body_json, int *status, char **reply_json)
{
	struct proto_msg req, ans;
	json_t *doc, *body = NULL;
	json_error_t jerr;
	char *text = NULL;
	json_int_t st;
	int r;

	if (!c || !method || !*method || !path || *path != '/')
		return client_set_error(EINVAL, "rdmad_request: no connection, "
						"method or path (/v1/...)");
	if (body_json) {
		body = json_loads(body_json, JSON_REJECT_DUPLICATES, &jerr);
		if (!json_is_object(body)) {
			json_decref(body);
			return client_set_error(EINVAL,
						"rdmad_request: the body is "
						"not a JSON object%s%s",
						body ? "" : ": ",
						body ? "" : jerr.text);
		}
	}
	doc = json_pack("{s:s, s:s}", "method", method, "path", path);
	if (doc && body && json_object_set_new(doc, "body", body) < 0) {
		json_decref(doc);
		doc = NULL;
	} else if (!doc) {
		json_decref(body);
	}
	r = client_request_msg(&req, PROTO_REQUEST, doc);
	if (r < 0)
		return r;
	r = exchange(c, &req, CLIENT_TIMEOUT_MS, &ans);
	proto_msg_clear(&req);
	if (r < 0)
		return r;
	st = json_integer_value(json_object_get(ans.payload, "status"));
	if (st < 100 || st > 599) {
		proto_msg_clear(&ans);
		return client_set_error(EPROTO,
					"rdmad's REPLY to %s %s has no status",
					method, path);
	}
	if (reply_json) {
		json_t *b = json_object_get(ans.payload, "body");

		text = b ? json_dumps(b, JSON_ENCODE_ANY | JSON_COMPACT)
			 : strdup("null");
		if (!text) {
			proto_msg_clear(&ans);
			return client_set_error(ENOMEM, "out of memory");
		}
		*reply_json = text;
	}
	if (status)
		*status = (int)st;
	proto_msg_clear(&ans);
	return 0;
}

int rdmad_subscribe(struct rdmad *c)
{
	_cleanup_free_ char *body = NULL;
	int status, r;

	if (!c)
		return client_set_error(EINVAL, "rdmad_subscribe: no connection");
	r = rdmad_request(c, "GET", "/v1/events", NULL, &status, &body);
	if (r < 0)
		return r;
	if (status == 409)
		return client_set_error(EEXIST, "subscribed already");
	if (status != 200)
		return client_set_error(EPROTO, "rdmad refused the "
					"subscription (status %d): %s",
					status, body);
	return 0;
}

int client_memory_ask(struct rdmad_profile *p, struct client_memory *mem)
{
	struct proto_msg req, ans;
	const json_t *doc;
	uint64_t size = 0, fd = 1;
	int r;

	if (!p->granted || !p->conn)
		return client_set_error(ENOTCONN,
					"memory '%s' of profile '%s' is not "
					"mapped yet and the attachment is "
					"gone (rdmad went away): attach again",
					mem->name, p->name);
	r = client_request_msg(&req, PROTO_MAP,
			       json_pack("{s:I, s:s}", "attachment",
					 (json_int_t)p->attachment, "memory",
					 mem->name));
	if (r < 0)
		return r;
	r = exchange(p->conn, &req, CLIENT_TIMEOUT_MS, &ans);
	proto_msg_clear(&req);
	if (r < 0)
		return r;
	/* The daemon's word for it, checked as ATTACHED's would be: the
	 * memory asked for, of the size announced, its one fd. */
	doc = ans.payload;
	if (ans.n_fds != 1 ||
	    !streq(json_string_value(json_object_get(doc, "memory")) ?: "",
		   mem->name) ||
	    !client_json_uint(doc, "size", INT64_MAX, &size) ||
	    size != mem->size || !client_json_uint(doc, "fd", 0, &fd)) {
		proto_msg_clear(&ans);
		return client_set_error(EPROTO,
					"rdmad's MAPPED for memory '%s' of "
					"profile '%s' is malformed",
					mem->name, p->name);
	}
	mem->fd = TAKE_FD(ans.fds[0]);
	proto_msg_clear(&ans);
	return 0;
}
