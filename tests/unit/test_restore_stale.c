// SPDX-License-Identifier: MIT
/* A restart never destroys, nor keeps for a holder, an MR by a handle
 * that names another MR by now (restore.c, issue 44 item 2). The verbs
 * stand in for a device whose file gave a freed handle to another
 * process's MR (uverbs hands out the lowest free one); the real case
 * on rxe is tests/integration/test_shared_restart.py. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "durable.h"
#include "profile.h"
#include "profile_fields.h" /* builds profiles by hand */
#include "restore.h"

/* ---- the device ---- */

static struct ibv_device fake_dev;
static struct ibv_context fake_ctx = { .device = &fake_dev, .cmd_fd = -1 };

/* What each MR handle of the file names now: its keys and length. */
struct fake_mr {
	uint32_t handle, lkey, rkey;
	size_t length;
	bool deregistered;
};

static struct fake_mr file_mrs[4];
static size_t n_file_mrs, unimported, pds_freed;

struct ibv_context *__wrap_ibv_import_device(int fd);
struct ibv_context *__wrap_ibv_import_device(int fd)
{
	close(fd);
	return &fake_ctx;
}

const char *__wrap_ibv_get_device_name(struct ibv_device *d);
const char *__wrap_ibv_get_device_name(struct ibv_device *d)
{
	(void)d;
	return "mlx5_0";
}

int __wrap_ibv_close_device(struct ibv_context *c);
int __wrap_ibv_close_device(struct ibv_context *c)
{
	(void)c;
	return 0;
}

struct ibv_pd *__wrap_ibv_import_pd(struct ibv_context *c, uint32_t h);
struct ibv_pd *__wrap_ibv_import_pd(struct ibv_context *c, uint32_t h)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	pd->context = c;
	pd->handle = h;
	return pd;
}

void __wrap_ibv_unimport_pd(struct ibv_pd *pd);
void __wrap_ibv_unimport_pd(struct ibv_pd *pd)
{
	free(pd);
}

int __wrap_ibv_dealloc_pd(struct ibv_pd *pd);
int __wrap_ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	pds_freed++;
	return 0;
}

struct ibv_mr *__wrap_ibv_import_mr(struct ibv_pd *pd, uint32_t h);
struct ibv_mr *__wrap_ibv_import_mr(struct ibv_pd *pd, uint32_t h)
{
	for (size_t i = 0; i < n_file_mrs; i++) {
		struct fake_mr *f = &file_mrs[i];
		struct ibv_mr *mr;

		if (f->handle != h || f->deregistered)
			continue;
		mr = calloc(1, sizeof(*mr));
		mr->context = pd->context;
		mr->pd = pd;
		mr->handle = h;
		mr->lkey = f->lkey;
		mr->rkey = f->rkey;
		mr->length = f->length;
		return mr;
	}
	errno = ENOENT;
	return NULL;
}

void __wrap_ibv_unimport_mr(struct ibv_mr *mr);
void __wrap_ibv_unimport_mr(struct ibv_mr *mr)
{
	unimported++;
	free(mr);
}

int __wrap_ibv_dereg_mr(struct ibv_mr *mr);
int __wrap_ibv_dereg_mr(struct ibv_mr *mr)
{
	for (size_t i = 0; i < n_file_mrs; i++)
		if (file_mrs[i].handle == mr->handle)
			file_mrs[i].deregistered = true;
	free(mr);
	return 0;
}

/* ---- the previous run's documents ---- */

static int memfd_with(const char *text, bool durable)
{
	int fd = memfd_create("doc", MFD_CLOEXEC);

	assert_true(fd >= 0);
	if (durable)
		assert_true(durable_write(fd, text, strlen(text)) > 0);
	else
		assert_int_equal(write(fd, text, strlen(text)),
				 (ssize_t)strlen(text));
	return fd;
}

/* PD a; MR r (handle 5) as declared; MR d drained (handle 7). */
static const char state[] =
	"{\"version\":1,\"ibdev\":\"mlx5_0\",\"objects\":["
	"{\"kind\":\"pd\",\"name\":\"a\",\"handle\":3},"
	"{\"kind\":\"mr\",\"name\":\"r\",\"handle\":5,\"lkey\":256,"
	"\"rkey\":257,\"pd\":\"a\",\"memory\":\"m\",\"offset\":0,"
	"\"length\":4096,\"iova\":0,\"access\":1,\"zero_based\":true},"
	"{\"kind\":\"mr\",\"name\":\"d\",\"handle\":7,\"lkey\":512,"
	"\"rkey\":513,\"length\":8192,\"draining\":true}]}";

