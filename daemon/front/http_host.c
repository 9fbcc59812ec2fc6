// SPDX-License-Identifier: MIT
/*
 * The judgement of a request's Host and Origin (http_host.h says why).
 * The grammar is RFC 9110's (7.2: Host = uri-host [ ":" port ]) over
 * RFC 3986's uri-host (IP-literal / IPv4address / reg-name), and RFC
 * 6454's for Origin. An IPv6 address is compared by its bytes, a name
 * case aside.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_host.h"
#include "util.h"

/* The longest host compared: a DNS name's (253), an IPv6 address's. */
#define HOST_MAX 256

static const char *const loopback[] = { "localhost", "127.0.0.1", "[::1]" };

/* RFC 3986's unreserved and sub-delims, and '%' of a pct-encoded byte:
 * what a reg-name is made of. */
static bool reg_name_char(unsigned char c)
{
	return isalnum(c) || (c && strchr("-._~%!$&'()*+,;=", c));
}

/* An IPv6 address in one spelling: inet_ntop()'s of its bytes. */
static bool ipv6_canonical(const char *s, char *out, size_t size)
{
	struct in6_addr a;

	return inet_pton(AF_INET6, s, &a) == 1 &&
	       inet_ntop(AF_INET6, &a, out, (socklen_t)size);
}

/*
 * host [":" port] of s[0..n): the host, lower case and without
 * brackets (an IPv6 address in its canonical spelling), into out.
 */
static enum host_verdict host_split(const char *s, size_t n, char *out)
{
	const char *end = s + n, *h = s, *he, *p;
	char raw[HOST_MAX];

	if (n && s[0] == '[') {
		he = memchr(s, ']', n);
		if (!he || (size_t)(he - s) > INET6_ADDRSTRLEN)
			return HOST_BAD;
		h = s + 1;
		p = he + 1;
	} else {
		for (p = s; p < end && *p != ':'; p++)
			if (!reg_name_char((unsigned char)*p))
				return HOST_BAD;
		he = p;
	}
	if (p < end && *p++ != ':')
		return HOST_BAD;
	for (; p < end; p++)
		if (!isdigit((unsigned char)*p))
			return HOST_BAD;
	if ((size_t)(he - h) >= sizeof(raw))
		return HOST_NOT_OURS; /* no name of ours is that long */
	for (size_t i = 0; i < (size_t)(he - h); i++)
		raw[i] = (char)tolower((unsigned char)h[i]);
	raw[he - h] = '\0';
	if (s[0] == '[')
		return ipv6_canonical(raw, out, HOST_MAX) ? HOST_OURS
							  : HOST_BAD;
	memcpy(out, raw, (size_t)(he - h) + 1);
	return HOST_OURS;
}

static bool is_address(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	return inet_pton(AF_INET, host, &a4) == 1 ||
	       inet_pton(AF_INET6, host, &a6) == 1;
}

static enum host_verdict host_ours(const struct host_names *hn,
				   const char *s, size_t n)
{
	char host[HOST_MAX];
	enum host_verdict v = host_split(s, n, host);

	if (v != HOST_OURS)
		return v;
	for (size_t i = 0; i < hn->n; i++)
		if (!strcmp(hn->names[i], host))
			return HOST_OURS;
	return hn->any_address && is_address(host) ? HOST_OURS
						   : HOST_NOT_OURS;
}

enum host_verdict host_judge(const struct host_names *hn, const char *host)
{
	size_t n = strlen(host);

	/* Optional whitespace around a field value is not the value's. */
	while (n && (host[n - 1] == ' ' || host[n - 1] == '\t'))
		n--;
	while (n && (*host == ' ' || *host == '\t')) {
		host++;
		n--;
	}
	return host_ours(hn, host, n);
}

/* One serialized origin, s[0..n): "http" or "https", "://", then
 * host[:port] and nothing else. */
static bool origin_ours(const struct host_names *hn, const char *s, size_t n)
{
	size_t k;

	if (n > 7 && !strncasecmp(s, "http://", 7))
		k = 7;
	else if (n > 8 && !strncasecmp(s, "https://", 8))
		k = 8;
	else
		return false;
	return host_ours(hn, s + k, n - k) == HOST_OURS;
}

enum host_verdict origin_judge(const struct host_names *hn,
			       const char *origin)
{
	const char *s = origin;
	bool any = false;

	while (*s) {
		size_t n;

		while (*s == ' ' || *s == '\t')
			s++;
		n = strcspn(s, " \t");
		if (!n)
			break;
		if (!origin_ours(hn, s, n))
			return HOST_NOT_OURS; /* "null" included */
		any = true;
		s += n;
	}
	return any ? HOST_OURS : HOST_NOT_OURS;
}

static int names_add(struct host_names *hn, const char *s, size_t n)
{
	char host[HOST_MAX];
	char **names;

	if (host_split(s, n, host) != HOST_OURS)
		return 0; /* not a name a request can give: none to add */
	if (streq(host, "0.0.0.0") || streq(host, "::")) {
		hn->any_address = true;
		return 0;
	}
	names = realloc(hn->names, (hn->n + 1) * sizeof(*names));
	if (!names)
		return -ENOMEM;
	hn->names = names;
	names[hn->n] = strdup(host);
	if (!names[hn->n])
		return -ENOMEM;
	hn->n++;
	return 0;
}

int host_names_init(struct host_names *hn, char *const *listen, size_t n,
		    char *const *extra, size_t n_extra)
{
	int r = 0;

	*hn = (struct host_names){ 0 };
	for (size_t i = 0; !r && i < sizeof(loopback) / sizeof(*loopback); i++)
		r = names_add(hn, loopback[i], strlen(loopback[i]));
	for (size_t i = 0; !r && i < n; i++) {
		const char *colon = strrchr(listen[i], ':');

		if (strncmp(listen[i], "unix:", 5) && colon)
			r = names_add(hn, listen[i],
				      (size_t)(colon - listen[i]));
	}
	for (size_t i = 0; !r && i < n_extra; i++)
		r = names_add(hn, extra[i], strlen(extra[i]));
	if (r < 0)
		host_names_done(hn);
	return r;
}

void host_names_done(struct host_names *hn)
{
	for (size_t i = 0; i < hn->n; i++)
		free(hn->names[i]);
	free(hn->names);
	*hn = (struct host_names){ 0 };
}
