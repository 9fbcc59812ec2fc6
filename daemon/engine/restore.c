// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

#include "durable.h"
#include "log.h"
#include "profile_index.h"
#include "restore.h"
#include "restore_doc.h"
#include "restore_leases.h"
#include "uhandle.h"
#include "util.h"

#define STATE_VERSION 1

/* One PD or MR of the previous run. */
struct entry {
	/* "pd/NAME" or "mr/NAME"; one that drained: "pd#HANDLE", "mr#HANDLE"
	 * (a name may drain in several incarnations, and beside a running
	 * one). */
	char *key;
	UT_hash_handle hh;
	char *name;
	char kind; /* 'p' or 'm' */
	/* It drained in the previous run: no declaration takes it back;
	 * it goes on draining while a live holder leases it. */
	bool draining;
	uint32_t handle;
	/* MRs declared: what the declaration must still say. */
	char *pd, *memory;
	uint64_t offset, length, iova;
	uint32_t lkey, rkey; /* 0: not in the state (not checked) */
	unsigned int access;
	bool zero_based;
	bool claimed; /* written by the one thread that creates it */
	bool kept;    /* handed to keep() for a live holder */
	/* PDs: in the context's list of PDs when it was taken back? */
	enum { RESTORE_UNKNOWN, RESTORE_LISTED, RESTORE_UNLISTED } listed;
};

struct restored {
	char *ibdev; /* the device it was on */
	struct entry *by_key; /* what it declared */
	struct entry *drained; /* what drained (entry.draining) */
	pid_t *tids; /* the previous run's threads */
	size_t n_tids;
	int64_t ctxn;
	/* The shared clients that held its objects, as the lease record
	 * said at the moment the previous run ended (or, from a run that
	 * wrote none, its state document at its stop):
	 * [{pid, start, uid, gid, leases: [{kind, name, handle}]}]. */
	json_t *holders;
	/* Who made what in the context (reclaim.h: reclaim_restore()), as
	 * the lease record said; NULL: it said nothing. */
	json_t *makers;
	/* Handles that named another object than the entry's by now. */
	size_t stale;
};

/* What systemd passed, by profile, until a profile takes it. */
struct kept {
	char *profile;
	int ctx_fd, state_fd, lease_fd;
	struct restore_set *sets; /* its lease sets (restore_leases.h) */
	size_t n_sets;
	/* Its state document, read ahead (restore_read_ahead()): parsed,
	 * or NULL and why not. */
	struct restored *read;
	const char *why;
};

static struct kept *kept;
static size_t n_kept;
/* The thread that reads the kept state documents while the daemon
 * loads its configuration; joined before anything uses them. */
static pthread_t reader;
static bool reading;

static struct kept *kept_find(const char *profile, bool add)
{
	struct kept *k;

	for (size_t i = 0; i < n_kept; i++)
		if (streq(kept[i].profile, profile))
			return &kept[i];
	if (!add)
		return NULL;
	k = realloc(kept, (n_kept + 1) * sizeof(*kept));
	if (!k)
		return NULL;
	kept = k;
	k = &kept[n_kept];
	*k = (struct kept){ .profile = strdup(profile), .ctx_fd = -1,
			    .state_fd = -1, .lease_fd = -1 };
	if (!k->profile)
		return NULL;
	n_kept++;
	return k;
}

/* A lease set's record, ID/P after its prefix. */
static int keep_set(const char *name, int fd)
{
	const char *slash = strchr(name, '/');
	struct restore_set *sets; /* its lease sets (restore_leases.h) */
	struct kept *k;
	char *id;

	if (!slash || slash == name || !slash[1]) {
		close(fd);
		return -EINVAL;
	}
	k = kept_find(slash + 1, true);
	id = k ? strndup(name, (size_t)(slash - name)) : NULL;
	sets = id ? realloc(k->sets, (k->n_sets + 1) * sizeof(*k->sets))
		  : NULL;
	if (!sets) {
		free(id);
		close(fd);
		return -ENOMEM;
	}
	k->sets = sets;
	sets[k->n_sets++] = (struct restore_set){id, fd};
	return 0;
}

