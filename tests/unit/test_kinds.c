// SPDX-License-Identifier: MIT
/* The object kinds' tables (daemon/engine/kinds.h): every kind has one,
 * under its own index, with no empty slot; what it names comes before it
 * in the creation order (enum obj_kind) and covers what the
 * configuration lets it name; its uverbs and netlink kinds, its handle
 * and its loss agree; its name is the configuration's. The docs and the
 * OpenAPI document are checked against the same kinds by tests/kinds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kinds.h"
#include "objects.h"

typedef void (*slot_fn)(void);

/* From reset on, struct object_kind holds function pointers only. */
static void test_no_empty_slot(void **state)
{
	const size_t first = offsetof(struct object_kind, reset);

	(void)state;
	assert_int_equal((sizeof(struct object_kind) - first) % sizeof(slot_fn),
			 0);
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		const struct object_kind *t = object_kind((enum obj_kind)k);

		assert_non_null(t);
		assert_int_equal(t->kind, k);
		for (size_t off = first; off < sizeof(*t); off += sizeof(slot_fn)) {
			slot_fn f;

			memcpy(&f, (const char *)t + off, sizeof(f));
			if (!f)
				fail_msg("kind %s: slot at offset %zu is empty",
					 obj_kind_name((enum obj_kind)k), off);
		}
	}
	assert_null(object_kind(OBJ_KIND_MAX));
}

/* The creation order: a kind names only kinds made before it. */
static void test_parents_first(void **state)
{
	(void)state;
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		unsigned int parents = object_kind((enum obj_kind)k)->parents;

		if (parents & ~(KIND_BIT(k) - 1))
			fail_msg("kind %s names a kind made after it (0x%x)",
				 obj_kind_name((enum obj_kind)k), parents);
	}
}

/* One of every kind, each reference given. */
#define EVERY_KIND                                                             \
	"devices = ( { name = \"d\"; match = { ibdev = \"rxe0\"; }; } );\n"   \
	"profiles = ( { name = \"p\"; device = \"d\";\n"                       \
	"memory = ( { name = \"m\"; size = \"1M\"; } );\n"                     \
	"xrcd = ( { name = \"x\"; file = \"/run/rdmad/x.xrcd\"; } );\n"        \
	"pd = ( { name = \"a\"; } );\n"                                        \
	"dm = ( { name = \"dm\"; size = \"64K\"; } );\n"                       \
	"mr = ( { name = \"r\"; pd = \"a\"; memory = \"m\";\n"                 \
	"         access = [ \"local_write\", \"mw_bind\" ]; },\n"             \
	"       { name = \"dr\"; pd = \"a\"; dm = \"dm\"; } );\n"              \
	"mw = ( { name = \"w\"; pd = \"a\"; } );\n"                            \
	"cq = ( { name = \"c\"; }, { name = \"qc\"; } );\n"                 \
	"srq = ( { name = \"s\"; pd = \"a\"; },\n"                             \
	"        { name = \"xs\"; pd = \"a\"; type = \"xrc\"; xrcd = \"x\";\n" \
	"          cq = \"qc\"; } );\n"                                        \
	"qp = ( { name = \"q\"; pd = \"a\"; type = \"rc\"; send_cq = \"qc\";\n" \
	"         recv_cq = \"qc\"; srq = \"s\"; peer = \"q2\"; state = \"rts\"; },\n" \
	"       { name = \"q2\"; pd = \"a\"; type = \"rc\"; send_cq = \"qc\";\n"\
	"         recv_cq = \"qc\"; peer = \"q\"; state = \"rts\"; },\n"      \
	"       { name = \"u\"; pd = \"a\"; type = \"ud\"; send_cq = \"qc\";\n" \
	"         recv_cq = \"qc\"; },\n"                                        \
	"       { name = \"xq\"; type = \"xrc_recv\"; xrcd = \"x\"; } );\n"    \
	"ah = ( { name = \"h\"; pd = \"a\"; dgid = \"::ffff:192.0.2.2\"; } );\n" \
	"target = ( { name = \"t\"; listen = \"192.0.2.1:7471\"; pd = \"a\";\n"\
	"             cq = \"c\"; allow = [ \"10.0.0.0/8\" ];\n"               \
	"             expose = ( { mr = \"r\"; access = [ \"remote_read\" ]; } ); } );\n" \
	"mcast = ( { name = \"g\"; addr = \"239.1.1.1\"; qps = [ \"u\" ]; } );\n" \
	"} );\n"

