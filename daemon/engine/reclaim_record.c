// SPDX-License-Identifier: MIT
/*
 * Who made what in a shared context, for the next run (reclaim.h): the
 * makers the scans watched, the MRs they saw them make and what they
 * claimed, as the lease record carries them (front/sysd.c writes it,
 * restore.c reads it back). A client that dies while the daemon is down
 * or being restarted has its objects reclaimed by the next run as if
 * that run had seen them made.
 */
#include <inttypes.h>
#include <stdio.h>

#include "reclaim_internal.h"
#include "util.h"

static const char *const claim_kinds[UH_KINDS] = {
	[UH_QP] = "qp", [UH_CQ] = "cq", [UH_SRQ] = "srq",
};

static void made_put(FILE *f, const struct made *m, const char **sep)
{
	fprintf(f, "%s{\"mrn\":%" PRIu32 ",\"tid\":%" PRIu32
		   ",\"length\":%" PRIu64,
		*sep, m->mrn, m->tid, m->key.length);
	if (m->keys)
		fprintf(f, ",\"lkey\":%" PRIu32 ",\"rkey\":%" PRIu32,
			m->key.lkey, m->key.rkey);
	putc('}', f);
	*sep = ",";
}

static void claim_put(FILE *f, const struct claim *c, const char **sep)
{
	fprintf(f, "%s{\"kind\":\"%s\",\"handle\":%" PRIu32, *sep,
		claim_kinds[c->kind], c->handle);
	if (c->kind == UH_QP)
		fprintf(f, ",\"qp_num\":%" PRIu32, c->qp_num);
	putc('}', f);
	*sep = ",";
}

static void maker_put(FILE *f, struct reclaim *r, struct maker *w,
		      const char **sep)
{
	const char *s = "";

	fprintf(f, "%s{\"pid\":%d,\"start\":%llu,\"gone\":%s,\"mrs\":[",
		*sep, (int)w->pid, w->start,
		reclaim_maker_gone(w) ? "true" : "false");
	for (size_t i = 0; i < r->n_made; i++)
		if (r->made[i].maker == w)
			made_put(f, &r->made[i], &s);
	fputs("],\"claims\":[", f);
	s = "";
	for (size_t i = 0; i < r->n_claims; i++)
		if (r->claims[i].maker == w && !r->claims[i].dropped)
			claim_put(f, &r->claims[i], &s);
	fputs("]}", f);
	*sep = ",";
}

char *reclaim_record_text(const struct profile *p, size_t *len)
{
	struct reclaim *r = profile_health(p)->reclaim;
	const char *sep = "";
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (!f)
		return NULL;
	putc('[', f);
	for (size_t i = 0; r && i < r->n_makers; i++)
		maker_put(f, r, r->makers[i], &sep);
	putc(']', f);
	if (!memstream_done(f, &text))
		return NULL;
	*len = n;
	return text;
}

bool reclaim_record_due(struct profile *p)
{
	struct reclaim *r = profile_health(p)->reclaim;
	bool due = r && r->dirty;

	if (r)
		r->dirty = false;
	return due;
}

/* A member that is an integer in [0, max]: its value in *v. */
static bool member_u(const json_t *o, const char *key, uint64_t max,
		     uint64_t *v)
{
	const json_t *j = json_object_get(o, key);

	if (!json_is_integer(j) || json_integer_value(j) < 0 ||
	    (uint64_t)json_integer_value(j) > max)
		return false;
	*v = (uint64_t)json_integer_value(j);
	return true;
}

static bool made_take(struct reclaim *r, struct maker *w, const json_t *j)
{
	uint64_t mrn, tid, length, lkey, rkey;
	bool keys;

	if (!member_u(j, "mrn", UINT32_MAX, &mrn) ||
	    !member_u(j, "tid", UINT32_MAX, &tid) ||
	    !member_u(j, "length", INT64_MAX, &length))
		return false;
	keys = member_u(j, "lkey", UINT32_MAX, &lkey) &&
	       member_u(j, "rkey", UINT32_MAX, &rkey);
	for (size_t i = 0; i < r->n_made; i++)
		if (r->made[i].mrn == mrn)
			return false; /* one MR per number */
	r->made[r->n_made++] = (struct made){
		.mrn = (uint32_t)mrn, .tid = (uint32_t)tid,
		.key = { .lkey = keys ? (uint32_t)lkey : 0,
			 .rkey = keys ? (uint32_t)rkey : 0, .length = length },
		.keys = keys, .maker = w, .now_tid = (uint32_t)tid,
		.at = -1, .listed = true,
	};
	w->refs++;
	return true;
}

static bool claim_take(struct reclaim *r, struct maker *w, const json_t *j)
{
	const char *kind = json_string_value(json_object_get(j, "kind"));
	uint64_t handle, qpn = 0;
	int k = -1;

	for (int i = 0; kind && i < UH_KINDS; i++)
		if (claim_kinds[i] && streq(kind, claim_kinds[i]))
			k = i;
	if (k < 0 || !member_u(j, "handle", UINT32_MAX, &handle) ||
	    (k == UH_QP && !member_u(j, "qp_num", UINT32_MAX, &qpn)))
		return false;
	for (size_t i = 0; i < r->n_claims; i++)
		if (r->claims[i].kind == (enum uhandle_kind)k &&
		    r->claims[i].handle == handle)
			return false;
	r->claims[r->n_claims++] = (struct claim){
		.kind = (enum uhandle_kind)k, .handle = (uint32_t)handle,
		.qp_num = (uint32_t)qpn, .maker = w,
	};
	w->refs++;
	return true;
}

/* Room for n more made entries and m more claims. */
static bool room(struct reclaim *r, size_t n, size_t m)
{
	struct made *made;
	struct claim *claims;

	if (r->n_claims + m > RECLAIM_CLAIMS_MAX)
		return false;
	made = realloc(r->made, (r->n_made + n + 1) * sizeof(*made));
	if (made)
		r->made = made;
	claims = made ? realloc(r->claims, (r->n_claims + m + 1) *
						   sizeof(*claims))
		      : NULL;
	if (claims)
		r->claims = claims;
	return made && claims;
}

static void maker_take(struct reclaim *r, const json_t *j)
{
	const json_t *mrs = json_object_get(j, "mrs"),
		     *claims = json_object_get(j, "claims"), *e;
	uint64_t pid, start;
	struct maker *w;
	size_t i;

	if (!member_u(j, "pid", INT32_MAX, &pid) || pid == 0 ||
	    !member_u(j, "start", UINT64_MAX >> 1, &start) ||
	    !json_is_array(mrs) || !json_is_array(claims) ||
	    !room(r, json_array_size(mrs), json_array_size(claims)))
		return;
	w = reclaim_maker_put(r, (pid_t)pid, start,
			      json_is_true(json_object_get(j, "gone")));
	if (!w)
		return;
	json_array_foreach(mrs, i, e)
		made_take(r, w, e);
	json_array_foreach(claims, i, e)
		claim_take(r, w, e);
}

void reclaim_restore(struct profile *p, const json_t *makers)
{
	struct reclaim *r;
	const json_t *j;
	size_t i;

	if (!json_is_array(makers) || !reclaim_shareable(p) ||
	    !(r = reclaim_get(p)))
		return;
	json_array_foreach(makers, i, j)
		maker_take(r, j);
	/* Sorted as the scans keep them; makers naming nothing go. */
	reclaim_made_compact(r);
	r->dirty = false; /* the record says this already */
}
