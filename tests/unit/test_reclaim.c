// SPDX-License-Identifier: MIT
/* Reclaim's matching of dead makers' MRs to handles, and its check of a
 * handle before it destroys (reclaim.c), on a fake context file: the
 * verbs it acts through (reclaim_set_verbs) are a table of handles here,
 * and a maker's pidfd an eventfd that a "death" makes readable. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include <infiniband/verbs.h>

#include "profile.h"
#include "profile_fields.h" /* builds profiles by hand */
#include "reclaim.h"
#include "util.h"

#define SEC 1000000ULL

/* The fake file: handles of each kind; an MR handle's key. */
static struct {
	uint32_t h[UH_KINDS][16];
	struct reclaim_key key[UH_KINDS][16];
	size_t n[UH_KINDS];
	int refuse; /* destroy fails with this, once per call, while set */
	unsigned int destroyed;
	uint32_t last_destroyed[UH_KINDS];
	/* makers: pid -> eventfd */
	pid_t pid[8];
	int efd[8];
	size_t n_makers;
	pid_t gone[4]; /* processes no pidfd can be opened for */
} file;

static void add(enum uhandle_kind k, uint32_t h, uint32_t lkey, uint64_t len)
{
	file.h[k][file.n[k]] = h;
	file.key[k][file.n[k]++] =
		(struct reclaim_key){ .lkey = lkey, .rkey = lkey, .length = len };
}

