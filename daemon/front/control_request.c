// SPDX-License-Identifier: MIT
#include <string.h>

#include "control_internal.h"
#include "proto.h"
#include "utf8.h"

static void on_later(struct api_later *later, int status, json_t *reply)
{
	struct later *lt = container_of(later, struct later, later);
	struct session *s = lt->s;

	for (struct later **pp = &s->laters; *pp; pp = &(*pp)->next)
		if (*pp == lt) {
			*pp = lt->next;
			break;
		}
	s->waits--;
	/* A session that cannot take it sees its hangup at the next read. */
	session_send_json(s, PROTO_REPLY, lt->id,
		  json_pack("{s:i, s:o}", "status", status, "body", reply),
		  NULL, 0);
	free(lt);
}


static void cached_forget_request(struct control *c, struct cached_reply *e)
{
	if (!e->request)
		return;
	HASH_DELETE(hh_request, c->cache_by_request, e);
	free(e->request);
	e->request = NULL;
}

static void cached_free(struct control *c, struct cached_reply *e)
{
	cached_forget_request(c, e);
	HASH_DEL(c->cache, e);
	free(e->path);
	free(e->frame);
	free(e);
}

/* The REPLY to GET path at generation, rendered if the cache has no
 * such one. NULL when out of memory or too large for a frame. */
static struct cached_reply *cached_reply(struct session *s,
					 const struct api_request *ar,
					 uint64_t generation)
{
	struct control *c = s->c;
	struct proto_msg m;
	struct cached_reply *e = NULL;
	json_t *reply = NULL;
	uint8_t *buf;
	size_t len;
	int status, r;

	HASH_FIND_STR(c->cache, ar->path, e);
	if (e && e->generation == generation)
		return e;
	if (e)
		cached_free(c, e);
	if (HASH_COUNT(c->cache) >= CONTROL_MAX_CACHED)
		while (c->cache)
			cached_free(c, c->cache);
	status = api_handle(c->m, ar, &reply);
	proto_msg_init(&m);
	m.type = PROTO_REPLY;
	m.payload = json_pack("{s:i, s:o}", "status", status, "body", reply);
	buf = malloc(PROTO_MAX_FRAME);
	r = buf && m.payload ? proto_encode(&m, buf, PROTO_MAX_FRAME, &len)
			     : -ENOMEM;
	proto_msg_clear(&m);
	e = r < 0 ? NULL : calloc(1, sizeof(*e));
	if (!e || !(e->path = strdup(ar->path)) ||
	    !(e->frame = realloc(buf, len))) {
		if (e)
			free(e->path);
		free(e);
		free(buf);
		return NULL;
	}
	e->len = len;
	e->generation = generation;
	HASH_ADD_KEYPTR(hh, c->cache, e->path, strlen(e->path), e);
	return e;
}

/* The cached REPLY, under this REQUEST's id. */
static int send_cached(struct session *s, uint32_t id,
		       const struct cached_reply *e)
{
	struct proto_hdr h;

	proto_hdr_unpack(e->frame, &h);
	return session_send_text(s, h.type, id, e->frame + PROTO_HDR_SIZE,
			 e->len - PROTO_HDR_SIZE);
}

/* The REQUEST's payload bytes are what e answers: the same bytes again
 * are answered from them (answer_again). */
static void cached_remember_request(struct control *c, struct cached_reply *e,
				    const uint8_t *raw, size_t len)
{
	uint8_t *copy;

	if (!raw || (e->request && e->request_len == len &&
		     !memcmp(e->request, raw, len)))
		return;
	cached_forget_request(c, e);
	copy = malloc(len);
	if (!copy)
		return; /* then it is decoded each time */
	memcpy(copy, raw, len);
	e->request = copy;
	e->request_len = len;
	HASH_ADD_KEYPTR(hh_request, c->cache_by_request, e->request, len, e);
}

/*
 * A REQUEST byte for byte like one answered from the cache decodes to the
 * same method and path: while that document holds, its REPLY goes again
 * without decoding (jansson and the allocations were most of what such
 * a request cost). 1 when answered, 0 when the frame is not one of those,
 * or a negative errno from sending.
 */
