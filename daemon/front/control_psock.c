// SPDX-License-Identifier: MIT
/*
 * The per-profile control sockets: <runtime_dir>/profiles/<name>/rdmad.sock
 * for each profile of the configuration (control.h), made and removed with
 * the profiles: at start, and once a reload is applied. A session accepted
 * on one is scoped to that profile (control.c): it sees and attaches that
 * profile only and is never admin, whoever its peer is. These are the
 * sockets containers are given (cdi.c), in place of the main one.
 *
 * The daemon makes them itself, with or without socket activation:
 * systemd passes the main socket only, and a profile's socket lives as
 * long as the profile does in the configuration.
 *
 * Mode and owner follow the allow list, where one owner or one group can
 * say it: a list of one user gives the socket to that user (0600), a list
 * of one group to that group (0660); any other list gets the main
 * socket's mode and group (0660, daemon.control_group). The allow list
 * checked at ATTACH is what decides; the mode only keeps the others from
 * even connecting.
 *
 * Each socket is bound under a temporary name, given its mode and owner,
 * then renamed into place. The profile's directory stays when the
 * daemon stops (a container's bind mount of it reaches the socket the
 * next run makes there); a reload that removes the profile removes it.
 */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "control.h"
#include "attach_view.h"
#include "control_internal.h"
#include "log.h"

struct psock {
	struct control_psocks *ps;
	char *name;
	char *dir;  /* <runtime_dir>/profiles/<name> */
	char *path; /* dir/rdmad.sock */
	int fd;	    /* -1: it could not be made (logged once) */
	sd_event_source *io;
	struct accept_pause pause;
	uid_t uid; /* as set last: (uid_t)-1, the daemon's */
	gid_t gid;
	mode_t mode; /* 0: not set yet */
	bool seen; /* in the configuration at the last sync */
	UT_hash_handle hh;
};

struct control_psocks {
	struct control *c;
	char *runtime_dir; /* as at start: a reload does not move it */
	struct psock *socks; /* by name */
	sd_event_source *defer; /* a sync scheduled */
};

int control_group_gid(const char *name, gid_t *gid)
{
	char *end;

	if (identity_group(name, gid))
		return 0;
	*gid = (gid_t)strtoul(name, &end, 10);
	return *name && !*end ? 0 : -ENOENT;
}

/* What the allow list makes of the socket's owner, group and mode. */
static void psock_access(const struct control_psocks *ps,
			 const struct conf_profile *cp, uid_t *uid, gid_t *gid,
			 mode_t *mode)
{
	const struct conf_daemon *d = &manager_config(ps->c->m)->daemon;

	*uid = (uid_t)-1;
	*gid = (gid_t)-1;
	*mode = 0660;
	if (cp->n_admit_uids == 1 && !cp->n_admit_gids) {
		*uid = cp->admit_uids[0];
		*mode = 0600;
	} else if (cp->n_admit_gids == 1 && !cp->n_admit_uids) {
		*gid = cp->admit_gids[0];
	} else if (!cp->n_admit_uids && !cp->n_admit_gids) {
		*mode = 0600; /* admits nobody but root (daemon.admit_root) */
	} else if (d->control_group && control_group_gid(d->control_group,
							 gid) < 0) {
		*gid = (gid_t)-1;
	}
}

/* Give path (the socket, or its temporary name) what cp's list says. */
static int psock_apply(struct psock *s, const char *path,
		       const struct conf_profile *cp)
{
	uid_t uid;
	gid_t gid;
	mode_t mode;

	psock_access(s->ps, cp, &uid, &gid, &mode);
	if (s->mode && uid == s->uid && gid == s->gid && mode == s->mode)
		return 0;
	/* Closed first, opened last: never wider than either list says. */
	if (chmod(path, 0600) < 0)
		return -errno;
	if (chown(path, uid == (uid_t)-1 ? geteuid() : uid,
		  gid == (gid_t)-1 ? getegid() : gid) < 0) {
		if (errno != EPERM)
			return -errno;
		/* A daemon that may not give it away (the shipped unit's,
		 * without CAP_CHOWN): open to every local user, and the
		 * allow list checked at ATTACH alone decides. */
		if (s->mode != 0666)
			log_notice("profile '%s': cannot give %s to the allow "
				   "list's owner or group (no CAP_CHOWN): mode "
				   "0666, the allow list alone decides",
				   cp->name, s->path);
		mode = 0666;
		uid = (uid_t)-1;
		gid = (gid_t)-1;
	}
	if (chmod(path, mode) < 0)
		return -errno;
	s->uid = uid;
	s->gid = gid;
	s->mode = mode;
	return 0;
}