static ssize_t find(enum uhandle_kind k, uint32_t h)
{
	for (size_t i = 0; i < file.n[k]; i++)
		if (file.h[k][i] == h)
			return (ssize_t)i;
	return -1;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int fake_list(int fd, enum uhandle_kind k, uint32_t **out, size_t *n,
		     int *complete)
{
	(void)fd;
	*complete = 1;
	*n = file.n[k];
	*out = NULL;
	if (!*n)
		return 0;
	*out = malloc(*n * sizeof(**out));
	memcpy(*out, file.h[k], *n * sizeof(**out));
	qsort(*out, *n, sizeof(**out), cmp_u32);
	return 0;
}

static int fake_destroy(int fd, enum uhandle_kind k, uint32_t h)
{
	ssize_t i = find(k, h);

	(void)fd;
	if (i < 0)
		return -ENOENT;
	if (file.refuse)
		return file.refuse;
	file.h[k][i] = file.h[k][file.n[k] - 1];
	file.key[k][i] = file.key[k][--file.n[k]];
	file.destroyed++;
	file.last_destroyed[k] = h;
	return 0;
}

static int fake_query_mr(int fd, uint32_t h, struct reclaim_key *key)
{
	ssize_t i = find(UH_MR, h);

	(void)fd;
	if (i < 0)
		return -ENOENT;
	*key = file.key[UH_MR][i];
	return 0;
}

static int fake_watch(pid_t pid)
{
	int fd;

	for (size_t i = 0; i < 4; i++)
		if (file.gone[i] == pid)
			return -ESRCH;
	fd = eventfd(0, EFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_true(file.n_makers < 8);
	file.pid[file.n_makers] = pid;
	file.efd[file.n_makers++] = dup(fd);
	return fd;
}

static void die(pid_t pid)
{
	uint64_t one = 1;

	for (size_t i = 0; i < file.n_makers; i++)
		if (file.pid[i] == pid)
			assert_int_equal(write(file.efd[i], &one, sizeof(one)),
					 sizeof(one));
}

static const struct reclaim_verbs fake = {
	.list = fake_list,
	.destroy = fake_destroy,
	.query_mr = fake_query_mr,
	.watch = fake_watch,
};

static struct conf_profile conf = { .name = "p" };
static struct ibv_context ctx = { .cmd_fd = -1 };
static struct profile prof;

static int setup(void **state)
{
	(void)state;
	memset(&file, 0, sizeof(file));
	memset(&prof, 0, sizeof(prof));
	prof.conf = &conf;
	prof.ctx = &ctx;
	reclaim_set_verbs(&fake);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	reclaim_free(&prof);
	for (size_t i = 0; i < file.n_makers; i++)
		close(file.efd[i]);
	reclaim_set_verbs(NULL);
	return 0;
}

/* The context's MRs as a scan lists them: mrn, lkey (= rkey), length,
 * the thread named (0: none) and its process. */
struct rec {
	uint32_t mrn, lkey;
	uint64_t len;
	uint32_t tid;
	bool keys;
};

static void scan(const struct rec *recs, size_t n, uint64_t now)
{
	struct reclaim_census c = { .keys = 1 };
	struct reclaim_mr mrs[16];

	for (int k = 0; k < UH_KINDS; k++)
		c.dumped[k] = k == UH_QP || k == UH_CQ || k == UH_MR ||
			      k == UH_PD || k == UH_SRQ;
	for (size_t i = 0; i < n; i++) {
		mrs[i] = (struct reclaim_mr){
			.mrn = recs[i].mrn,
			.key = { .lkey = recs[i].keys ? recs[i].lkey : 0,
				 .rkey = recs[i].keys ? recs[i].lkey : 0,
				 .length = recs[i].len },
			.keys = recs[i].keys,
			.tid = recs[i].tid,
			.maker = (pid_t)recs[i].tid,
		};
		if (!recs[i].keys)
			c.keys = 0;
		if (recs[i].tid)
			c.live[UH_MR]++;
		else
			c.dead[UH_MR]++;
	}
	c.mrs = mrs;
	c.n_mrs = n;
	reclaim_begin(&prof, NULL, NULL, NULL);
	reclaim_end(&prof, &c, true, now);
}

/* A's MR goes once A is gone and the delay is over; B's, alive, stays,
 * though B's MRs make counting leave the kind alone. */
static void test_dead_makers_mr_goes_live_ones_stays(void **state)
{
	struct rec both[] = { { 1, 0x100, 4096, 100, true },
			      { 2, 0x200, 8192, 200, true } };
	struct rec a_gone[] = { { 1, 0x100, 4096, 0, true },
				{ 2, 0x200, 8192, 200, true } };
	bool alive;

	(void)state;
	add(UH_MR, 5, 0x100, 4096);
	add(UH_MR, 6, 0x200, 8192);
	scan(both, 2, 1 * SEC);
	assert_int_equal(reclaim_maker_of(&prof, 1, &alive), 100);
	assert_true(alive);
	assert_int_equal(reclaim_maker_of(&prof, 2, NULL), 200);
	die(100);
	scan(a_gone, 2, 2 * SEC);
	assert_int_equal(file.destroyed, 0); /* the delay */
	assert_int_equal(reclaim_maker_of(&prof, 1, &alive), 100);
	assert_false(alive);
	scan(a_gone, 2, 4 * SEC + 1);
	assert_int_equal(file.destroyed, 1);
	assert_int_equal(file.last_destroyed[UH_MR], 5);
	assert_int_equal(prof.health.faults.reclaimed[UH_MR], 1);
	assert_int_equal(find(UH_MR, 6), 0);
	/* Forgotten once destroyed; B's MR is never a leftover. */
	assert_int_equal(reclaim_maker_of(&prof, 1, NULL), 0);
	scan(both + 1, 1, 10 * SEC);
	assert_int_equal(file.destroyed, 1);
}

/* B's MR, made by a thread that has exited, looks dead to counting;
 * B lives: it stays. */
static void test_live_makers_mr_is_never_counted(void **state)
{
	struct rec seen[] = { { 2, 0x200, 8192, 200, true } };
	struct rec thread_gone[] = { { 2, 0x200, 8192, 0, true } };

	(void)state;
	add(UH_MR, 6, 0x200, 8192);
	scan(seen, 1, 1 * SEC);
	for (int i = 2; i < 8; i++)
		scan(thread_gone, 1, (uint64_t)i * SEC);
	assert_int_equal(file.destroyed, 0);
	die(200);
	scan(thread_gone, 1, 9 * SEC);
	scan(thread_gone, 1, 12 * SEC);
	assert_int_equal(file.destroyed, 1);
}

/* A counting leftover's handle given to another MR between two scans:
 * left alone, counted; the new one waits the delay again. */
static void test_stale_handle_left_alone(void **state)
{
	struct rec x[] = { { 3, 0x300, 4096, 0, true } };
	struct rec y[] = { { 4, 0x400, 4096, 0, true } };

	(void)state;
	add(UH_MR, 7, 0x300, 4096);
	scan(x, 1, 1 * SEC);
	file.key[UH_MR][0].lkey = file.key[UH_MR][0].rkey = 0x400;
	scan(y, 1, 4 * SEC);
	assert_int_equal(file.destroyed, 0);
	assert_int_equal(prof.health.faults.stale[UH_MR], 1);
	scan(y, 1, 5 * SEC);
	assert_int_equal(file.destroyed, 0);
	scan(y, 1, 6 * SEC + 1);
	assert_int_equal(file.destroyed, 1);
}

/* A leftover whose keys the dumps do not list as a dead process's MR
 * (counting only saw as many dead MRs as leftover handles) is not
 * destroyed. */
static void test_leftover_not_listed_dead_is_left_alone(void **state)
{
	struct rec dead[] = { { 9, 0x900, 4096, 0, true } };

	(void)state;
	add(UH_MR, 7, 0x300, 4096);
	scan(dead, 1, 1 * SEC);
	scan(dead, 1, 4 * SEC);
	assert_int_equal(file.destroyed, 0);
	assert_int_equal(prof.health.faults.stale[UH_MR], 1);
}

/* Keys hidden: a dead maker's MR is matched by its length only where
 * that length is the context's only one. */
static void test_length_matches_only_when_unique(void **state)
{
	struct rec alive[] = { { 1, 0, 4096, 100, false },
			       { 2, 0, 4096, 200, false },
			       { 3, 0, 65536, 300, false } };
	struct rec gone[] = { { 1, 0, 4096, 0, false },
			      { 2, 0, 4096, 200, false },
			      { 3, 0, 65536, 0, false } };

	(void)state;
	add(UH_MR, 5, 0x100, 4096);
	add(UH_MR, 6, 0x200, 4096);
	add(UH_MR, 8, 0x300, 65536);
	scan(alive, 3, 1 * SEC);
	die(100);
	die(300);
	scan(gone, 3, 2 * SEC);
	scan(gone, 3, 5 * SEC);
	assert_int_equal(file.destroyed, 1);
	assert_int_equal(file.last_destroyed[UH_MR], 8);
	assert_int_equal(find(UH_MR, 5) >= 0, 1);
	assert_int_equal(find(UH_MR, 6) >= 0, 1);
}

/* The kernel refuses (a window bound to it): tried again at later
 * scans, and the failure counted. */
static void test_refused_is_tried_again(void **state)
{
	struct rec alive[] = { { 1, 0x100, 4096, 100, true } };
	struct rec gone[] = { { 1, 0x100, 4096, 0, true } };

	(void)state;
	add(UH_MR, 5, 0x100, 4096);
	scan(alive, 1, 1 * SEC);
	die(100);
	scan(gone, 1, 2 * SEC);
	file.refuse = -EINVAL;
	scan(gone, 1, 5 * SEC);
	assert_int_equal(file.destroyed, 0);
	assert_int_equal(prof.health.faults.reclaim_failed[UH_MR], 1);
	file.refuse = 0;
	scan(gone, 1, 6 * SEC);
	assert_int_equal(file.destroyed, 1);
	assert_int_equal(prof.health.faults.reclaimed[UH_MR], 1);
}

/* An MR number the kernel gives again, to an MR of other keys: not the
 * one remembered (whose maker died). */
static void test_recycled_number_is_another_mr(void **state)
{
	struct rec alive[] = { { 1, 0x100, 4096, 100, true } };
	struct rec other[] = { { 1, 0x700, 4096, 400, true } };

	(void)state;
	add(UH_MR, 5, 0x100, 4096);
	scan(alive, 1, 1 * SEC);
	file.key[UH_MR][0].lkey = file.key[UH_MR][0].rkey = 0x700;
	die(100);
	scan(other, 1, 2 * SEC);
	scan(other, 1, 5 * SEC);
	assert_int_equal(file.destroyed, 0);
	assert_int_equal(reclaim_maker_of(&prof, 1, NULL), 400);
}

/* A scan of QPs (qpn, tid: 0 gone) and CQs (dead: made by nobody
 * alive), no MRs. */
static void scan_qps(const uint32_t (*qps)[2], size_t n, unsigned int dead_cqs,
		     uint64_t now)
{
	struct reclaim_census c = { .keys = -1 };
	struct reclaim_qp q[8];

	for (int k = 0; k < UH_KINDS; k++)
		c.dumped[k] = k == UH_QP || k == UH_CQ || k == UH_MR ||
			      k == UH_PD || k == UH_SRQ;
	for (size_t i = 0; i < n; i++) {
		q[i] = (struct reclaim_qp){ .qpn = qps[i][0],
					    .tid = qps[i][1],
					    .maker = (pid_t)qps[i][1] };
		if (qps[i][1])
			c.live[UH_QP]++;
		else
			c.dead[UH_QP]++;
	}
	c.dead[UH_CQ] = dead_cqs;
	c.qps = q;
	c.n_qps = n;
	reclaim_begin(&prof, NULL, NULL, NULL);
	reclaim_end(&prof, &c, true, now);
}

/* A claimed QP and CQ go once their process is gone, QP first; another
 * live client's QP (unclaimed) stays. */
static void test_claims_go_once_their_maker_is(void **state)
{
	const struct reclaim_claim mine[] = { { UH_QP, 3, 17 }, { UH_CQ, 4, 0 } };
	const uint32_t alive[][2] = { { 17, 500 }, { 18, 600 } };
	const uint32_t gone[][2] = { { 17, 0 }, { 18, 600 } };

	(void)state;
	add(UH_QP, 3, 0, 0);
	add(UH_QP, 5, 0, 0);
	add(UH_CQ, 4, 0, 0);
	add(UH_CQ, 6, 0, 0);
	assert_int_equal(reclaim_claim(&prof, 500, mine, 2, false), 0);
	scan_qps(alive, 2, 0, 1 * SEC);
	assert_int_equal(reclaim_qp_maker(&prof, 17), 500);
	die(500);
	scan_qps(gone, 2, 1, 2 * SEC);
	assert_int_equal(file.destroyed, 0);
	scan_qps(gone, 2, 1, 4 * SEC + 1);
	assert_int_equal(file.destroyed, 2);
	assert_int_equal(file.last_destroyed[UH_QP], 3);
	assert_int_equal(file.last_destroyed[UH_CQ], 4);
	assert_true(find(UH_QP, 5) >= 0 && find(UH_CQ, 6) >= 0);
	assert_int_equal(reclaim_qp_maker(&prof, 17), 0);
}

/* A claimed QP whose number the kernel no longer lists: its handle may
 * name another QP now; left alone, counted stale. A CQ with no dead CQ
 * listed stays too. */
static void test_claim_without_its_qp_number_is_left_alone(void **state)
{
	const struct reclaim_claim mine[] = { { UH_QP, 3, 17 }, { UH_CQ, 4, 0 } };
	const uint32_t other[][2] = { { 19, 0 } };

	(void)state;
	add(UH_QP, 3, 0, 0);
	add(UH_CQ, 4, 0, 0);
	assert_int_equal(reclaim_claim(&prof, 500, mine, 2, false), 0);
	die(500);
	scan_qps(other, 1, 0, 1 * SEC);
	scan_qps(other, 1, 0, 4 * SEC);
	assert_int_equal(file.destroyed, 0);
	assert_int_equal(prof.health.faults.stale[UH_QP], 1);
}

/* A handle another live process claims is refused; taken back, it is
 * no claim. */
static void test_claims_conflict_and_undo(void **state)
{
	const struct reclaim_claim cq[] = { { UH_CQ, 4, 0 } };
	const struct reclaim_claim mr[] = { { UH_MR, 4, 0 } };
	struct reclaim_stats st;

	(void)state;
	add(UH_CQ, 4, 0, 0);
	assert_int_equal(reclaim_claim(&prof, 500, cq, 1, false), 0);
	assert_int_equal(reclaim_claim(&prof, 600, cq, 1, false), -EEXIST);
	assert_int_equal(reclaim_claim(&prof, 500, mr, 1, false), -EINVAL);
	reclaim_stats(&prof, &st);
	assert_int_equal(st.claims[UH_CQ], 1);
	assert_int_equal(reclaim_claim(&prof, 600, cq, 1, true), 0);
	reclaim_stats(&prof, &st);
	assert_int_equal(st.claims[UH_CQ], 1); /* not 600's to undo */
	assert_int_equal(reclaim_claim(&prof, 500, cq, 1, true), 0);
	reclaim_stats(&prof, &st);
	assert_int_equal(st.claims[UH_CQ], 0);
	assert_int_equal(st.makers, 0);
}

/* The record's member named key of the maker pid, from its text. */
static json_t *maker_in(json_t *rec, pid_t pid)
{
	size_t i;
	json_t *m;

	json_array_foreach(rec, i, m)
		if (json_integer_value(json_object_get(m, "pid")) == pid)
			return m;
	return NULL;
}

/* The next run takes back, from the record this one writes, who made
 * what: A died while the daemon was down (no pidfd for it now), so its
 * MR and its claimed CQ go; B lives, and its MR stays. */
static void test_record_carries_makers_to_the_next_run(void **state)
{
	const struct reclaim_claim cq[] = { { UH_CQ, 4, 0 } };
	struct rec both[] = { { 1, 0x100, 4096, 100, true },
			      { 2, 0x200, 8192, 200, true } };
	struct rec a_gone[] = { { 1, 0x100, 4096, 0, false },
				{ 2, 0x200, 8192, 200, false } };
	_cleanup_free_ char *text = NULL;
	json_t *rec, *a, *mr;
	struct reclaim_stats st;
	size_t len = 0;
	bool alive;

	(void)state;
	add(UH_MR, 5, 0x100, 4096);
	add(UH_MR, 6, 0x200, 8192);
	add(UH_CQ, 4, 0, 0);
	assert_int_equal(reclaim_claim(&prof, 100, cq, 1, false), 0);
	assert_true(reclaim_record_due(&prof));
	scan(both, 2, 1 * SEC);
	assert_true(reclaim_record_due(&prof));
	assert_false(reclaim_record_due(&prof)); /* said once */
	text = reclaim_record_text(&prof, &len);
	assert_non_null(text);
	/* The form reclaim.h documents. */
	rec = json_loadb(text, len, 0, NULL);
	assert_true(json_is_array(rec));
	assert_int_equal(json_array_size(rec), 2);
	a = maker_in(rec, 100);
	assert_non_null(a);
	assert_true(json_is_false(json_object_get(a, "gone")));
	mr = json_array_get(json_object_get(a, "mrs"), 0);
	assert_int_equal(json_integer_value(json_object_get(mr, "mrn")), 1);
	assert_int_equal(json_integer_value(json_object_get(mr, "lkey")), 0x100);
	assert_int_equal(json_integer_value(json_object_get(mr, "length")), 4096);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(json_object_get(a, "claims"), 0), "kind")), "cq");
	assert_non_null(maker_in(rec, 200));

	/* The next run: nothing known until the record is taken back. */
	reclaim_free(&prof);
	file.gone[0] = 100;
	reclaim_restore(&prof, rec);
	json_decref(rec);
	assert_false(reclaim_record_due(&prof));
	assert_int_equal(reclaim_maker_of(&prof, 1, &alive), 100);
	assert_false(alive);
	assert_int_equal(reclaim_maker_of(&prof, 2, &alive), 200);
	assert_true(alive);
	assert_true(reclaim_knows_mr(&prof, 1, 4096));
	assert_false(reclaim_knows_mr(&prof, 1, 8192));
	reclaim_stats(&prof, &st);
	assert_int_equal(st.claims[UH_CQ], 1);
	assert_int_equal(st.makers, 2);
	/* Keys hidden in this run: the lengths tell the MRs apart. */
	scan(a_gone, 2, 10 * SEC);
	scan(a_gone, 2, 12 * SEC + 1);
	assert_int_equal(find(UH_MR, 5), -1);
	assert_true(find(UH_MR, 6) >= 0);
	assert_int_equal(reclaim_maker_of(&prof, 2, NULL), 200);
}

