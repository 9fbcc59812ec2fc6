/* SPDX-License-Identifier: MIT */
/* A minimal HTTP/1.0 client for rdmactl: one request, one reply. */
#ifndef RDMAD_RESTC_H
#define RDMAD_RESTC_H

#include <stdbool.h>
#include <stddef.h>

#define RESTC_DEFAULT_URL "http://127.0.0.1:8470"
#define RESTC_MAX_REPLY (16 << 20)

/* url: "http://HOST:PORT", "http://[V6]:PORT" or "unix:/PATH".
 * Returns 0 with the HTTP status and a NUL-terminated body (to free), or
 * -errno (-EPROTO for a reply that is not HTTP). */
/* Is url one of the forms restc_request() takes? */
bool restc_url_valid(const char *url);

int restc_request(const char *url, const char *method, const char *path,
		  int *status, char **body);

/* The same with a JSON request body (may be NULL) and a bearer token (may
 * be NULL). */
int restc_request_ex(const char *url, const char *method, const char *path,
		     const char *req_body, const char *token, int *status,
		     char **body);

#endif
