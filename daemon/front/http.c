// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdbool.h>
#include <strings.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <uthash.h>

#include "api.h"
#include "http.h"
#include "log.h"
#include "manager.h"
#include "metrics.h"

#define HTTP_MAX_CONNECTIONS 64
#define HTTP_CONNECTION_TIMEOUT 30 /* seconds */
#define HTTP_MAX_BODY (64 * 1024)

struct listener {
	struct manager *m;
	struct MHD_Daemon *mhd;
	sd_event_source *io;
	sd_event_source *timer;
	char *unix_path; /* to unlink at stop */
};

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

struct http {
	struct listener *l;
	size_t n;
	struct cached *cache;
};

static void cached_free(struct http *h, struct cached *c)
{
	HASH_DEL(h->cache, c);
	MHD_destroy_response(c->resp);
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
	resp = MHD_create_response_from_buffer(strlen(text), text,
					       MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return NULL;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"application/json");
	return resp;
}

/* The document of path at generation, rendered once: a response the
 * cache keeps (*shared). */
static struct MHD_Response *cached_answer(struct manager *m,
					  const struct api_request *ar,
					  uint64_t generation,
					  unsigned int *status, bool *shared)
{
	struct http *h = m->http;
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

/* One request in flight: its body, bounded by HTTP_MAX_BODY. */
struct request {
	char *body;
	size_t len;
	bool too_big;
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

static bool authorized(struct manager *m, const char *h)
{
	if (!m->token || !h || strncasecmp(h, "Bearer ", 7))
		return false;
	return token_equal(h + 7, m->token);
}

/* Prometheus scrapes text, not JSON. */
static struct MHD_Response *metrics_response(struct manager *m)
{
	char *text = metrics_render(m);
	struct MHD_Response *resp;

	if (!text)
		return NULL;
	resp = MHD_create_response_from_buffer(strlen(text), text,
					       MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return NULL;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4");
	return resp;
}

static struct MHD_Response *json_answer(int st, json_t *doc,
					unsigned int *status)
{
	*status = (unsigned int)st;
	return json_response(doc);
}

struct MHD_Response *http_answer(struct manager *m, const char *method,
				 const char *url, const char *authorization,
				 const char *body, size_t len, bool too_big,
				 unsigned int *status, bool *shared)
{
	struct api_request ar = {
		.method = method,
		.path = url,
		.authorized = authorized(m, authorization),
		.token_set = m->token != NULL,
	};
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
	if (streq(url, "/metrics") && streq(method, "GET")) {
		*status = 200;
		resp = metrics_response(m);
		if (resp)
			return resp;
		return json_answer(500, api_error("internal", "out of memory"),
				   status);
	}
	if (!len && m->http && api_cacheable(m, method, url, &generation))
		return cached_answer(m, &ar, generation, status, shared);
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
	log_debug("%s %s -> %d", method, url, st);
	return json_answer(st, reply, status);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
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

	(void)version;
	if (!req) {
		/* The first call only announces the request. */
		req = calloc(1, sizeof(*req));
		if (!req)
			return MHD_NO;
		*state = req;
		return MHD_YES;
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
	resp = http_answer(l->m, method, url,
			   MHD_lookup_connection_value(
				   c, MHD_HEADER_KIND,
				   MHD_HTTP_HEADER_AUTHORIZATION),
			   req->body, req->len, req->too_big, &status,
			   &shared);
	if (!resp)
		return MHD_NO;
	ret = MHD_queue_response(c, status, resp);
	if (!shared)
		MHD_destroy_response(resp);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
			 enum MHD_RequestTerminationCode code)
{
	struct request *req = *state;

	(void)cls;
	(void)c;
	(void)code;
	if (req) {
		free(req->body);
		free(req);
	}
	*state = NULL;
}

static void listener_rearm(struct listener *l)
{
	MHD_UNSIGNED_LONG_LONG ms;
	uint64_t now;

	if (MHD_get_timeout(l->mhd, &ms) == MHD_YES) {
		sd_event_now(l->m->event, CLOCK_MONOTONIC, &now);
		sd_event_source_set_time(l->timer, now + ms * 1000);
		sd_event_source_set_enabled(l->timer, SD_EVENT_ONESHOT);
	} else {
		sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
	}
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	struct listener *l = ud;

	(void)s;
	(void)fd;
	(void)revents;
	MHD_run(l->mhd);
	listener_rearm(l);
	return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *ud)
{
	(void)s;
	(void)usec;
	return on_io(NULL, -1, 0, ud);
}

/* Does a process still listen on this unix socket? */
static bool socket_in_use(const struct sockaddr_un *sun)
{
	_cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (probe < 0)
		return false;
	return connect(probe, (const struct sockaddr *)sun, sizeof(*sun)) == 0 ||
	       errno == EAGAIN;
}

/* A listening socket for "unix:/path", "[v6]:port" or "host:port". */
static int listen_socket(const char *addr, char **unix_path)
{
	_cleanup_close_ int fd = -1;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	_cleanup_free_ char *host = NULL;
	const char *port;
	int one = 1, r;

	if (!strncmp(addr, "unix:", 5)) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		const char *path = addr + 5;
		struct stat st;

		if (strlen(path) >= sizeof(sun.sun_path))
			return -ENAMETOOLONG;
		strcpy(sun.sun_path, path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		if (fd < 0)
			return -errno;
		/* Replace a stale socket, never another kind of file nor a
		 * socket someone still listens on. */
		if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
			if (socket_in_use(&sun))
				return -EADDRINUSE;
			unlink(path);
		}
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
		    listen(fd, 64) < 0)
			return -errno;
		*unix_path = strdup(path);
		if (!*unix_path)
			return -ENOMEM;
		return TAKE_FD(fd);
	}

	port = strrchr(addr, ':');
	if (addr[0] == '[')
		host = strndup(addr + 1, (size_t)(port - addr - 2));
	else
		host = strndup(addr, (size_t)(port - addr));
	if (!host)
		return -ENOMEM;
	r = getaddrinfo(host, port + 1, &hints, &ai);
	if (r)
		return -EADDRNOTAVAIL;
	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		freeaddrinfo(ai);
		return r;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
		r = -errno;
		freeaddrinfo(ai);
		return r;
	}
	freeaddrinfo(ai);
	return TAKE_FD(fd);
}

static int listener_start(struct manager *m, struct listener *l,
			  const char *addr)
{
	const union MHD_DaemonInfo *info;
	int fd, r;

	l->m = m;
	fd = listen_socket(addr, &l->unix_path);
	if (fd < 0)
		return fd;
	l->mhd = MHD_start_daemon(
		MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request,
		l, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned int)HTTP_MAX_CONNECTIONS,
		MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned int)HTTP_CONNECTION_TIMEOUT,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
		MHD_OPTION_END);
	if (!l->mhd) {
		close(fd);
		return -EIO;
	}
	info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info)
		return -EIO;
	r = sd_event_add_io(m->event, &l->io, info->epoll_fd, EPOLLIN, on_io,
			    l);
	if (r < 0)
		return r;
	r = sd_event_add_time(m->event, &l->timer, CLOCK_MONOTONIC, 0, 0,
			      on_timer, l);
	if (r < 0)
		return r;
	listener_rearm(l);
	return 0;
}

