// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>

#include "api.h"
#include "config.h"
#include "devinfo.h"
#include "manager.h"
#include "objects.h"
#include "openapi.h"
#include "orphans.h"
#include "qphealth.h"
#include "qpstate.h"
#include "selftest.h"
#include "target.h"
#include "utf8.h"
#include "view.h"

#define MAX_SEGMENTS 8

/* Messages quote paths, names and values as the client sent them: they
 * are made UTF-8 (bad bytes become U+FFFD, a character the buffer cut
 * is dropped), or jansson would refuse the document and the client
 * would get no answer at all. */
json_t *api_verror(const char *code, const char *fmt, va_list ap)
{
	_cleanup_free_ char *clean = NULL;
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	utf8_trim_cut(msg);
	if (!utf8_valid(msg) && !(clean = utf8_sanitize(msg)))
		return NULL;
	return json_pack("{s:{s:s, s:s}}", "error", "code", code, "message",
			 clean ? clean : msg);
}

json_t *api_error(const char *code, const char *fmt, ...)
{
	json_t *doc;
	va_list ap;

	va_start(ap, fmt);
	doc = api_verror(code, fmt, ap);
	va_end(ap);
	return doc;
}

struct request {
	struct manager *m;
	const struct api_request *req;
	const char *seg[MAX_SEGMENTS]; /* path segments after /v1 */
	size_t n_seg;
	json_t *reply;
};

/* doc with what this caller may not see of other users left out. */
static json_t *viewed(const struct request *r, json_t *doc)
{
	const struct api_viewer v = { .admin = r->req->authorized,
				      .has_uid = r->req->has_uid,
				      .uid = r->req->uid };

	return api_view(doc, &v);
}

static int reply(struct request *r, int status, json_t *doc)
{
	r->reply = doc;
	if (!doc) {
		r->reply = api_error("internal", "out of memory");
		return 500;
	}
	return status;
}

static int not_found(struct request *r, const char *what, const char *name)
{
	return reply(r, 404, api_error("not_found", "no %s '%s'", what, name));
}

static int errno_reply(struct request *r, int err, const char *what)
{
	return reply(r, 500, api_error("device_error", "%s: %s", what,
				       strerror(err < 0 ? -err : err)));
}

/* ---- /v1/health, /v1/version ---- */

static int get_health(struct request *r)
{
	return reply(r, 200,
		     json_pack("{s:s, s:s}", "status", "ok", "device_events",
			       manager_device_events(r->m)));
}

static int get_version(struct request *r)
{
	return reply(r, 200,
		     json_pack("{s:s, s:s, s:f}", "name", "rdmad", "version",
			       RDMAD_VERSION, "uptime",
			       manager_uptime(r->m)));
}

/* The document describing this API (tests check that it parses and
 * validates: failing here means memory). */
static int get_openapi(struct request *r)
{
	json_error_t jerr;
	json_t *doc = json_loads(rdmad_openapi_json, 0, &jerr);

	if (!doc)
		return reply(r, 500, api_error("internal", "openapi.json: %s",
					       jerr.text));
	return reply(r, 200, doc);
}

/* ---- devices ---- */

static void import_json(json_t *j, struct ibv_context *ctx)
{
	int e = devinfo_probe_import(ctx);

	json_object_set_new(j, "import_capable", json_boolean(e == 0));
	if (e)
		json_object_set_new(j, "import_error", json_string(strerror(-e)));
}

/* From the manager's view of the devices: no device is opened here. */
static int get_devices(struct request *r)
{
	return reply(r, 200, manager_devices_json(r->m));
}

static int parse_port(const char *s, struct ibv_context *ctx)
{
	struct ibv_device_attr attr;
	char *end;
	long n = strtol(s, &end, 10);

	if (*end || end == s || n < 1 || n > 255)
		return -EINVAL;
	if (ibv_query_device(ctx, &attr) || n > attr.phys_port_cnt)
		return -EINVAL;
	return (int)n;
}

