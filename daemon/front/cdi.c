// SPDX-License-Identifier: MIT
/*
 * The CDI specification (cdi.h). One CDI device per profile whose device
 * is open, named after the profile; its container edits are what an
 * unmodified librdmad client inside the container needs to attach:
 *
 *   - the character devices: the profile device's uverbs node (local
 *     mode opens the device itself; shared mode imports the daemon's
 *     context over it) and rdma_cm (targets, rdmad_target_connect());
 *   - the profile's own socket (control.h), never the daemon's main one:
 *     its directory, <runtime_dir>/profiles/<name>, bound read-only
 *     (connecting to a unix socket needs no write access to the mount),
 *     so that the socket stays reachable across a daemon restart that
 *     binds it anew. Its sessions see and attach that profile only and
 *     change nothing, whoever the container's user is (root included);
 *   - RDMAD_SOCKET and RDMAD_PROFILE, and RDMAD_PROFILE_<NAME> and
 *     RDMAD_SOCKET_<NAME> (the profile's name in upper case, '_' for
 *     what is not a letter or a digit): a container given two profiles
 *     gets RDMAD_SOCKET and RDMAD_PROFILE from one of them, and both
 *     profiles' own variables.
 *
 * The allow list still decides: the container's process gets only what
 * its uid is admitted to, seen by SO_PEERCRED as for any client; uid 0
 * too, unless daemon.admit_root.
 *
 * The file is replaced atomically (a temporary file in the same directory,
 * renamed over it): engines read it whenever a container starts, and some
 * watch the directory. Every announcement of the manager schedules one
 * rewrite on the loop (a reload announces each profile; one write is
 * enough), and an unchanged document is not written again.
 */
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <systemd/sd-event.h>

#include "attach_view.h"
#include "cdi.h"
#include "control.h"
#include "log.h"
#include "manager.h"

/* The oldest version that can say what we write, as the CDI project's
 * own library decides it (its MinimumRequiredVersion): env, device nodes
 * without hostPath and mounts without type are 0.3.0's; a device name
 * beginning with something other than a letter needs 0.5.0. Dots in a
 * device name need nothing newer (0.6.0 allowed them in the kind's
 * class, which ours, "profile", has none of). The oldest is what most
 * engines in the field read: a library of 0.5.x (Debian 12's podman)
 * refuses a whole file that says 0.6.0. */
#define CDI_VERSION "0.3.0"
#define CDI_VERSION_DIGIT "0.5.0"

#define RDMA_CM_PATH "/dev/infiniband/rdma_cm"

struct cdi {
	struct manager *m;
	sd_event_source *defer; /* a rewrite scheduled, NULL: none */
	/* The runtime directory as at start, where the profiles' own
	 * sockets are: a reload does not move it. */
	char *runtime_dir;
	char *path;		/* the file written last, NULL: none */
	char *text;		/* what it holds */
};

/*
 * A CDI device name (the container-device-interface parser): letters,
 * digits, '_', '-', '.', ':', beginning and ending with a letter or a
 * digit. Profile names are 1-64 of A-Z a-z 0-9 _ - . (config_verify.c):
 * those beginning or ending with '_', '-' or '.' have no CDI name.
 */
