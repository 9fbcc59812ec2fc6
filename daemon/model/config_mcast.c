// SPDX-License-Identifier: MIT
/*
 * Multicast groups in the configuration: the address a declaration
 * names, and what the verify pass checks of it (its QPs exist and are
 * UD, the address is a multicast one of the device's family, no group is
 * declared twice in a profile).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "config_internal.h"
#include "config_mcast.h"

int config_parse_mcast(const struct conf_mcast *m,
		       struct sockaddr_storage *out, const char **why)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)out;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;
	const char *s = m->addr ? m->addr : m->mgid;

	memset(out, 0, sizeof(*out));
	*why = NULL;
	if (!s) {
		*why = "needs addr (an IP multicast address) or mgid";
		return -EINVAL;
	}
	if (m->addr && m->mgid) {
		*why = "takes addr or mgid, not both";
		return -EINVAL;
	}
	if (m->addr && inet_pton(AF_INET, s, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		if (!IN_MULTICAST(ntohl(sin->sin_addr.s_addr))) {
			*why = "is not an IPv4 multicast address "
			       "(224.0.0.0/4)";
			return -EINVAL;
		}
		return 0;
	}
	if (m->mgid && config_parse_gid(s, sin6->sin6_addr.s6_addr) == 0) {
		sin6->sin6_family = AF_INET6;
	} else if (inet_pton(AF_INET6, s, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
	} else {
		*why = "is not an IPv4 or IPv6 address";
		return -EINVAL;
	}
	if (!IN6_IS_ADDR_MULTICAST(&sin6->sin6_addr)) {
		*why = m->mgid ? "is not a multicast GID (ff00::/8)"
			       : "is not an IPv6 multicast address (ff00::/8)";
		return -EINVAL;
	}
	return 0;
}

static const char *unnamed(const char *name)
{
	return name ? name : "?";
}

size_t conf_mcast_refs(const struct conf_mcast *m, struct conf_ref *out,
		       size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < m->n_qps && n < max; i++)
		out[n++] = (struct conf_ref){ OBJ_QP, m->qps[i] };
	return n;
}

static void verify_qps(struct parser *p, const struct conf_profile *pr,
		       const struct conf_mcast *m)
{
	if (!m->n_qps)
		parser_error(p, m->loc, "mcast '%s': qps lists no QP",
			     unnamed(m->name));
	if (m->n_qps > CONF_MCAST_MAX_QPS)
		parser_error(p, m->loc,
			     "mcast '%s': %zu qps, at most %d",
			     unnamed(m->name), m->n_qps, CONF_MCAST_MAX_QPS);
	for (size_t i = 0; i < m->n_qps; i++) {
		const struct conf_qp *q = conf_obj_find(pr, OBJ_QP, m->qps[i]);

		for (size_t j = 0; j < i; j++)
			if (streq(m->qps[j], m->qps[i]))
				parser_error(p, m->loc,
					     "mcast '%s': qp '%s' is listed "
					     "twice",
					     unnamed(m->name), m->qps[i]);
		if (!q) {
			parser_error(p, m->loc,
				     "mcast '%s': qp '%s' is not declared in "
				     "profile '%s'",
				     unnamed(m->name), m->qps[i],
				     unnamed(pr->name));
			continue;
		}
		if (q->type != QPK_UD)
			parser_error(p, m->loc,
				     "mcast '%s': qp '%s' is %s: only UD QPs "
				     "join a multicast group",
				     unnamed(m->name), m->qps[i],
				     qp_kind_name(q->type));
		else if (q->qkey != CONF_MCAST_QKEY)
			parser_warning(p, m->loc,
				       "mcast '%s': qp '%s' has qkey 0x%x, not "
				       "0x%x (the qkey of the groups rdma_cm "
				       "makes): datagrams sent to the group "
				       "with its qkey are dropped there",
				       unnamed(m->name), m->qps[i], q->qkey,
				       CONF_MCAST_QKEY);
	}
}

/* The device's declared GID family, where it says one. */
static void verify_family(struct parser *p, const struct conf_profile *pr,
			  const struct conf_mcast *m, int family)
{
	const struct conf_device *d = config_device(p->c, pr->device);

	if (!d || !m->addr || d->gid_family == GIDF_ANY)
		return;
	if ((d->gid_family == GIDF_IPV4) != (family == AF_INET))
		parser_error(p, m->loc,
			     "mcast '%s': addr %s is %s, device '%s' uses "
			     "%s GIDs",
			     unnamed(m->name), m->addr,
			     family == AF_INET ? "IPv4" : "IPv6", d->name,
			     d->gid_family == GIDF_IPV4 ? "IPv4" : "IPv6");
}

void conf_verify_mcasts(struct parser *p, const struct conf_profile *pr)
{
	size_t n = pr->n_objs[OBJ_MCAST];

	for (size_t i = 0; i < n; i++) {
		const struct conf_mcast *m = conf_obj(pr, OBJ_MCAST, i);
		struct sockaddr_storage ss;
		const char *why;

		verify_qps(p, pr, m);
		if (config_parse_mcast(m, &ss, &why) < 0) {
			if (m->addr || m->mgid)
				parser_error(p, m->loc,
					     "mcast '%s': %s %s %s",
					     unnamed(m->name),
					     m->addr ? "addr" : "mgid",
					     m->addr ? m->addr : m->mgid, why);
			else
				parser_error(p, m->loc, "mcast '%s': %s",
					     unnamed(m->name), why);
			continue;
		}
		verify_family(p, pr, m, ss.ss_family);
		/* The same group twice: one is enough (a group's QPs are
		 * listed in it). Few groups per profile: pairs. */
		for (size_t j = 0; j < i; j++) {
			const struct conf_mcast *o = conf_obj(pr, OBJ_MCAST, j);
			struct sockaddr_storage os;

			if (config_parse_mcast(o, &os, &why) < 0 ||
			    os.ss_family != ss.ss_family)
				continue;
			if (ss.ss_family == AF_INET
				    ? ((struct sockaddr_in *)&os)->sin_addr.s_addr ==
					      ((struct sockaddr_in *)&ss)->sin_addr.s_addr
				    : !memcmp(&((struct sockaddr_in6 *)&os)->sin6_addr,
					      &((struct sockaddr_in6 *)&ss)->sin6_addr,
					      16))
				parser_error(p, m->loc,
					     "mcast '%s': group %s is declared "
					     "already, by mcast '%s' (%s:%d)",
					     unnamed(m->name),
					     m->addr ? m->addr : m->mgid,
					     unnamed(o->name), o->loc.file,
					     o->loc.line);
		}
	}
}