static int get_device(struct request *r)
{
	const char *ibdev = r->seg[1];
	struct ibv_context *ctx = devinfo_open(ibdev);
	json_t *j = NULL;
	int port = 0, e;

	if (!ctx) {
		if (errno == ENODEV)
			return not_found(r, "device", ibdev);
		return errno_reply(r, errno, ibdev);
	}
	if (r->n_seg >= 4) {
		port = parse_port(r->seg[3], ctx);
		if (port < 0) {
			ibv_close_device(ctx);
			return not_found(r, "port", r->seg[3]);
		}
	}
	if (r->n_seg == 2)
		e = devinfo_device(ctx, &j);
	else if (r->n_seg == 4)
		e = devinfo_port(ctx, (uint8_t)port, &j);
	else
		e = devinfo_gids(ctx, (uint8_t)port, &j);
	if (e == 0 && r->n_seg == 2)
		import_json(j, ctx);
	ibv_close_device(ctx);
	if (e < 0)
		return errno_reply(r, e, ibdev);
	return reply(r, 200, j);
}

/* ---- profiles ---- */

static int get_profiles(struct request *r)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < manager_n_profiles(r->m); i++) {
		const struct profile *p = manager_profile_at(r->m, i);

		/* A profile's own socket lists that profile alone. */
		if (r->req->scope && !streq(profile_name(p), r->req->scope))
			continue;
		json_array_append_new(a, profile_json(p, 0));
	}
	return reply(r, 200, a);
}

static int get_profile(struct request *r)
{
	struct profile *p = manager_profile(r->m, r->seg[1]);
	struct object *o;
	int kind;

	if (!p)
		return not_found(r, "profile", r->seg[1]);
	if (r->n_seg == 2)
		return reply(r, 200, profile_json(p, 1));
	kind = obj_kind_from_name(r->seg[2]);
	if (kind < 0)
		return not_found(r, "object kind", r->seg[2]);
	o = profile_find(p, (enum obj_kind)kind, r->seg[3]);
	if (!o)
		return not_found(r, r->seg[2], r->seg[3]);
	return reply(r, 200, object_json(o, profile_object_leases(p, o)));
}

/* What the last RDMA netlink scan found in the profile's context. */
static int get_orphans(struct request *r)
{
	struct profile *p = manager_profile(r->m, r->seg[1]);

	if (!p)
		return not_found(r, "profile", r->seg[1]);
	/* The last scan's view now, and a newer one soon if it is old. */
	manager_orphans_refresh(r->m, p);
	return reply(r, 200, viewed(r, orphans_json(p)));
}

/* ---- configuration ---- */

static int get_config(struct request *r)
{
	return reply(r, 200, config_json(manager_config(r->m)));
}

/* A reload's outcome as POST /v1/reload answers it. */
static int reload_reply(int e, json_t *result, json_t **doc)
{
	if (e == -EINVAL) {
		json_t *errors = json_object_get(result, "errors");
		size_t n = json_array_size(errors);

		*doc = api_error("config_invalid",
				 "the new configuration has %zu error%s; "
				 "nothing was changed",
				 n, n == 1 ? "" : "s");
		if (*doc)
			json_object_set(json_object_get(*doc, "error"),
					"errors", errors);
		return 422;
	}
	if (e == -ENOTEMPTY) {
		*doc = api_error("would_remove_all", "%s",
				 json_string_value(
					 json_object_get(result, "message")));
		return 409;
	}
	if (e == -ECANCELED) {
		*doc = api_error("unavailable", "%s",
				 json_string_value(
					 json_object_get(result, "message")));
		return 503;
	}
	if (e < 0) {
		*doc = api_error("internal", "reload: %s", strerror(-e));
		return 500;
	}
	*doc = json_incref(result);
	return 200;
}