static bool cdi_name_valid(const char *s)
{
	size_t n = strlen(s);

#define ALNUM(c)                                                               \
	(((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') ||           \
	 ((c) >= '0' && (c) <= '9'))
	return n && ALNUM(s[0]) && ALNUM(s[n - 1]);
#undef ALNUM
}

/* Does the profile have a device a container can be given? A pending
 * profile (device absent) or a failed one (it could not be opened) has
 * none: no CDI device, rather than one that names a missing node. */
static bool profile_has_device(const struct profile *p)
{
	return profile_uverbs_node(p) != NULL;
}

/* <prefix><NAME>=<value>: NAME upper case, '_' for the rest. */
static char *profile_env(const char *prefix, const char *name,
			 const char *value)
{
	char *s;

	if (asprintf(&s, "%s%s=%s", prefix, name, value) < 0)
		return NULL;
	for (char *c = s + strlen(prefix); *c != '='; c++) {
		if (*c >= 'a' && *c <= 'z')
			*c = (char)(*c - 'a' + 'A');
		else if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
			*c = '_';
	}
	return s;
}

static json_t *device_json(const struct profile *p, const char *socket_dir,
			   bool rdma_cm)
{
	_cleanup_free_ char *socket = NULL, *own_env = NULL, *own_sock = NULL;
	char uverbs[PATH_MAX];
	json_t *nodes, *edits;

	if (asprintf(&socket, "%s/%s", socket_dir, CONTROL_PROFILE_SOCKET) < 0)
		return NULL;
	own_env =
	    profile_env("RDMAD_PROFILE_", profile_name(p), profile_name(p));
	own_sock = profile_env("RDMAD_SOCKET_", profile_name(p), socket);
	if (!own_env || !own_sock)
		return NULL;

	snprintf(uverbs, sizeof(uverbs), "/dev/infiniband/%s",
		 profile_uverbs_node(p));
	nodes = json_pack("[{s:s}]", "path", uverbs);
	if (nodes && rdma_cm)
		json_array_append_new(nodes,
				      json_pack("{s:s}", "path", RDMA_CM_PATH));
	edits = json_pack(
	    "{s:[s+, s+, s, s], s:o*, s:[{s:s, s:s, s:[s, s, s, s]}]}", "env",
	    "RDMAD_SOCKET=", socket, "RDMAD_PROFILE=", profile_name(p), own_env,
	    own_sock, "deviceNodes", nodes, "mounts", "hostPath", socket_dir,
	    "containerPath", socket_dir, "options", "bind", "ro", "nosuid",
	    "nodev");
	return edits ? json_pack("{s:s, s:o}", "name", profile_name(p),
				 "containerEdits", edits)
		     : NULL;
}

json_t *cdi_spec_json(struct manager *m, const char *runtime_dir)
{
	json_t *devices = json_array(), *spec;
	bool digit = false, rdma_cm;
	char dir[PATH_MAX];

	if (!devices)
		return NULL;
	/* Present wherever rdma_ucm is loaded; absent, naming it would make
	 * every container start fail. */
	rdma_cm = access(RDMA_CM_PATH, F_OK) == 0;
	for (size_t i = 0; i < manager_n_profiles(m); i++) {
		const struct profile *p = manager_profile_at(m, i);

		/* No socket of its own (too long a path): no device, rather
		 * than one that cannot attach. */
		if (!profile_has_device(p) ||
		    !cdi_name_valid(profile_name(p)) ||
		    !control_profile_dir(runtime_dir, profile_name(p), dir,
					 sizeof(dir)))
			continue;
		if (json_array_append_new(devices,
					  device_json(p, dir, rdma_cm)) < 0) {
			json_decref(devices);
			return NULL;
		}
		digit |= !(
		    (profile_name(p)[0] >= 'a' && profile_name(p)[0] <= 'z') ||
		    (profile_name(p)[0] >= 'A' && profile_name(p)[0] <= 'Z'));
	}
	if (!json_array_size(devices)) {
		json_decref(devices);
		return NULL;
	}
	spec = json_pack("{s:s, s:s, s:o}", "cdiVersion",
			 digit ? CDI_VERSION_DIGIT : CDI_VERSION, "kind",
			 CDI_KIND, "devices", devices);
	return spec;
}

/* Replace path's contents with text: a temporary file beside it, renamed
 * over it. Its directory (/run/cdi) is made if missing. */
static int write_atomic(const char *path, const char *text)
{
	_cleanup_free_ char *dir_buf = strdup(path), *tmp = NULL;
	_cleanup_close_ int fd = -1;
	size_t len = strlen(text), done = 0;
	const char *dir;

	if (!dir_buf)
		return -ENOMEM;
	dir = dirname(dir_buf);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	/* Not *.json: engines that watch the directory skip it. */
	if (asprintf(&tmp, "%s/.%s.XXXXXX", dir, path + strlen(dir) + 1) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Engines may read it as another user (rootless podman); the unit's
	 * UMask=0077 would hide it. */
	if (fchmod(fd, 0644) < 0)
		goto fail;
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		done += (size_t)n;
	}
	if (fdatasync(fd) < 0 || rename(tmp, path) < 0)
		goto fail;
	return 0;
fail: {
	int err = errno;

	unlink(tmp);
	return -err;
}
}

static void cdi_remove(struct cdi *c)
{
	if (c->path && unlink(c->path) < 0 && errno != ENOENT)
		log_warn(errno, "cannot remove the CDI specification %s",
			 c->path);
	free(c->path);
	free(c->text);
	c->path = c->text = NULL;
}

static void cdi_write(struct cdi *c)
{
	const char *path = manager_config(c->m)->daemon.cdi_spec;
	_cleanup_free_ char *text = NULL, *spec_text = NULL;
	json_t *spec;
	int r;

	/* A reload may have moved it, or turned it off. */
	if (c->path && (!*path || strcmp(c->path, path)))
		cdi_remove(c);
	if (!*path)
		return;
	spec = cdi_spec_json(c->m, c->runtime_dir);
	if (!spec) {
		/* No device to offer (or no memory to say so): no file. */
		if (c->path)
			log_info("no profile has its device: CDI "
				 "specification %s removed",
				 c->path);
		cdi_remove(c);
		return;
	}
	r = asprintf(&text, "%s\n",
		     (spec_text = json_dumps(spec, JSON_INDENT(2) |
							  JSON_PRESERVE_ORDER))
			     ?: "");
	json_decref(spec);
	if (r < 0 || !spec_text) {
		free(r < 0 ? NULL : text);
		text = NULL;
		return;
	}
	if (c->path && c->text && !strcmp(c->text, text))
		return;
	r = write_atomic(path, text);
	if (r < 0) {
		log_warn(r, "cannot write the CDI specification %s, ignoring",
			 path);
		return;
	}
	log_debug("CDI specification %s written", path);
	if (!c->path && !(c->path = strdup(path))) {
		unlink(path); /* we could not remove it at stop */
		return;
	}
	free(c->text);
	c->text = TAKE_PTR(text);
}

static int on_defer(sd_event_source *s, void *ud)
{
	struct cdi *c = ud;

	(void)s;
	c->defer = sd_event_source_unref(c->defer);
	cdi_write(c);
	return 0;
}

static void on_manager_event(void *ud, const struct event *ev)
{
	struct cdi *c = ud;

	/* Progress and leases change nothing a container sees; during a
	 * reload the profile list is half old, half new: it ends with an
	 * announcement of every profile. */
	if (!event_profiles_moved(ev->kind) ||
	    manager_reloading(c->m) || c->defer)
		return;
	if (sd_event_add_defer(manager_loop(c->m), &c->defer, on_defer, c) < 0) {
		c->defer = NULL;
		cdi_write(c);
	}
}

int cdi_start(struct manager *m, struct cdi **out)
{
	struct cdi *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->m = m;
	c->runtime_dir = strdup(manager_config(m)->daemon.runtime_dir);
	r = c->runtime_dir ? events_subscribe(manager_bus(m), on_manager_event, c)
			   : -ENOMEM;
	if (r < 0) {
		free(c->runtime_dir);
		free(c);
		return r;
	}
	/* Nothing has a device before manager_start(): this only removes a
	 * file a daemon killed before it could left behind. */
	cdi_write(c);
	if (!c->path && *manager_config(m)->daemon.cdi_spec)
		unlink(manager_config(m)->daemon.cdi_spec);
	*out = c;
	return 0;
}

struct cdi *cdi_stop(struct cdi *c)
{
	if (!c)
		return NULL;
	events_unsubscribe(manager_bus(c->m), on_manager_event, c);
	c->defer = sd_event_source_disable_unref(c->defer);
	cdi_remove(c);
	free(c->runtime_dir);
	free(c);
	return NULL;
}