/* A record that does not fit the form takes nothing back, and breaks
 * nothing. */
static void test_record_out_of_form_is_skipped(void **state)
{
	static const char *const bad[] = {
		"{}",
		"[1, \"x\", null]",
		"[{\"pid\": \"100\", \"start\": 0, \"mrs\": [], \"claims\": []}]",
		"[{\"pid\": 0, \"start\": 0, \"mrs\": [], \"claims\": []}]",
		"[{\"pid\": -4, \"start\": 0, \"mrs\": [], \"claims\": []}]",
		"[{\"pid\": 100, \"start\": 0, \"mrs\": {}, \"claims\": []}]",
		"[{\"pid\": 100, \"start\": 0, \"mrs\": [{\"mrn\": -1, "
		"\"tid\": 1, \"length\": 1}, {\"mrn\": 4294967296, "
		"\"tid\": 1, \"length\": 1}], \"claims\": [{\"kind\": "
		"\"mr\", \"handle\": 1}, {\"kind\": \"qp\", \"handle\": 2}]}]",
	};
	struct reclaim_stats st;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		json_t *j = json_loads(bad[i], 0, NULL);

		assert_non_null(j);
		reclaim_restore(&prof, j);
		json_decref(j);
		reclaim_stats(&prof, &st);
		assert_int_equal(st.makers, 0);
		assert_int_equal(st.mrs_live + st.mrs_waiting, 0);
		assert_int_equal(st.claims[UH_QP] + st.claims[UH_CQ], 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_dead_makers_mr_goes_live_ones_stays, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_live_makers_mr_is_never_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_handle_left_alone,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_leftover_not_listed_dead_is_left_alone, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_length_matches_only_when_unique, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_is_tried_again,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_recycled_number_is_another_mr, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_claims_go_once_their_maker_is, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_claim_without_its_qp_number_is_left_alone, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_record_carries_makers_to_the_next_run, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_record_out_of_form_is_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_claims_conflict_and_undo,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