int restore_keep(const char *name, int fd)
{
	static const char *const prefixes[] = { RESTORE_FDNAME_CTX,
						RESTORE_FDNAME_STATE,
						RESTORE_FDNAME_LEASE };
	size_t i;
	struct kept *k;
	int *slot;

	if (!strncmp(name, RESTORE_FDNAME_LEASESET,
		     strlen(RESTORE_FDNAME_LEASESET)))
		return keep_set(name + strlen(RESTORE_FDNAME_LEASESET), fd);
	for (i = 0; i < ARRAY_SIZE(prefixes); i++)
		if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
			break;
	if (i == ARRAY_SIZE(prefixes)) {
		close(fd);
		return -EINVAL;
	}
	k = kept_find(name + strlen(prefixes[i]), true);
	if (!k) {
		close(fd);
		return -ENOMEM;
	}
	slot = i == 0 ? &k->ctx_fd : i == 1 ? &k->state_fd : &k->lease_fd;
	if (*slot >= 0)
		close(*slot);
	*slot = fd;
	return 0;
}

static void kept_close(struct kept *k)
{
	if (k->ctx_fd >= 0)
		close(k->ctx_fd);
	if (k->state_fd >= 0)
		close(k->state_fd);
	if (k->lease_fd >= 0)
		close(k->lease_fd);
	k->ctx_fd = k->state_fd = k->lease_fd = -1;
	for (size_t i = 0; i < k->n_sets; i++) {
		free(k->sets[i].id);
		close(k->sets[i].fd);
	}
	free(k->sets);
	k->sets = NULL;
	k->n_sets = 0;
}

static void entry_free(struct entry *e)
{
	free(e->key);
	free(e->name);
	free(e->pd);
	free(e->memory);
	free(e);
}

static void restored_free(struct restored *r)
{
	struct entry *e, *tmp;

	if (!r)
		return;
	HASH_ITER(hh, r->by_key, e, tmp) {
		HASH_DEL(r->by_key, e);
		entry_free(e);
	}
	HASH_ITER(hh, r->drained, e, tmp) {
		HASH_DEL(r->drained, e);
		entry_free(e);
	}
	free(r->tids);
	json_decref(r->holders);
	json_decref(r->makers);
	free(r->ibdev);
	free(r);
}

/* An entry of the document, checked; its strings are taken. */
static int add_entry(struct restored *r, struct restore_doc_entry *d)
{
	struct entry *e, *old, **table = d->draining ? &r->drained : &r->by_key;
	int n;

	if (d->not_object || !d->kind || !d->name || !d->has_handle ||
	    (strcmp(d->kind, "pd") && strcmp(d->kind, "mr")))
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	n = !e ? -1
	    : d->draining
		    ? asprintf(&e->key, "%s#%u", d->kind, (uint32_t)d->handle)
		    : asprintf(&e->key, "%s/%s", d->kind, d->name);
	if (n < 0) {
		free(e);
		return -ENOMEM;
	}
	e->name = TAKE_PTR(d->name);
	e->draining = d->draining;
	e->kind = d->kind[0] == 'p' ? 'p' : 'm';
	e->handle = (uint32_t)d->handle;
	e->lkey = (uint32_t)d->lkey;
	e->rkey = (uint32_t)d->rkey;
	if (e->kind == 'm' && !e->draining) {
		e->pd = TAKE_PTR(d->pd);
		e->memory = TAKE_PTR(d->memory);
		e->offset = (uint64_t)d->offset;
		e->length = (uint64_t)d->length;
		e->iova = (uint64_t)d->iova;
		e->access = (unsigned int)d->access;
		e->zero_based = d->zero_based;
		if (!e->pd || !e->memory) {
			entry_free(e);
			return -EINVAL;
		}
	}
	HASH_FIND_STR(*table, e->key, old);
	if (old) {
		entry_free(e);
		return -EINVAL;
	}
	HASH_ADD_KEYPTR(hh, *table, e->key, strlen(e->key), e);
	return 0;
}

/* The kept state of a profile; NULL (and a reason) if unfit. */
static struct restored *parse_state(struct restore_doc *doc, const char **why)
{
	struct restored *r;
	json_t *top = doc->rest, *o, *tids;
	const char *dev = json_string_value(json_object_get(top, "ibdev"));
	size_t i;

