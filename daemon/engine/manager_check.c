// SPDX-License-Identifier: MIT
/*
 * The manager's part in checking the profiles' objects against the
 * kernel (reconcile.h): what the checks ask of it, and the check an
 * ATTACH asks for; and the orphan scans' policy question.
 */
#include "log.h"
#include "manager.h"
#include "reconcile.h"

struct profile *const *manager_profiles_of(void *ud, size_t *n)
{
	struct manager *m = ud;

	*n = m->n_profiles;
	return m->profiles;
}

static bool reconcile_paused(void *ud)
{
	return ((struct manager *)ud)->reloading;
}

/* The sessions attached to profile: who held it when an object went. */
static json_t *reconcile_holders(void *ud, const char *profile)
{
	const struct manager_sessions *s = &((struct manager *)ud)->sessions;
	json_t *all = s->json ? s->json(s->ud) : NULL, *out = json_array();
	json_t *sess, *att;
	size_t i, k;

	json_array_foreach(all, i, sess)
		json_array_foreach(json_object_get(sess, "attachments"), k,
				   att) {
			if (!streq(json_string_value(json_object_get(
					   att, "profile")) ?: "",
				   profile))
				continue;
			json_array_append_new(
				out,
				json_pack("{s:O, s:O, s:O, s:O, s:O}",
					  "session",
					  json_object_get(sess, "session"),
					  "pid", json_object_get(sess, "pid"),
					  "uid", json_object_get(sess, "uid"),
					  "attachment",
					  json_object_get(att, "attachment"),
					  "mode", json_object_get(att, "mode")));
		}
	json_decref(all);
	return out;
}

int manager_check(struct manager *m, struct profile *p)
{
	return m->reconcile && !m->reloading
		       ? reconcile_profile(m->reconcile, p,
					   RECONCILE_ATTACH_USEC)
		       : 0;
}

void manager_check_start(struct manager *m)
{
	int r = reconcile_new(
		&(struct reconcile_owner){ .event = m->event,
					   .profiles = manager_profiles_of,
					   .paused = reconcile_paused,
					   .holders = reconcile_holders,
					   .ud = m },
		&m->reconcile);

	if (r < 0)
		log_warn(r, "cannot check objects against the kernel, "
			    "ignoring");
}

void manager_check_stop(struct manager *m)
{
	m->reconcile = reconcile_free(m->reconcile);
}

bool manager_may_retire(void *ud)
{
	return streq(((struct manager *)ud)->config->daemon.orphans,
		     "retire");
}
