// SPDX-License-Identifier: MIT
/* Profiles and backing memory without a device: the paths a host with no
 * RDMA device (or a profile whose device is gone) takes. The device paths
 * themselves are tested for real in tests/integration on rxe. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "attach_view.h"
#include "config.h"
#include "memory.h"
#include "objects.h"
#include "profile.h"
#include "profile_fields.h" /* builds profiles by hand */

static const char text[] =
	"devices = ( { name = \"d\"; match = { ibdev = \"no-such-dev0\"; }; } );\n"
	"profiles = ( { name = \"p\"; device = \"d\";\n"
	"  memory = ( { name = \"m\"; size = \"1M\"; } );\n"
	"  pd = ( { name = \"a\"; } );\n"
	"  mr = ( { name = \"r\"; pd = \"a\"; memory = \"m\"; } ); } );\n";

static void test_absent_device_is_pending(void **state)
{
	struct config *cfg = NULL;
	struct profile *p = NULL;
	json_t *j;

	(void)state;
	assert_int_equal(config_load_string("t.conf", text, &cfg), 0);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(profile_new(cfg, &cfg->profiles[0], NULL, NULL, &p),
			 0);
	assert_int_equal(p->n_objects, 3);
	/* Indexed by kind and name. */
	assert_ptr_equal(profile_find(p, OBJ_MR, "r"), &p->objects[2]);
	assert_null(profile_find(p, OBJ_PD, "r"));
	assert_null(profile_find(p, OBJ_PD, NULL));
	/* On a host without any RDMA device, ibv_get_device_list() returns
	 * NULL: this must not crash either. */
	assert_int_equal(profile_start(p), -ENODEV);
	assert_int_equal(p->state, PROFILE_PENDING);
	assert_non_null(strstr(p->reason, "no-such-dev0"));
	for (size_t i = 0; i < p->n_objects; i++)
		assert_int_equal(p->objects[i].state, OBJ_PENDING);

	j = profile_json(p, 1);
	assert_string_equal(json_string_value(json_object_get(j, "state")),
			    "pending");
	assert_int_equal(json_array_size(json_object_get(j, "objects")), 3);
	json_decref(j);
	profile_free(p);
	config_free(cfg);
}

static int count_fds(void)
{
	char path[64];
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n += access(path, F_OK) == 0;
	}
	return n;
}