	if (json_integer_value(json_object_get(top, "version")) !=
		STATE_VERSION ||
	    !doc->has_objects || !dev) {
		*why = "its state document is not one this version reads";
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->ibdev = strdup(dev))) {
		free(r);
		*why = "out of memory";
		return NULL;
	}
	tids = json_object_get(top, "tids");
	if (json_array_size(tids)) {
		r->tids = calloc(json_array_size(tids), sizeof(*r->tids));
		if (!r->tids) {
			*why = "out of memory";
			restored_free(r);
			return NULL;
		}
		json_array_foreach(tids, i, o)
			r->tids[r->n_tids++] = (pid_t)json_integer_value(o);
	}
	if (json_is_array(json_object_get(top, "holders")))
		r->holders = json_incref(json_object_get(top, "holders"));
	r->ctxn = json_is_integer(json_object_get(top, "ctxn"))
			  ? json_integer_value(json_object_get(top, "ctxn"))
			  : -1;
	for (i = 0; i < doc->n_entries; i++) {
		if (add_entry(r, &doc->entries[i]) < 0) {
			*why = "its state document is malformed";
			restored_free(r);
			return NULL;
		}
	}
	return r;
}

/* The state document k kept, parsed, with the holders of its lease
 * record (if any): NULL (and a reason) if unfit. */
static struct restored *read_kept(const struct kept *k, const char **why)
{
	int fd = k->state_fd;
	json_t *holders, *makers;
	struct restore_doc doc;
	struct restored *r;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;

	text = fd >= 0 ? restore_record_read(fd, &len) : NULL;
	if (!text || restore_doc_read(text, len, &doc) < 0) {
		*why = "its state document is missing or unreadable";
		return NULL;
	}
	r = parse_state(&doc, why);
	restore_doc_free(&doc);
	/* The lease record is written at every change, the document's
	 * holders only at a clean stop (and by older runs). */
	holders = r ? restore_leases_read(k->profile, k->lease_fd, k->sets,
					  k->n_sets, &makers)
		    : NULL;
	if (holders) {
		json_decref(r->holders);
		r->holders = holders;
		r->makers = makers;
	}
	return r;
}

static void *read_ahead(void *unused)
{
	(void)unused;
	for (size_t i = 0; i < n_kept; i++)
		if (kept[i].ctx_fd >= 0)
			kept[i].read = read_kept(&kept[i], &kept[i].why);
	return NULL;
}

void restore_read_ahead(void)
{
	if (!n_kept || reading)
		return;
	/* Without a thread, each is read when its profile takes it. */
	reading = pthread_create(&reader, NULL, read_ahead, NULL) == 0;
}

/* The documents read ahead are there (or none was). */
static void read_ahead_join(void)
{
	if (reading)
		pthread_join(reader, NULL);
	reading = false;
}

/*
 * Which kept PDs the context still has: one INFO_HANDLES listing of its
 * PDs stands for a kernel call per PD (restore_pd()). A handle in that
 * list names a PD of this very context; one not in it names none.
 * Without the method, or with more PDs than one listing holds, nothing
 * is known and each PD is checked as it is taken back.
 */
static bool list_pds(struct restored *r, struct ibv_context *ctx)
{
	_cleanup_free_ uint32_t *pds = NULL;
	struct entry *e, *tmp;
	size_t n;
	int complete;

	if (uhandle_list(ctx->cmd_fd, UH_PD, &pds, &n, &complete) < 0 ||
	    !complete)
		return false;
	HASH_ITER(hh, r->by_key, e, tmp)
		if (e->kind == 'p')
			e->listed = uhandle_in(pds, n, e->handle)
					    ? RESTORE_LISTED
					    : RESTORE_UNLISTED;
	return true;
}

struct restored *restore_take(const struct profile *p,
			      struct ibv_context **ctx)
{
	struct kept *k = kept_find(profile_name(p), false);
	struct restored *r;
	const char *why = NULL;
	int err = 0;