/* What the configuration lets a kind name, it names (a QP's peer is a
 * link, not a parent): every kind is declared, every reference used. */
static void test_parents_cover_references(void **state)
{
	struct config *cfg = NULL;
	struct conf_ref refs[CONF_MAX_REFS];
	const struct conf_profile *p;

	(void)state;
	assert_int_equal(config_load_string("t.conf", EVERY_KIND, &cfg), 0);
	if (cfg->n_errors)
		config_print_errors(cfg, stderr);
	assert_int_equal(cfg->n_errors, 0);
	assert_int_equal(cfg->n_profiles, 1);
	p = &cfg->profiles[0];
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		unsigned int parents = object_kind((enum obj_kind)k)->parents;
		unsigned int named = 0;

		assert_true(p->n_objs[k] > 0);
		for (size_t i = 0; i < p->n_objs[k]; i++) {
			size_t n = conf_obj_refs((enum obj_kind)k,
						 conf_obj(p, (enum obj_kind)k, i),
						 refs, CONF_MAX_REFS);

			for (size_t r = 0; r < n; r++)
				if (!(k == OBJ_QP && refs[r].kind == OBJ_QP))
					named |= KIND_BIT(refs[r].kind);
		}
		if (named != parents)
			fail_msg("kind %s: parents 0x%x, its declarations name "
				 "0x%x", obj_kind_name((enum obj_kind)k),
				 parents, named);
	}
	config_free(cfg);
}

/*
 * A kind with a uverbs kind is a kernel object of the context: it has a
 * handle and can be lost; one without has neither. Each uverbs kind is
 * one kind's, and so is each netlink kind but the context's. A kind on
 * the loop is the one started there; a kind a restart keeps is the one
 * handed over.
 */
static void test_kernel_kinds_agree(void **state)
{
	int uverbs[UH_KINDS + 1] = { 0 }, netlink[RDMANL_KINDS + 1] = { 0 };

	(void)state;
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		const struct object_kind *t = object_kind((enum obj_kind)k);
		bool kernel = t->uverbs != UH_KINDS;

		assert_in_range(t->uverbs, 0, UH_KINDS);
		assert_in_range(t->netlink, RDMANL_PD, RDMANL_KINDS);
		if (kernel != (t->handle != kind_no_handle) ||
		    kernel != (t->lose != kind_never_lost))
			fail_msg("kind %s: uverbs kind, handle and loss disagree",
				 obj_kind_name((enum obj_kind)k));
		if (t->on_loop != (t->start != kind_no_start))
			fail_msg("kind %s: on the loop, or started there",
				 obj_kind_name((enum obj_kind)k));
		if (t->kept_by_restart != (t->hand_over != kind_no_hand_over))
			fail_msg("kind %s: kept by a restart, or handed over",
				 obj_kind_name((enum obj_kind)k));
		if (t->netlink != RDMANL_KINDS && !kernel)
			fail_msg("kind %s: a netlink kind without a uverbs one",
				 obj_kind_name((enum obj_kind)k));
		if (t->netlink != RDMANL_KINDS)
			assert_int_equal(object_uverbs_of_netlink(t->netlink),
					 t->uverbs);
		uverbs[t->uverbs]++;
		netlink[t->netlink]++;
	}
	assert_int_equal(object_uverbs_of_netlink(RDMANL_CTX), UH_KINDS);
	for (int u = 0; u < UH_KINDS; u++)
		if (uverbs[u] != 1)
			fail_msg("uverbs kind %s is %d kinds'",
				 uhandle_kind_name((enum uhandle_kind)u),
				 uverbs[u]);
	for (int n = RDMANL_PD; n < RDMANL_KINDS; n++)
		if (netlink[n] != 1)
			fail_msg("netlink kind %s is %d kinds'",
				 rdmanl_kind_name((enum rdmanl_kind)n),
				 netlink[n]);
}

/* Its name is the configuration's, and reads back. */
static void test_names(void **state)
{
	(void)state;
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		const char *name = obj_kind_name((enum obj_kind)k);

		assert_non_null(name);
		assert_string_not_equal(name, "?");
		assert_int_equal(obj_kind_from_name(name), k);
		assert_true(conf_obj_size((enum obj_kind)k) > 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_empty_slot),
		cmocka_unit_test(test_parents_first),
		cmocka_unit_test(test_parents_cover_references),
		cmocka_unit_test(test_kernel_kinds_agree),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
