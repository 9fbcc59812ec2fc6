// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <sys/mman.h>

#include "control_internal.h"
#include "attach_view.h"
#include "log.h"
#include "made.h"
#include "proto.h"
#include "reclaim.h"
#include "view.h"

const double control_attach_bucket_le[SESSION_ATTACH_BUCKETS] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1,
};

/* An attachment that never went out: its record only, nothing leased. */
static void attachment_drop(struct attachment *a)
{
	free(a->profile);
	*a = (struct attachment){ 0 };
}

/* session_attach / session_detach on the stream: the fields of
 * GET /v1/sessions. */
void session_publish(struct session *s, const struct attachment *a,
		     enum event_kind what, const char *reason)
{
	events_publish(manager_bus(s->c->m),
		       &(struct event){
			       .kind = what,
			       .profile_name = a->profile,
			       .u.session = { .session = s->id,
					      .attachment = a->id,
					      .pid = s->cred.pid,
					      .uid = s->cred.uid,
					      .shared = a->shared,
					      .reason = reason } });
}

/* ---- ATTACH ---- */

static int attach_one(struct session *s, uint32_t id, json_t *req);

static int send_not_ready(struct session *s, uint32_t id,
			  const struct profile *p, const char *why)
{
	_cleanup_free_ char *state = profile_state_sentence(p);

	return session_send_error(s, id, "not_ready", "%s%s", why ? why : "",
				  state ? state : "profile is not ready");
}

static void waiter_free(struct waiter *w)
{
	struct control *c = w->s->c;

	for (struct waiter **pp = &c->waiters; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	w->s->waits--;
	sd_event_source_disable_unref(w->timer);
	json_decref(w->req);
	free(w);
}

static int on_wait_timeout(sd_event_source *es, uint64_t usec, void *ud)
{
	struct waiter *w = ud;
	struct session *s = w->s;
	const char *name = json_string_value(json_object_get(w->req, "profile"));
	struct profile *p = manager_profile(s->c->m, name);
	uint32_t id = w->id;
	char why[64];

	(void)es;
	(void)usec;
	snprintf(why, sizeof(why), "timed out after %lld ms: ",
		 (long long)json_integer_value(json_object_get(w->req, "wait_ms")));
	waiter_free(w);
	s->c->attach_failures++;
	if (!p)
		session_send_error(s, id, "not_found", "no profile '%s'", name);
	else
		send_not_ready(s, id, p, why);
	return 0;
}

/* Answer the ATTACH when the profile is ready, fails, or wait_ms pass. */
static int wait_ready(struct session *s, uint32_t id, json_t *req,
		      json_int_t wait_ms)
{
	struct control *c = s->c;
	struct waiter *w;
	int r;

	if (s->waits >= CONTROL_MAX_WAITS_PER_SESSION)
		return session_send_error(s, id, "too_many_requests",
				  "a session may wait for %d attaches at once",
				  CONTROL_MAX_WAITS_PER_SESSION);
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct waiter){ .next = c->waiters, .s = s, .id = id,
			      .req = json_incref(req) };
	c->waiters = w;
	s->waits++;
	if (wait_ms > 0) {
		r = sd_event_add_time_relative(manager_loop(c->m), &w->timer,
					       CLOCK_MONOTONIC,
					       (uint64_t)wait_ms * 1000, 1000,
					       on_wait_timeout, w);
		if (r < 0) {
			waiter_free(w);
			return r;
		}
	}
	return 0;
}

/*
 * Tell every session attached to ev's profile that its device went
 * (EV_DEVICE_LOST) or a reload removes it (EV_PROFILE_REMOVED):
 * one EVENT per attachment, so that clients let go of what they opened
 * on the device themselves (rxe's removal waits for every context on
 * it) and of their leases. The attachments stay until DETACH. A client
 * that does not read is not waited for: an EVENT that does not fit in
 * its socket is dropped.
 */