	read_ahead_join();
	if (!k || k->ctx_fd < 0)
		return NULL;
	r = TAKE_PTR(k->read);
	why = k->why;
	if (!r && !why)
		r = read_kept(k, &why);
	if (r && !streq(r->ibdev, profile_ibdev(p))) {
		why = "it was on another device";
		restored_free(r);
		r = NULL;
	}
	if (r) {
		/* The context owns the fd from here, and closes it. */
		*ctx = ibv_import_device(k->ctx_fd);
		if (*ctx && !streq(ibv_get_device_name((*ctx)->device),
				   profile_ibdev(p))) {
			/* The document says ours; the context is not. */
			log_warn(0,
				 "profile %s: the kept device context is "
				 "of %s, not %s",
				 profile_name(p),
				 ibv_get_device_name((*ctx)->device),
				 profile_ibdev(p));
			ibv_close_device(*ctx); /* closes k->ctx_fd */
			*ctx = NULL;
			k->ctx_fd = -1;
			why = "it is another device's";
			restored_free(r);
			r = NULL;
		} else if (*ctx) {
			k->ctx_fd = -1;
			if (!list_pds(r, *ctx))
				log_debug(
				    "profile %s: the context's PDs cannot "
				    "be listed in one call: each kept PD "
				    "is checked with a window",
				    profile_name(p));
		} else {
			err = errno ? -errno : -EOPNOTSUPP;
			why = "it cannot be imported";
			restored_free(r);
			r = NULL;
		}
	}
	if (!r)
		log_warn(err,
			 "profile %s: not taking back the device "
			 "context of the previous run: %s",
			 profile_name(p), why);
	kept_close(k);
	return r;
}

pid_t *restore_take_tids(struct restored *r, size_t *n)
{
	*n = r ? r->n_tids : 0;
	return r ? TAKE_PTR(r->tids) : NULL;
}

int64_t restore_ctxn(const struct restored *r)
{
	return r ? r->ctxn : -1;
}

static struct entry *entry_of(struct restored *r, const char *kind,
			      const char *name)
{
	char key[320];
	struct entry *e;

	if (!r || snprintf(key, sizeof(key), "%s/%s", kind, name) >=
			  (int)sizeof(key))
		return NULL;
	HASH_FIND_STR(r->by_key, key, e);
	return e;
}

/* Unclaimed entry of kind and name. */
static struct entry *find(struct restored *r, const char *kind,
			  const char *name)
{
	struct entry *e = entry_of(r, kind, name);

	return e && !e->claimed ? e : NULL;
}

/*
 * Is pd a PD of the context? Importing a PD is no proof on every device
 * (rxe's import asks the kernel nothing), so, where the context's list of
 * PDs could not be had (list_pds()), a kernel call that needs the handle
 * is made: a type 1 window, allocated and freed. A device without
 * windows cannot tell: taken as usable (its first use would fail).
 */
static bool pd_usable(struct ibv_pd *pd)
{
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);

	if (mw)
		return ibv_dealloc_mw(mw) == 0;
	return errno == EOPNOTSUPP || errno == ENOSYS;
}

struct ibv_pd *restore_pd(struct restored *r, struct ibv_context *ctx,
			  const char *name, uint32_t *handle, bool *was_kept)
{
	struct entry *e = find(r, "pd", name);
	struct ibv_pd *pd;

	*was_kept = e != NULL;
	if (!e)
		return NULL;
	*handle = e->handle;
	/* Not in the context's list: no PD of it, nothing to import. */
	errno = ENOENT;
	pd = e->listed != RESTORE_UNLISTED ? ibv_import_pd(ctx, e->handle)
					   : NULL;
	if (pd && (e->listed == RESTORE_LISTED || pd_usable(pd))) {
		e->claimed = true;
		return pd;
	}
	if (pd) {
		int err = errno;

		ibv_unimport_pd(pd);
		errno = err;
	}
	return NULL;
}

bool restore_mr(struct restored *r, const char *name,
		const struct restore_mr *want, struct restore_mr_was *was)
{
	struct entry *e = find(r, "mr", name);

	if (!e || strcmp(e->pd, want->pd) || strcmp(e->memory, want->memory) ||
	    e->offset != want->offset || e->length != want->length ||
	    e->access != want->access || e->zero_based != want->zero_based)
		return false;
	*was = (struct restore_mr_was){ .handle = e->handle,
					.lkey = e->lkey,
					.rkey = e->rkey,
					.iova = e->iova,
					.length = e->length };
	return true;
}

bool restore_claimed(struct restored *r, const char *kind,
		     const char *name)
{
	struct entry *e = entry_of(r, kind, name);

	return e && e->claimed;
}

void restore_claim(struct restored *r, const char *kind, const char *name)
{
	struct entry *e = find(r, kind, name);

	if (e)
		e->claimed = true;
}

