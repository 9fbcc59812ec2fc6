// SPDX-License-Identifier: MIT
/*
 * pattern_writer: a librdmad program that attaches to a profile, writes
 * bytes into one of its MRs and detaches, for test_python_client.py
 * (a C client writes, a Python client reads).
 *
 *   pattern_writer SOCKET PROFILE MR OFFSET HEX
 *
 * HEX is the bytes to write at OFFSET into MR's memory
 * (rdmad_mr_map()). Prints "wrote N MODE lkey=.. rkey=..", exits 0; on
 * failure prints "error WHAT: MESSAGE" and exits 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

static int fail(const char *what)
{
	printf("error %s: %s\n", what, rdmad_last_error());
	return 1;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int main(int argc, char **argv)
{
	struct rdmad_profile *p;
	unsigned char *bytes;
	struct ibv_mr *mr;
	struct rdmad *c;
	size_t len, off, n, i;
	const char *hex;
	int r;

	if (argc != 6) {
		fprintf(stderr, "Usage: pattern_writer SOCKET PROFILE MR "
				"OFFSET HEX\n");
		return 64;
	}
	off = strtoull(argv[4], NULL, 0);
	hex = argv[5];
	n = strlen(hex) / 2;
	c = rdmad_connect(argv[1]);
	if (!c)
		return fail("connect");
	p = rdmad_attach(c, argv[2], RDMAD_ATTACH_AUTO);
	if (!p)
		return fail("attach");
	mr = rdmad_mr(p, argv[3]);
	bytes = rdmad_mr_map(p, argv[3], &len);
	if (!mr || !bytes)
		return fail("mr");
	if (off > len || n > len - off) {
		printf("error range: %zu bytes at %zu do not fit %zu\n", n,
		       off, len);
		return 1;
	}
	for (i = 0; i < n; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			printf("error hex: not a hex string\n");
			return 1;
		}
		bytes[off + i] = (unsigned char)(hi << 4 | lo);
	}
	printf("wrote %zu %s lkey=%u rkey=%u\n", n,
	       rdmad_mode(p) == RDMAD_MODE_SHARED ? "shared" : "local",
	       mr->lkey, mr->rkey);
	r = rdmad_detach(p);
	if (r < 0)
		return fail("detach");
	rdmad_close(c);
	return 0;
}
