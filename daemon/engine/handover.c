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

bool profile_hands_over(const struct profile *p)
{
	return p->ctx && !p->import_err;
}

int profile_kept_context(const struct profile *p, struct kept_context *out)
{
	/* Until what the previous run kept is judged (restore_finish()),
	 * its document is the truth: this run's would not name it. */
	if (!profile_hands_over(p) || p->restart.restored)
		return -1;
	out->text = restore_state(p, NULL, &out->len);
	out->ctxn = p->ctxn;
	out->taken_back = p->restart.ctx_kept;
	out->cmd_fd = p->ctx->cmd_fd;
	return out->text ? 0 : -1;
}

bool profile_leave_context(struct profile *p)
{
	p->restart.hand_over = profile_hands_over(p);
	return p->restart.hand_over;
}
