// SPDX-License-Identifier: MIT
/*
 * Leases that outlive the daemon process (restore.h): the shared clients
 * of the previous run that held objects of a context taken back are
 * adopted once the profile has settled. Each live one's leases are
 * counted on the objects again (a taken-back object it holds, or one
 * kept to drain for it), and it is watched through a pidfd: when it
 * exits, its leases end as a session's do, and what drained for it goes.
 * At the next stop they are written to the store again with the
 * sessions' (manager_holders_json()): a second restart keeps them too.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "manager.h"
#include "objects.h"
#include "restore.h"

struct adopted_lease {
	enum obj_kind kind;
	char *name;
	uint64_t serial;
};

struct adopted {
	struct adopted *next;
	struct manager *m;
	manager_release_fn release; /* the manager's, lent */
	char *profile;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	unsigned long long start;
	struct adopted_lease *leases;
	size_t n_leases;
	int pidfd;
	sd_event_source *io;
};

static void adopted_free(struct adopted *a)
{
	sd_event_source_disable_unref(a->io);
	if (a->pidfd >= 0)
		close(a->pidfd);
	for (size_t i = 0; i < a->n_leases; i++)
		free(a->leases[i].name);
	free(a->leases);
	free(a->profile);
	free(a);
}

static void unlink_adopted(struct manager *m, struct adopted *a)
{
	for (struct adopted **pp = &m->adopted; *pp; pp = &(*pp)->next)
		if (*pp == a) {
			*pp = a->next;
			return;
		}
}

/* The holder exited: its leases end. */
static int on_exit_of(sd_event_source *es, int fd, uint32_t revents,
		      void *ud)
{
	struct adopted *a = ud;
	struct manager *m = a->m;

	(void)es;
	(void)fd;
	(void)revents;
	log_info("profile %s: pid %d, a client of the previous run, exited: "
		 "its %zu leases end",
		 a->profile, (int)a->pid, a->n_leases);
	unlink_adopted(m, a);
	for (size_t i = 0; i < a->n_leases; i++)
		a->release(m, a->profile, a->leases[i].kind,
			   a->leases[i].name, a->leases[i].serial);
	adopted_free(a);
	return 0;
}

/* Is o the incarnation of a lease that names handle (-1: none)? */
static bool of_handle(const struct object *o, json_int_t handle)
{
	enum uhandle_kind k;
	uint32_t h;

	return handle < 0 || !object_handle(o, &k, &h) || h == handle;
}

/* The object of kind and name a lease names: running, else draining;
 * the one of its handle, where it names one (a PD or MR of the previous
 * run may drain beside a running one of the same name). */
static struct object *leased(struct profile *p, enum obj_kind kind,
			     const char *name, json_int_t handle)
{
	struct object *o = profile_find(p, kind, name);

	if (o && o->state == OBJ_READY && of_handle(o, handle))
		return o;
	for (size_t i = 0; i < p->n_draining; i++)
		if (p->draining[i].kind == kind &&
		    streq(object_name(&p->draining[i]), name) &&
		    of_handle(&p->draining[i], handle))
			return &p->draining[i];
	return NULL;
}

static void adopt_one(struct manager *m, struct profile *p, const json_t *h,
		      manager_release_fn release)
{
	struct adopted *a = calloc(1, sizeof(*a));
	const json_t *l;
	size_t i;
	int r;

	if (!a)
		return;
	a->m = m;
	a->release = release;
	a->pidfd = -1;
	a->pid = (pid_t)json_integer_value(json_object_get(h, "pid"));
	a->uid = (uid_t)json_integer_value(json_object_get(h, "uid"));
	a->gid = (gid_t)json_integer_value(json_object_get(h, "gid"));
	a->start = (unsigned long long)json_integer_value(
		json_object_get(h, "start"));
	a->profile = strdup(p->conf->name);
	a->leases = calloc(json_array_size(json_object_get(h, "leases")) + 1,
			   sizeof(*a->leases));
	a->pidfd = (int)syscall(SYS_pidfd_open, a->pid, 0);
	r = a->pidfd < 0 ? -errno : 0;
	if (r >= 0 && (!a->profile || !a->leases))
		r = -ENOMEM;
	if (r >= 0)
		r = sd_event_add_io(m->event, &a->io, a->pidfd, EPOLLIN,
				    on_exit_of, a);
	if (r < 0) {
		if (r != -ESRCH)
			log_warn(r, "profile %s: cannot watch pid %d, a client "
				    "of the previous run; what it held goes",
				 p->conf->name, (int)a->pid);
		adopted_free(a);
		return;
	}
	json_array_foreach(json_object_get(h, "leases"), i, l) {
		int k = obj_kind_from_name(
			json_string_value(json_object_get(l, "kind")) ?: "");
		const char *name =
			json_string_value(json_object_get(l, "name"));
		const json_t *handle = json_object_get(l, "handle");
		struct object *o =
			k >= 0 && name
				? leased(p, (enum obj_kind)k, name,
					 json_is_integer(handle)
						 ? json_integer_value(handle)
						 : -1)
				: NULL;
		struct adopted_lease *al = &a->leases[a->n_leases];

		if (!o || !(al->name = strdup(name)))
			continue;
		al->kind = (enum obj_kind)k;
		al->serial = o->serial;
		o->leases++;
		a->n_leases++;
	}
	a->next = m->adopted;
	m->adopted = a;
	profile_touch_leases(p);
	log_info("profile %s: adopted pid %d, a client of the previous run: "
		 "%zu leases",
		 p->conf->name, (int)a->pid, a->n_leases);
}

