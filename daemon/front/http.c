// SPDX-License-Identifier: MIT

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "http.h"
#include "http_internal.h"
#include "log.h"
#include "metrics.h"

/* A rendered document kept while its generation holds (api_cacheable):
 * large documents are not rebuilt for every request. */
struct cached {
	char *path;
	uint64_t generation;
	unsigned int status;
	struct MHD_Response *resp;
	UT_hash_handle hh;
};

#define HTTP_MAX_CACHED 256


static void cached_free(struct http *h, struct cached *c)
{
	HASH_DEL(h->cache, c);
	sym_MHD_destroy_response(c->resp);
	free(c->path);
	free(c);
}

static struct MHD_Response *json_response(json_t *doc)
{
	char *text = json_dumps(doc, JSON_COMPACT);
	struct MHD_Response *resp;

	json_decref(doc);
	if (!text)
		return NULL;
	resp = sym_MHD_create_response_from_buffer(strlen(text), text,
					       MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return NULL;
	}
	sym_MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"application/json");
	return resp;
}

/* The document of path at generation, rendered once: a response the
 * cache keeps (*shared). */
static struct MHD_Response *cached_answer(struct http *h,
					  const struct api_request *ar,
					  uint64_t generation,
					  unsigned int *status, bool *shared)
{
	struct manager *m = h->m;
	struct cached *c = NULL;
	json_t *reply = NULL;
	int st;

	HASH_FIND_STR(h->cache, ar->path, c);
	if (c && c->generation == generation) {
		*status = c->status;
		*shared = true;
		return c->resp;
	}
	if (c)
		cached_free(h, c);
	/* Profiles come and go: a bound, not an eviction policy. */
	if (HASH_COUNT(h->cache) >= HTTP_MAX_CACHED)
		while (h->cache)
			cached_free(h, h->cache);
	st = api_handle(m, ar, &reply);
	c = calloc(1, sizeof(*c));
	if (!c || !(c->path = strdup(ar->path)) ||
	    !(c->resp = json_response(reply))) {
		if (c)
			free(c->path);
		free(c);
		return NULL;
	}
	c->generation = generation;
	c->status = (unsigned int)st;
	HASH_ADD_KEYPTR(hh, h->cache, c->path, strlen(c->path), c);
	*status = c->status;
	*shared = true;
	return c->resp;
}

/* One request in flight: its body, bounded by HTTP_MAX_BODY; and an
 * answer that comes later (api.h), the connection suspended meanwhile. */
struct request {
	char *body;
	size_t len;
	bool too_big;
	struct api_later later;
	struct listener *l;
	struct MHD_Connection *c;
	bool waiting; /* suspended until later.fn */
	bool answered;
	struct MHD_Response *resp; /* later's, NULL when out of memory */
	unsigned int status;
};

/* Constant time: the comparison does not tell how much of it matched. */
static bool token_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char diff = la != lb;

	for (size_t i = 0; i < la; i++)
		diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	return diff == 0;
}

static bool authorized(const struct http *h, const char *auth)
{
	if (!h->token || !auth || strncasecmp(auth, "Bearer ", 7))
		return false;
	return token_equal(auth + 7, h->token);
}

/* Prometheus scrapes text, not JSON. */
static struct MHD_Response *metrics_response(struct manager *m)
{
	char *text = metrics_render(m);
	struct MHD_Response *resp;

	if (!text)
		return NULL;
	resp = sym_MHD_create_response_from_buffer(strlen(text), text,
					       MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return NULL;
	}
	sym_MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4");
	return resp;
}

/* doc (taken) as the body of an answer of status st; *status is what
 * is sent. */
static struct MHD_Response *json_answer(int st, json_t *doc,
				 unsigned int *status)
{
	*status = (unsigned int)st;
	return json_response(doc);
}

/* What RFC 9110 asks of a 405 (Allow) and RFC 6750 of a 401. */
static struct MHD_Response *with_status_headers(struct MHD_Response *resp,
						unsigned int status,
						const char *url)
{
	char allow[64];

	if (!resp)
		return NULL;
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
		if (streq(url, "/metrics") || streq(url, "/v1/events"))
			strcpy(allow, "GET, HEAD");
		else
			api_allow(url, allow, sizeof(allow));
		sym_MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	} else if (status == MHD_HTTP_UNAUTHORIZED) {
		sym_MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"rdmad\"");
	}
	return resp;
}

