// SPDX-License-Identifier: MIT
/*
 * big_client: what librdmad gives of a big profile, for
 * test_attach_big.py.
 *
 *   big_client SOCKET PROFILE shared|local OP...
 *
 * Attaches, then prints one JSON object: "mode", the counts of MRs and
 * PDs librdmad lists ("mr", "pd"), the seconds the attach took
 * ("attach_s"), and what each OP gives:
 *   keys:NAME      "keys":{NAME:[rkey, iova]} (the daemon's registration)
 *   put:NAME:BYTE  fills the MR's bytes in this process with BYTE
 *   get:NAME       "get":{NAME:[first byte, last byte]}
 * then detaches. Exit 1, and librdmad's sentence, if the attach fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void op(struct rdmad_profile *p, char *arg, const char **sep)
{
	char *name = strchr(arg, ':'), *byte;
	unsigned char *b;
	size_t len = 0;

	if (!name)
		return;
	*name++ = '\0';
	byte = strchr(name, ':');
	if (byte)
		*byte++ = '\0';
	if (!strcmp(arg, "keys")) {
		printf("%s\"keys:%s\":[%u,%llu]", *sep, name,
		       rdmad_mr_rkey(p, name),
		       (unsigned long long)rdmad_mr_iova(p, name));
	} else if (!strcmp(arg, "put") && byte) {
		b = rdmad_mr_map(p, name, &len);
		if (b)
			memset(b, atoi(byte), len);
		printf("%s\"put:%s\":%zu", *sep, name, b ? len : 0);
	} else if (!strcmp(arg, "get")) {
		b = rdmad_mr_map(p, name, &len);
		printf("%s\"get:%s\":[%d,%d]", *sep, name, b && len ? b[0] : -1,
		       b && len ? b[len - 1] : -1);
	}
	*sep = ",";
}

int main(int argc, char **argv)
{
	const char *sep = ",";
	struct rdmad_profile *p;
	struct rdmad *c;
	size_t n_mr = 0, n_pd = 0;
	double t0, dt;

	if (argc < 4) {
		fprintf(stderr,
			"usage: big_client SOCKET PROFILE shared|local OP...\n");
		return 64;
	}
	c = rdmad_connect(argv[1]);
	t0 = now();
	p = c ? rdmad_attach(c, argv[2],
			     strcmp(argv[3], "shared") ? RDMAD_ATTACH_LOCAL
						       : RDMAD_ATTACH_SHARED)
	      : NULL;
	dt = now() - t0;
	if (!p) {
		fprintf(stderr, "big_client: %s\n", rdmad_last_error());
		return 1;
	}
	while (rdmad_mr_name(p, n_mr))
		n_mr++;
	while (rdmad_pd_name(p, n_pd))
		n_pd++;
	printf("{\"mode\":\"%s\",\"mr\":%zu,\"pd\":%zu,\"attach_s\":%.6f",
	       rdmad_mode(p) == RDMAD_MODE_SHARED ? "shared" : "local", n_mr,
	       n_pd, dt);
	for (int i = 4; i < argc; i++)
		op(p, argv[i], &sep);
	printf("}\n");
	fflush(stdout);
	if (rdmad_detach(p) < 0)
		return 2;
	rdmad_close(c);
	return 0;
}