void manager_adopt(struct manager *m, struct profile *p,
		   manager_release_fn release)
{
	_cleanup_(json_decrefp) json_t *holders = TAKE_PTR(p->adopt);
	const json_t *h;
	size_t i;
	bool again = true;

	json_array_foreach(holders, i, h)
		if (restore_holder_alive(h))
			adopt_one(m, p, h, release);
	/* Kept for a holder that is gone by now: nobody drains for. */
	while (again) {
		again = false;
		for (size_t k = 0; k < p->n_draining; k++)
			if (!p->draining[k].leases) {
				p->draining[k].leases = 1;
				profile_release(p, &p->draining[k]);
				again = true;
				break;
			}
	}
}

static json_t *leases_json(const struct adopted *a)
{
	json_t *l = json_array();

	for (size_t i = 0; l && i < a->n_leases; i++)
		json_array_append_new(
			l, json_pack("{s:s, s:s, s:I}", "kind",
				     obj_kind_name(a->leases[i].kind), "name",
				     a->leases[i].name, "serial",
				     (json_int_t)a->leases[i].serial));
	return l;
}

/* A lease names the incarnation it holds by its serial, this run's; the
 * next run knows a PD or MR by its handle instead (restore.c: held()). */
static void leases_by_handle(struct profile *p, json_t *holders)
{
	json_t *h, *l;
	size_t i, k;

	json_array_foreach(holders, i, h)
		json_array_foreach(json_object_get(h, "leases"), k, l) {
			int kind = obj_kind_from_name(
				json_string_value(json_object_get(l, "kind"))
					?: "");
			const char *name =
				json_string_value(json_object_get(l, "name"));
			const json_t *serial = json_object_get(l, "serial");
			struct object *o =
				(kind == OBJ_PD || kind == OBJ_MR) && name &&
						json_is_integer(serial)
					? profile_find_serial(
						  p, (enum obj_kind)kind, name,
						  (uint64_t)json_integer_value(
							  serial))
					: NULL;
			enum uhandle_kind uk;
			uint32_t handle;

			if (o && object_handle(o, &uk, &handle))
				json_object_set_new(l, "handle",
						    json_integer(handle));
			json_object_del(l, "serial");
		}
}

json_t *manager_holders_json(struct manager *m, struct profile *p)
{
	const struct manager_sessions *s = &m->sessions;
	json_t *out = s->leases ? s->leases(s->ud, p->conf->name) : NULL;

	if (!out)
		out = json_array();
	for (struct adopted *a = m->adopted; out && a; a = a->next)
		if (streq(a->profile, p->conf->name))
			json_array_append_new(
				out, json_pack("{s:i, s:I, s:i, s:i, s:o}",
					       "pid", (int)a->pid, "start",
					       (json_int_t)a->start, "uid",
					       (int)a->uid, "gid", (int)a->gid,
					       "leases", leases_json(a)));
	if (out)
		leases_by_handle(p, out);
	return out;
}

json_t *manager_adopted_json(struct manager *m)
{
	json_t *out = json_array();

	for (struct adopted *a = m->adopted; out && a; a = a->next)
		json_array_append_new(
			out,
			json_pack("{s:i, s:i, s:i, s:i, s:b, s:b, "
				  "s:[{s:i, s:s, s:s, s:i}]}",
				  "session", 0, "pid", (int)a->pid, "uid",
				  (int)a->uid, "gid", (int)a->gid, "admin", 0,
				  "adopted", 1, "attachments", "attachment", 0,
				  "profile", a->profile, "mode", "shared",
				  "leases", (int)a->n_leases));
	return out;
}

void manager_adopt_stop(struct manager *m)
{
	while (m->adopted) {
		struct adopted *a = m->adopted;

		m->adopted = a->next;
		adopted_free(a);
	}
}

size_t manager_adopted_claim(struct manager *m, struct profile *p, pid_t pid,
			     void (*each)(void *ud, enum obj_kind kind,
					  const char *name, uint64_t serial),
			     void *ud)
{
	size_t n = 0;

	for (struct adopted **pp = &m->adopted; *pp;) {
		struct adopted *a = *pp;

		if (a->pid != pid || !streq(a->profile, p->conf->name)) {
			pp = &a->next;
			continue;
		}
		/* Its leases change hands, not counts: the objects are
		 * held all along. */
		*pp = a->next;
		for (size_t i = 0; i < a->n_leases; i++)
			each(ud, a->leases[i].kind, a->leases[i].name,
			     a->leases[i].serial);
		n += a->n_leases;
		log_info("profile %s: pid %d, a client of the previous run, "
			 "resumed: its %zu leases are its session's now",
			 a->profile, (int)a->pid, a->n_leases);
		adopted_free(a);
	}
	/* Who holds them is another now: written down. */
	if (n)
		profile_touch_leases(p);
	return n;
}
