// SPDX-License-Identifier: MIT
/*
 * lazy_client: librdmad's objects imported when first asked for, for
 * test_attach_lazy.py.
 *
 *   lazy_client SOCKET PROFILE CMD...
 *
 * Attaches in shared mode, prints "attached", then runs each CMD, one
 * line of output each:
 *   mr:NAME      rdmad_mr(): "mr NAME ok RKEY" or "mr NAME err ERRNO"
 *   pd:NAME      rdmad_pd(): "pd NAME ok" or "pd NAME err ERRNO"
 *   wait         reads a line from stdin first (the test's go-ahead)
 *   draining:N   waits (10 s at most) for RDMAD_EVENT_OBJECT_DRAINING
 *                naming N: "draining N"
 *   names        "names COUNT FIRST LAST" (rdmad_mr_name())
 * then detaches: "detached 0". ERRNO is the symbolic name (ESTALE, ...).
 * With LAZY_CLIENT_MAP=1 in the environment it attaches with
 * RDMAD_ATTACH_MAP too, and "mr NAME ok RKEY" is followed by " at" when
 * the MR's address is its bytes in this process (rdmad_mr_map()); with
 * LAZY_CLIENT_AT=1, that check without RDMAD_ATTACH_MAP.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

static const char *errname(int e)
{
	switch (e) {
	case ESTALE: return "ESTALE";
	case ENOENT: return "ENOENT";
	case EPROTO: return "EPROTO";
	case EIO: return "EIO";
	case EINVAL: return "EINVAL";
	default: return strerror(e);
	}
}

static void wait_draining(struct rdmad *c, const char *name)
{
	struct pollfd pfd = { .fd = rdmad_fd(c), .events = POLLIN };
	struct rdmad_event ev;

	for (int i = 0; i < 100; i++) {
		while (rdmad_next_event(c, &ev) == 1)
			if (ev.type == RDMAD_EVENT_OBJECT_DRAINING &&
			    strstr(rdmad_event_json(c), name)) {
				printf("draining %s\n", name);
				return;
			}
		poll(&pfd, 1, 100);
	}
	printf("no draining %s\n", name);
}

int main(int argc, char **argv)
{
	struct rdmad_profile *p;
	struct rdmad *c;
	char line[64];

	if (argc < 3) {
		fprintf(stderr, "usage: lazy_client SOCKET PROFILE CMD...\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	c = rdmad_connect(argv[1]);
	p = c ? rdmad_attach(
		    c, argv[2],
		    RDMAD_ATTACH_SHARED |
			(getenv("LAZY_CLIENT_MAP") ? RDMAD_ATTACH_MAP : 0))
	      : NULL;
	if (!p) {
		fprintf(stderr, "lazy_client: %s\n", rdmad_last_error());
		return 1;
	}
	printf("attached\n");
	for (int i = 3; i < argc; i++) {
		char *arg = argv[i], *name = strchr(arg, ':');

		if (name)
			*name++ = '\0';
		if (!strcmp(arg, "wait")) {
			if (!fgets(line, sizeof(line), stdin))
				return 1;
		} else if (!strcmp(arg, "mr") && name) {
			struct ibv_mr *mr = rdmad_mr(p, name);

			size_t len = 0;

			if (mr)
				printf("mr %s ok %u%s\n", name, mr->rkey,
				       (getenv("LAZY_CLIENT_MAP") ||
					getenv("LAZY_CLIENT_AT")) &&
					       mr->addr &&
					       mr->addr == rdmad_mr_map(p, name,
									&len) &&
					       len == mr->length
					   ? " at"
					   : "");
			else
				printf("mr %s err %s\n", name, errname(errno));
		} else if (!strcmp(arg, "pd") && name) {
			struct ibv_pd *pd = rdmad_pd(p, name);

			if (pd)
				printf("pd %s ok\n", name);
			else
				printf("pd %s err %s\n", name, errname(errno));
		} else if (!strcmp(arg, "draining") && name) {
			wait_draining(c, name);
		} else if (!strcmp(arg, "names")) {
			size_t n = 0;

			while (rdmad_mr_name(p, n))
				n++;
			printf("names %zu %s %s\n", n,
			       n ? rdmad_mr_name(p, 0) : "-",
			       n ? rdmad_mr_name(p, n - 1) : "-");
		}
	}
	printf("detached %d\n", rdmad_detach(p));
	rdmad_close(c);
	return 0;
}
