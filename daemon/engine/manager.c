// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include "capcheck.h"
#include "devmatch.h"
#include "devwatch.h"
#include "control.h"
#include "log.h"
#include "manager.h"

int manager_new(struct config *config, struct manager **out)
{
	struct manager *m = calloc(1, sizeof(*m));
	int r;

	if (!m) {
		config_free(config);
		return -ENOMEM;
	}
	m->config = config;
	clock_gettime(CLOCK_MONOTONIC, &m->started);
	r = sd_event_default(&m->event);
	if (r < 0) {
		manager_free(m);
		return r;
	}
	m->profiles = calloc(config->n_profiles + 1, sizeof(*m->profiles));
	if (!m->profiles) {
		manager_free(m);
		return -ENOMEM;
	}
	for (size_t i = 0; i < config->n_profiles; i++) {
		r = profile_new(config, &config->profiles[i],
				&m->profiles[i]);
		if (r < 0) {
			manager_free(m);
			return r;
		}
		m->n_profiles++;
	}
	*out = m;
	return 0;
}

/* ---- device events ---- */

static void on_async_event(void *ud, const struct ibv_async_event *ev);

static void watch_profile(struct manager *m, struct profile *p)
{
	int r;

	if (!p->ctx || p->async)
		return;
	r = asyncwatch_new(m->event, p->ctx, on_async_event, p, &p->async);
	if (r < 0)
		log_warn(r, "profile %s: cannot watch async events of %s",
			 p->conf->name, p->ibdev);
}

static void stop_profile(struct profile *p, const char *reason)
{
	p->async = asyncwatch_free(p->async);
	profile_stop(p, reason);
}

static void log_profile(const struct profile *p)
{
	for (size_t k = 0; k < p->n_objects; k++)
		if (p->objects[k].state == OBJ_FAILED)
			log_warn(0, "profile %s: %s %s failed: %s",
				 p->conf->name,
				 obj_kind_name(p->objects[k].kind),
				 p->objects[k].name, p->objects[k].reason);
	log_info("profile %s: %s%s%s", p->conf->name,
		 profile_state_name(p->state), p->reason ? ": " : "",
		 p->reason ? p->reason : "");
}

static void on_async_event(void *ud, const struct ibv_async_event *ev)
{
	struct profile *p = ud;
	char reason[128];

	if (ev->event_type != IBV_EVENT_DEVICE_FATAL) {
		log_info("profile %s: async event on %s: %s", p->conf->name,
			 p->ibdev, ibv_event_type_str(ev->event_type));
		return;
	}
	snprintf(reason, sizeof(reason), "device %s failed or was removed",
		 p->ibdev);
	log_warn(0, "profile %s: %s; waiting for it to come back",
		 p->conf->name, reason);
	stop_profile(p, reason);
}

static void on_device(void *ud, const char *ibdev, enum devwatch_action a)
{
	struct manager *m = ud;

	log_info("device %s %s", ibdev,
		 a == DEVWATCH_ADD ? "appeared" : "went away");
	for (size_t i = 0; i < m->n_profiles; i++) {
		struct profile *p = m->profiles[i];
		char reason[128];

		if (a == DEVWATCH_REMOVE && p->ctx && streq(p->ibdev, ibdev)) {
			snprintf(reason, sizeof(reason),
				 "device %s was removed", ibdev);
			stop_profile(p, reason);
			log_profile(p);
		} else if (a == DEVWATCH_ADD && !p->ctx &&
			   devmatch_matches(p->dev, ibdev)) {
			profile_start(p, NULL, NULL);
			watch_profile(m, p);
			log_profile(p);
		}
	}
}

/* ---- start and stop ---- */

struct progress {
	size_t done, total;
	const char *profile;
};

static void report_progress(void *ud, const struct object *o)
{
	struct progress *pr = ud;

	pr->done++;
	sd_notifyf(0, "STATUS=creating %s %s in %s (%zu/%zu)",
		   obj_kind_name(o->kind), o->name, pr->profile, pr->done,
		   pr->total);
	log_debug("creating %s %s in profile %s", obj_kind_name(o->kind),
		  o->name, pr->profile);
}

int manager_start(struct manager *m)
{
	struct progress pr = { 0 };
	int r;

	r = devwatch_new(m->event, on_device, m, &m->devwatch);
	if (r < 0)
		log_warn(r, "cannot watch RDMA devices coming and going");
	for (size_t i = 0; i < m->n_profiles; i++)
		pr.total += m->profiles[i]->n_objects;
	for (size_t i = 0; i < m->n_profiles; i++) {
		struct profile *p = m->profiles[i];

		pr.profile = p->conf->name;
		profile_start(p, report_progress, &pr);
		watch_profile(m, p);
		log_profile(p);
	}
	return 0;
}

void manager_stop(struct manager *m)
{
	m->devwatch = devwatch_free(m->devwatch);
	for (size_t i = m->n_profiles; i-- > 0;)
		stop_profile(m->profiles[i], NULL);
}

struct manager *manager_free(struct manager *m)
{
	if (!m)
		return NULL;
	control_stop(m);
	manager_stop(m);
	for (size_t i = 0; i < m->n_profiles; i++)
		profile_free(m->profiles[i]);
	free(m->profiles);
	free(m->token);
	config_free(m->config);
	sd_event_unref(m->event);
	free(m);
	return NULL;
}

/* ---- reload ---- */

json_t *config_errors_json(const struct config *c)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < c->n_errors; i++)
		json_array_append_new(
			a, json_pack("{s:s, s:i, s:s}", "file",
				     c->errors[i].loc.file, "line",
				     c->errors[i].loc.line, "message",
				     c->errors[i].msg));
	return a;
}

struct reload_report {
	const char *profile;
	json_t *changes;
	size_t kept;
};