struct MHD_Response *http_answer(struct http *h, const char *method,
				 const char *url, const char *authorization,
				 const char *body, size_t len, bool too_big,
				 struct api_later *later, unsigned int *status,
				 bool *shared)
{
	/* HEAD is GET without the body, which libmicrohttpd leaves out. */
	bool head = streq(method, "HEAD");
	struct api_request ar = {
		.method = head ? "GET" : method,
		.path = url,
		.authorized = authorized(h, authorization),
		.token_set = h->token != NULL,
		.later = later,
	};
	struct manager *m = h->m;
	struct MHD_Response *resp;
	json_error_t jerr;
	json_t *reply = NULL;
	uint64_t generation;
	int st;

	*shared = false;
	if (too_big)
		return json_answer(413,
				   api_error("body_too_large",
					     "request bodies are limited to %d "
					     "bytes",
					     HTTP_MAX_BODY),
				   status);
	if (len && (streq(method, "GET") || streq(method, "HEAD")))
		return json_answer(413,
				   api_error("body_not_allowed",
					     "%s %s takes no request body",
					     method, url),
				   status);
	/* GET /v1/events streams (events_start()); HEAD gives the
	 * stream's headers, without waiting for events. */
	if (streq(url, "/v1/events") && head) {
		resp = sym_MHD_create_response_from_buffer(0, NULL,
						       MHD_RESPMEM_PERSISTENT);
		if (!resp)
			return NULL;
		sym_MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					"text/event-stream");
		sym_MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
					"no-cache");
		*status = 200;
		return resp;
	}
	if (streq(url, "/metrics") && streq(ar.method, "GET")) {
		*status = 200;
		resp = metrics_response(m);
		if (resp)
			return resp;
		return json_answer(500, api_error("internal", "out of memory"),
				   status);
	}
	/* Neither answers any other method. */
	if (streq(url, "/metrics") ||
	    (streq(url, "/v1/events") && !streq(ar.method, "GET"))) {
		resp = json_answer(405,
				   api_error("method_not_allowed",
					     "%s is not allowed on %s", method,
					     url),
				   status);
		return with_status_headers(resp, *status, url);
	}
	if (!len && api_cacheable(m, ar.method, url, &generation))
		return cached_answer(h, &ar, generation, status, shared);
	if (len) {
		/* Depth is bounded by the body size limit and jansson's own
		 * limit (2048). */
		ar.body = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
		if (!json_is_object(ar.body)) {
			json_decref(ar.body);
			return json_answer(400,
					   api_error("bad_json",
						     "the body must be a JSON "
						     "object: %s",
						     ar.body ? "it is not"
							     : jerr.text),
					   status);
		}
	}
	st = api_handle(m, &ar, &reply);
	json_decref(ar.body);
	if (st == API_LATER) {
		log_debug("%s %s -> later", method, url);
		*status = 0;
		return NULL;
	}
	log_debug("%s %s -> %d", method, url, st);
	resp = json_answer(st, reply, status);
	return with_status_headers(resp, *status, url);
}


/* GET /v1/events, while the streams leave connections for the rest. */
static enum MHD_Result events_start(struct listener *l,
				    struct MHD_Connection *c)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	unsigned int status;

	if (!streams_full(l->h))
		return stream_start(
			l, c,
			authorized(l->h, sym_MHD_lookup_connection_value(
						 c, MHD_HEADER_KIND,
						 MHD_HTTP_HEADER_AUTHORIZATION)));
	resp = json_answer(503,
			   api_error("too_many_streams",
				     "the daemon has %u event streams open, "
				     "its limit (half of "
				     "daemon.http.max_connections)",
				     l->h->n_streams),
			   &status);
	if (!resp)
		return MHD_NO;
	ret = sym_MHD_queue_response(c, status, resp);
	sym_MHD_destroy_response(resp);
	return ret;
}

/*
 * A request whose Content-Length is over the limit is answered at its
 * headers, not after a body that would be refused anyway (or never
 * comes: issue 38). libmicrohttpd takes a response queued this early
 * and then reads nothing more of the connection, which it closes after
 * the answer; the connection lingers (http_conn.c) so that the body on
 * its way does not reset it before the client has read the answer.
 * The first request of a plain connection was judged so before
 * libmicrohttpd had it (http_screen.h); this is for the requests after
 * it, and for TLS.
 */