/* Process pid's start time (/proc/PID/stat, field 22), 0 when unknown. */
unsigned long long restore_start_time(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long start = 0;
	const char *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* After the command's closing parenthesis: field 3 on. */
	p = strrchr(buf, ')');
	if (p && sscanf(p + 1,
			" %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u"
			" %*d %*d %*d %*d %*d %*d %llu",
			&start) != 1)
		start = 0;
	return start;
}

bool restore_holder_alive(const json_t *h)
{
	pid_t pid = (pid_t)json_integer_value(json_object_get(h, "pid"));
	unsigned long long was = (unsigned long long)json_integer_value(
		json_object_get(h, "start"));
	unsigned long long now;

	if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
		return false;
	/* The same process, not another under a reused pid: where /proc
	 * hides it (the unit's ProtectProc=), taken for the same. */
	now = restore_start_time(pid);
	return !now || !was || now == was;
}

/* Does a live holder lease e? A lease names its kind and name, and the
 * handle of the incarnation it holds where it knows one: another
 * incarnation of the name (one that drains beside a running one) is
 * not e. */
static bool held(const struct restored *r, const struct entry *e)
{
	const char *kind = e->kind == 'p' ? "pd" : "mr";
	const json_t *h, *l, *handle;
	size_t i, k;

	json_array_foreach(r->holders, i, h) {
		if (!restore_holder_alive(h))
			continue;
		json_array_foreach(json_object_get(h, "leases"), k, l) {
			handle = json_object_get(l, "handle");
			if (streq(json_string_value(json_object_get(l, "kind"))
					  ?: "",
				  kind) &&
			    streq(json_string_value(json_object_get(l, "name"))
					  ?: "",
				  e->name) &&
			    (!json_is_integer(handle) ||
			     json_integer_value(handle) == e->handle))
				return true;
		}
	}
	return false;
}

/* A held MR that nothing took back. */
static bool mr_kept(const struct restored *r, const struct entry *e)
{
	return e->kind == 'm' && !e->claimed && held(r, e);
}

/* A PD is held with any MR of it that is held (the kernel keeps it
 * under the MR anyway). Which PD an MR that drained is over is not
 * written down: while one is held, every PD not taken back is kept (one
 * no holder leases goes once the MRs do: destroy_draining()). */
static bool pd_held(struct restored *r, const struct entry *pd)
{
	struct entry *e, *tmp;

	if (held(r, pd))
		return true;
	HASH_ITER(hh, r->by_key, e, tmp)
		if ((e->kept || mr_kept(r, e)) && streq(e->pd, pd->name))
			return true;
	HASH_ITER(hh, r->drained, e, tmp)
		if (e->kept || mr_kept(r, e))
			return true;
	return false;
}

/* A PD to import e (an MR) with: its own, else any of the context's
 * (the kernel finds an MR by its handle; the PD only fills in ibv_mr). */
static struct entry *pd_for(struct restored *r, const struct entry *e)
{
	struct entry *pd = e->pd ? entry_of(r, "pd", e->pd) : NULL, *tmp;

	if (pd)
		return pd;
	HASH_ITER(hh, r->by_key, pd, tmp)
		if (pd->kind == 'p')
			return pd;
	HASH_ITER(hh, r->drained, pd, tmp)
		if (pd->kind == 'p')
			return pd;
	return NULL;
}

/* MR e of the context, imported: NULL (errno) when it cannot be. Its pd
 * is not to be used: that import is gone. */
static struct ibv_mr *import_mr(struct restored *r, struct ibv_context *ctx,
				const struct entry *e)
{
	struct entry *pde = pd_for(r, e);
	struct ibv_pd *pd = pde ? ibv_import_pd(ctx, pde->handle) : NULL;
	struct ibv_mr *mr = pd ? ibv_import_mr(pd, e->handle) : NULL;
	int err = errno;

	if (pd)
		ibv_unimport_pd(pd);
	if (mr)
		mr->pd = NULL;
	errno = err;
	return mr;
}

/*
 * Does the import of e's handle show e? uverbs hands a freed handle to
 * the next object made in the file, so a document that is stale by now
 * (an MR destroyed since, or lost and not made again) may name another
 * process's MR by it: its keys tell. A document without keys (an older
 * run's) is trusted, as that run trusted it.
 */
static unsigned long long stale_total;

unsigned long long restore_stale_total(void)
{
	return stale_total;
}

