// SPDX-License-Identifier: MIT
/*
 * nums_client: what librdmad says of a profile's QPs and SRQs by
 * number, for test_client_nums.py.
 *
 *   nums_client SOCKET PROFILE KIND:NAME...
 *
 * Attaches in local mode; for each argument (KIND qp, srq or open, the
 * last for rdmad_open_qp()) prints "KIND NAME NUMBER ERRNO MESSAGE"
 * (NUMBER 0 and the errno name when the call failed), then detaches.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

int main(int argc, char **argv)
{
	struct rdmad_profile *p;
	struct rdmad *c;

	if (argc < 3) {
		fprintf(stderr, "usage: nums_client SOCKET PROFILE KIND:NAME...\n");
		return 64;
	}
	c = rdmad_connect(argv[1]);
	p = c ? rdmad_attach(c, argv[2], RDMAD_ATTACH_LOCAL) : NULL;
	if (!p) {
		fprintf(stderr, "nums_client: %s\n", rdmad_last_error());
		return 1;
	}
	for (int i = 3; i < argc; i++) {
		char *name = strchr(argv[i], ':');
		uint32_t num = 0;

		if (!name)
			return 64;
		*name++ = '\0';
		errno = 0;
		if (!strcmp(argv[i], "qp")) {
			num = rdmad_qp_num(p, name);
		} else if (!strcmp(argv[i], "srq")) {
			num = rdmad_srq_num(p, name);
		} else {
			struct ibv_qp *qp = rdmad_open_qp(p, name);

			num = qp ? qp->qp_num : 0;
			if (qp)
				ibv_destroy_qp(qp);
		}
		printf("%s %s %u %s %s\n", argv[i], name, num,
		       num ? "0" : strerrorname_np(errno),
		       num ? "" : rdmad_last_error());
	}
	printf("detached %d\n", rdmad_detach(p));
	rdmad_close(c);
	return 0;
}
