// SPDX-License-Identifier: MIT
/*
 * The control socket's lowest part: who a session's peer is (its
 * groups, what it may attach to) and sending it a message. Every other
 * control file calls it; it calls none of them.
 */
#include <stdarg.h>
#include <stdio.h>

#include "api.h"
#include "control_internal.h"
#include "proto.h"
#include "utf8.h"

/* ---- who the peer is ---- */

int session_read_groups(struct session *s)
{
	socklen_t len = 64 * sizeof(gid_t);

	for (;;) {
		gid_t *g = realloc(s->groups, len ? len : sizeof(gid_t));

		if (!g)
			return -ENOMEM;
		s->groups = g;
		if (getsockopt(s->fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0)
			break;
		if (errno != ERANGE)
			return -errno;
	}
	s->n_groups = len / sizeof(gid_t);
	return 0;
}

bool session_in_group(const struct session *s, gid_t gid)
{
	if (s->cred.gid == gid)
		return true;
	for (size_t i = 0; i < s->n_groups; i++)
		if (s->groups[i] == gid)
			return true;
	return false;
}

bool session_allowed(const struct conf_profile *p, const struct session *s)
{
	if (s->cred.uid == 0)
		return true;
	for (size_t i = 0; i < p->n_admit_uids; i++)
		if (p->admit_uids[i] == s->cred.uid)
			return true;
	for (size_t i = 0; i < p->n_admit_gids; i++)
		if (session_in_group(s, p->admit_gids[i]))
			return true;
	return false;
}

/* ---- sending ---- */

int session_send_json(struct session *s, uint16_t type, uint32_t id,
		      json_t *payload, const int *fds, size_t n_fds)
{
	struct proto_msg m;
	int r;

	proto_msg_init(&m);
	m.type = type;
	m.id = id;
	m.payload = payload;
	for (size_t i = 0; i < n_fds; i++)
		m.fds[i] = fds[i];
	m.n_fds = n_fds;
	r = proto_send(s->fd, &m);
	json_decref(payload);
	return r;
}

/* A payload already in JSON text (a cached document, a fixed answer). */
int session_send_text(struct session *s, uint16_t type, uint32_t id,
		      const void *payload, size_t len)
{
	return proto_send_text(s->fd, type, id, payload, len, NULL, 0);
}

int session_send_error(struct session *s, uint32_t id, const char *code,
		       const char *fmt, ...)
{
	json_t *doc;
	va_list ap;

	/* The same error document as REST's (api_error: UTF-8 kept whole). */
	va_start(ap, fmt);
	doc = api_verror(code, fmt, ap);
	va_end(ap);
	return session_send_json(s, PROTO_ERROR, id, doc, NULL, 0);
}