static void reload_done(void *ud, int e, json_t *result)
{
	struct api_later *later = ud;
	json_t *doc = NULL;
	int status = reload_reply(e, result, &doc);

	if (!doc) {
		doc = api_error("internal", "out of memory");
		status = 500;
	}
	later->fn(later, status, doc);
}

static int post_reload(struct request *r)
{
	const json_t *force = json_object_get(r->req->body, "force");
	int e;

	if (force && !json_is_boolean(force))
		return reply(r, 400, api_error("bad_request",
					       "\"force\" must be true or "
					       "false"));
	if (!r->req->later)
		return reply(r, 503, api_error("unavailable",
					       "no more requests may wait for "
					       "their answer here"));
	e = manager_reload(r->m, json_is_true(force), reload_done,
			   r->req->later);
	if (e < 0) {
		json_t *doc = NULL;
		int status = reload_reply(e, NULL, &doc);

		if (e == -ECANCELED) {
			json_decref(doc);
			doc = api_error("unavailable", "the daemon is stopping");
		}
		return reply(r, status, doc);
	}
	return API_LATER;
}

void api_forget(struct manager *m, struct api_later *later)
{
	manager_reload_forget(m, later);
}

static struct object *ready_object(struct request *r, struct profile *p,
				   enum obj_kind kind, const char *name,
				   int *status)
{
	struct object *o = name ? profile_find(p, kind, name) : NULL;

	if (!o) {
		*status = not_found(r, obj_kind_name(kind), name ? name : "");
		return NULL;
	}
	if (o->state != OBJ_READY) {
		*status = reply(r, 409,
				api_error("not_ready", "%s '%s' is %s",
					  obj_kind_name(kind), name,
					  obj_state_name(o->state)));
		return NULL;
	}
	return o;
}

/* ---- sessions ---- */

static int get_sessions(struct request *r)
{
	return reply(r, 200, viewed(r, manager_sessions_json(r->m)));
}

/* ---- QP state change: the remote end in the config's path vocabulary ---- */

static const struct {
	const char *name;
	enum ibv_qp_state state;
} qp_states[] = {
	{ "reset", IBV_QPS_RESET }, { "init", IBV_QPS_INIT },
	{ "rtr", IBV_QPS_RTR },	    { "rts", IBV_QPS_RTS },
	{ "error", IBV_QPS_ERR },
};