static struct profile *profile_p(void)
{
	static struct conf_profile conf = { .name = "p" };
	static struct profile p;

	memset(&p, 0, sizeof(p));
	p.conf = &conf;
	snprintf(p.ibdev, sizeof(p.ibdev), "mlx5_0");
	return &p;
}

static void setup_file(void)
{
	/* Handle 5 went (its MR destroyed since) and another process's
	 * MR took it; handle 7 is still the drained MR. */
	file_mrs[0] = (struct fake_mr){ 5, 0x900, 0x901, 4096, false };
	file_mrs[1] = (struct fake_mr){ 7, 512, 513, 8192, false };
	n_file_mrs = 2;
	unimported = pds_freed = 0;
}

static const char *kept_names[4];
static size_t n_kept_names;

static void on_keep(void *ud, const char *kind, const char *name, void *obj)
{
	(void)ud;
	kept_names[n_kept_names++] = strdup(name);
	if (!strcmp(kind, "mr"))
		__wrap_ibv_unimport_mr(obj);
	else
		__wrap_ibv_unimport_pd(obj);
	(void)kind;
}

static void test_a_stale_handle_is_not_destroyed(void **unused)
{
	struct ibv_context *ctx = NULL;
	unsigned long long before = restore_stale_total();
	struct restored *r;

	(void)unused;
	setup_file();
	assert_int_equal(restore_keep("ctx/p", open("/dev/null", O_RDWR)), 0);
	assert_int_equal(restore_keep("state/p", memfd_with(state, true)), 0);
	r = restore_take(profile_p(), &ctx);
	assert_non_null(r);
	assert_ptr_equal(ctx, &fake_ctx);
	/* Nobody holds anything: what was not taken back goes, but for
	 * what its handle no longer names. */
	assert_int_equal(restore_finish(r, ctx, NULL, NULL), 2); /* d, a */
	assert_false(file_mrs[0].deregistered);
	assert_true(file_mrs[1].deregistered);
	assert_int_equal(unimported, 1);
	assert_int_equal(pds_freed, 1);
	assert_int_equal(restore_stale_total(), before + 1);
	restore_done(NULL);
}

/* A live holder (this process) leases both: d is kept for it, r is
 * neither kept nor destroyed; the lease record (durable) stands over
 * the state document's own holders (a clean stop's). */
static void test_a_stale_handle_is_not_kept_for_a_holder(void **unused)
{
	char lease[512];
	struct ibv_context *ctx = NULL;
	unsigned long long before = restore_stale_total();
	struct restored *r;
	json_t *holders;

	(void)unused;
	setup_file();
	n_kept_names = 0;
	snprintf(lease, sizeof(lease),
		 "{\"version\":1,\"holders\":[{\"pid\":%d,\"start\":0,"
		 "\"uid\":0,\"gid\":0,\"leases\":["
		 "{\"kind\":\"mr\",\"name\":\"r\",\"handle\":5},"
		 "{\"kind\":\"mr\",\"name\":\"d\",\"handle\":7}]}]}",
		 (int)getpid());
	assert_int_equal(restore_keep("ctx/p", open("/dev/null", O_RDWR)), 0);
	assert_int_equal(restore_keep("state/p", memfd_with(state, false)), 0);
	assert_int_equal(restore_keep("lease/p", memfd_with(lease, true)), 0);
	r = restore_take(profile_p(), &ctx);
	assert_non_null(r);
	holders = restore_holders(r);
	assert_int_equal(json_array_size(holders), 1);
	json_decref(holders);
	/* PD a is kept under the kept MR d (whose PD is not written down:
	 * every PD is); nothing is destroyed. */
	assert_int_equal(restore_finish(r, ctx, on_keep, NULL), 0);
	assert_int_equal(n_kept_names, 2);
	assert_string_equal(kept_names[0], "d");
	assert_string_equal(kept_names[1], "a");
	assert_false(file_mrs[0].deregistered);
	assert_false(file_mrs[1].deregistered);
	assert_int_equal(restore_stale_total(), before + 1);
	restore_done(NULL);
	for (size_t i = 0; i < n_kept_names; i++)
		free((void *)kept_names[i]);
}

/* Version 2 of the lease record: the holder names a lease set, kept in
 * a record of its own (leaseset/ID/P), beside leases of its own. The
 * set's leases count as the holder's: the same outcome as above. */
