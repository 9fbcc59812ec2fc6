// SPDX-License-Identifier: MIT
/*
 * librdmad: the multicast groups of an attached profile (ATTACHED's
 * "mcast" list: each joined group's MGID, MLID, qkey and the attributes
 * of the address vector to it), by name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "attached.h"
#include "librdmad_internal.h"
#include "util.h"

struct client_mcast {
	char *name;
	struct rdmad_mcast g;
};

/* A joined group's numbers, as the decoder checked them. */
static void group_of(const struct proto_att_mcast *d, struct rdmad_mcast *g)
{
	const struct proto_att_ah *ah = &d->ah;

	memcpy(g->mgid, d->mgid, sizeof(g->mgid));
	g->mlid = (uint16_t)d->mlid;
	g->qkey = (uint32_t)d->qkey;
	g->remote_qpn = (uint32_t)d->remote_qpn;
	g->port_num = (uint8_t)ah->port_num;
	g->sl = (uint8_t)ah->sl;
	g->src_path_bits = (uint8_t)ah->src_path_bits;
	g->static_rate = (uint8_t)ah->static_rate;
	g->sgid_index = (uint8_t)ah->sgid_index;
	g->hop_limit = (uint8_t)ah->hop_limit;
	g->traffic_class = (uint8_t)ah->traffic_class;
	g->flow_label = (uint32_t)ah->flow_label;
	g->send_only = d->join && streq(d->join, "send_only");
}

int client_mcasts_take(struct rdmad_profile *p, struct proto_attached *a)
{
	p->mcast = calloc(a->n_mcast + 1, sizeof(*p->mcast));
	if (!p->mcast)
		return client_set_error(ENOMEM, "out of memory");
	for (size_t i = 0; i < a->n_mcast; i++) {
		struct proto_att_mcast *d = &a->mcast[i];
		struct client_mcast *c = &p->mcast[p->n_mcast];

		/* A group being joined again has no MGID to give. */
		if (!d->join_state || !streq(d->join_state, "joined"))
			continue;
		group_of(d, &c->g);
		c->name = d->name;
		d->name = NULL;
		p->n_mcast++;
	}
	return 0;
}

void client_mcasts_free(struct rdmad_profile *p)
{
	for (size_t i = 0; i < p->n_mcast; i++)
		free(p->mcast[i].name);
	free(p->mcast);
	p->mcast = NULL;
	p->n_mcast = 0;
}

int rdmad_mcast(struct rdmad_profile *p, const char *name,
		struct rdmad_mcast *out)
{
	if (!p || !name || !out)
		return client_set_error(EINVAL, "no profile, name or result");
	for (size_t i = 0; i < p->n_mcast; i++)
		if (streq(p->mcast[i].name, name)) {
			*out = p->mcast[i].g;
			return 0;
		}
	return client_set_error(ENOENT,
				"profile '%s' has no joined mcast group '%s'",
				p->name, name);
}