static int patch_qp(struct request *r)
{
	struct profile *p = manager_profile(r->m, r->seg[1]);
	const char *target = json_string_value(json_object_get(r->req->body,
							       "state"));
	const json_t *path_doc = json_object_get(r->req->body, "path");
	const json_t *ep_doc = json_object_get(r->req->body, "endpoint");
	const char *step = NULL;
	struct ibv_port_attr pattr;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr cur;
	struct qp_path path;
	struct object *o;
	char err[256];
	int status = 0, e, mask;
	size_t i;

	if (!p)
		return not_found(r, "profile", r->seg[1]);
	if (!(o = ready_object(r, p, OBJ_QP, r->seg[3], &status)))
		return status;
	for (i = 0; target && i < ARRAY_SIZE(qp_states); i++)
		if (streq(qp_states[i].name, target))
			break;
	if (!target || i == ARRAY_SIZE(qp_states))
		return reply(r, 400, api_error("bad_request",
					       "\"state\" must be one of reset, "
					       "init, rtr, rts, error"));
	/* The profile's own port and GID, then what the body says. */
	qp_path_init(&path);
	path.port_num = (uint8_t)profile_device(p)->port;
	path.qkey = ((const struct conf_qp *)o->conf)->qkey;
	path.pkey_index = ((const struct conf_qp *)o->conf)->pkey_index;
	path.access = ((const struct conf_qp *)o->conf)->access;
	/* As for a path in the config: this device's GID unless said. */
	if (profile_gid_index(p) >= 0) {
		path.sgid_index = (uint8_t)profile_gid_index(p);
		path.has_grh = true;
		path.dgid = *profile_gid(p);
	}
	/* The other end's endpoint document, then path keys over it. */
	if (ep_doc &&
	    qp_path_from_endpoint(
		ep_doc, qp_kind_name(((const struct conf_qp *)o->conf)->type),
		ibv_query_port(profile_ctx(p), path.port_num, &pattr)
		    ? 0
		    : pattr.active_mtu,
		&path, err, sizeof(err)))
		return reply(r, 400, api_error("bad_request", "endpoint: %s",
					       err));
	if (path_doc && qp_path_from_json(path_doc, &path, err, sizeof(err)))
		return reply(r, 400, api_error("bad_request", "path: %s", err));
	/* RTS to RTS: change what may change in place; the QP stays. */
	if (qp_states[i].state == IBV_QPS_RTS &&
	    !ibv_query_qp(o->u.qp.qp, &cur, IBV_QP_STATE, &init) &&
	    cur.qp_state == IBV_QPS_RTS) {
		if (ep_doc)
			return reply(r, 400,
				     api_error("bad_request",
					       "endpoint: the QP is in RTS "
					       "and connected; move it to "
					       "reset first"));
		if (qp_path_rts_mask(path_doc, &mask, err, sizeof(err)))
			return reply(r, 400,
				     api_error("bad_request", "path: %s", err));
		e = qp_modify_rts(o->u.qp.qp, &path, mask, &step);
	} else {
		e = qp_modify(o->u.qp.qp, qp_states[i].state, &path, &step);
	}
	/* Out of the error state by hand: what qphealth knew is over. */
	if (!e)
		qphealth_clear(p, o);
	profile_touch(p);
	if (e < 0)
		return reply(r, 422,
			     api_error("device_error", "modify_qp %s: %s",
				       step ? step : "", strerror(-e)));
	return reply(r, 200, object_json(o, profile_object_leases(p, o)));
}

/* Automatic path migration by hand: to the armed alternate path. */
static int post_qp_migrate(struct request *r)
{
	struct profile *p = manager_profile(r->m, r->seg[1]);
	const char *step = NULL;
	struct object *o;
	int status = 0, e;

	if (!p)
		return not_found(r, "profile", r->seg[1]);
	if (!(o = ready_object(r, p, OBJ_QP, r->seg[3], &status)))
		return status;
	e = qp_migrate(o->u.qp.qp, &step);
	profile_touch(p);
	if (e == -ENOENT || e == -EINVAL)
		return reply(r, 409,
			     api_error("conflict",
				       "qp '%s' cannot migrate: %s", r->seg[3],
				       e == -ENOENT
					       ? "it has no alternate path "
						 "armed (path_mig_state "
						 "migrated: declare alt_path, "
						 "or it migrated already)"
					       : "it is not in RTS, or the "
						 "device has not armed its "
						 "alternate path"));
	if (e < 0)
		return reply(r, 422,
			     api_error("device_error", "modify_qp %s: %s",
				       step ? step : "", strerror(-e)));
	return reply(r, 200, object_json(o, profile_object_leases(p, o)));
}

/* What a peer elsewhere needs to connect to this QP (PATCH "endpoint"). */
static int get_qp_endpoint(struct request *r)
{
	struct profile *p = manager_profile(r->m, r->seg[1]);
	struct object *o;
	int status = 0, e;
	json_t *j;

	if (!p)
		return not_found(r, "profile", r->seg[1]);
	if (!(o = ready_object(r, p, OBJ_QP, r->seg[3], &status)))
		return status;
	j = object_qp_endpoint(p, o, &e);
	if (!j && e)
		return errno_reply(r, e, "query");
	return reply(r, 200, viewed(r, j));
}

/* ---- target connections ---- */

