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
	for (size_t i = 0; i < profile_n_objects(p); i++) {
		const struct object *o = profile_object_at(p, i);
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
	return profile_ctx(p) && !profile_import_err(p);
}

int profile_kept_context(const struct profile *p, struct kept_context *out)
{
	/* Until what the previous run kept is judged (restore_finish()),
	 * its document is the truth: this run's would not name it. */
	if (!profile_hands_over(p) || profile_restored(p))
		return -1;
	out->text = restore_state(p, NULL, &out->len);
	out->ctxn = profile_ctxn(p);
	out->taken_back = profile_ctx_kept(p);
	out->cmd_fd = profile_ctx(p)->cmd_fd;
	return out->text ? 0 : -1;
}

bool profile_leave_context(struct profile *p)
{
	bool hand_over = profile_hands_over(p);

	profile_set_hand_over(p, hand_over);
	return hand_over;
}
