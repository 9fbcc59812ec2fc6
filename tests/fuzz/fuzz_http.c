// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the REST front end's request handling
 * (http_answer: what on_request does with a request libmicrohttpd has
 * read): the body limits, the bearer token, /metrics, the cache of
 * rendered documents, JSON bodies, then the control layer.
 *
 * Input: one byte of flags (bit 0: the body was cut at the limit, bit 1:
 * no Authorization header), then "METHOD\nURL\nAUTHORIZATION\nBODY".
 * The token is "secret".
 *
 * The whole input, as the first bytes of a connection, also goes
 * through http_screen() (the first request head, judged before
 * libmicrohttpd reads it): a verdict, and for a refusal a status and a
 * message that can go into JSON as they are; every prefix of a head it
 * passes is good so far (never refused).
 *
 * The URL line is also judged as a Host and an Origin (http_host.c): a
 * verdict in range, and "http://" before a Host is an Origin of ours
 * exactly when the Host is one.
 */
#include <string.h>

#include "api.h"
#include "fuzz_util.h"
#include "fuzz_manager.h"
#include "http.h"
#include "http_host.h"
#include "http_internal.h"
#include "manager_internal.h"
#include "http_screen.h"
#include "mhd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct http *setup(void)
{
	static struct http *h;
	struct manager *m;
	const char *failed = NULL;
	size_t n;

	if (h)
		return h;
	m = fuzz_manager();
	check(mhd_open() == 0, "mhd_open");
	/* The front end without listening anywhere: its cache. */
	n = m->config->daemon.n_listen;
	m->config->daemon.n_listen = 0;
	check(http_start(m, &failed, &h) == 0, "http_start");
	m->config->daemon.n_listen = n;
	/* Shorter than a token file may give: the seeds' own. */
	check((h->token = strdup("secret")) != NULL, "the token");
	return h;
}

static void screen(const uint8_t *data, size_t size)
{
	struct screen_result r;
	enum screen_verdict v;

	v = http_screen((const char *)data, size, 65536, &r);
	if (v == SCREEN_REJECT) {
		check(r.status == 400 || r.status == 413 || r.status == 501 ||
			      r.status == 505,
		      "screen: status");
	}
	if (v == SCREEN_MORE) {
		http_screen_too_long((const char *)data, size, &r);
		check(r.status == 414 || r.status == 431, "screen: too long");
		check(r.message[0] && !strpbrk(r.message, "\"\\"),
		      "screen: message");
	}
	if (v == SCREEN_PASS)
		for (size_t n = 0; n < size; n++)
			check(http_screen((const char *)data, n, 65536, &r) !=
				      SCREEN_REJECT,
			      "screen: a prefix of a good head refused");
}

static void judge(const char *s)
{
	static char *listen[] = { "127.0.0.1:8470", "[::1]:8470" };
	static char *extra[] = { "rdmad.example" };
	static struct host_names hn;
	static bool ready;
	enum host_verdict v;
	char origin[1100];

	if (!ready)
		check(host_names_init(&hn, listen, 2, extra, 1) == 0,
		      "host_names_init");
	ready = true;
	v = host_judge(&hn, s);
	check(v == HOST_OURS || v == HOST_BAD || v == HOST_NOT_OURS,
	      "host verdict");
	v = origin_judge(&hn, s);
	check(v == HOST_OURS || v == HOST_NOT_OURS, "origin verdict");
	if (*s && !strpbrk(s, " \t") && strlen(s) < 1024) {
		snprintf(origin, sizeof(origin), "http://%s", s);
		check((origin_judge(&hn, origin) == HOST_OURS) ==
			      (host_judge(&hn, s) == HOST_OURS),
		      "an Origin of a Host of ours");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http *h = setup();
	const uint8_t *p = data + 1, *end = data + size;
	struct MHD_Response *resp;
	char *method, *url, *auth;
	unsigned int status = 0;
	bool shared = false;

	screen(data, size);
	if (size < 1)
		return 0;
	method = take_line(&p, end);
	url = take_line(&p, end);
	judge(url);
	auth = take_line(&p, end);
	resp = http_answer(h, method, url, data[0] & 2 ? NULL : auth,
			   (const char *)p, (size_t)(end - p), data[0] & 1,
			   NULL, &status, &shared);
	check(resp != NULL, "no response");
	check(status >= 100 && status <= 599, "status out of range");
	if (!shared)
		sym_MHD_destroy_response(resp);
	free(method);
	free(url);
	free(auth);
	return 0;
}
