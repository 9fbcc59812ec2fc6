// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>

#include "manager.h"
#include "metrics.h"
#include "objects.h"
#include "restore.h"
#include "reclaim.h"
#include "target.h"

/* Label values are names the config validated ([A-Za-z0-9_.-]), device
 * and counter names from sysfs: nothing to escape but a quote or a
 * backslash, which do not occur; refuse them anyway. */
static const char *label(const char *s)
{
	return strpbrk(s, "\"\\\n") ? "invalid" : s;
}

static void objects(FILE *f, struct manager *m)
{
	fputs("# HELP rdmad_objects Objects declared, by profile, kind and "
	      "state.\n# TYPE rdmad_objects gauge\n",
	      f);
	for (size_t i = 0; i < manager_n_profiles(m); i++) {
		struct profile *p = manager_profile_at(m, i);
		unsigned int n[OBJ_KIND_MAX][OBJ_CREATING + 1] = { { 0 } };

		for (size_t k = 0; k < profile_n_objects(p); k++) {
			const struct object *o = profile_object_at(p, k);

			n[o->kind][o->state]++;
		}
		for (size_t k = 0; k < profile_n_draining(p); k++)
			n[profile_draining_at(p, k)->kind][OBJ_DRAINING]++;
		for (int k = 0; k < OBJ_KIND_MAX; k++)
			for (int s = 0; s <= OBJ_CREATING; s++)
				if (n[k][s])
					fprintf(
					    f,
					    "rdmad_objects{profile=\"%s\","
					    "kind=\"%s\",state=\"%s\"} %u\n",
					    label(profile_name(p)),
					    obj_kind_name((enum obj_kind)k),
					    obj_state_name((enum obj_state)s),
					    n[k][s]);
	}
	fputs("# HELP rdmad_registered_bytes Bytes registered by the daemon's "
	      "memory regions.\n# TYPE rdmad_registered_bytes gauge\n",
	      f);
	for (size_t i = 0; i < manager_n_profiles(m); i++) {
		struct profile *p = manager_profile_at(m, i);
		unsigned long long bytes = 0;

		for (size_t k = 0; k < profile_n_objects(p); k++) {
			const struct object *o = profile_object_at(p, k);

			if (o->kind == OBJ_MR && o->state == OBJ_READY)
				bytes += o->u.mr.mr->length;
		}
		fprintf(f, "rdmad_registered_bytes{profile=\"%s\"} %llu\n",
			label(profile_name(p)), bytes);
	}
	fputs("# HELP rdmad_profile_up 1 when the profile runs (ready or "
	      "degraded).\n# TYPE rdmad_profile_up gauge\n",
	      f);
	for (size_t i = 0; i < manager_n_profiles(m); i++)
		fprintf(f, "rdmad_profile_up{profile=\"%s\"} %d\n",
			label(profile_name(manager_profile_at(m, i))),
			profile_ctx(manager_profile_at(m, i)) != NULL);
}

/* What RDMA netlink shows in each profile's context (orphans.c), by
 * who made it; orphans are also a series of their own, the one to
 * alert on. Only scanned contexts have series. */