static void test_memory_backings(void **state)
{
	struct memory_spec c = { .name = "m", .size = 1 << 20 };
	struct memory mem;
	int before = count_fds();

	(void)state;
	c.backing = MEMORY_MEMFD;
	assert_int_equal(memory_create(&c, &mem), 0);
	assert_true(mem.fd >= 0);
	assert_int_equal(fcntl(mem.fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	((char *)mem.addr)[c.size - 1] = 7;
	memory_destroy(&mem);
	assert_int_equal(mem.fd, -1);

	c.backing = MEMORY_ANONYMOUS;
	assert_int_equal(memory_create(&c, &mem), 0);
	assert_int_equal(mem.fd, -1);
	((char *)mem.addr)[0] = 1;
	memory_destroy(&mem);
	assert_int_equal(count_fds(), before);
}

static void test_memory_file(void **state)
{
	char dir[] = "/tmp/rdmad-mem-XXXXXX", path[128], link[128];
	struct memory_spec c = { .name = "f", .size = 8192,
				 .backing = MEMORY_FILE };
	struct memory mem;
	struct stat st;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/data", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	c.path = path;

	/* Created and grown to size. */
	assert_int_equal(memory_create(&c, &mem), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 8192);
	memory_destroy(&mem);

	/* A larger file is mapped, not cut. */
	fd = open(path, O_WRONLY);
	assert_int_equal(ftruncate(fd, 65536), 0);
	close(fd);
	assert_int_equal(memory_create(&c, &mem), 0);
	memory_destroy(&mem);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 65536);

	/* A symbolic link where the operator named a file is refused. */
	assert_int_equal(symlink(path, link), 0);
	c.path = link;
	assert_int_equal(memory_create(&c, &mem), -ELOOP);

	unlink(link);
	unlink(path);
	rmdir(dir);
}

/*
 * The attaches of a mode hold their generation's lease list in one
 * count (attach_view.h). What the spec promises of it: REST's "leases"
 * of an object is the number of attachments holding it, whichever way
 * they hold it, and an object held by nobody is not leased; once the
 * generation moves, the holders are each object's own, released one by
 * one.
 */
static void test_lease_list_counted_once(void **state)
{
	struct config *cfg = NULL;
	struct profile *p = NULL;
	struct object *mem, *pd, *mr;
	struct attach_lease l[2];
	uint64_t gen;
	json_t *j;

	(void)state;
	assert_int_equal(config_load_string("t.conf", text, &cfg), 0);
	assert_int_equal(profile_new(cfg, &cfg->profiles[0], NULL, NULL, &p),
			 0);
	mem = profile_find(p, OBJ_MEMORY, "m");
	pd = profile_find(p, OBJ_PD, "a");
	mr = profile_find(p, OBJ_MR, "r");
	l[0] = (struct attach_lease){OBJ_PD, "a", pd->serial, pd};
	l[1] = (struct attach_lease){OBJ_MR, "r", mr->serial, mr};
	profile_touch(p);
	gen = profile_attach_generation(p);
	assert_false(profile_leased(p));

	/* Two shared attaches of both, one local of the PD, one adopted
	 * lease of the MR (its own count). */
	profile_hold(p, 0, l, 2);
	profile_hold(p, 0, l, 2);
	profile_hold(p, 1, l, 1);
	mr->leases++;
	assert_true(profile_leased(p));
	assert_int_equal(profile_object_leases(p, pd), 3);
	assert_int_equal(profile_object_leases(p, mr), 3);
	assert_int_equal(profile_object_leases(p, mem), 0);
	/* REST says the same. */
	j = profile_json(p, 1);
	assert_int_equal(
	    json_integer_value(json_object_get(
		json_array_get(json_object_get(j, "objects"), 1), "leases")),
	    3);
	json_decref(j);

	/* One lets go in its generation: one count. Another generation's
	 * or a mode nobody holds is refused (released by name instead). */
	assert_true(profile_unhold(p, 0, gen));
	assert_false(profile_unhold(p, 0, gen + 1));
	assert_true(profile_unhold(p, 1, gen));
	assert_false(profile_unhold(p, 1, gen));
	assert_int_equal(profile_object_leases(p, pd), 1);
	assert_int_equal(profile_object_leases(p, mr), 2);

	/* The generation moves: each object's own count now, the list's
	 * holders released by name, one by one. */
	profile_touch(p);
	assert_false(profile_unhold(p, 0, gen));
	assert_int_equal(pd->leases, 1);
	assert_int_equal(mr->leases, 2);
	assert_int_equal(pd->held, 0);
	profile_release(p, pd);
	profile_release(p, mr);
	profile_release(p, mr);
	assert_int_equal(profile_object_leases(p, pd), 0);
	assert_int_equal(profile_object_leases(p, mr), 0);
	assert_false(profile_leased(p));

	/* A new generation's first attach marks its own list: what the
	 * last one marked and this one does not lease is not held. */
	gen = profile_attach_generation(p);
	profile_hold(p, 0, &l[1], 1);
	assert_int_equal(profile_object_leases(p, pd), 0);
	assert_int_equal(profile_object_leases(p, mr), 1);
	/* An object whose incarnation ends leaves the list (its holders
	 * find nothing of it), and a fold gives the next one nothing. */
	object_destroy(mr);
	profile_holds_fold(p);
	assert_int_equal(profile_object_leases(p, mr), 0);
	assert_false(profile_unhold(p, 0, gen));
	profile_free(p);
	config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_absent_device_is_pending),
	    cmocka_unit_test(test_lease_list_counted_once),
	    cmocka_unit_test(test_memory_backings),
	    cmocka_unit_test(test_memory_file),
	};

	return cmocka_run_group_tests_name("profile", tests, NULL, NULL);
}