int control_answer_again(struct session *s, const uint8_t *frame, size_t len,
			size_t n_fds)
{
	struct cached_reply *e = NULL;
	const uint8_t *payload;
	struct proto_hdr h;
	uint64_t generation;
	size_t plen;
	int r;

	if (!s->welcomed || !s->c->cache_by_request)
		return 0;
	payload = proto_frame_payload(frame, len, n_fds, PROTO_REQUEST, &plen);
	if (!payload)
		return 0;
	HASH_FIND(hh_request, s->c->cache_by_request, payload, plen, e);
	/* A profile's own socket: what is outside it is refused afresh. */
	if (e && s->scope && !api_in_scope("GET", e->path, s->scope))
		return 0;
	if (!e || !api_cacheable(s->c->m, "GET", e->path, &generation) ||
	    generation != e->generation)
		return 0;
	proto_hdr_unpack(frame, &h);
	r = send_cached(s, h.id, e);
	return r < 0 ? r : 1;
}

int control_request(struct session *s, uint32_t id, json_t *req,
		   const uint8_t *raw, size_t raw_len)
{
	struct api_request ar = {
		.method = json_string_value(json_object_get(req, "method")),
		.path = json_string_value(json_object_get(req, "path")),
		.body = json_object_get(req, "body"),
		.authorized = s->admin,
		.token_set = true,
		.via_socket = true,
		.has_uid = true,
		.uid = s->cred.uid,
		.scope = s->scope,
	};
	json_t *reply = NULL;
	struct cached_reply *e;
	struct later *lt;
	uint64_t generation;
	int status, r;

	if (!ar.method || !ar.path)
		return session_send_error(s, id, "bad_request",
				  "REQUEST needs \"method\" and \"path\"");
	if (ar.body && !json_is_object(ar.body))
		return session_send_error(s, id, "bad_request",
				  "\"body\" must be an object");
	/* The stream carries every profile's events: not on a profile's
	 * own socket. */
	if (streq(ar.method, "GET") && streq(ar.path, "/v1/events") &&
	    !s->scope)
		return control_subscribe(s, id);
	if (streq(ar.method, "GET") && streq(ar.path, "/v1/events"))
		return session_send_json(
			s, PROTO_REPLY, id,
			json_pack("{s:i, s:o}", "status", 403, "body",
				  api_error("forbidden",
					    "this socket serves profile '%s' "
					    "only: the event stream shows "
					    "every profile",
					    s->scope)),
			NULL, 0);
	/* Documents that change only when the engine says so: the bytes
	 * of last time, while they hold (outside a socket's scope, the
	 * control layer refuses). */
	if (!ar.body && utf8_valid(ar.path) &&
	    (!s->scope || api_in_scope(ar.method, ar.path, s->scope)) &&
	    api_cacheable(s->c->m, ar.method, ar.path, &generation) &&
	    (e = cached_reply(s, &ar, generation))) {
		cached_remember_request(s->c, e, raw, raw_len);
		return send_cached(s, id, e);
	}
	lt = calloc(1, sizeof(*lt));
	if (!lt)
		return -ENOMEM;
	*lt = (struct later){ .later.fn = on_later, .s = s, .id = id };
	/* What waits for later counts with the attaches that wait. */
	if (s->waits < CONTROL_MAX_WAITS_PER_SESSION)
		ar.later = &lt->later;
	status = api_handle(s->c->m, &ar, &reply);
	if (status == API_LATER) {
		lt->next = s->laters;
		s->laters = lt;
		s->waits++;
		return 0;
	}
	free(lt);
	r = session_send_json(s, PROTO_REPLY, id,
			      json_pack("{s:i, s:o}", "status", status, "body",
					reply),
			      NULL, 0);
	/* Cut into frames from version 2 on; never a part of it. */
	if (r == -EMSGSIZE)
		return session_send_error(
			s, id, "too_large",
			"the REPLY to %s %s does not fit one frame (%d bytes): "
			"the client must speak protocol version %d to get it",
			ar.method, ar.path, PROTO_MAX_PAYLOAD,
			PROTO_VERSION_FRAMES);
	return r;
}


void control_laters_drop(struct session *s)
{
	while (s->laters) {
		struct later *lt = s->laters;

		s->laters = lt->next;
		api_forget(s->c->m, &lt->later);
		free(lt);
	}
}

void control_cache_clear(struct control *c)
{
	while (c->cache)
		cached_free(c, c->cache);
}