static void test_a_holder_holds_what_its_lease_sets_name(void **unused)
{
	char lease[512];
	static const char set[] =
		"{\"version\":2,\"id\":\"00000000000000ab\",\"leases\":["
		"{\"kind\":\"mr\",\"name\":\"d\",\"handle\":7}]}";
	static const char other[] =
		"{\"version\":2,\"id\":\"00000000000000cd\",\"leases\":["
		"{\"kind\":\"mr\",\"name\":\"x\",\"handle\":9}]}";
	struct ibv_context *ctx = NULL;
	struct restored *r;
	json_t *holders, *leases;

	(void)unused;
	setup_file();
	n_kept_names = 0;
	snprintf(lease, sizeof(lease),
		 "{\"version\":2,\"holders\":[{\"pid\":%d,\"start\":0,"
		 "\"uid\":0,\"gid\":0,\"sets\":[\"00000000000000ab\"],"
		 "\"leases\":[{\"kind\":\"mr\",\"name\":\"r\","
		 "\"handle\":5}]}],\"makers\":[]}",
		 (int)getpid());
	assert_int_equal(restore_keep("ctx/p", open("/dev/null", O_RDWR)), 0);
	assert_int_equal(restore_keep("state/p", memfd_with(state, false)), 0);
	assert_int_equal(restore_keep("leaseset/00000000000000cd/p",
				      memfd_with(other, true)),
			 0);
	assert_int_equal(restore_keep("lease/p", memfd_with(lease, true)), 0);
	assert_int_equal(restore_keep("leaseset/00000000000000ab/p",
				      memfd_with(set, true)),
			 0);
	r = restore_take(profile_p(), &ctx);
	assert_non_null(r);
	holders = restore_holders(r);
	assert_int_equal(json_array_size(holders), 1);
	leases = json_object_get(json_array_get(holders, 0), "leases");
	/* Its own first, then its set's; the set not named is not. */
	assert_int_equal(json_array_size(leases), 2);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(leases, 1), "name")),
			    "d");
	json_decref(holders);
	assert_int_equal(restore_finish(r, ctx, on_keep, NULL), 0);
	assert_int_equal(n_kept_names, 2);
	assert_string_equal(kept_names[0], "d");
	assert_false(file_mrs[1].deregistered);
	restore_done(NULL);
	for (size_t i = 0; i < n_kept_names; i++)
		free((void *)kept_names[i]);
}

/* A holder that names a set the store does not hold (or one whose record
 * says another id) makes the lease record unread: what it says is not
 * whole. Nobody is taken to hold anything then (the state document names
 * no holders), as with no lease record at all. */
static void test_a_lease_record_naming_a_missing_set_is_not_read(void **unused)
{
	char lease[512];
	static const char wrong[] =
		"{\"version\":2,\"id\":\"0000000000000000\",\"leases\":["
		"{\"kind\":\"mr\",\"name\":\"d\",\"handle\":7}]}";
	struct ibv_context *ctx = NULL;
	struct restored *r;
	json_t *holders;

	(void)unused;
	setup_file();
	snprintf(lease, sizeof(lease),
		 "{\"version\":2,\"holders\":[{\"pid\":%d,\"start\":0,"
		 "\"uid\":0,\"gid\":0,\"sets\":[\"00000000000000ef\"],"
		 "\"leases\":[]}],\"makers\":[]}",
		 (int)getpid());
	assert_int_equal(restore_keep("ctx/p", open("/dev/null", O_RDWR)), 0);
	assert_int_equal(restore_keep("state/p", memfd_with(state, false)), 0);
	assert_int_equal(restore_keep("lease/p", memfd_with(lease, true)), 0);
	assert_int_equal(restore_keep("leaseset/00000000000000ef/p",
				      memfd_with(wrong, true)),
			 0);
	/* Not a set's name: refused. */
	assert_int_equal(restore_keep("leaseset/p", open("/dev/null", O_RDWR)),
			 -EINVAL);
	r = restore_take(profile_p(), &ctx);
	assert_non_null(r);
	holders = restore_holders(r);
	assert_int_equal(json_array_size(holders), 0);
	json_decref(holders);
	assert_int_equal(restore_finish(r, ctx, NULL, NULL), 2); /* d, a */
	assert_true(file_mrs[1].deregistered);
	restore_done(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_stale_handle_is_not_destroyed),
		cmocka_unit_test(test_a_stale_handle_is_not_kept_for_a_holder),
		cmocka_unit_test(test_a_holder_holds_what_its_lease_sets_name),
		cmocka_unit_test(
			test_a_lease_record_naming_a_missing_set_is_not_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