static void contexts(FILE *f, struct manager *m)
{
	struct manager_counters mc;
	static const char *const owners[] = { "daemon", "client", "orphan" };

	fputs("# HELP rdmad_context_objects Objects RDMA netlink lists in a "
	      "profile's device context, by who made them.\n"
	      "# TYPE rdmad_context_objects gauge\n",
	      f);
	for (size_t i = 0; i < manager_n_profiles(m); i++) {
		const struct profile *p = manager_profile_at(m, i);
		const struct ctx_view *v = profile_ctx_view(p);
		const unsigned int *n[] = {v->owned, v->clients, v->orphans};

		if (!profile_ctx(p) || !v->scanned || v->err)
			continue;
		for (int w = 0; w < 3; w++)
			for (int k = RDMANL_PD; k < RDMANL_KINDS; k++)
				fprintf(f,
					"rdmad_context_objects{profile=\"%s\","
					"device=\"%s\",kind=\"%s\","
					"owner=\"%s\"} %u\n",
					label(profile_name(p)),
					label(profile_ibdev(p)),
					rdmanl_kind_name((enum rdmanl_kind)k),
					owners[w], n[w][k]);
	}
	fputs("# HELP rdmad_orphan_objects Objects left in a profile's "
	      "context by clients that are gone.\n"
	      "# TYPE rdmad_orphan_objects gauge\n",
	      f);
	for (size_t i = 0; i < manager_n_profiles(m); i++) {
		const struct profile *p = manager_profile_at(m, i);
		const struct ctx_view *v = profile_ctx_view(p);

		if (!profile_ctx(p) || !v->scanned || v->err)
			continue;
		for (int k = RDMANL_PD; k < RDMANL_KINDS; k++)
			fprintf(f,
				"rdmad_orphan_objects{profile=\"%s\","
				"device=\"%s\",kind=\"%s\"} %u\n",
				label(profile_name(p)), label(profile_ibdev(p)),
				rdmanl_kind_name((enum rdmanl_kind)k),
				v->orphans[k]);
	}
	manager_counters(m, &mc);
	fprintf(f,
		"# HELP rdmad_orphan_scans_total RDMA netlink scans of the "
		"profiles' contexts, by result.\n"
		"# TYPE rdmad_orphan_scans_total counter\n"
		"rdmad_orphan_scans_total{result=\"ok\"} %llu\n"
		"rdmad_orphan_scans_total{result=\"error\"} %llu\n"
		"# HELP rdmad_context_retirements_total Contexts closed and "
		"opened afresh to free orphaned objects.\n"
		"# TYPE rdmad_context_retirements_total counter\n"
		"rdmad_context_retirements_total %llu\n"
		"# HELP rdmad_stale_handles_total Handles the daemon was to "
		"keep or destroy and did not make in this run, that named "
		"another object by then (left alone).\n"
		"# TYPE rdmad_stale_handles_total counter\n"
		"rdmad_stale_handles_total{source=\"restore\"} %llu\n",
		mc.orphan_scans - mc.orphan_scan_failures,
		mc.orphan_scan_failures, mc.ctx_retirements,
		restore_stale_total());
}

/* One counter of a profile's faults, for each kind of the table. */
static void fault_rows(FILE *f, const char *metric, const char *help,
		       const unsigned long long *const *rows,
		       const char *const *profiles, size_t n, int kinds,
		       const char *(*kind_name)(int k))
{
	fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", metric, help, metric);
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < kinds; k++)
			if (kind_name(k))
				fprintf(f,
					"%s{profile=\"%s\",kind=\"%s\"} "
					"%llu\n",
					metric, label(profiles[i]),
					kind_name(k), rows[i][k]);
}

/* The kinds a process holding a context can destroy. */
static const char *lost_kind(int k)
{
	return object_kind_losable((enum obj_kind)k)
		       ? obj_kind_name((enum obj_kind)k)
		       : NULL;
}

static const char *reclaim_kind(int k)
{
	return uhandle_kind_name((enum uhandle_kind)k);
}

/* Declared objects the kernel lost and their re-creation (reconcile.h),
 * dead clients' leftovers destroyed by handle (reclaim.h). Every
 * series exists from 0, so that a first increase is seen. */
static void faults(FILE *f, struct manager *m)
{
	size_t n = manager_n_profiles(m);
	const char **names = calloc(n + 1, sizeof(*names));
	const unsigned long long **rows = calloc(6 * (n + 1), sizeof(*rows));

	if (!names || !rows)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct profile_faults *pf =
		    profile_faults(manager_profile_at(m, i));

		names[i] = profile_name(manager_profile_at(m, i));
		rows[i] = pf->lost;
		rows[n + 1 + i] = pf->recreated;
		rows[2 * (n + 1) + i] = pf->recreate_failed;
		rows[3 * (n + 1) + i] = pf->reclaimed;
		rows[4 * (n + 1) + i] = pf->reclaim_failed;
		rows[5 * (n + 1) + i] = pf->stale;
	}
	fputs("# HELP rdmad_profile_ready 1 when the profile's state is "
	      "ready (every object made).\n# TYPE rdmad_profile_ready gauge\n",
	      f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "rdmad_profile_ready{profile=\"%s\"} %d\n",
			label(names[i]),
			profile_state(manager_profile_at(m, i)) ==
			    PROFILE_READY);
	fault_rows(f, "rdmad_objects_lost_total",
		   "Declared objects the kernel no longer had (a client "
		   "destroyed them).",
		   rows, names, n, OBJ_KIND_MAX, lost_kind);
	fault_rows(f, "rdmad_objects_recreated_total",
		   "Lost objects made again.", rows + n + 1, names, n,
		   OBJ_KIND_MAX, lost_kind);
	fault_rows(f, "rdmad_object_recreate_failures_total",
		   "Lost objects that could not be made again.",
		   rows + 2 * (n + 1), names, n, OBJ_KIND_MAX, lost_kind);
	fault_rows(f, "rdmad_orphans_reclaimed_total",
		   "Objects dead clients left in a shared context, destroyed "
		   "by handle.",
		   rows + 3 * (n + 1), names, n, UH_KINDS, reclaim_kind);
	fault_rows(f, "rdmad_orphan_reclaim_failures_total",
		   "Leftovers whose destruction by handle failed.",
		   rows + 4 * (n + 1), names, n, UH_KINDS, reclaim_kind);
	fault_rows(f, "rdmad_reclaim_stale_handles_total",
		   "Handles reclaim was to destroy that named another object "
		   "by then (an MR's keys had changed), left alone.",
		   rows + 5 * (n + 1), names, n, UH_KINDS, reclaim_kind);
	fprintf(f,
		"# HELP rdmad_orphan_reclaim_delay_seconds How long a "
		"leftover is seen before it is destroyed.\n"
		"# TYPE rdmad_orphan_reclaim_delay_seconds gauge\n"
		"rdmad_orphan_reclaim_delay_seconds %g\n",
		RECLAIM_DELAY_USEC / 1e6);