static bool body_over_limit(struct MHD_Connection *c)
{
	const char *cl = sym_MHD_lookup_connection_value(
		c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	unsigned long long n;
	char *end;

	if (!cl)
		return false;
	errno = 0;
	n = strtoull(cl, &end, 10);
	/* libmicrohttpd has read it as a number already. */
	return errno == ERANGE || n > HTTP_MAX_BODY;
}

/* doc (taken), of status, answered at the request's headers: the
 * connection closes after it (what it still sends is read and thrown
 * away: it lingers), with a Retry-After when retry. */
static enum MHD_Result refuse_now(struct MHD_Connection *c, struct conn *cn,
				  int status, json_t *doc, bool retry)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	unsigned int st;
	char secs[16];

	resp = json_answer(status, doc, &st);
	if (!resp)
		return MHD_NO;
	sym_MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION,
				    "close");
	if (retry) {
		snprintf(secs, sizeof(secs), "%u", HTTP_RETRY_AFTER);
		sym_MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER,
					    secs);
	}
	ret = sym_MHD_queue_response(c, st, resp);
	sym_MHD_destroy_response(resp);
	if (ret == MHD_YES && cn)
		cn->linger = true;
	return ret;
}

static enum MHD_Result too_large_now(struct MHD_Connection *c,
				     struct conn *cn)
{
	return refuse_now(c, cn, 413,
			  api_error("body_too_large",
				    "request bodies are limited to %d bytes",
				    HTTP_MAX_BODY),
			  false);
}

/*
 * Whom the request is for (http_host.h): a Host or an Origin not ours
 * is refused, on TCP (no browser reaches a unix socket); NULL, or the
 * refusal, of status *status.
 */