static int get_connections(struct request *r)
{
	struct profile *p = manager_profile(r->m, r->seg[1]);
	struct object *o;
	int status = 0;

	if (!p)
		return not_found(r, "profile", r->seg[1]);
	if (!(o = ready_object(r, p, OBJ_TARGET, r->seg[3], &status)))
		return status;
	return reply(r, 200, target_connections_json(o->u.target));
}

/* Revoke one: its windows go at once, the connection after. */
static int delete_connection(struct request *r)
{
	struct profile *p = manager_profile(r->m, r->seg[1]);
	struct object *o;
	int status = 0;
	char *end;
	unsigned long long id;

	if (!p)
		return not_found(r, "profile", r->seg[1]);
	if (!(o = ready_object(r, p, OBJ_TARGET, r->seg[3], &status)))
		return status;
	errno = 0;
	id = strtoull(r->seg[5], &end, 10);
	if (*end || end == r->seg[5] || errno || r->seg[5][0] == '-' ||
	    target_revoke(o->u.target, id) < 0)
		return not_found(r, "connection", r->seg[5]);
	return reply(r, 200, json_pack("{s:s, s:s, s:I, s:s}", "profile",
				       r->seg[1], "target", r->seg[3], "id",
				       (json_int_t)id, "state", "revoked"));
}

/* ---- data-path self-check ---- */

static int post_selftest(struct request *r)
{
	struct profile *p = manager_profile(r->m, r->seg[1]);
	const char *a_name = json_string_value(json_object_get(r->req->body, "a"));
	const char *b_name = json_string_value(json_object_get(r->req->body, "b"));
	const char *mr_name =
		json_string_value(json_object_get(r->req->body, "mr"));
	struct object *qa, *qb, *mr = NULL;
	struct selftest_end ea, eb;
	struct selftest_mr smr;
	json_t *report = NULL;
	int status = 0, e;

	if (!p)
		return not_found(r, "profile", r->seg[1]);
	if (!a_name || !b_name)
		return reply(r, 400, api_error("bad_request",
					       "the body needs \"a\" and "
					       "\"b\": two QPs of the profile"));
	if (!(qa = ready_object(r, p, OBJ_QP, a_name, &status)) ||
	    !(qb = ready_object(r, p, OBJ_QP, b_name, &status)))
		return status;
	/* Without a name: the first MR that allows remote writes. */
	for (size_t i = 0; !mr_name && i < profile_n_objects(p); i++) {
		struct object *o = profile_object_at(p, i);

		if (o->kind == OBJ_MR && o->state == OBJ_READY &&
		    (((const struct conf_mr *)o->conf)->access &
		     IBV_ACCESS_REMOTE_WRITE))
			mr_name = object_name(o);
	}
	if (!(mr = ready_object(r, p, OBJ_MR, mr_name, &status)))
		return status;
	ea = (struct selftest_end){
		qa->u.qp.qp, qa->u.qp.qp->send_cq, qa->u.qp.qp->recv_cq };
	eb = (struct selftest_end){
		qb->u.qp.qp, qb->u.qp.qp->send_cq, qb->u.qp.qp->recv_cq };
	smr = (struct selftest_mr){
		.addr = mr->u.mr.mr->addr,
		.iova = mr->u.mr.iova,
		.length = mr->u.mr.mr->length,
		.lkey = mr->u.mr.mr->lkey,
		.rkey = mr->u.mr.mr->rkey,
		.access = ((const struct conf_mr *)mr->conf)->access,
	};
	e = selftest_run(&ea, &eb, &smr, 5000, &report);
	if (!report)
		return errno_reply(r, e, "selftest");
	json_object_set_new(report, "profile", json_string(profile_name(p)));
	json_object_set_new(report, "a", json_string(a_name));
	json_object_set_new(report, "b", json_string(b_name));
	json_object_set_new(report, "mr", json_string(mr_name));
	json_object_set_new(report, "ok", json_boolean(e == 0));
	return reply(r, e == 0 ? 200 : 422, report);
}