static void sessions_notify(struct control *c, const struct event *ev)
{
	const char *name = ev->profile_name;
	bool lost = ev->kind == EV_DEVICE_LOST;

	for (struct session *s = c->sessions; s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			const struct attachment *a = &s->att[i];
			json_t *doc;
			int r;

			if (!streq(a->profile, name))
				continue;
			doc = json_pack("{s:s, s:i, s:s}", "event",
					lost ? "device_removed"
					     : "profile_removed",
					"attachment", (int)a->id, "profile",
					name);
			if (doc && lost)
				json_object_set_new(
					doc, "device",
					json_string(ev->u.device.ibdev));
			if (doc && lost && ev->u.device.reason)
				json_object_set_new(
					doc, "reason",
					json_string(ev->u.device.reason));
			r = session_send_json(s, PROTO_EVENT, 0, doc, NULL, 0);
			if (r < 0)
				log_warn(r,
					 "session %u (pid %d): cannot tell it "
					 "profile %s %s, ignoring",
					 s->id, (int)s->cred.pid, name,
					 lost ? "lost its device"
					      : "is removed");
			else
				log_info("session %u (pid %d): told it "
					 "profile %s %s",
					 s->id, (int)s->cred.pid, name,
					 lost ? "lost its device"
					      : "is removed");
		}
}

/*
 * A reload removed or recreated an object (change ch of its result) that
 * attachments hold: it drains (kept for them) until the last lets go.
 * Each attachment holding it hears it (EVENT object_draining), so that
 * its client can detach and attach again for what the configuration
 * says now, and the old object goes.
 */
static void on_draining(struct control *c, const struct reload_change *ch)
{
	const char *profile = ch->profile, *name = ch->name;
	const char *kind = ch->kind >= 0 ? obj_kind_name(ch->kind) : NULL;

	if (!ch->drains || !kind || !name)
		return;
	for (struct session *s = c->sessions; s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			const struct attachment *a = &s->att[i];
			char reason[160];

			if (!streq(a->profile, profile) ||
			    !attachment_holds(a, (enum obj_kind)ch->kind, name))
				continue;
			snprintf(reason, sizeof(reason),
				 "%s '%s' was removed or changed by a reload: "
				 "it stays for you until you detach",
				 kind, name);
			session_send_json(s, PROTO_EVENT, 0,
				  json_pack("{s:s, s:i, s:s, s:s, s:s, s:s}",
					    "event", "object_draining",
					    "attachment", (int)a->id,
					    "profile", profile, "kind", kind,
					    "name", name, "reason", reason),
				  NULL, 0);
		}
}

/*
 * An event of the stream for each session attached to its profile, as
 * the stream has it (event_json()) and as the session may see it, with
 * the attachment's id in place of seq and time:
 *   - an object of the profile the kernel lost (a client destroyed it),
 *     or that was made again after (its old or new handle and keys), so
 *     that its client imports the new one;
 *   - a port of the profile's device went down or came up, so that a
 *     client can stop and resume its traffic.
 * Dropped for a session whose socket is full, as the others.
 */
static void sessions_pass_on(struct control *c, const struct event *ev)
{
	const json_t *stream = event_json(ev);

	if (!stream)
		return;
	for (struct session *s = c->sessions; s; s = s->next)
		for (size_t i = 0; i < s->n_att; i++) {
			/* The other holders' processes as s may see them. */
			const struct api_viewer v = { .admin = s->admin,
						      .has_uid = true,
						      .uid = s->cred.uid };
			json_t *doc, *seen;

			if (!streq(s->att[i].profile, ev->profile_name))
				continue;
			seen = api_view_event(stream, &v);
			doc = seen ? json_copy(seen) : NULL;
			json_decref(seen);
			if (doc) {
				json_object_del(doc, "seq");
				json_object_del(doc, "time");
				json_object_set_new(doc, "attachment",
						    json_integer(s->att[i].id));
			}
			session_send_json(s, PROTO_EVENT, 0, doc, NULL, 0);
		}
}

/* A profile changed: answer the attaches that waited for it. Leases
 * make no profile ready (and an attach answered here takes leases,
 * which are announced from within this loop): only a profile's change
 * and the end of the creations are heard. */
