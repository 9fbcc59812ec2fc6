/* SPDX-License-Identifier: MIT */
/*
 * Whom a REST request is for (issue 45, item 6): its Host must be one
 * of ours, and its Origin, when it has one, too. A web page the operator
 * opens can make the browser send requests to 127.0.0.1:8470, under a
 * name of the page's own that resolves there (DNS rebinding): its Host
 * then says that name, and a cross-site request says the page's Origin.
 *
 * Ours: the loopback names (localhost, 127.0.0.1, [::1]), the hosts of
 * the listen addresses (any IP address when one is a wildcard: 0.0.0.0
 * or [::]: an address is never rebound), and daemon.http.hosts; with or
 * without a port, case aside. It calls nothing of the front end's.
 */
#ifndef RDMAD_HTTP_HOST_H
#define RDMAD_HTTP_HOST_H

#include <stdbool.h>
#include <stddef.h>

struct host_names {
	char **names; /* lower case; IPv6 addresses without brackets */
	size_t n;
	bool any_address; /* a wildcard listen address */
};

enum host_verdict {
	HOST_OURS,
	HOST_BAD,      /* not host[:port] (RFC 9110, 7.2): 400 */
	HOST_NOT_OURS, /* 421 (RFC 9110, 15.5.20); an Origin: 403 */
};

/* The loopback names, the hosts of listen[0..n) ("HOST:PORT",
 * "[V6]:PORT"; unix: ones have none) and extra[0..n_extra). Returns 0
 * or -ENOMEM. */
int host_names_init(struct host_names *hn, char *const *listen, size_t n,
		    char *const *extra, size_t n_extra);
void host_names_done(struct host_names *hn);

/* A Host field's value. */
enum host_verdict host_judge(const struct host_names *hn, const char *host);
/* An Origin field's value (RFC 6454, 7: "null" or scheme://host[:port],
 * several separated by spaces): HOST_OURS when every one is ours, else
 * HOST_NOT_OURS (a malformed one included). */
enum host_verdict origin_judge(const struct host_names *hn,
			       const char *origin);

#endif