static void report_action(void *ud, const struct object *o,
			  enum obj_action a)
{
	struct reload_report *r = ud;

	if (a == ACT_KEEP) {
		r->kept++;
		return;
	}
	log_info("reload: profile %s: %s %s %s", r->profile,
		 obj_action_name(a), obj_kind_name(o->kind), o->name);
	json_array_append_new(
		r->changes,
		json_pack("{s:s, s:s, s:s, s:s}", "profile", r->profile, "kind",
			  obj_kind_name(o->kind), "name", o->name, "action",
			  obj_action_name(a)));
}

static void report_profile(struct reload_report *r, const struct profile *p,
			   const char *action)
{
	log_info("reload: %s profile %s", action, p->conf->name);
	json_array_append_new(r->changes,
			      json_pack("{s:s, s:s, s:s}", "profile",
					p->conf->name, "kind", "profile",
					"action", action));
}

int manager_reload(struct manager *m, json_t **result)
{
	_cleanup_(config_freep) struct config *next = NULL;
	struct reload_report rep = { 0 };
	struct profile **profiles;
	int r;

	m->reloads++;
	r = config_load(m->config->path, &next);
	if (r < 0) {
		m->reload_failures++;
		return r;
	}
	if (!next->n_errors)
		capcheck_config(next);
	if (next->n_errors) {
		m->reload_failures++;
		log_warn(0, "%s has %zu errors, not reloading",
			 m->config->path, next->n_errors);
		*result = json_pack("{s:s, s:o}", "status", "error", "errors",
				    config_errors_json(next));
		return -EINVAL;
	}
	profiles = calloc(next->n_profiles + 1, sizeof(*profiles));
	rep.changes = json_array();
	if (!profiles || !rep.changes) {
		free(profiles);
		json_decref(rep.changes);
		m->reload_failures++;
		return -ENOMEM;
	}
	for (size_t i = 0; i < next->n_profiles; i++) {
		r = profile_new(next, &next->profiles[i], &profiles[i]);
		if (r < 0) {
			for (size_t k = 0; k < i; k++)
				profile_free(profiles[k]);
			free(profiles);
			json_decref(rep.changes);
			m->reload_failures++;
			return r;
		}
	}

	/* Nothing fails from here on: every object ends up in its old or
	 * its new form, or failed with its reason. */
	for (size_t i = 0; i < m->n_profiles; i++) {
		struct profile *old = m->profiles[i];
		bool stays = false;

		for (size_t k = 0; k < next->n_profiles; k++)
			stays |= streq(next->profiles[k].name, old->conf->name);
		if (!stays) {
			report_profile(&rep, old, "remove");
			stop_profile(old, "removed by a reload");
		}
	}
	for (size_t i = 0; i < next->n_profiles; i++) {
		struct profile *p = profiles[i];
		struct profile *old = manager_profile(m, p->conf->name);

		rep.profile = p->conf->name;
		if (old) {
			old->async = asyncwatch_free(old->async);
			profile_reload(p, old, report_action, &rep);
		} else {
			report_profile(&rep, p, "create");
			profile_start(p, NULL, NULL);
		}
		watch_profile(m, p);
		log_profile(p);
	}
	for (size_t i = 0; i < m->n_profiles; i++)
		profile_free(m->profiles[i]);
	free(m->profiles);
	m->profiles = profiles;
	m->n_profiles = next->n_profiles;

	if (!streq(next->daemon.log_level, m->config->daemon.log_level))
		log_set_level(log_parse_level(next->daemon.log_level));
	config_free(m->config);
	m->config = TAKE_PTR(next);
	r = manager_load_token(m);
	if (r < 0)
		log_warn(r, "token file %s: changes over REST are off",
			 m->config->daemon.token_file);
	*result = json_pack("{s:s, s:o, s:i}", "status", "ok", "changes",
			    rep.changes, "kept", (int)rep.kept);
	log_info("reloaded %s: %zu changes, %zu objects kept",
		 m->config->path, json_array_size(rep.changes), rep.kept);
	return 0;
}

/* ---- the REST token ---- */

int manager_load_token(struct manager *m)
{
	const char *path = m->config->daemon.token_file;
	_cleanup_close_ int fd = -1;
	char buf[256];
	struct stat st;
	ssize_t n;

	free(m->token);
	m->token = NULL;
	if (!path)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if (st.st_mode & (S_IRWXG | S_IRWXO))
		log_warn(0, "token file %s is readable by others than its "
			    "owner", path);
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	if (strlen(buf) < 16)
		return -EINVAL; /* too short to be a secret */
	m->token = strdup(buf);
	return m->token ? 0 : -ENOMEM;
}

/* ---- queries ---- */

struct profile *manager_profile(struct manager *m, const char *name)
{
	for (size_t i = 0; i < m->n_profiles; i++)
		if (streq(m->profiles[i]->conf->name, name))
			return m->profiles[i];
	return NULL;
}

int manager_device_used(struct manager *m, const char *ibdev)
{
	for (size_t i = 0; i < m->n_profiles; i++)
		if (m->profiles[i]->ctx && streq(m->profiles[i]->ibdev, ibdev))
			return 1;
	return 0;
}

double manager_uptime(struct manager *m)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - m->started.tv_sec) +
	       (double)(now.tv_nsec - m->started.tv_nsec) / 1e9;
}

int device_probe_import(struct ibv_context *ctx)
{
	struct ibv_context *imported;
	int fd, err;

	fd = fcntl(ctx->cmd_fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	imported = ibv_import_device(fd);
	if (!imported) {
		err = errno ? errno : EOPNOTSUPP;
		close(fd);
		return -err;
	}
	/* Closing the imported context closes fd, not the original. */
	ibv_close_device(imported);
	return 0;
}