static void answer_waiters(struct control *c)
{
	struct waiter *w, *next;

	for (w = c->waiters; w; w = next) {
		const char *name =
			json_string_value(json_object_get(w->req, "profile"));
		struct profile *p = manager_profile(c->m, name);
		struct session *s = w->s;
		uint32_t id = w->id;
		json_t *req;

		next = w->next;
		if (p && !profile_settled_state(p))
			continue;
		req = json_incref(w->req);
		waiter_free(w);
		/* Answered in full, as if it had come now. */
		if (control_attach(s, id, req) < 0) {
			json_decref(req);
			session_free(s);
			/* The list may have lost more than w. */
			next = c->waiters;
			continue;
		}
		json_decref(req);
	}
}

/* What attached sessions hear of the bus, and what answers the
 * attaches that wait. */
static void on_event(void *ud, const struct event *ev)
{
	struct control *c = ud;

	switch (ev->kind) {
	case EV_PROFILE_CHANGED:
	case EV_SETTLED:
		answer_waiters(c);
		break;
	case EV_DEVICE_LOST:
	case EV_PROFILE_REMOVED:
		sessions_notify(c, ev);
		break;
	case EV_RELOAD:
		/* What it removes or recreates that attachments hold
		 * drains. */
		for (size_t k = 0; k < ev->u.reload.n_changes; k++)
			on_draining(c, &ev->u.reload.changes[k]);
		break;
	case EV_OBJECT_LOST:
	case EV_OBJECT_RECREATED:
	case EV_PORT_ERROR:
	case EV_PORT_ACTIVE:
		sessions_pass_on(c, ev);
		break;
	default:
		break;
	}
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Attach, timed for the histogram of /metrics. */
int control_attach(struct session *s, uint32_t id, json_t *req)
{
	struct control *c = s->c;
	size_t before = s->n_att;
	unsigned int waits = s->waits;
	double t0 = now(), dt;
	int r = attach_one(s, id, req);

	if (s->waits > waits)
		return r; /* answered later */
	if (s->n_att == before) {
		c->attach_failures++;
		return r;
	}
	dt = now() - t0;
	c->attaches++;
	c->attach_seconds += dt;
	for (size_t b = 0; b < SESSION_ATTACH_BUCKETS; b++)
		if (dt <= control_attach_bucket_le[b]) {
			c->attach_buckets[b]++;
			break;
		}
	return r;
}

/*
 * What ATTACHED says of a profile in one mode, but for the attachment's
 * id, as text: rendered once and sent again while the profile's attach
 * generation holds (profile_attach_generation(): the scheme REST's
 * documents are kept by, http.c). Rendering was most of an attach in
 * the daemon, and attaching changes nothing in it.
 */
struct attach_text {
	uint64_t generation;
	char *text; /* the object without "attachment": "{...}" */
	size_t len;
	/* With an MR table: its sealed memfd, the message's last fd. */
	int table_fd;
	/* The fds that go with it (the table's last), and the leases of
	 * the generation's attaches while one holds them (NULL: none). */
	struct attach_view view;
	struct lease_set *set;
};

/* How ATTACHED is sent, as bits: the engine's (attach_view.h: shared
 * mode, the memories without their fds), and with an MR table. */
enum {
	TEXT_LOCAL = ATTACH_LOCAL,
	TEXT_SHARED = ATTACH_SHARED,
	TEXT_NO_MEMORY_FDS = ATTACH_NO_MEMORY_FDS,
	TEXT_MEMORY_TABLE = ATTACH_MEMORY_TABLE,
	TEXT_TABLE = 1 << 3,
	TEXT_KINDS = 1 << 4,
};

struct attach_cache {
	UT_hash_handle hh;
	struct attach_text mode[TEXT_KINDS];
	char name[]; /* the profile's */
};

void control_attach_sets(struct control *c, const char *profile,
			 void (*each)(void *ud, uint64_t id), void *ud)
{
	struct attach_cache *e;

	HASH_FIND_STR(c->attach_cache, profile, e);
	for (int k = 0; e && k < TEXT_KINDS; k++)
		if (k & TEXT_SHARED && e->mode[k].set)
			each(ud, e->mode[k].set->id);
}

static void attach_text_clear(struct attach_text *t)
{
	free(t->text);
	if (t->table_fd >= 0)
		close(t->table_fd);
	attach_view_clear(&t->view);
	/* The set lives on while attachments hold it. */
	lease_set_forget(t->set);
	*t = (struct attach_text){ .table_fd = -1 };
}

static void attach_cache_free(struct control *c)
{
	struct attach_cache *e, *tmp;

	HASH_ITER(hh, c->attach_cache, e, tmp) {
		HASH_DEL(c->attach_cache, e);
		for (int k = 0; k < TEXT_KINDS; k++)
			attach_text_clear(&e->mode[k]);
		free(e);
	}
}

/* The MR table in a memfd sealed against any change: every attach of
 * the generation maps the same, and none can alter what another reads.
 * The fd, or -errno. */
static int table_memfd(const char *profile, const void *table, size_t len)
{
	char name[64];
	int fd, r = 0;

	snprintf(name, sizeof(name), "rdmad-mr-table:%s", profile);
	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	for (size_t at = 0; r == 0 && at < len;) {
		ssize_t n = write(fd, (const char *)table + at, len - at);

		if (n < 0 && errno != EINTR)
			r = -errno;
		else if (n > 0)
			at += (size_t)n;
	}
	if (r == 0 && fcntl(fd, F_ADD_SEALS,
			    F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW |
				    F_SEAL_SEAL) < 0)
		r = -errno;
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* The text of p's ATTACHED with an MR table, and the table's memfd. */
static char *render_table(struct profile *p, unsigned int how, size_t *len,
			  int *table_fd)
{
	_cleanup_free_ void *table = NULL;
	size_t table_len = 0;
	char *text = NULL;
	int r;

	r = profile_attach_table(p, how, &text, len, &table, &table_len);
	if (r == 0)
		r = *table_fd = table_memfd(profile_name(p), table, table_len);
	if (r < 0) {
		log_warn(-r, "profile %s: cannot make its MR table",
			 profile_name(p));
		free(text);
		return NULL;
	}
	return text;
}

/* ATTACHED's text of p in this way: the one kept, or rendered again if
 * the generation moved. NULL when out of memory. */
static struct attach_text *attach_text(struct control *c,
					     struct profile *p, int how)
{
	const char *name = profile_name(p);
	uint64_t generation = profile_attach_generation(p);
	struct attach_cache *e;
	struct attach_view view = { 0 };
	struct attach_text *t;
	int table_fd = -1, r;
	size_t len = 0;
	char *text;

	HASH_FIND_STR(c->attach_cache, name, e);
	if (e && e->mode[how].text && e->mode[how].generation == generation)
		return &e->mode[how];
	text = how & TEXT_TABLE
		   ? render_table(p, how & ~TEXT_TABLE, &len, &table_fd)
		   : profile_attach_text(p, how, &len);
	if (!text)
		return NULL;
	r = profile_attach_view(p, how & ~TEXT_TABLE, &view);
	if (r < 0) {
		log_warn(r, "profile %s: cannot attach", name);
		free(text);
		if (table_fd >= 0)
			close(table_fd);
		return NULL;
	}
	if (table_fd >= 0)
		view.fds[view.n_fds++] = table_fd;
	if (!e) {
		/* Profiles gone by reloads leave theirs: a bound. */
		if (HASH_COUNT(c->attach_cache) >= CONTROL_MAX_CACHED)
			attach_cache_free(c);
		e = calloc(1, sizeof(*e) + strlen(name) + 1);
		if (!e) {
			free(text);
			if (table_fd >= 0)
				close(table_fd);
			attach_view_clear(&view);
			return NULL;
		}
		for (int k = 0; k < TEXT_KINDS; k++)
			e->mode[k].table_fd = -1;
		strcpy(e->name, name);
		HASH_ADD_STR(c->attach_cache, name, e);
	}
	t = &e->mode[how];
	attach_text_clear(t);
	*t = (struct attach_text){ .generation = generation, .text = text,
				   .len = len, .table_fd = table_fd,
				   .view = view };
	return t;
}

/* A message too big for the session: what it would be, and why it does
 * not go (never a part of it). */
static int send_too_large(struct session *s, uint32_t id, const char *name,
			  bool shared, size_t len, size_t n_fds)
{
	const char *mode = shared ? "shared" : "local";

	if (s->version < PROTO_VERSION_FRAMES)
		return session_send_error(
			s, id, "too_large",
			"ATTACHED of profile '%s' in %s mode is %zu bytes with "
			"%zu fds, over one frame (%d bytes, %d fds): the "
			"client must speak protocol version %d to attach it",
			name, mode, len, n_fds, PROTO_MAX_PAYLOAD,
			PROTO_MAX_FDS, PROTO_VERSION_FRAMES);
	return session_send_error(
		s, id, "too_large",
		"ATTACHED of profile '%s' in %s mode is %zu bytes with %zu "
		"fds, over what one message carries (%u bytes, %u fds)",
		name, mode, len, n_fds, (unsigned int)PROTO_MAX_MESSAGE,
		(unsigned int)PROTO_MAX_MESSAGE_FDS);
}

/* The mode an ATTACH asks for, decided: 1 with *shared set, else the
 * answer sent (0, or the session's end). */
static int attach_mode(struct session *s, uint32_t id, json_t *req,
		       const struct profile *p, bool *shared)
{
	const char *mode = json_string_value(json_object_get(req, "mode"));
	int import_err = profile_import_err(p);
	int r;

	if (!mode || streq(mode, "auto"))
		*shared = import_err == 0;
	else if (streq(mode, "shared") || streq(mode, "local"))
		*shared = streq(mode, "shared");
	else
		return session_send_error(
			s, id, "bad_request",
			"mode \"%s\" is not auto, shared or local", mode);
	if (!*shared || !import_err)
		return 1;
	r = session_send_error(s, id, "not_supported",
			       "%s cannot share its context (%s): attach in "
			       "local or auto mode",
			       profile_ibdev(p), strerror(-import_err));
	return r < 0 ? r : 0;
}

/* The profile is there and the session may attach: wait for it, or say
 * why not (0 or the session's end), or 1 to go on. */
static int attach_ready(struct session *s, uint32_t id, json_t *req,
			struct profile *p)
{
	json_t *w = json_object_get(req, "wait_ms");

	/* Its handles against the kernel's first, every time (a round of
	 * the timer may have just missed it): what a client destroyed is
	 * being made again then, and the profile is not ready. A client
	 * that reads an MR table has each MR's handle looked up by the
	 * kernel when it imports it, and checks its keys. */
	manager_check(s->c->m, p,
		      !json_is_true(json_object_get(req, "mr_table")));
	if (profile_attachable(p))
		return 1;
	if (w && (!json_is_integer(w) || json_integer_value(w) < -1))
		return session_send_error(
			s, id, "bad_request",
			"\"wait_ms\" is a number of milliseconds, or -1 for no "
			"limit");
	if (json_integer_value(w) && !profile_failed(p))
		return wait_ready(s, id, req, json_integer_value(w));
	return send_not_ready(s, id, p, NULL);
}

/* Send the view as ATTACHED of attachment a: 0 once it is on its way,
 * else the error (-EMSGSIZE: too large for the session). */
static int attach_send(struct session *s, uint32_t id, struct attachment *a,
		       const struct attach_text *doc,
		       const struct attach_view *v)
{
	char head[64];
	int n;

	/* "{" "attachment":N "," and the rest of the kept object. */
	n = snprintf(head, sizeof(head), "{\"attachment\":%u%s", a->id,
		     doc->len > 2 ? "," : "");
	return session_send_message(
		s, PROTO_ATTACHED, id,
		(struct iovec[]){ { head, (size_t)n },
				  { doc->text + 1, doc->len - 1 } },
		2, v->fds, v->n_fds);
}

/* One lease of the previous run's adoption, now the attachment's. */
static void take_lease(void *ud, enum obj_kind kind, const char *name,
		       uint64_t serial)
{
	struct attachment *a = ud;
	struct lease *l = realloc(a->leases, (a->n_leases + 1) * sizeof(*l));
	char *copy = strdup(name);

	if (!l || !copy) {
		/* Kept counted with nobody to release it: the object drains
		 * until the daemon stops, never goes under the client. */
		free(copy);
		if (l)
			a->leases = l;
		return;
	}
	a->leases = l;
	l[a->n_leases++] = (struct lease){ kind, copy, serial };
}

/* ATTACH with "resume": the client held objects of p through the
 * previous run (it was adopted, from the lease record); the attachment
 * takes those leases over, so that its DETACH, or its end, releases
 * them as a session's do. Nothing to take over is no error: a fresh
 * attachment is what a client that was not adopted needs. */
static void resume(struct session *s, struct profile *p, struct attachment *a)
{
	size_t n = manager_adopted_claim(s->c->m, p, s->cred.pid, take_lease,
					 a);

	a->resumed = n > 0;
	if (n) {
		/* Who holds them is this session now: written down. */
		attachment_render(s->c, a);
		profile_touch_leases(p);
	}
	if (n)
		log_info("session %u (pid %d): resumed %zu leases of the "
			 "previous run on profile %s",
			 s->id, (int)s->cred.pid, n, a->profile);
}

/* Whether the memories' fds go with the answer: "memory_fds" true (or
 * absent), or a number at least the profile's memories; false, or a
 * smaller number, not (the client asks for each with MAP). */
static bool memory_fds_wanted(const json_t *req, const struct profile *p)
{
	const json_t *f = json_object_get(req, "memory_fds");

	if (json_is_integer(f))
		return json_integer_value(f) >= 0 &&
		       (uint64_t)json_integer_value(f) >=
			       profile_memories(p);
	return !json_is_false(f);
}

/* How the ATTACH is answered. In shared mode, a client that reads an
 * MR table gets one, and one that asks for each memory's fd when it
 * maps it gets none with the message; one that reads the memories in
 * the table too gets no list, and their fds only when it asked for
 * them by name (an older daemon sent none there). */
static unsigned int attach_how(const json_t *req, const struct profile *p,
			       bool shared)
{
	bool table = json_is_true(json_object_get(req, "mr_table"));
	bool fds = memory_fds_wanted(req, p);

	if (!shared)
		return TEXT_LOCAL;
	if (table && json_is_true(json_object_get(req, "memory_table")))
		return TEXT_SHARED | TEXT_TABLE | TEXT_MEMORY_TABLE |
		       (fds && json_object_get(req, "memory_fds")
			    ? 0
			    : TEXT_NO_MEMORY_FDS);
	return TEXT_SHARED | (table ? TEXT_TABLE : 0) |
	       (fds ? 0 : TEXT_NO_MEMORY_FDS);
}

static int attach_one(struct session *s, uint32_t id, json_t *req)
{
	struct control *c = s->c;
	const char *name = json_string_value(json_object_get(req, "profile"));
	struct profile *p = name ? manager_profile(c->m, name) : NULL;
	struct attach_text *doc;
	struct attachment *att, a = { 0 };
	size_t n_fds = 0;
	bool shared = false;
	int r;

	if (!name)
		return session_send_error(s, id, "bad_request",
					  "ATTACH needs \"profile\"");
	/* Before not_found: a profile's own socket says nothing of the
	 * others, not even whether they exist. */
	if (s->scope && !streq(name, s->scope))
		return session_send_error(s, id, "forbidden",
					  "this socket serves profile '%s' "
					  "only",
					  s->scope);
	if (!p)
		return session_send_error(s, id, "not_found",
					  "no profile '%s'", name);
	if (!session_allowed(p, s))
		return session_send_error(
			s, id, "forbidden",
			"uid %u may not attach to profile '%s'",
			(unsigned int)s->cred.uid, name);
	if (s->n_att >=
	    (size_t)manager_config(c->m)->daemon.max_attachments_per_session)
		return session_send_error(
			s, id, "resource_exhausted",
			"a session holds at most %d attachments "
			"(daemon.max_attachments_per_session)",
			manager_config(c->m)->daemon.max_attachments_per_session);
	r = attach_ready(s, id, req, p);
	if (r <= 0)
		return r;
	r = attach_mode(s, id, req, p, &shared);
	if (r <= 0)
		return r;

	a.shared = shared;
	a.profile = strdup(name);
	doc = attach_text(c, p, attach_how(req, p, shared));
	att = realloc(s->att, (s->n_att + 1) * sizeof(*att));
	if (att)
		s->att = att;
	if (!a.profile || !doc || !att) {
		/* Nothing was leased: the record goes without a release. */
		attachment_drop(&a);
		return session_send_error(s, id, "internal",
					  "cannot attach: %s",
					  strerror(ENOMEM));
	}
	/* Leased, and so in the lease record that outlives us (sysd.c),
	 * before the client has a handle: a crash right after the send
	 * must not forget who holds what. A session that ends before the
	 * message is all sent releases them with its attachments. */
	a.id = ++c->next_attachment;
	n_fds = doc->view.n_fds;
	a.set = lease_set_get(p, &doc->set, &doc->view, doc->generation);
	if (!a.set) {
		attachment_drop(&a);
		return session_send_error(s, id, "internal",
					  "cannot attach: %s",
					  strerror(ENOMEM));
	}
	s->att[s->n_att++] = a;
	/* Written down now that the session holds them: the set's leases
	 * were taken before the attachment was in the session's list. */
	profile_touch_leases(p);
	r = attach_send(s, id, &s->att[s->n_att - 1], doc, &doc->view);
	if (r < 0 && r != -EMSGSIZE)
		return r; /* the socket's: the session ends, and releases */
	if (r < 0) {
		/* Nothing went: the leases end at once. */
		attachment_release(c, &s->att[--s->n_att]);
		return send_too_large(s, id, name, shared, doc->len + 16,
				      n_fds);
	}
	if (shared && json_is_true(json_object_get(req, "resume")))
		resume(s, p, &s->att[s->n_att - 1]);
	session_publish(s, &s->att[s->n_att - 1], EV_SESSION_ATTACH, NULL);
	log_info("session %u (pid %d uid %u): attached to %s, %s mode", s->id,
		 (int)s->cred.pid, (unsigned int)s->cred.uid, name,
		 shared ? "shared" : "local");
	return 0;
}

struct attachment *session_attachment(struct session *s, const json_t *req)
{
	json_int_t id = json_integer_value(json_object_get(req, "attachment"));

	for (size_t i = 0; i < s->n_att; i++)
		if (s->att[i].id == (uint32_t)id)
			return &s->att[i];
	return NULL;
}

int control_detach(struct session *s, uint32_t id, json_t *req)
{
	struct attachment *a = session_attachment(s, req);
	char text[64];
	uint32_t aid;
	int n;

	if (!a)
		return session_send_error(s, id, "not_found", "no such attachment");
	aid = a->id;
	session_publish(s, a, EV_SESSION_DETACH, "detached");
	attachment_release(s->c, a);
	*a = s->att[--s->n_att];
	n = snprintf(text, sizeof(text), "{\"attachment\":%u}", aid);
	return session_send_text(s, PROTO_DETACHED, id, text, (size_t)n);
}

/* A report lists no more MRs than the profile declares objects: what a
 * session keeps of it is bounded by what the operator declared. */
static size_t report_max(const struct profile *p)
{
	size_t n = p ? profile_n_objects(p) : 0;

	return n < CONTROL_MAX_REPORT_MRS ? n : CONTROL_MAX_REPORT_MRS;
}

/* NULL when every entry of mr is {name, lkey, rkey, iova, length}: the
 * name one of p's MRs, the rest integers (keys 32-bit); else why not.
 * What is kept, and shown in GET /v1/sessions, is only that. */
static const char *report_check(struct profile *p, const json_t *mr)
{
	static const char *const ints[] = { "lkey", "rkey", "iova", "length" };
	const json_t *e;
	size_t i;

	if (!json_is_array(mr))
		return "\"mr\" must be a list";
	json_array_foreach(mr, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));

		if (!json_is_object(e) || json_object_size(e) != 5)
			return "each MR is {name, lkey, rkey, iova, length}";
		if (!name || !p || !profile_find(p, OBJ_MR, name))
			return "an MR the profile does not declare";
		for (size_t k = 0; k < ARRAY_SIZE(ints); k++) {
			const json_t *v = json_object_get(e, ints[k]);

			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    (k < 2 && json_integer_value(v) > UINT32_MAX))
				return "lkey, rkey, iova and length are "
				       "integers (lkey and rkey 32-bit)";
		}
	}
	return NULL;
}

