/* SPDX-License-Identifier: MIT */
/* REST front end: libmicrohttpd without threads, driven by sd-event. */
#ifndef RDMAD_HTTP_H
#define RDMAD_HTTP_H

#include <stdbool.h>
#include <stddef.h>

struct manager;
struct http;
struct MHD_Response;

/* Listen on every address of the configuration ("HOST:PORT",
 * "[V6]:PORT", "unix:/PATH"), with the bearer token of
 * daemon.http.token_file (read again after each reload). Returns 0 and
 * the front end in *out, or -errno (*out NULL); *failed names the
 * address that failed. */
int http_start(struct manager *m, const char **failed, struct http **out);
/*
 * The answer to one complete request, as libmicrohttpd hands it over
 * (url decoded; authorization: the Authorization header or NULL; the
 * body, too_big when it was cut at the limit): the response to queue
 * with *status, which the front end's cache keeps when *shared (do not
 * destroy it). NULL when out of memory, or with *status 0 when the
 * answer comes later, through later (api.h; NULL: such requests get a
 * 503). The fuzz target calls it too.
 */
struct api_later;
struct MHD_Response *http_answer(struct http *h, const char *method,
				 const char *url, const char *authorization,
				 const char *body, size_t len, bool too_big,
				 struct api_later *later, unsigned int *status,
				 bool *shared);
/* Stop listening and free h (NULL: nothing). Returns NULL. */
struct http *http_stop(struct http *h);
static inline void http_stopp(struct http **h)
{
	http_stop(*h);
}

#endif
