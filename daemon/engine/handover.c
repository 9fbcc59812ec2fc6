// SPDX-License-Identifier: MIT
#include "handover.h"
#include "objects.h"
#include "profile.h"
#include "profile_index.h"
#include "restore.h"
#include "verbs_spec.h"

void profile_each_kept_memory(const struct profile *p, bool ready,
			      void (*each)(void *ud, const char *memory,
					   uint64_t serial, int fd),
			      void *ud)
{
	for (size_t i = 0; i < p->n_objects; i++) {
		const struct object *o = &p->objects[i];
		const struct conf_memory *c = o->conf;

		if (o->kind != OBJ_MEMORY ||
		    !memory_keepable(memory_of(c).backing))
			continue;
		if (!ready) {
			each(ud, c->name, o->serial, -1);
			continue;
		}
		if (o->state == OBJ_READY && o->u.mem.fd >= 0)
			each(ud, c->name, o->serial, o->u.mem.fd);
	}
}

int profile_kept_context(const struct profile *p, json_t *holders,
			 char **text, size_t *len)
{
	if (!p->ctx || p->import_err || p->state != PROFILE_READY)
		return -1;
	*text = restore_state(p, holders, len);
	return *text ? p->ctx->cmd_fd : -1;
}

bool profile_leave_context(struct profile *p)
{
	p->hand_over = p->ctx && !p->import_err;
	return p->hand_over;
}