int control_report(struct session *s, uint32_t id, json_t *req)
{
	struct attachment *a = session_attachment(s, req);

	if (!a)
		return session_send_error(s, id, "not_found", "no such attachment");
	if (a->shared)
		return session_send_error(s, id, "bad_request",
				  "REPORT is for local mode");
	static const char ok[] = "{\"status\":200,\"body\":{}}";
	json_t *mr = json_object_get(req, "mr");
	struct profile *p = manager_profile(s->c->m, a->profile);
	const char *why = report_check(p, mr);

	if (why)
		return session_send_error(s, id, "bad_request", "REPORT: %s",
					  why);

	/* A report over one frame comes in parts: each REPORT after the
	 * first says "append", and its list goes after the others. */
	if (json_is_true(json_object_get(req, "append")) &&
	    json_is_array(a->report) && json_is_array(mr)) {
		if (json_array_size(a->report) + json_array_size(mr) >
		    report_max(p))
			return session_send_error(
				s, id, "too_large",
				"a report lists at most %zu MRs (the profile's "
				"objects)",
				report_max(p));
		json_array_extend(a->report, mr);
	} else {
		json_decref(a->report);
		a->report = json_incref(mr);
	}
	return session_send_text(s, PROTO_REPLY, id, ok, sizeof(ok) - 1);
}