out:
	free(names);
	free(rows);
}

static void sessions(FILE *f, struct manager *m)
{
	static const double no_buckets[SESSION_ATTACH_BUCKETS];
	struct session_stats st;
	unsigned long long cumulative = 0;
	bool lent = manager_session_stats(m, &st);

	if (!lent)
		st.bucket_le = no_buckets;
	fprintf(f,
		"# HELP rdmad_sessions Connected clients.\n"
		"# TYPE rdmad_sessions gauge\nrdmad_sessions %u\n"
		"# HELP rdmad_attachments Live attachments.\n"
		"# TYPE rdmad_attachments gauge\nrdmad_attachments %u\n"
		"# HELP rdmad_attach_seconds Time the daemon took to answer an "
		"attach.\n# TYPE rdmad_attach_seconds histogram\n",
		st.sessions, st.attachments);
	for (size_t b = 0; lent && b < SESSION_ATTACH_BUCKETS;
	     b++) {
		cumulative += st.attach_buckets[b];
		fprintf(f, "rdmad_attach_seconds_bucket{le=\"%g\"} %llu\n",
			st.bucket_le[b], cumulative);
	}
	fprintf(f,
		"rdmad_attach_seconds_bucket{le=\"+Inf\"} %llu\n"
		"rdmad_attach_seconds_sum %.6f\n"
		"rdmad_attach_seconds_count %llu\n"
		"# HELP rdmad_attach_failures_total Attach requests refused.\n"
		"# TYPE rdmad_attach_failures_total counter\n"
		"rdmad_attach_failures_total %llu\n",
		st.attaches, st.attach_seconds, st.attaches,
		st.attach_failures);
}

/* The front ends' connections: what limits turned away or closed. */
static void fronts(FILE *f, struct manager *m)
{
	static const char *const name[FRONT_MAX] = { "control", "http" };
	static const struct {
		const char *metric, *help, *type;
		size_t off;
	} rows[] = {
		{ "rdmad_connections", "Open connections, by front end.",
		  "gauge", offsetof(struct front_stats, open) },
		{ "rdmad_connections_refused_total",
		  "Connections turned away at a limit, by front end.",
		  "counter", offsetof(struct front_stats, refused) },
		{ "rdmad_connections_evicted_total",
		  "Idle connections closed to make room for new ones.",
		  "counter", offsetof(struct front_stats, evicted) },
		{ "rdmad_connections_timed_out_total",
		  "Connections closed for want of a HELLO (control) or of "
		  "request headers (http) in time.",
		  "counter", offsetof(struct front_stats, timed_out) },
	};
	struct front_stats st[FRONT_MAX];
	bool lent[FRONT_MAX];

	for (int k = 0; k < FRONT_MAX; k++)
		lent[k] = manager_front_stats(m, (enum manager_front_kind)k,
					      &st[k]);
	for (size_t r = 0; r < ARRAY_SIZE(rows); r++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", rows[r].metric,
			rows[r].help, rows[r].metric, rows[r].type);
		for (int k = 0; k < FRONT_MAX; k++) {
			const unsigned long long *v =
				(const void *)((const char *)&st[k] +
					       rows[r].off);

			if (lent[k])
				fprintf(f, "%s{front=\"%s\"} %llu\n",
					rows[r].metric, name[k], *v);
		}
	}
}

