// SPDX-License-Identifier: MIT
/*
 * The leases of the control socket's attachments: the sets the attaches
 * of one generation share (control_internal.h), an attachment's own
 * (those it took over from the previous run), their release and their
 * text for the lease record.
 */
#include <stdio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "control_internal.h"
#include "attach_view.h"

static void leases_release(struct control *c, const char *profile,
			   struct lease *leases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct lease *l = &leases[i];

		manager_release(c->m, profile, l->kind, l->name, l->serial);
		free(l->name);
	}
	free(leases);
}

void lease_set_free(struct lease_set *set)
{
	for (size_t i = 0; i < set->n_leases; i++)
		free(set->leases[i].name);
	free(set->leases);
	free(set->memories);
	free(set->text);
	free(set);
}

/*
 * One attachment fewer holds set: its lease on each object ends (in
 * one count while the generation holds: no lookup by name). The set
 * itself stays in the attach cache while its generation holds, so that
 * the next attach leases the same objects without building it again (a
 * worker that attaches, works and detaches in a loop).
 */
static void lease_set_put(struct control *c, const char *profile,
			  struct lease_set *set)
{
	struct profile *p;

	if (!set)
		return;
	set->refs--;
	p = manager_profile(c->m, profile);
	/* Nothing moved since the attach: one count. */
	if (!p || profile_attach_generation(p) != set->generation ||
	    !manager_release_held(c->m, p, set->mode, set->generation))
		for (size_t i = 0; i < set->n_leases; i++) {
			struct lease *l = &set->leases[i];

			manager_release(c->m, profile, l->kind, l->name,
					l->serial);
		}
	if (!set->refs && !set->slot)
		lease_set_free(set);
}

void attachment_release(struct control *c, struct attachment *a)
{
	lease_set_put(c, a->profile, a->set);
	leases_release(c, a->profile, a->leases, a->n_leases);
	free(a->profile);
	free(a->lease_text);
	json_decref(a->report);
	*a = (struct attachment){ 0 };
}

static const struct lease *leases_find(const struct lease *l, size_t n,
				       enum obj_kind kind, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (l[i].kind == kind && streq(l[i].name, name))
			return &l[i];
	return NULL;
}

bool attachment_holds(const struct attachment *a, enum obj_kind kind,
		      const char *name)
{
	return (a->set && leases_find(a->set->leases, a->set->n_leases, kind,
				      name)) ||
	       leases_find(a->leases, a->n_leases, kind, name);
}

const struct lease *attachment_memory(const struct attachment *a,
				      const char *name)
{
	const struct lease_set *set = a->set;
	const struct lease *l =
	    leases_find(a->leases, a->n_leases, OBJ_MEMORY, name);

	/* The set's memories by their index: a set may hold 10k MRs. */
	for (size_t i = 0; !l && set && i < set->n_memories; i++)
		if (streq(set->leases[set->memories[i]].name, name))
			l = &set->leases[set->memories[i]];
	return l;
}

size_t attachment_n_leases(const struct attachment *a)
{
	return (a->set ? a->set->n_leases : 0) + a->n_leases;
}

char *leases_render(struct profile *p, const struct lease *l, size_t n,
			   size_t *len)
{
	const char *sep = "";
	char *text = NULL;
	FILE *f;

	*len = 0;
	if (!n || !(f = open_memstream(&text, len)))
		return NULL;
	for (size_t i = 0; i < n; i++)
		manager_lease_put(f, p, l[i].kind, l[i].name, l[i].serial,
				  &sep);
	if (fclose(f) != 0) {
		free(text);
		*len = 0;
		return NULL;
	}
	return text;
}

void attachment_render(struct control *c, struct attachment *a)
{
	struct profile *p = manager_profile(c->m, a->profile);

	free(a->lease_text);
	a->lease_text = NULL;
	a->lease_len = 0;
	if (p && a->shared)
		a->lease_text =
			leases_render(p, a->leases, a->n_leases, &a->lease_len);
}

void lease_set_forget(struct lease_set *set)
{
	if (set && set->refs)
		set->slot = NULL;
	else if (set)
		lease_set_free(set);
}

/* A new set's id: random at the first, counted from there, so that
 * this run's sets do not take the names of the previous run's, whose
 * records the store holds until the lease record names them no more. */
static uint64_t lease_set_id(void)
{
	static uint64_t next;

	while (!next &&
	       getrandom(&next, sizeof(next), GRND_NONBLOCK) != sizeof(next))
		next = (uint64_t)time(NULL) << 32 | (uint64_t)getpid();
	return next++;
}

struct lease_set *lease_set_get(struct profile *p, struct lease_set **slot,
			       const struct attach_view *v, uint64_t generation)
{
	struct lease_set *set = *slot;

	if (set) {
		set->refs++;
		attach_view_lease(p, v);
		return set;
	}
	set = calloc(1, sizeof(*set));
	if (!set)
		return NULL;
	/* Names copied: the configuration may go with a reload before
	 * the lease does. */
	set->leases =
	    calloc(v->n_leases ? v->n_leases : 1, sizeof(*set->leases));
	set->memories =
	    calloc(v->n_leases ? v->n_leases : 1, sizeof(*set->memories));
	set->mode = v->mode;
	set->generation = generation;
	set->id = lease_set_id();
	for (size_t i = 0; set->leases && set->memories && i < v->n_leases;
	     i++) {
		const struct attach_lease *l = &v->leases[i];

		if (l->kind == OBJ_MEMORY)
			set->memories[set->n_memories++] = i;
		set->leases[i] = (struct lease){ l->kind, strdup(l->name),
						 l->serial };
		if (!set->leases[i].name)
			break;
		set->n_leases++;
	}
	if (!set->leases || !set->memories || set->n_leases < v->n_leases) {
		lease_set_free(set);
		return NULL;
	}
	set->text = leases_render(p, set->leases, set->n_leases, &set->len);
	attach_view_lease(p, v);
	set->refs = 1;
	set->slot = slot;
	*slot = set;
	return set;
}