static bool names_entry(struct restored *r, const struct entry *e,
			const struct ibv_mr *mr)
{
	if ((!e->lkey && !e->rkey) ||
	    (mr->lkey == e->lkey && mr->rkey == e->rkey &&
	     (!e->length || mr->length == e->length)))
		return true;
	r->stale++;
	stale_total++;
	log_warn(0, "mr %s of the previous run: its handle %u names another "
		    "MR now (lkey 0x%x, not 0x%x): left alone",
		 e->name, e->handle, mr->lkey, e->lkey);
	return false;
}

/* e's MR, imported, when its handle still names it; NULL otherwise
 * (errno: ESTALE when it names another). */
static struct ibv_mr *import_checked(struct restored *r,
				     struct ibv_context *ctx,
				     const struct entry *e)
{
	struct ibv_mr *mr = import_mr(r, ctx, e);

	if (mr && !names_entry(r, e, mr)) {
		ibv_unimport_mr(mr);
		errno = ESTALE;
		return NULL;
	}
	return mr;
}

/* What live holders lease and the new run does not take back (declared
 * otherwise now, or draining already): imported and handed to keep(),
 * to drain until they let go. */
static void keep_held(struct restored *r, struct ibv_context *ctx,
		      restore_keep_fn keep, void *ud)
{
	struct entry *tables[] = { r->by_key, r->drained }, *e, *tmp;

	for (size_t t = 0; t < ARRAY_SIZE(tables); t++)
		HASH_ITER(hh, tables[t], e, tmp) {
			struct ibv_mr *mr;

			if (!mr_kept(r, e))
				continue;
			mr = import_checked(r, ctx, e);
			if (!mr) {
				/* Another's by now: not ours to keep, nor
				 * to destroy. */
				if (errno == ESTALE)
					e->claimed = true;
				continue; /* destroyed below, if it can be */
			}
			e->claimed = e->kept = true;
			keep(ud, "mr", e->name, mr);
		}
	for (size_t t = 0; t < ARRAY_SIZE(tables); t++)
		HASH_ITER(hh, tables[t], e, tmp) {
			struct ibv_pd *pd;

			if (e->kind != 'p' || e->claimed || !pd_held(r, e))
				continue;
			pd = ibv_import_pd(ctx, e->handle);
			if (!pd)
				continue;
			e->claimed = true;
			keep(ud, "pd", e->name, pd);
		}
}

json_t *restore_holders(const struct restored *r)
{
	return r ? json_incref(r->holders) : NULL;
}

const json_t *restore_makers(const struct restored *r)
{
	return r ? r->makers : NULL;
}

size_t restore_finish(struct restored *r, struct ibv_context *ctx,
		      restore_keep_fn keep, void *ud)
{
	struct entry *tables[2], *e, *tmp;
	size_t gone = 0;

	if (!r)
		return 0;
	if (keep && r->holders)
		keep_held(r, ctx, keep, ud);
	tables[0] = r->by_key;
	tables[1] = r->drained;
	/* MRs first: a PD goes only once no MR is over it. */
	for (size_t t = 0; t < ARRAY_SIZE(tables); t++)
		HASH_ITER(hh, tables[t], e, tmp) {
			struct ibv_mr *mr;

			if (e->kind != 'm' || e->claimed)
				continue;
			mr = import_checked(r, ctx, e);
			if (mr && ibv_dereg_mr(mr) == 0)
				gone++;
			else if (errno != ESTALE)
				log_warn(-errno, "cannot destroy mr %s of the "
						 "previous run (handle %u)",
					 e->name, e->handle);
		}
	for (size_t t = 0; t < ARRAY_SIZE(tables); t++)
		HASH_ITER(hh, tables[t], e, tmp) {
			struct ibv_pd *pd;

			if (e->kind != 'p' || e->claimed)
				continue;
			pd = ibv_import_pd(ctx, e->handle);
			if (pd && ibv_dealloc_pd(pd) == 0) {
				gone++;
			} else {
				log_warn(-errno, "cannot destroy pd %s of the "
						 "previous run (handle %u)",
					 e->name, e->handle);
				if (pd)
					ibv_unimport_pd(pd);
			}
		}
	restored_free(r);
	return gone;
}

void restore_done(void (*gone)(const char *profile))
{
	read_ahead_join();
	for (size_t i = 0; i < n_kept; i++) {
		restored_free(kept[i].read);
		if ((kept[i].ctx_fd >= 0 || kept[i].state_fd >= 0 ||
		     kept[i].lease_fd >= 0) &&
		    gone)
			gone(kept[i].profile);
		kept_close(&kept[i]);
		free(kept[i].profile);
	}
	free(kept);
	kept = NULL;
	n_kept = 0;
}