/* One sysfs counter directory, e.g. .../ports/1/hw_counters. */
static void counter_dir(FILE *f, const struct profile *p, const char *group)
{
	char dir[256];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "/sys/class/infiniband/%s/ports/%d/%s",
		 profile_ibdev(p), profile_device(p)->port, group);
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		char path[512], buf[64];
		_cleanup_close_ int fd = -1;
		ssize_t n;

		if (e->d_name[0] == '.' || streq(e->d_name, "lifespan"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		fprintf(f,
			"rdmad_port_stat_total{device=\"%s\",port=\"%d\","
			"group=\"%s\",counter=\"%s\"} %s\n",
			label(profile_ibdev(p)), profile_device(p)->port, group,
			label(e->d_name), buf);
	}
	if (d)
		closedir(d);
}

/* The port's own counters (sysfs: counters, and the driver's
 * hw_counters), for the ports profiles use, each once. */
static void port_counters(FILE *f, struct manager *m)
{
	fputs("# HELP rdmad_port_stat_total The port's counters from "
	      "/sys/class/infiniband/DEV/ports/N/{counters,hw_counters}.\n"
	      "# TYPE rdmad_port_stat_total counter\n",
	      f);
	for (size_t i = 0; i < manager_n_profiles(m); i++) {
		struct profile *p = manager_profile_at(m, i);
		bool seen = false;

		if (!profile_ctx(p))
			continue;
		for (size_t k = 0; k < i; k++)
			seen |=
			    profile_ctx(manager_profile_at(m, k)) &&
			    streq(profile_ibdev(manager_profile_at(m, k)),
				  profile_ibdev(p)) &&
			    profile_device(manager_profile_at(m, k))->port ==
				profile_device(p)->port;
		if (seen)
			continue;
		counter_dir(f, p, "counters");
		counter_dir(f, p, "hw_counters");
	}
}

/* Each ready target: its connections now, and how each one ended or was
 * turned away. */
static void targets(FILE *f, struct manager *m)
{
	static const char *const results[] = {
		"accepted",	  "revoked",	    "disconnected",  "failed",
		"rejected_address", "rejected_token", "rejected_full",
	};
	bool first = true;

	for (size_t i = 0; i < manager_n_profiles(m); i++) {
		struct profile *p = manager_profile_at(m, i);

		for (size_t k = 0; k < profile_n_objects(p); k++) {
			struct object *o = profile_object_at(p, k);
			struct target_stats s;
			unsigned long long n[ARRAY_SIZE(results)];

			if (o->kind != OBJ_TARGET || o->state != OBJ_READY)
				continue;
			if (first)
				fputs("# HELP rdmad_target_connections A "
				      "target's connections now.\n"
				      "# TYPE rdmad_target_connections gauge\n"
				      "# HELP rdmad_target_connections_total "
				      "Connections to a target, by how they "
				      "ended or were refused.\n"
				      "# TYPE rdmad_target_connections_total "
				      "counter\n",
				      f);
			first = false;
			target_stats(o->u.target, &s);
			n[0] = s.accepted;
			n[1] = s.revoked;
			n[2] = s.disconnected;
			n[3] = s.failed;
			n[4] = s.rejected_address;
			n[5] = s.rejected_token;
			n[6] = s.rejected_full;
			fprintf(f,
				"rdmad_target_connections{profile=\"%s\","
				"target=\"%s\"} %u\n",
				label(profile_name(p)), label(object_name(o)),
				s.connections);
			for (size_t r = 0; r < ARRAY_SIZE(results); r++)
				fprintf(f,
					"rdmad_target_connections_total{"
					"profile=\"%s\",target=\"%s\","
					"result=\"%s\"} %llu\n",
					label(profile_name(p)),
					label(object_name(o)), results[r],
					n[r]);
		}
	}
}

char *metrics_render(struct manager *m)
{
	struct manager_counters mc;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	manager_counters(m, &mc);
	fprintf(f,
		"# HELP rdmad_up 1 while rdmad runs.\n# TYPE rdmad_up gauge\n"
		"rdmad_up 1\n"
		"# HELP rdmad_uptime_seconds Seconds since start.\n"
		"# TYPE rdmad_uptime_seconds gauge\n"
		"rdmad_uptime_seconds %.3f\n"
		"# HELP rdmad_reloads_total Reloads that ended, by result.\n"
		"# TYPE rdmad_reloads_total counter\n"
		"rdmad_reloads_total{result=\"ok\"} %u\n"
		"rdmad_reloads_total{result=\"error\"} %u\n",
		manager_uptime(m), mc.reloads_applied, mc.reload_failures);
	objects(f, m);
	contexts(f, m);
	faults(f, m);
	sessions(f, m);
	fronts(f, m);
	port_counters(f, m);
	targets(f, m);
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	return text;
}