/* ---- routing ---- */

#define ANY "*"

struct route {
	const char *method;
	const char *pattern[MAX_SEGMENTS]; /* after /v1; ANY matches one */
	int (*handler)(struct request *r);
	bool mutating; /* needs an authorized request */
	/* May be asked on a profile's own socket (api_request.scope): reads
	 * of that profile, and documents that show no profile at all. */
	bool scoped;
};

static const struct route routes[] = {
	{ "GET", { "health" }, get_health, false, true },
	{ "GET", { "version" }, get_version, false, true },
	{ "GET", { "openapi.json" }, get_openapi, false, true },
	{ "GET", { "devices" }, get_devices, false, false },
	{ "GET", { "devices", ANY }, get_device, false, false },
	{ "GET", { "devices", ANY, "ports", ANY }, get_device, false, false },
	{ "GET", { "devices", ANY, "ports", ANY, "gids" }, get_device, false,
	  false },
	{ "GET", { "profiles" }, get_profiles, false, true },
	{ "GET", { "profiles", ANY }, get_profile, false, true },
	{ "GET", { "profiles", ANY, "orphans" }, get_orphans, false, true },
	{ "GET", { "profiles", ANY, ANY, ANY }, get_profile, false, true },
	{ "GET", { "profiles", ANY, "target", ANY, "connections" },
	  get_connections, false, true },
	{ "DELETE", { "profiles", ANY, "target", ANY, "connections", ANY },
	  delete_connection, true, false },
	{ "GET", { "config" }, get_config, false, false },
	{ "POST", { "reload" }, post_reload, true, false },
	{ "GET", { "sessions" }, get_sessions, false, false },
	{ "PATCH", { "profiles", ANY, "qp", ANY }, patch_qp, true, false },
	{ "GET", { "profiles", ANY, "qp", ANY, "endpoint" },
	  get_qp_endpoint, false, true },
	{ "POST", { "profiles", ANY, "selftest" }, post_selftest, true, false },
	{ "POST", { "profiles", ANY, "qp", ANY, "migrate" },
	  post_qp_migrate, true, false },
};

static bool route_matches(const struct route *rt, const struct request *r)
{
	size_t n = 0;

	while (n < MAX_SEGMENTS && rt->pattern[n])
		n++;
	if (n != r->n_seg)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!streq(rt->pattern[i], ANY) &&
		    !streq(rt->pattern[i], r->seg[i]))
			return false;
	return true;
}

/* Split "/v1/a/b" into segments of buf. Empty segments are invalid. */
static int split_path(char *buf, struct request *r)
{
	char *s;

	if (strncmp(buf, "/v1/", 4))
		return -EINVAL;
	s = buf + 4;
	for (;;) {
		char *slash = strchr(s, '/');

		if (!*s || r->n_seg == MAX_SEGMENTS)
			return -EINVAL; /* "//", a trailing "/" or too deep */
		r->seg[r->n_seg++] = s;
		if (!slash)
			return 0;
		*slash = '\0';
		s = slash + 1;
	}
}

/* A profile's own socket reaches that profile's documents only: any
 * other name is refused, whether a profile has it or not. */
static bool route_in_scope(const struct route *rt, const struct request *r,
			   const char *scope)
{
	if (!rt->scoped)
		return false;
	return !streq(rt->pattern[0], "profiles") || r->n_seg < 2 ||
	       streq(r->seg[1], scope);
}

bool api_in_scope(const char *method, const char *path, const char *scope)
{
	struct request r = { 0 };
	char buf[1024];

	if (strlen(path) >= sizeof(buf))
		return false;
	strcpy(buf, path);
	if (split_path(buf, &r) < 0)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
		if (streq(routes[i].method, method) &&
		    route_matches(&routes[i], &r))
			return route_in_scope(&routes[i], &r, scope);
	return false;
}