/* Our threads: RDMA netlink names an object's maker by thread. */
static void put_tids(FILE *f)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	const char *sep = "";

	putc('[', f);
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.') {
			fprintf(f, "%s%d", sep, atoi(de->d_name));
			sep = ",";
		}
	if (d)
		closedir(d);
	putc(']', f);
}

/* o (draining), when a PD or MR: the next run drains it on for its
 * holders. What it was declared as is gone with its declaration. */
static void put_draining(FILE *f, const struct object *o, const char **sep)
{
	const struct ibv_mr *mr = o->kind == OBJ_MR ? o->u.mr.mr : NULL;

	if (o->state != OBJ_DRAINING || (o->kind == OBJ_PD && !o->u.pd) ||
	    (o->kind != OBJ_PD && !mr))
		return;
	fprintf(f, "%s{\"kind\":\"%s\",\"name\":", *sep,
		mr ? "mr" : "pd");
	restore_doc_str(f, object_name(o));
	fprintf(f, ",\"handle\":%u", mr ? mr->handle : o->u.pd->handle);
	if (mr)
		fprintf(f, ",\"lkey\":%u,\"rkey\":%u,\"length\":%zu", mr->lkey,
			mr->rkey, mr->length);
	fputs(",\"draining\":true}", f);
	*sep = ",";
}

/* o's entry, when it is one the next run can take back. */
static void put_object(FILE *f, const struct object *o, const char **sep)
{
	const struct conf_mr *c = o->conf;

	if (o->state != OBJ_READY)
		return;
	if (o->kind == OBJ_PD) {
		fprintf(f, "%s{\"kind\":\"pd\",\"name\":", *sep);
		restore_doc_str(f, object_name(o));
		fprintf(f, ",\"handle\":%u}", o->u.pd->handle);
	} else if (o->kind == OBJ_MR && o->u.mr.mr && c->memory) {
		/* Over host memory only: device memory goes with its
		 * context, and what is over it. */
		fprintf(f, "%s{\"kind\":\"mr\",\"name\":", *sep);
		restore_doc_str(f, c->name);
		fprintf(f, ",\"handle\":%u,\"lkey\":%u,\"rkey\":%u,\"pd\":",
			o->u.mr.mr->handle, o->u.mr.mr->lkey,
			o->u.mr.mr->rkey);
		restore_doc_str(f, c->pd);
		fputs(",\"memory\":", f);
		restore_doc_str(f, c->memory);
		fprintf(f,
			",\"offset\":%" PRIu64 ",\"length\":%zu,\"iova\":%" PRIu64
			",\"access\":%u,\"zero_based\":%s}",
			c->offset, o->u.mr.mr->length, o->u.mr.iova,
			(unsigned int)c->access, c->zero_based ? "true" : "false");
	} else {
		return;
	}
	*sep = ",";
}

/* Written as text, not built as a tree of json_t: restore_doc.h. */
char *restore_state(const struct profile *p, json_t *holders, size_t *len)
{
	char *text = NULL;
	const char *sep = "";
	size_t n = 0;
	FILE *f;

	if (!profile_ctx(p))
		return NULL;
	f = open_memstream(&text, &n);
	if (!f)
		return NULL;
	fprintf(f, "{\"version\":%d,\"ibdev\":", STATE_VERSION);
	restore_doc_str(f, profile_ibdev(p));
	fputs(",\"tids\":", f);
	put_tids(f);
	if (profile_ctxn(p) >= 0)
		fprintf(f, ",\"ctxn\":%" PRId64, profile_ctxn(p));
	if (holders) {
		fputs(",\"holders\":", f);
		if (json_dumpf(holders, f, JSON_COMPACT) < 0)
			fputs("[]", f);
	}
	fputs(",\"objects\":[", f);
	for (size_t i = 0; i < profile_n_objects(p); i++)
		put_object(f, profile_object_at(p, i), &sep);
	for (size_t i = 0; i < profile_n_draining(p); i++)
		put_draining(f, profile_draining_at(p, i), &sep);
	fputs("]}", f);
	if (!memstream_done(f, &text))
		return NULL;
	*len = n;
	return text;
}