#define ACCEPT_BATCH 64

static int on_accept(sd_event_source *es, int fd, uint32_t revents,
		     void *ud)
{
	struct psock *s = ud;

	(void)es;
	(void)revents;
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (cfd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
			    !accept_pause_on_error(&s->pause, errno))
				log_warn(errno, "socket of profile '%s': accept",
					 s->name);
			return 0;
		}
		accept_pause_ok(&s->pause);
		control_accept_one(s->ps->c, cfd, s->name);
	}
	return 0;
}

/* A live socket at path (another rdmad) is never replaced; a stale one
 * is removed. */
static int psock_clear_stale(const struct sockaddr_un *sun)
{
	struct stat st;

	if (lstat(sun->sun_path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		_cleanup_close_ int probe = socket(
			AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

		if (probe >= 0 && connect(probe, (const struct sockaddr *)sun,
					  sizeof(*sun)) == 0)
			return -EADDRINUSE;
		unlink(sun->sun_path);
	}
	return 0;
}

/* Bind, listen and watch s's socket, born with its final mode. */
static int psock_listen(struct psock *s, const struct conf_profile *cp)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	mode_t old_mask;
	int r;

	if (mkdir(s->dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	strcpy(sun.sun_path, s->path);
	r = psock_clear_stale(&sun);
	if (r < 0)
		return r;
	s->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK,
		       0);
	if (s->fd < 0)
		return -errno;
	strcat(sun.sun_path, "~"); /* fits: control_profile_dir() */
	unlink(sun.sun_path);
	old_mask = umask(0177);
	r = bind(s->fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old_mask);
	if (r < 0 || listen(s->fd, SOMAXCONN) < 0)
		return -errno;
	r = psock_apply(s, sun.sun_path, cp);
	if (r == 0 && rename(sun.sun_path, s->path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(sun.sun_path);
		return r;
	}
	r = sd_event_add_io(manager_loop(s->ps->c->m), &s->io, s->fd, EPOLLIN,
			    on_accept, s);
	if (r >= 0)
		r = sd_event_source_set_priority(s->io,
						 SD_EVENT_PRIORITY_IMPORTANT);
	if (r < 0) {
		unlink(s->path);
		return r;
	}
	s->pause = (struct accept_pause){ .io = s->io,
					  .what = "a profile's socket" };
	return 0;
}

/* Stop listening; remove the socket, and with gone (the profile left
 * the configuration) its directory. */
static void psock_free(struct control_psocks *ps, struct psock *s, bool gone)
{
	HASH_DEL(ps->socks, s);
	accept_pause_done(&s->pause);
	sd_event_source_disable_unref(s->io);
	if (s->fd >= 0) {
		close(s->fd);
		unlink(s->path);
	}
	if (gone && s->dir)
		rmdir(s->dir);
	free(s->name);
	free(s->dir);
	free(s->path);
	free(s);
}

static struct psock *psock_new(struct control_psocks *ps,
			       const struct conf_profile *cp)
{
	struct psock *s = calloc(1, sizeof(*s));
	char dir[PATH_MAX];
	int r = -ENOMEM;

	if (!s)
		return NULL;
	s->ps = ps;
	s->fd = -1;
	s->name = strdup(cp->name);
	if (!s->name) {
		free(s);
		return NULL;
	}
	HASH_ADD_KEYPTR(hh, ps->socks, s->name, strlen(s->name), s);
	if (!control_profile_dir(ps->runtime_dir, cp->name, dir,
				 sizeof(dir))) {
		log_warn(0, "profile '%s': %s/profiles/%s/%s is too long for a "
			    "unix socket: it has no socket of its own",
			 cp->name, ps->runtime_dir, cp->name,
			 CONTROL_PROFILE_SOCKET);
		return s;
	}
	s->dir = strdup(dir);
	if (s->dir && asprintf(&s->path, "%s/%s", dir,
			       CONTROL_PROFILE_SOCKET) < 0)
		s->path = NULL;
	if (s->path)
		r = psock_listen(s, cp);
	if (r < 0) {
		log_warn(r, "profile '%s': cannot listen on its socket %s, "
			    "ignoring",
			 cp->name, s->path ? s->path : dir);
		s->io = sd_event_source_disable_unref(s->io);
		if (s->fd >= 0)
			close(s->fd);
		s->fd = -1;
		return s;
	}
	log_info("profile '%s': its own socket on %s", cp->name, s->path);
	return s;
}

/* One socket per profile of the configuration, no other. */
static void psocks_sync(struct control_psocks *ps)
{
	struct manager *m = ps->c->m;
	struct psock *s, *tmp;

	HASH_ITER(hh, ps->socks, s, tmp)
		s->seen = false;
	for (size_t i = 0; i < manager_n_profiles(m); i++) {
		const struct conf_profile *cp =
		    profile_conf(manager_profile_at(m, i));
		int r;

		HASH_FIND_STR(ps->socks, cp->name, s);
		if (!s) {
			s = psock_new(ps, cp);
			if (s)
				s->seen = true;
			continue;
		}
		s->seen = true;
		/* The allow list may have changed. */
		if (s->fd >= 0 && (r = psock_apply(s, s->path, cp)) < 0)
			log_warn(r, "profile '%s': cannot set the access of "
				    "%s, ignoring",
				 cp->name, s->path);
	}
	HASH_ITER(hh, ps->socks, s, tmp)
		if (!s->seen) {
			log_info("profile '%s' is gone: its socket too",
				 s->name);
			psock_free(ps, s, true);
		}
}

static int on_defer(sd_event_source *es, void *ud)
{
	struct control_psocks *ps = ud;

	(void)es;
	ps->defer = sd_event_source_unref(ps->defer);
	psocks_sync(ps);
	return 0;
}

static void on_manager_event(void *ud, const struct event *ev)
{
	struct control_psocks *ps = ud;

	/* The profile list changes with a reload, which ends with an
	 * announcement of every profile: synced then, once per turn. */
	if (!event_profiles_moved(ev->kind) ||
	    manager_reloading(ps->c->m) || ps->defer)
		return;
	if (sd_event_add_defer(manager_loop(ps->c->m), &ps->defer, on_defer, ps) < 0) {
		ps->defer = NULL;
		psocks_sync(ps);
	}
}

int control_psocks_start(struct control *c)
{
	struct control_psocks *ps = calloc(1, sizeof(*ps));
	char dir[PATH_MAX];
	int r;

	if (!ps)
		return -ENOMEM;
	ps->c = c;
	ps->runtime_dir = strdup(manager_config(c->m)->daemon.runtime_dir);
	if (!ps->runtime_dir) {
		free(ps);
		return -ENOMEM;
	}
	c->psocks = ps;
	snprintf(dir, sizeof(dir), "%s/profiles", ps->runtime_dir);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		log_warn(errno, "cannot make %s: no profile has a socket of "
			    "its own",
			 dir);
	r = events_subscribe(manager_bus(c->m), on_manager_event, ps);
	if (r < 0)
		return r;
	psocks_sync(ps);
	return 0;
}

void control_psocks_stop(struct control *c)
{
	struct control_psocks *ps = c->psocks;

	if (!ps)
		return;
	events_unsubscribe(manager_bus(c->m), on_manager_event, ps);
	ps->defer = sd_event_source_disable_unref(ps->defer);
	while (ps->socks)
		psock_free(ps, ps->socks, false);
	free(ps->runtime_dir);
	free(ps);
	c->psocks = NULL;
}
