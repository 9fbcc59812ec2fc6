// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "manager.h"

int manager_new(struct config *config, struct manager **out)
{
	struct manager *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	m->config = config;
	clock_gettime(CLOCK_MONOTONIC, &m->started);
	r = sd_event_default(&m->event);
	if (r < 0) {
		free(m);
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

	for (size_t i = 0; i < m->n_profiles; i++)
		pr.total += m->profiles[i]->n_objects;
	for (size_t i = 0; i < m->n_profiles; i++) {
		struct profile *p = m->profiles[i];

		pr.profile = p->conf->name;
		profile_start(p, report_progress, &pr);
		if (p->state != PROFILE_READY)
			log_warn(0, "profile %s is %s: %s", p->conf->name,
				 profile_state_name(p->state),
				 p->reason ? p->reason : "");
		for (size_t k = 0; k < p->n_objects; k++)
			if (p->objects[k].state == OBJ_FAILED)
				log_warn(0, "profile %s: %s %s failed: %s",
					 p->conf->name,
					 obj_kind_name(p->objects[k].kind),
					 p->objects[k].name,
					 p->objects[k].reason);
		log_info("profile %s: %s, %zu objects on %s", p->conf->name,
			 profile_state_name(p->state), p->n_objects,
			 p->dev->ibdev);
	}
	return 0;
}

void manager_stop(struct manager *m)
{
	for (size_t i = m->n_profiles; i-- > 0;)
		profile_stop(m->profiles[i]);
}

struct manager *manager_free(struct manager *m)
{
	if (!m)
		return NULL;
	for (size_t i = 0; i < m->n_profiles; i++)
		profile_free(m->profiles[i]);
	free(m->profiles);
	sd_event_unref(m->event);
	free(m);
	return NULL;
}

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
		if (m->profiles[i]->ctx &&
		    streq(m->profiles[i]->dev->ibdev, ibdev))
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