static void listener_stop(struct listener *l)
{
	l->io = sd_event_source_disable_unref(l->io);
	l->timer = sd_event_source_disable_unref(l->timer);
	if (l->mhd)
		MHD_stop_daemon(l->mhd); /* closes the listen socket */
	l->mhd = NULL;
	if (l->unix_path)
		unlink(l->unix_path);
	free(l->unix_path);
	l->unix_path = NULL;
}

int http_start(struct manager *m, const char **failed)
{
	const struct conf_daemon *d = &m->config->daemon;
	struct http *h = calloc(1, sizeof(*h));
	int r;

	if (!h)
		return -ENOMEM;
	h->l = calloc(d->n_listen, sizeof(*h->l));
	if (!h->l) {
		free(h);
		return -ENOMEM;
	}
	m->http = h;
	for (size_t i = 0; i < d->n_listen; i++) {
		r = listener_start(m, &h->l[i], d->listen[i]);
		h->n++;
		if (r < 0) {
			*failed = d->listen[i];
			http_stop(m);
			return r;
		}
		log_info("REST API on %s", d->listen[i]);
	}
	return 0;
}

void http_stop(struct manager *m)
{
	struct http *h = m->http;

	if (!h)
		return;
	for (size_t i = 0; i < h->n; i++)
		listener_stop(&h->l[i]);
	while (h->cache)
		cached_free(h, h->cache);
	free(h->l);
	free(h);
	m->http = NULL;
}
