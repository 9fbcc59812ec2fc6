// SPDX-License-Identifier: MIT
/*
 * What the rest of the daemon asks the manager (its struct is its own):
 * the loop, the bus, the configuration, counters, what the front ends
 * lent; what the scans and checks working for it ask (reconcile.h,
 * orphans.h); and the check an ATTACH asks for.
 */
#include "log.h"
#include "manager_internal.h"
#include "orphans.h"
#include "reconcile.h"

sd_event *manager_loop(const struct manager *m)
{
	return m->event;
}

struct events *manager_bus(const struct manager *m)
{
	return m->events;
}

const struct config *manager_config(const struct manager *m)
{
	return m->config;
}

size_t manager_n_profiles(const struct manager *m)
{
	return m->n_profiles;
}

struct profile *manager_profile_at(const struct manager *m, size_t i)
{
	return m->profiles[i];
}

bool manager_reloading(const struct manager *m)
{
	return m->reloading;
}

void manager_counters(const struct manager *m, struct manager_counters *out)
{
	*out = (struct manager_counters){
		.reloads_applied = m->reloads_applied,
		.reload_failures = m->reload_failures,
		.orphan_scans = m->orphan_scans,
		.orphan_scan_failures = m->orphan_scan_failures,
		.ctx_retirements = m->ctx_retirements,
	};
}

bool manager_session_stats(const struct manager *m, struct session_stats *out)
{
	*out = (struct session_stats){ 0 };
	if (!m->sessions.stats)
		return false;
	m->sessions.stats(m->sessions.ud, out);
	return true;
}

bool manager_front_stats(const struct manager *m, enum manager_front_kind k,
			 struct front_stats *out)
{
	*out = (struct front_stats){ 0 };
	if (!m->fronts[k].stats)
		return false;
	m->fronts[k].stats(m->fronts[k].ud, out);
	return true;
}

json_t *manager_sessions_json(const struct manager *m)
{
	return m->sessions.json ? m->sessions.json(m->sessions.ud)
				: json_array();
}

void manager_orphans_refresh(struct manager *m, const struct profile *p)
{
	orphans_refresh(m->orphans, p);
}

struct profile *const *manager_profiles_of(struct manager *m, size_t *n)
{
	*n = m->n_profiles;
	return m->profiles;
}

json_t *manager_holders_json(struct manager *m, const char *profile)
{
	const struct manager_sessions *s = &m->sessions;
	json_t *out = s->holders ? s->holders(s->ud, profile) : json_array();

	manager_adopted_holders(m, profile, out);
	return out;
}

int manager_check(struct manager *m, struct profile *p, bool mrs)
{
	return m->reconcile && !m->reloading
		   ? reconcile_attach(m->reconcile, p, mrs)
		   : 0;
}

void manager_check_start(struct manager *m)
{
	int r = reconcile_new(m, &m->reconcile);

	if (r < 0)
		log_warn(r, "cannot check objects against the kernel, "
			    "ignoring");
}

void manager_check_stop(struct manager *m)
{
	m->reconcile = reconcile_free(m->reconcile);
}

bool manager_may_retire(struct manager *m)
{
	return streq(m->config->daemon.orphans, "retire");
}
