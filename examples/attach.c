// SPDX-License-Identifier: MIT
/*
 * attach: attach to an rdmad profile, show what it gives, detach.
 *
 *   attach [-s SOCKET] [-m auto|shared|local] [PROFILE]
 *
 * Without PROFILE, $RDMAD_PROFILE (set in a container given a profile
 * through CDI, with $RDMAD_SOCKET).
 *
 * Build: cc attach.c $(pkg-config --cflags --libs rdmad libibverbs)
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdmad.h>

static void usage(FILE *f)
{
	fprintf(f, "Usage: attach [-s SOCKET] [-m auto|shared|local] "
		   "[PROFILE]\n"
		   "Attach to an rdmad profile, print its device, PDs and "
		   "MRs, detach.\n"
		   "  -s SOCKET  rdmad's socket (default $RDMAD_SOCKET "
		   "or " RDMAD_DEFAULT_SOCKET ")\n"
		   "  -m MODE    auto (the daemon picks), shared (import the "
		   "daemon's objects)\n"
		   "             or local (register the same memory here)\n"
		   "  PROFILE    default $RDMAD_PROFILE\n");
}

static void print_mr(struct rdmad_profile *p, const char *name)
{
	struct ibv_mr *mr = rdmad_mr(p, name);
	const unsigned char *bytes;
	size_t len = 0, i;

	if (!mr) {
		printf("mr %s: %s\n", name, rdmad_last_error());
		return;
	}
	bytes = rdmad_mr_map(p, name, &len);
	printf("mr %s: lkey 0x%x rkey 0x%x length %zu iova 0x%" PRIx64
	       " daemon rkey 0x%x\n",
	       name, mr->lkey, mr->rkey, mr->length, rdmad_mr_iova(p, name),
	       rdmad_mr_rkey(p, name));
	printf("  first bytes:");
	for (i = 0; bytes && i < len && i < 16; i++)
		printf(" %02x", bytes[i]);
	printf("  \"");
	for (i = 0; bytes && i < len && i < 16; i++)
		putchar(bytes[i] >= 0x20 && bytes[i] < 0x7f ? bytes[i] : '.');
	printf("\"");
	printf("\n");
}

int main(int argc, char **argv)
{
	const char *socket_path = NULL, *mode = "auto";
	struct rdmad_profile *p;
	struct ibv_context *ctx;
	struct rdmad *c;
	unsigned int flags;
	const char *name, *profile;
	size_t i;
	int opt, r;

	while ((opt = getopt(argc, argv, "s:m:h")) != -1) {
		switch (opt) {
		case 's':
			socket_path = optarg;
			break;
		case 'm':
			mode = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind < argc - 1 || (optind == argc && !getenv("RDMAD_PROFILE"))) {
		usage(stderr);
		return 1;
	}
	profile = optind < argc ? argv[optind] : NULL;
	if (!strcmp(mode, "auto")) {
		flags = RDMAD_ATTACH_AUTO;
	} else if (!strcmp(mode, "shared")) {
		flags = RDMAD_ATTACH_SHARED;
	} else if (!strcmp(mode, "local")) {
		flags = RDMAD_ATTACH_LOCAL;
	} else {
		fprintf(stderr,
			"attach: mode '%s' is not auto, shared or "
			"local\n",
			mode);
		return 1;
	}

	c = rdmad_connect(socket_path);
	if (!c) {
		fprintf(stderr, "attach: %s\n", rdmad_last_error());
		return 1;
	}
	p = rdmad_attach(c, profile, flags);
	if (!p) {
		fprintf(stderr, "attach: %s (%s)\n", rdmad_last_error(),
			rdmad_strerror(errno));
		rdmad_close(c);
		return 1;
	}

	ctx = rdmad_context(p);
	printf("profile %s: %s mode, device %s port %d gid_index %d\n",
	       profile ? profile : getenv("RDMAD_PROFILE"),
	       rdmad_mode(p) == RDMAD_MODE_SHARED ? "shared" : "local",
	       ibv_get_device_name(ctx->device), rdmad_port(p),
	       rdmad_gid_index(p));
	for (i = 0; (name = rdmad_pd_name(p, i)); i++)
		printf("pd %s: handle %u\n", name, rdmad_pd(p, name)->handle);
	for (i = 0; (name = rdmad_mr_name(p, i)); i++)
		print_mr(p, name);

	r = rdmad_detach(p);
	if (r < 0)
		fprintf(stderr, "attach: detach: %s\n", rdmad_last_error());
	rdmad_close(c);
	return r < 0 ? 1 : 0;
}