bool api_cacheable(struct manager *m, const char *method, const char *path,
		   uint64_t *generation)
{
	struct request r = { .m = m };
	struct profile *p;
	char buf[1024];

	if (!streq(method, "GET") || strlen(path) >= sizeof(buf))
		return false;
	/* Fixed at build time, or for the daemon's life: rendered once. */
	if (streq(path, "/v1/openapi.json") || streq(path, "/v1/health")) {
		*generation = 0;
		return true;
	}
	/* GET /v1/profiles/{p}: the large one. */
	strcpy(buf, path);
	if (split_path(buf, &r) < 0 || r.n_seg != 2 ||
	    !streq(r.seg[0], "profiles"))
		return false;
	p = manager_profile(m, r.seg[1]);
	if (!p)
		return false;
	*generation = profile_generation(p);
	return true;
}

size_t api_allow(const char *path, char *allow, size_t size)
{
	struct request r = { 0 };
	size_t len = 0;
	char buf[1024];

	if (size)
		allow[0] = '\0';
	if (strlen(path) >= sizeof(buf))
		return 0;
	strcpy(buf, path);
	if (split_path(buf, &r) < 0)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
		const char *meth = routes[i].method;
		bool get = streq(meth, "GET");
		int n;

		if (!route_matches(&routes[i], &r))
			continue;
		/* Two routes may share a method (profiles/{p} and deeper). */
		if (strstr(allow, meth))
			continue;
		n = snprintf(allow + len, size - len, "%s%s%s",
			     len ? ", " : "", meth, get ? ", HEAD" : "");
		if (n < 0 || (size_t)n >= size - len)
			break;
		len += (size_t)n;
	}
	return len;
}

int api_handle(struct manager *m, const struct api_request *req,
	       json_t **out)
{
	struct request r = { .m = m, .req = req };
	const char *method = req->method, *path = req->path;
	bool path_known = false;
	char buf[1024];
	int status;

	if (!utf8_valid(path)) {
		*out = api_error("not_found",
				 "no resource at a path that is not valid UTF-8");
		return 404;
	}
	if (!utf8_valid(method)) {
		*out = api_error("bad_request", "the method is not valid UTF-8");
		return 400;
	}
	if (strlen(path) >= sizeof(buf)) {
		*out = api_error("not_found", "path too long");
		return 404;
	}
	strcpy(buf, path);
	if (split_path(buf, &r) < 0) {
		*out = api_error("not_found", "no such path: %s", path);
		return 404;
	}
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
		if (!route_matches(&routes[i], &r))
			continue;
		path_known = true;
		if (!streq(routes[i].method, method))
			continue;
		if (req->scope && !route_in_scope(&routes[i], &r, req->scope)) {
			*out = api_error("forbidden",
					 "this socket serves profile '%s' only "
					 "and changes nothing: %s %s is outside "
					 "it",
					 req->scope, method, path);
			return 403;
		}
		if (routes[i].mutating && !req->authorized && req->via_socket) {
			*out = api_error("forbidden",
					 "%s %s needs root or the admin group",
					 method, path);
			return 403;
		}
		if (routes[i].mutating && !req->authorized) {
			*out = req->token_set
				       ? api_error("unauthorized",
						   "%s %s needs Authorization: "
						   "Bearer <token>",
						   method, path)
				       : api_error("forbidden",
						   "no token is configured "
						   "(daemon.http.token_file): "
						   "changes over REST are off");
			return req->token_set ? 401 : 403;
		}
		status = routes[i].handler(&r);
		*out = r.reply;
		if (status == API_LATER)
			return API_LATER;
		if (!*out) {
			*out = api_error("internal", "out of memory");
			return 500;
		}
		return status;
	}
	if (path_known) {
		*out = api_error("method_not_allowed", "%s is not allowed on %s",
				 method, path);
		return 405;
	}
	*out = api_error("not_found", "no such path: %s", path);
	return 404;
}
