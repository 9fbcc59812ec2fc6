// SPDX-License-Identifier: MIT
/*
 * librdmad: the multicast groups of an attached profile (ATTACHED's
 * "mcast" list: each joined group's MGID, MLID, qkey and the attributes
 * of the address vector to it), by name.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "librdmad_internal.h"
#include "util.h"

struct client_mcast {
	char *name;
	struct rdmad_mcast g;
};

static int malformed(const struct rdmad_profile *p, const char *name,
		     const char *what)
{
	return client_set_error(EPROTO,
				"rdmad's ATTACHED for profile '%s' is "
				"malformed: mcast '%s': %s",
				p->name, name, what);
}

/* o[key], an integer in [0, max], into *out; false when not. */
static bool get_u32(const json_t *o, const char *key, uint32_t max,
		    uint32_t *out)
{
	uint64_t v;

	if (!client_json_uint(o, key, max, &v))
		return false;
	*out = (uint32_t)v;
	return true;
}

static bool get_u8(const json_t *o, const char *key, uint8_t *out)
{
	uint32_t v;

	if (!get_u32(o, key, 255, &v))
		return false;
	*out = (uint8_t)v;
	return true;
}

static int parse_one(const struct rdmad_profile *p, const char *name,
		     const json_t *o, struct rdmad_mcast *g)
{
	const char *mgid = json_string_value(json_object_get(o, "mgid"));
	const char *join = json_string_value(json_object_get(o, "join"));
	const json_t *ah = json_object_get(o, "ah");
	uint32_t v;

	if (!mgid || inet_pton(AF_INET6, mgid, g->mgid) != 1)
		return malformed(p, name, "bad mgid");
	if (!get_u32(o, "mlid", UINT16_MAX, &v))
		return malformed(p, name, "bad mlid");
	g->mlid = (uint16_t)v;
	if (!get_u32(o, "qkey", UINT32_MAX, &g->qkey) ||
	    !get_u32(o, "remote_qpn", 0xffffff, &g->remote_qpn))
		return malformed(p, name, "bad qkey or remote_qpn");
	if (!json_is_object(ah) || !get_u8(ah, "port_num", &g->port_num) ||
	    !get_u8(ah, "sl", &g->sl) ||
	    !get_u8(ah, "src_path_bits", &g->src_path_bits) ||
	    !get_u8(ah, "static_rate", &g->static_rate) ||
	    !get_u8(ah, "sgid_index", &g->sgid_index) ||
	    !get_u8(ah, "hop_limit", &g->hop_limit) ||
	    !get_u8(ah, "traffic_class", &g->traffic_class) ||
	    !get_u32(ah, "flow_label", 0xfffff, &g->flow_label))
		return malformed(p, name, "bad ah");
	g->send_only = join && streq(join, "send_only");
	return 0;
}

int client_parse_mcasts(struct rdmad_profile *p, const json_t *doc)
{
	const json_t *a = json_object_get(doc, "mcast"), *o;
	size_t i;
	int r;

	if (!a)
		return 0;
	if (!json_is_array(a))
		return client_set_error(EPROTO,
					"rdmad's ATTACHED for profile '%s' "
					"is malformed: \"mcast\" is not an "
					"array",
					p->name);
	p->mcast = calloc(json_array_size(a) + 1, sizeof(*p->mcast));
	if (!p->mcast)
		return client_set_error(ENOMEM, "out of memory");
	json_array_foreach(a, i, o)
	{
		const char *name = json_string_value(json_object_get(o, "name"));
		const char *state =
			json_string_value(json_object_get(o, "join_state"));
		struct client_mcast *c = &p->mcast[p->n_mcast];

		if (!name || !*name)
			return malformed(p, "?", "no name");
		/* A group being joined again has no MGID to give. */
		if (!state || !streq(state, "joined"))
			continue;
		r = parse_one(p, name, o, &c->g);
		if (r < 0)
			return r;
		c->name = strdup(name);
		if (!c->name)
			return client_set_error(ENOMEM, "out of memory");
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