static json_t *misdirected(struct listener *l, struct MHD_Connection *c,
			   const char *version, int *status)
{
	const char *host = sym_MHD_lookup_connection_value(
		c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	const char *origin = sym_MHD_lookup_connection_value(
		c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN);

	if (l->local)
		return NULL;
	*status = 400;
	if (!host && streq(version, MHD_HTTP_VERSION_1_1))
		return api_error("bad_request",
				 "an HTTP/1.1 request has a Host header "
				 "field (RFC 9112, 3.2)");
	switch (host ? host_judge(&l->h->hosts, host) : HOST_OURS) {
	case HOST_BAD:
		return api_error("bad_request",
				 "Host '%s' is not HOST[:PORT] (RFC 9110, 7.2)",
				 host);
	case HOST_NOT_OURS:
		*status = 421;
		return api_error("misdirected_request",
				 "this server does not answer for '%s': only "
				 "for its loopback names, its listen "
				 "addresses and daemon.http.hosts",
				 host);
	case HOST_OURS:
		break;
	}
	if (origin && origin_judge(&l->h->hosts, origin) != HOST_OURS) {
		*status = 403;
		return api_error("forbidden_origin",
				 "requests from origin '%s' (another site's "
				 "page, in a browser) are refused",
				 origin);
	}
	return NULL;
}

/* A request without the token holds one of the anonymous clients'
 * connections: refused past their share (http.anon_max), NULL when it
 * is served. */
static json_t *over_share(struct listener *l, struct MHD_Connection *c,
			  struct conn *cn)
{
	struct http *h = l->h;
	const char *auth = sym_MHD_lookup_connection_value(
		c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);

	if (!cn)
		return NULL;
	if (authorized(l->h, auth)) {
		if (cn->anon)
			h->n_anon--;
		cn->anon = false;
		return NULL;
	}
	if (cn->anon)
		return NULL; /* held already */
	if (h->n_anon >= h->anon_max) {
		h->refused++;
		return api_error("too_many_connections",
				 "clients without the token hold %u REST "
				 "connections, their share (daemon.http."
				 "max_connections less reserved_connections)",
				 h->n_anon);
	}
	cn->anon = true;
	h->n_anon++;
	return NULL;
}

/* Its headers are in: refused here, or MHD_YES with *go to serve it. */
static enum MHD_Result request_admit(struct listener *l,
				     struct MHD_Connection *c,
				     const char *version, bool *go)
{
	const union MHD_ConnectionInfo *ci =
		sym_MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *cn = ci ? ci->socket_context : NULL;
	json_t *doc;
	int status;

	*go = false;
	/* The headers are in: the header deadline is over. */
	if (cn)
		conn_headers_done(cn);
	/* A request refused before it was read (http_early.c), which
	 * libmicrohttpd read all the same: not served. */
	if (cn && cn->refused)
		return MHD_NO;
	if ((doc = misdirected(l, c, version, &status)))
		return refuse_now(c, cn, status, doc, false);
	if ((doc = over_share(l, c, cn)))
		return refuse_now(c, cn, 503, doc, true);
	if (body_over_limit(c))
		return too_large_now(c, cn);
	*go = true;
	return MHD_YES;
}

/* The answer that came later: the connection is served again. */
static void on_later(struct api_later *later, int status, json_t *reply)
{
	struct request *req = container_of(later, struct request, later);
	struct listener *l = req->l;

	req->resp = json_answer(status, reply, &req->status);
	req->resp = with_status_headers(req->resp, req->status, "/v1/reload");
	req->waiting = false;
	req->answered = true;
	sym_MHD_resume_connection(req->c);
	/* Served at the next turn of the loop. */
	listener_kick(l);
}

enum MHD_Result http_on_request(void *cls, struct MHD_Connection *c,
				const char *url, const char *method,
				const char *version, const char *upload,
				size_t *upload_size, void **state)
{
	struct listener *l = cls;
	struct request *req = *state;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	unsigned int status;
	bool shared;

	if (!req) {
		bool go;

		ret = request_admit(l, c, version, &go);
		if (!go)
			return ret;
		/* The first call only announces the request. */
		req = calloc(1, sizeof(*req));
		if (!req)
			return MHD_NO;
		req->later.fn = on_later;
		req->l = l;
		req->c = c;
		*state = req;
		return MHD_YES;
	}
	if (req->waiting)
		return MHD_YES;
	if (req->answered) {
		/* Resumed with the answer that came later. */
		req->answered = false;
		if (!req->resp)
			return MHD_NO;
		ret = sym_MHD_queue_response(c, req->status, req->resp);
		sym_MHD_destroy_response(req->resp);
		req->resp = NULL;
		return ret;
	}
	if (*upload_size) {
		size_t n = *upload_size;

		*upload_size = 0;
		if (req->too_big || req->len + n > HTTP_MAX_BODY) {
			req->too_big = true;
			return MHD_YES; /* drain, answer at the end */
		}
		char *b = realloc(req->body, req->len + n + 1);
		if (!b)
			return MHD_NO;
		memcpy(b + req->len, upload, n);
		req->len += n;
		b[req->len] = '\0';
		req->body = b;
		return MHD_YES;
	}
	if (streq(method, "GET") && streq(url, "/v1/events") && !req->len &&
	    manager_bus(l->m))
		return events_start(l, c);
	resp = http_answer(l->h, method, url,
			   sym_MHD_lookup_connection_value(
				   c, MHD_HEADER_KIND,
				   MHD_HTTP_HEADER_AUTHORIZATION),
			   req->body, req->len, req->too_big, &req->later,
			   &status, &shared);
	if (!resp && !status) {
		/* The answer comes later (on_later). */
		req->waiting = true;
		sym_MHD_suspend_connection(c);
		return MHD_YES;
	}
	if (!resp)
		return MHD_NO;
	ret = sym_MHD_queue_response(c, status, resp);
	if (!shared)
		sym_MHD_destroy_response(resp);
	return ret;
}

void http_on_completed(void *cls, struct MHD_Connection *c, void **state,
		       enum MHD_RequestTerminationCode code)
{
	struct request *req = *state;
	const union MHD_ConnectionInfo *ci =
		sym_MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	(void)cls;
	/* Kept alive: the next request's headers have a deadline too. */
	if (code == MHD_REQUEST_TERMINATED_COMPLETED_OK && ci &&
	    ci->socket_context) {
		conn_unfresh(ci->socket_context);
		conn_wait_headers(ci->socket_context);
		conn_request_done(ci->socket_context);
	}
	if (req) {
		if (req->waiting)
			api_forget(req->l->m, &req->later);
		if (req->resp)
			sym_MHD_destroy_response(req->resp);
		free(req->body);
		free(req);
	}
	*state = NULL;
}


static void http_front_stats(void *ud, struct front_stats *out)
{
	struct http *h = ud;

	*out = (struct front_stats){ .open = conns_open(h),
				     .refused = h->refused,
				     .evicted = h->evicted,
				     .timed_out = h->timed_out };
}

/* The anonymous clients' share: what the reserve leaves, the reserve
 * lowered in proportion when the caps were (budget.h). */
static void http_share(struct http *h, const struct conf_daemon *d,
		       const struct front_caps *caps)
{
	unsigned long long reserved = (unsigned long long)d->http_reserved;

	if (caps->http < (unsigned int)d->http_max_connections)
		reserved = reserved * caps->http /
			   (unsigned int)d->http_max_connections;
	if (!reserved)
		reserved = 1;
	h->anon_max = caps->http > reserved ? caps->http - (unsigned int)reserved
					    : 1;
}

/* ---- the bearer token ---- */

/* daemon.http.token_file's first line (at least 16 characters), read
 * at start and after each reload; none: changes over REST are off. */
static int load_token(struct http *h)
{
	const char *path = manager_config(h->m)->daemon.token_file;
	_cleanup_close_ int fd = -1;
	char buf[256];
	struct stat st;
	ssize_t n;

	if (h->token)
		explicit_bzero(h->token, strlen(h->token));
	free(h->token);
	h->token = NULL;
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
	n = (ssize_t)strlen(buf);
	h->token = n >= 16 ? strdup(buf) : NULL;
	explicit_bzero(buf, sizeof(buf));
	if (n < 16)
		return -EINVAL; /* too short to be a secret */
	return h->token ? 0 : -ENOMEM;
}

static void token_reload(struct http *h)
{
	int r = load_token(h);

	if (r < 0)
		log_warn(r, "token file %s: changes over REST are off",
			 manager_config(h->m)->daemon.token_file);
}

/* A reload applied may name another token file, or the file changed. */
static void on_event(void *ud, const struct event *ev)
{
	if (ev->kind == EV_RELOAD && ev->u.reload.r == 0)
		token_reload(ud);
}

int http_start(struct manager *m, const char **failed, struct http **out)
{
	const struct conf_daemon *d = &manager_config(m)->daemon;
	struct http *h = calloc(1, sizeof(*h));
	struct front_caps caps;
	int r;

	*out = NULL;
	if (!h)
		return -ENOMEM;
	h->l = calloc(d->n_listen, sizeof(*h->l));
	if (!h->l) {
		free(h);
		return -ENOMEM;
	}
	h->m = m;
	token_reload(h);
	r = events_subscribe(manager_bus(m), on_event, h);
	if (r < 0) {
		*failed = "the event bus";
		http_stop(h);
		return r;
	}
	manager_set_front(m, FRONT_HTTP,
			  &(struct manager_front){ .stats = http_front_stats,
						   .ud = h });
	front_caps(manager_config(m), &caps);
	h->max_conns = caps.http;
	h->per_address = (unsigned int)d->http_max_per_address;
	http_share(h, d, &caps);
	r = host_names_init(&h->hosts, d->listen, d->n_listen, d->http_hosts,
			    d->n_http_hosts);
	if (r < 0) {
		*failed = "the host names";
		http_stop(h);
		return r;
	}
	h->header_timeout = (uint64_t)d->http_header_timeout * 1000000;
	if (d->n_listen && mhd_open() < 0) {
		*failed = d->listen[0];
		http_stop(h);
		return -ENOPKG;
	}
	if (d->tls_cert) {
		if (d->n_listen &&
		    !sym_MHD_is_feature_supported(MHD_FEATURE_TLS)) {
			*failed = "https (libmicrohttpd is built without TLS)";
			http_stop(h);
			return -EOPNOTSUPP;
		}
		r = read_pem(d->tls_cert, &h->cert);
		if (r < 0) {
			*failed = d->tls_cert;
			http_stop(h);
			return r;
		}
		r = read_pem(d->tls_key, &h->key);
		if (r < 0) {
			*failed = d->tls_key;
			http_stop(h);
			return r;
		}
	}
	r = conns_start(m, h);
	if (r < 0) {
		*failed = "a timer";
		http_stop(h);
		return r;
	}
	for (size_t i = 0; i < d->n_listen; i++) {
		h->l[i].fd = -1;
		r = listener_start(m, h, &h->l[i], d->listen[i]);
		h->n++;
		if (r < 0) {
			*failed = d->listen[i];
			http_stop(h);
			return r;
		}
		log_info("REST API on %s%s", d->listen[i],
			 h->l[i].tls ? " (HTTPS)" : "");
	}
	*out = h;
	return 0;
}

struct http *http_stop(struct http *h)
{
	if (!h)
		return NULL;
	events_unsubscribe(manager_bus(h->m), on_event, h);
	manager_set_front(h->m, FRONT_HTTP, NULL);
	streams_ping(h, 0, true);
	for (size_t i = 0; i < h->n; i++)
		if (h->l[i].mhd)
			sym_MHD_run(h->l[i].mhd);
	for (size_t i = 0; i < h->n; i++)
		listener_stop(&h->l[i]);
	conns_stop(h);
	while (h->cache)
		cached_free(h, h->cache);
	host_names_done(&h->hosts);
	free(h->l);
	free(h->cert);
	if (h->key)
		explicit_bzero(h->key, strlen(h->key));
	free(h->key);
	if (h->token)
		explicit_bzero(h->token, strlen(h->token));
	free(h->token);
	free(h);
	return NULL;
}

