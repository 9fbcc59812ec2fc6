// SPDX-License-Identifier: MIT
/*
 * What verbs/ is handed for a configuration (model/verbs_spec.c): each
 * key of a device and of a memory, as rdmad.conf(5) documents it, reaches
 * devmatch and memory unchanged in meaning. The configurations are loaded
 * from text, as the daemon loads them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <infiniband/verbs.h>

#include "config.h"
#include "verbs_spec.h"

static struct config *load(const char *text)
{
	struct config *c = NULL;

	assert_int_equal(config_load_string("test", text, &c), 0);
	assert_non_null(c);
	return c;
}

/* gid = { type; family; }: rdmad.conf(5) names the verbs GID types. */
static void device_keys(void **state)
{
	struct config *c = load(
	    "devices = ( { name = \"a\"; match = { ibdev = \"rxe0\";"
	    " netdev = \"veth0\"; guid = \"0001:0203:0405:0607\";"
	    " pci = \"0000:3b:00.0\"; driver = \"mlx5_core\"; }; port = 2;"
	    " gid = { type = \"roce_v2\"; family = \"ipv6\"; }; },"
	    " { name = \"b\"; match = { ibdev = \"rxe1\"; };"
	    " gid = { index = 3; }; },"
	    " { name = \"c\"; match = { netdev = \"eth0\"; };"
	    " gid = { type = \"ib\"; }; } );");
	struct devmatch_spec a = devmatch_of(&c->devices[0]);
	struct devmatch_spec b = devmatch_of(&c->devices[1]);
	struct devmatch_spec d = devmatch_of(&c->devices[2]);

	(void)state;
	assert_string_equal(a.ibdev, "rxe0");
	assert_string_equal(a.netdev, "veth0");
	assert_string_equal(a.guid, "0001:0203:0405:0607");
	assert_string_equal(a.pci, "0000:3b:00.0");
	assert_string_equal(a.driver, "mlx5_core");
	assert_int_equal(a.port, 2);
	assert_int_equal(a.gid_index, -1);
	assert_int_equal(a.gid_type, IBV_GID_TYPE_ROCE_V2);
	assert_int_equal(a.gid_family, DEVMATCH_IPV6);

	/* Left out: any type and family, port 1, matchers not given. */
	assert_null(b.netdev);
	assert_null(b.guid);
	assert_int_equal(b.port, 1);
	assert_int_equal(b.gid_index, 3);
	assert_int_equal(b.gid_type, -1);
	assert_int_equal(b.gid_family, DEVMATCH_ANY_FAMILY);

	assert_null(d.ibdev);
	assert_int_equal(d.gid_type, IBV_GID_TYPE_IB);
	config_free(c);
}

#define ONE_PROFILE(mem)                                                       \
	"devices = ( { name = \"d\"; match = { ibdev = \"rxe0\"; }; } );\n"   \
	"profiles = ( { name = \"p\"; device = \"d\"; memory = ( " mem      \
	" ); } );"

/* backing, size, path, page_size and thp of each memory. */
static void memory_keys(void **state)
{
	struct config *c = load(ONE_PROFILE(
	    "{ name = \"m\"; size = \"1M\"; backing = \"memfd\"; thp = false; },"
	    " { name = \"a\"; size = \"2M\"; backing = \"anonymous\"; },"
	    " { name = \"f\"; size = \"4K\"; backing = \"file\";"
	    " path = \"/tmp/x\"; },"
	    " { name = \"h\"; size = \"1G\"; backing = \"hugetlb\";"
	    " page_size = \"1G\"; }"));
	const struct conf_memory *m = c->profiles[0].objs[OBJ_MEMORY];
	struct memory_spec s[4];

	(void)state;
	assert_int_equal(c->profiles[0].n_objs[OBJ_MEMORY], 4);
	for (int i = 0; i < 4; i++)
		s[i] = memory_of(&m[i]);
	assert_string_equal(s[0].name, "m");
	assert_int_equal(s[0].size, 1 << 20);
	assert_int_equal(s[0].backing, MEMORY_MEMFD);
	assert_true(s[0].no_thp);
	assert_int_equal(s[1].backing, MEMORY_ANONYMOUS);
	assert_false(s[1].no_thp); /* left out: asked for */
	assert_int_equal(s[2].backing, MEMORY_FILE);
	assert_string_equal(s[2].path, "/tmp/x");
	assert_int_equal(s[3].backing, MEMORY_HUGETLB);
	assert_int_equal(s[3].page_size, 1ULL << 30);
	config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(device_keys),
		cmocka_unit_test(memory_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
