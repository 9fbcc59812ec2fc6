// SPDX-License-Identifier: MIT
/*
 * MAP (proto/PROTOCOL.md): a memory's fd, asked for by a client that
 * attached with "memory_fds": false when it first maps that memory, so
 * that an attach carries no fd per memory.
 */
#include "control_internal.h"
#include "proto.h"

/* MAP: the fd of a memory the attachment holds, the incarnation it was
 * given (a reload since leaves that one draining, not the new one), as
 * long as the profile still admits the peer. */
int control_map(struct session *s, uint32_t id, json_t *req)
{
	struct attachment *a = session_attachment(s, req);
	const char *name = json_string_value(json_object_get(req, "memory"));
	struct profile *p;
	const struct lease *l;
	uint64_t size = 0;
	int fd;

	if (!json_is_integer(json_object_get(req, "attachment")) || !name)
		return session_send_error(s, id, "bad_request",
					  "MAP needs \"attachment\" (a number) "
					  "and \"memory\" (a name)");
	if (!a)
		return session_send_error(s, id, "not_found",
					  "no such attachment");
	l = attachment_memory(a, name);
	if (!l)
		return session_send_error(s, id, "not_found",
					  "attachment %u holds no memory "
					  "'%.64s'",
					  a->id, name);
	p = manager_profile(s->c->m, a->profile);
	if (p && !session_allowed(p, s))
		return session_send_error(
		    s, id, "forbidden",
		    "uid %u may no longer attach to profile '%s'",
		    (unsigned int)s->cred.uid, a->profile);
	fd = manager_memory_fd(s->c->m, a->profile, l->name, l->serial, &size);
	if (fd < 0)
		return session_send_error(s, id, "not_found",
					  "memory '%s' is gone", l->name);
	return session_send_json(s, PROTO_MAPPED, id,
				 json_pack("{s:s, s:I, s:i}", "memory", l->name,
					   "size", (json_int_t)size, "fd", 0),
				 &fd, 1);
}
