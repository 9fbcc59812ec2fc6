// SPDX-License-Identifier: MIT
/*
 * nums_client: what librdmad says of a profile's QPs and SRQs by
 * number, and of its device memory, for test_client_nums.py and the
 * hardware tests.
 *
 *   [NUMS_MODE=shared] nums_client SOCKET PROFILE KIND:NAME...
 *
 * Attaches in local mode (shared with NUMS_MODE=shared); for each
 * argument prints "KIND NAME NUMBER ERRNO MESSAGE" (NUMBER 0 and the
 * errno name when the call failed), then detaches. KIND:
 *   qp, srq   rdmad_qp_num(), rdmad_srq_num()
 *   open      rdmad_open_qp(): its qp_num
 *   dm        rdmad_dm(): its handle + 1 (a handle may be 0)
 *   dmput     writes PATTERN at offset 0 of the dm: 1
 *   dmget     reads it back there: 1 when it is PATTERN
 *   mr        rdmad_mr(): its lkey
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

#define PATTERN "rdmad device memory, written by one process, read by another"

static uint32_t dm_op(struct rdmad_profile *p, const char *kind,
		      const char *name)
{
	char buf[sizeof(PATTERN)] = "";
	struct ibv_dm *dm = rdmad_dm(p, name);
	int r;

	if (!dm)
		return 0;
	if (!strcmp(kind, "dm"))
		return dm->handle + 1;
	if (!strcmp(kind, "dmput")) {
		r = ibv_memcpy_to_dm(dm, 0, PATTERN, sizeof(PATTERN));
		errno = r;
		return !r;
	}
	r = ibv_memcpy_from_dm(buf, dm, 0, sizeof(buf));
	errno = r ? r : EBADMSG;
	return !r && !memcmp(buf, PATTERN, sizeof(buf));
}

int main(int argc, char **argv)
{
	struct rdmad_profile *p;
	struct rdmad *c;

	if (argc < 3) {
		fprintf(stderr, "usage: nums_client SOCKET PROFILE KIND:NAME...\n");
		return 64;
	}
	c = rdmad_connect(argv[1]);
	p = c ? rdmad_attach(c, argv[2],
			     getenv("NUMS_MODE") &&
					     !strcmp(getenv("NUMS_MODE"), "shared")
				     ? RDMAD_ATTACH_SHARED
				     : RDMAD_ATTACH_LOCAL)
	      : NULL;
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
		} else if (!strncmp(argv[i], "dm", 2)) {
			num = dm_op(p, argv[i], name);
		} else if (!strcmp(argv[i], "mr")) {
			struct ibv_mr *mr = rdmad_mr(p, name);

			num = mr ? mr->lkey : 0;
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
