// SPDX-License-Identifier: MIT
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "restc.h"
#include "util.h"

#define RESTC_TIMEOUT_MS 30000

static int connect_unix(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int connect_tcp(const char *hostport)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai, *a;
	_cleanup_free_ char *host = NULL, *service = NULL;
	const char *port = strrchr(hostport, ':');
	int fd = -EHOSTUNREACH;

	if (!port || port == hostport)
		return -EINVAL;
	/* "http://host:port/" names the same daemon. */
	service = strndup(port + 1, strcspn(port + 1, "/"));
	if (!service)
		return -ENOMEM;
	if (hostport[0] == '[')
		host = strndup(hostport + 1, (size_t)(port - hostport - 2));
	else
		host = strndup(hostport, (size_t)(port - hostport));
	if (!host)
		return -ENOMEM;
	if (getaddrinfo(host, service, &hints, &ai))
		return -EHOSTUNREACH;
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			fd = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -errno;
	}
	freeaddrinfo(ai);
	return fd;
}

static int send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_all(int fd, char **out, size_t *out_len)
{
	return read_all(fd, RESTC_MAX_REPLY, RESTC_TIMEOUT_MS, out, out_len);
}

bool restc_url_valid(const char *url)
{
	const char *hp = url + 7, *colon;

	if (!strncmp(url, "unix:", 5))
		return url[5] == '/';
	if (strncmp(url, "http://", 7))
		return false;
	colon = strrchr(hp, ':');
	return colon && colon > hp && colon[1] &&
	       strspn(colon + 1, "0123456789/") == strlen(colon + 1);
}

int restc_request(const char *url, const char *method, const char *path,
		  int *status, char **body)
{
	return restc_request_ex(url, method, path, NULL, NULL, status, body);
}

int restc_request_ex(const char *url, const char *method, const char *path,
		     const char *req_body, const char *token, int *status,
		     char **body)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *req = NULL;
	_cleanup_free_ char *reply = NULL;
	_cleanup_free_ char *auth = NULL;
	size_t len;
	char *sep;
	int r;

	if (!strncmp(url, "unix:", 5))
		fd = connect_unix(url + 5);
	else if (!strncmp(url, "http://", 7))
		fd = connect_tcp(url + 7);
	else
		return -EINVAL;
	if (fd < 0)
		return fd;
	if (token && asprintf(&auth, "Authorization: Bearer %s\r\n", token) < 0)
		return -ENOMEM;
	if (asprintf(&req,
		     "%s %s HTTP/1.0\r\nHost: rdmad\r\n"
		     "Accept: application/json\r\n%s"
		     "Content-Type: application/json\r\n"
		     "Content-Length: %zu\r\n\r\n%s",
		     method, path, auth ? auth : "",
		     req_body ? strlen(req_body) : 0,
		     req_body ? req_body : "") < 0) {
		req = NULL;
		return -ENOMEM;
	}
	r = send_all(fd, req, strlen(req));
	if (r < 0)
		return r;
	r = recv_all(fd, &reply, &len);
	if (r < 0)
		return r;
	if (sscanf(reply, "HTTP/1.%*d %d", status) != 1)
		return -EPROTO;
	sep = strstr(reply, "\r\n\r\n");
	if (!sep)
		return -EPROTO;
	*body = strdup(sep + 4);
	return *body ? 0 : -ENOMEM;
}
