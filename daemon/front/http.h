/* SPDX-License-Identifier: MIT */
/* REST front end: libmicrohttpd without threads, driven by sd-event. */
#ifndef RDMAD_HTTP_H
#define RDMAD_HTTP_H

struct manager;
struct http;

/* Listen on every address of the configuration ("HOST:PORT",
 * "[V6]:PORT", "unix:/PATH"). Returns 0 or -errno; *failed names the
 * address that failed. */
int http_start(struct manager *m, const char **failed);
void http_stop(struct manager *m);

#endif