/* The handle kinds of MADE's. */
static const enum uhandle_kind made_kinds[PROTO_MADE_KINDS] = {
	[PROTO_MADE_QP] = UH_QP,
	[PROTO_MADE_CQ] = UH_CQ,
	[PROTO_MADE_SRQ] = UH_SRQ,
};

int control_made(struct session *s, uint32_t id, json_t *req)
{
	_cleanup_(proto_made_clear) struct proto_made m = { 0 };
	_cleanup_free_ struct reclaim_claim *c = NULL;
	struct attachment *a;
	struct profile *p;
	char text[64];
	int r = proto_made_decode(req, &m), n;

	if (r == -E2BIG)
		return session_send_error(s, id, "too_large",
					  "MADE lists at most %d objects",
					  PROTO_MADE_MAX);
	if (r < 0)
		return session_send_error(s, id, "bad_request",
					  "MADE: %s", strerror(-r));
	a = session_attachment(s, req);
	if (!a)
		return session_send_error(s, id, "not_found", "no such attachment");
	if (!a->shared)
		return session_send_error(s, id, "bad_request",
					  "MADE is for shared mode");
	p = a->profile ? manager_profile(s->c->m, a->profile) : NULL;
	c = calloc(m.n_objs + 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < m.n_objs; i++)
		c[i] = (struct reclaim_claim){
			.kind = made_kinds[m.objs[i].kind],
			.handle = m.objs[i].handle,
			.qp_num = m.objs[i].qp_num,
		};
	/* The process is the session's peer (SO_PEERCRED), never a pid
	 * the message names. */
	r = p ? reclaim_claim(p, s->cred.pid, c, m.n_objs, m.undo) : -ENOENT;
	/* Written down before the client is told: a crash from now on
	 * leaves the next run knowing (reclaim.h). */
	if (r == 0 && reclaim_record_due(p))
		profile_touch_leases(p);
	if (r == -EEXIST)
		return session_send_error(s, id, "conflict",
					  "a handle is another live process's");
	if (r < 0)
		return session_send_error(s, id, "unavailable",
					  "cannot take the objects: %s",
					  strerror(-r));
	n = snprintf(text, sizeof(text),
		     "{\"status\":200,\"body\":{\"made\":%zu}}", m.n_objs);
	return session_send_text(s, PROTO_REPLY, id, text, (size_t)n);
}

void control_waiters_drop(struct control *c, struct session *s)
{
	for (struct waiter *w = c->waiters, *next; w; w = next) {
		next = w->next;
		if (w->s == s)
			waiter_free(w);
	}
}

int control_attach_start(struct control *c)
{
	return events_subscribe(manager_bus(c->m), on_event, c);
}

void control_attach_stop(struct control *c)
{
	events_unsubscribe(manager_bus(c->m), on_event, c);
	attach_cache_free(c);
}
