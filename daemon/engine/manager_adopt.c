// SPDX-License-Identifier: MIT
/*
 * Leases that outlive the daemon process (restore.h): the shared clients
 * of the previous run that held objects of a context taken back are
 * adopted once the profile has settled. Each live one's leases are
 * counted on the objects again (a taken-back object it holds, or one
 * kept to drain for it), and it is watched through a pidfd: when it
 * exits, its leases end as a session's do, and what drained for it goes.
 * The lease record names them with the sessions' holders
 * (manager_holders_text()): a second restart keeps them too.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "manager_internal.h"
#include "objects.h"
#include "restore.h"
#include "restore_doc.h"

struct adopted_lease {
	enum obj_kind kind;
	char *name;
	uint64_t serial;
};

struct adopted {
	struct adopted *next;
	struct manager *m;
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
		manager_release(m, a->profile, a->leases[i].kind,
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
	for (size_t i = 0; i < profile_n_draining(p); i++) {
		struct object *d = profile_draining_at(p, i);

		if (d->kind == kind && streq(object_name(d), name) &&
		    of_handle(d, handle))
			return d;
	}
	return NULL;
}

static void adopt_one(struct manager *m, struct profile *p, const json_t *h)
{
	struct adopted *a = calloc(1, sizeof(*a));
	const json_t *l;
	size_t i;
	int r;

	if (!a)
		return;
	a->m = m;
	a->pidfd = -1;
	a->pid = (pid_t)json_integer_value(json_object_get(h, "pid"));
	a->uid = (uid_t)json_integer_value(json_object_get(h, "uid"));
	a->gid = (gid_t)json_integer_value(json_object_get(h, "gid"));
	a->start = (unsigned long long)json_integer_value(
		json_object_get(h, "start"));
	a->profile = strdup(profile_name(p));
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
			log_warn(r,
				 "profile %s: cannot watch pid %d, a client "
				 "of the previous run; what it held goes",
				 profile_name(p), (int)a->pid);
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
		 profile_name(p), (int)a->pid, a->n_leases);
}

void manager_adopt(struct manager *m, struct profile *p)
{
	_cleanup_(json_decrefp) json_t *holders = profile_take_adopt(p);
	const json_t *h;
	size_t i;
	bool again = true;

	json_array_foreach(holders, i, h)
		if (restore_holder_alive(h))
			adopt_one(m, p, h);
	/* Kept for a holder that is gone by now: nobody drains for. */
	while (again) {
		again = false;
		for (size_t k = 0; k < profile_n_draining(p); k++) {
			struct object *d = profile_draining_at(p, k);

			if (!d->leases) {
				d->leases = 1;
				profile_release(p, d);
				again = true;
				break;
			}
		}
	}
}

void manager_lease_put(FILE *f, struct profile *p, enum obj_kind kind,
		       const char *name, uint64_t serial, const char **sep)
{
	struct object *o = kind == OBJ_PD || kind == OBJ_MR
				   ? profile_find_serial(p, kind, name, serial)
				   : NULL;
	enum uhandle_kind uk;
	uint32_t handle;

	fprintf(f, "%s{\"kind\":\"%s\",\"name\":", *sep,
		obj_kind_name(kind));
	restore_doc_str(f, name);
	/* A lease names the incarnation it holds by its serial, this
	 * run's; the next run knows a PD or MR by its handle instead
	 * (restore.c: held()). */
	if (o && object_handle(o, &uk, &handle))
		fprintf(f, ",\"handle\":%u", handle);
	putc('}', f);
	*sep = ",";
}

void manager_set_id(uint64_t id, char out[MANAGER_SET_ID_LEN + 1])
{
	snprintf(out, MANAGER_SET_ID_LEN + 1, "%016" PRIx64, id);
}

void manager_holder_put(FILE *f, pid_t pid, unsigned long long start,
			uid_t uid, gid_t gid, const uint64_t *sets,
			size_t n_sets, const char *leases, size_t len,
			const char **sep)
{
	fprintf(f, "%s{\"pid\":%d,\"start\":%llu,\"uid\":%u,\"gid\":%u,",
		*sep, (int)pid, start, (unsigned int)uid, (unsigned int)gid);
	if (n_sets) {
		fputs("\"sets\":[", f);
		for (size_t i = 0; i < n_sets; i++) {
			char id[MANAGER_SET_ID_LEN + 1];

			manager_set_id(sets[i], id);
			fprintf(f, "%s\"%s\"", i ? "," : "", id);
		}
		fputs("],", f);
	}
	fputs("\"leases\":[", f);
	fwrite(leases, 1, len, f);
	fputs("]}", f);
	*sep = ",";
}

char *manager_holders_text(struct manager *m, struct profile *p, size_t *len,
			   const struct manager_lease_sets *sets)
{
	const struct manager_sessions *s = &m->sessions;
	const char *sep = "";
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (!f)
		return NULL;
	putc('[', f);
	if (s->leases_put && !s->leases_put(s->ud, profile_name(p), f, &sep,
					    sets)) {
		fclose(f);
		free(text);
		return NULL;
	}
	for (struct adopted *a = m->adopted; a; a = a->next) {
		_cleanup_free_ char *l = NULL;
		size_t ln = 0;
		const char *lsep = "";
		FILE *lf;

		if (!streq(a->profile, profile_name(p)))
			continue;
		lf = open_memstream(&l, &ln);
		if (!lf)
			continue;
		for (size_t i = 0; i < a->n_leases; i++)
			manager_lease_put(lf, p, a->leases[i].kind,
					  a->leases[i].name,
					  a->leases[i].serial, &lsep);
		if (fclose(lf) == 0)
			manager_holder_put(f, a->pid, a->start, a->uid, a->gid,
					   NULL, 0, l, ln, &sep);
	}
	putc(']', f);
	if (!memstream_done(f, &text))
		return NULL;
	*len = n;
	return text;
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

void manager_adopted_holders(struct manager *m, const char *profile,
			     json_t *out)
{
	for (struct adopted *a = m->adopted; out && a; a = a->next)
		if (streq(a->profile, profile))
			json_array_append_new(
				out, json_pack("{s:i, s:i, s:i, s:i, s:s}",
					       "session", 0, "pid", (int)a->pid,
					       "uid", (int)a->uid, "attachment",
					       0, "mode", "shared"));
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

		if (a->pid != pid || !streq(a->profile, profile_name(p))) {
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
	return n;
}
