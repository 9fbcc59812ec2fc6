// SPDX-License-Identifier: MIT
/* Users and groups named by the configuration, resolved to numbers once
 * per load (see config_resolve_identities() in config.h). */
#include <grp.h>
#include <pwd.h>

#include "config.h"
#include "log.h"
#include "util.h"

/* The lookups run on a worker during a reload, while the loop may look
 * up too: the reentrant forms, each with a buffer of its own. */
bool identity_user(const char *name, uid_t *uid)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (getpwnam_r(name, &pw, buf, sizeof(buf), &res) || !res)
		return false;
	*uid = res->pw_uid;
	return true;
}

bool identity_group(const char *name, gid_t *gid)
{
	struct group gr, *res = NULL;
	char buf[16384]; /* a group lists its members */

	if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) || !res)
		return false;
	*gid = res->gr_gid;
	return true;
}

/* A group by name, or a number; -1 when it does not exist. */
static int64_t group_id(const char *name)
{
	char *end;
	unsigned long v;
	gid_t gid;

	if (identity_group(name, &gid))
		return gid;
	errno = 0;
	v = strtoul(name, &end, 10);
	if (!*name || *end || errno || v > UINT32_MAX)
		return -1;
	return (int64_t)v;
}

static int resolve_profile(struct conf_profile *p)
{
	size_t n_u = p->n_allow_uids + p->n_allow_users;

	p->admit_uids = calloc(n_u + 1, sizeof(*p->admit_uids));
	p->admit_gids = calloc(p->n_allow_groups + 1, sizeof(*p->admit_gids));
	if (!p->admit_uids || !p->admit_gids)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_allow_uids; i++)
		p->admit_uids[p->n_admit_uids++] = (uint32_t)p->allow_uids[i];
	for (size_t i = 0; i < p->n_allow_users; i++) {
		uid_t uid;

		if (identity_user(p->allow_users[i], &uid))
			p->admit_uids[p->n_admit_uids++] = uid;
		else
			log_warn(0, "profile %s: user '%s' does not exist: "
				 "it admits nobody", p->name,
				 p->allow_users[i]);
	}
	for (size_t i = 0; i < p->n_allow_groups; i++) {
		int64_t g = group_id(p->allow_groups[i]);

		if (g >= 0)
			p->admit_gids[p->n_admit_gids++] = (uint32_t)g;
		else
			log_warn(0, "profile %s: group '%s' does not exist: "
				 "it admits nobody", p->name,
				 p->allow_groups[i]);
	}
	return 0;
}

int config_resolve_identities(struct config *c)
{
	c->daemon.admin_gid = -1;
	if (c->daemon.admin_group) {
		c->daemon.admin_gid = group_id(c->daemon.admin_group);
		if (c->daemon.admin_gid < 0)
			log_warn(0, "admin_group '%s' does not exist",
				 c->daemon.admin_group);
	}
	for (size_t i = 0; i < c->n_profiles; i++) {
		struct conf_profile *p = &c->profiles[i];

		free(p->admit_uids);
		free(p->admit_gids);
		p->admit_uids = NULL;
		p->admit_gids = NULL;
		p->n_admit_uids = p->n_admit_gids = 0;
		if (resolve_profile(p) < 0)
			return -ENOMEM;
	}
	return 0;
}
