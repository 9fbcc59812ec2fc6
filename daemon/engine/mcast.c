// SPDX-License-Identifier: MIT
/*
 * Multicast groups: one rdma_cm id per group, bound to the profile's
 * address on its device (the GID the profile selected), joined with
 * rdma_join_multicast(_ex). rdma_cm's id has a verbs context of its own;
 * the group's MGID and MLID are what matter, and the daemon's QPs, on
 * the profile's context of the same device, are attached with them.
 *
 * As in target.c, every rdma_cm event is acknowledged before it is acted
 * on: rdma_leave_multicast() and rdma_destroy_id() wait for it.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <infiniband/ib.h>

#include "attached.h"
#include "events.h"
#include "gid.h"
#include "log.h"
#include "profile_index.h"
#include "mcast.h"
#include "util.h"

enum join_state {
	JOIN_JOINING, /* asked, no answer yet (a rejoin on the loop) */
	JOIN_JOINED,  /* QPs attached, AH made */
	JOIN_ERROR,   /* the fabric dropped it and a rejoin failed */
};

static const char *const join_state_names[] = {
	[JOIN_JOINING] = "joining",
	[JOIN_JOINED] = "joined",
	[JOIN_ERROR] = "error",
};

struct mcast {
	char *profile, *name;
	enum mcast_join join;
	struct sockaddr_storage addr; /* the group */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	bool joined; /* rdma_cm has a membership to leave */
	enum join_state state;
	char *reason; /* JOIN_ERROR */
	struct ibv_qp *qps[CONF_MCAST_MAX_QPS];
	char *qp_names[CONF_MCAST_MAX_QPS];
	bool attached[CONF_MCAST_MAX_QPS];
	size_t n_qps;
	struct ibv_pd *pd;
	/* What the join answered. */
	struct ibv_ah_attr ah_attr;
	uint32_t remote_qpn, qkey;
	struct ibv_ah *ah;
	unsigned int rejoins;
	sd_event_source *io;
	/* A port that came back or a GID table that changed (the event
	 * stream's port_active, gid_change): joined again from the loop's
	 * next turn, not from inside the publication. */
	sd_event_source *again;
	const char *again_why;
	struct events *events;
	struct profile *owner;
};

static int fail(char **why, int err, const char *fmt, ...) _printf_(3, 4);
static int fail(char **why, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(why, fmt, ap) < 0)
		*why = NULL;
	va_end(ap);
	return -(err ? err : EIO);
}

static const char *group_text(const struct mcast *m, char *buf, size_t len)
{
	const struct sockaddr_in *sin = (const void *)&m->addr;
	const struct sockaddr_in6 *sin6 = (const void *)&m->addr;

	if (m->addr.ss_family == AF_INET)
		inet_ntop(AF_INET, &sin->sin_addr, buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, &sin6->sin6_addr, buf, (socklen_t)len);
	return buf;
}

/* The profile's address: its GID as rdma_cm binds it. IPv4-mapped GIDs
 * are IPv4 addresses; others IPv6 ones (a link-local one on the GID's
 * netdev); on InfiniBand, the GID itself (AF_IB). */
static void source_addr(const struct mcast_params *mp, bool ib,
			struct sockaddr_storage *ss)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	char path[256], ndev[IF_NAMESIZE + 2] = "";
	FILE *f;

	memset(ss, 0, sizeof(*ss));
	if (ib) {
		struct sockaddr_ib *sib = (struct sockaddr_ib *)ss;

		sib->sib_family = AF_IB;
		sib->sib_pkey = htons(0xffff);
		memcpy(&sib->sib_addr, mp->gid.raw, 16);
		return;
	}
	if (!memcmp(mp->gid.raw, mapped, sizeof(mapped))) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, mp->gid.raw + 12, 4);
		return;
	}
	sin6->sin6_family = AF_INET6;
	memcpy(&sin6->sin6_addr, mp->gid.raw, 16);
	if (!IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr))
		return;
	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d",
		 mp->ibdev, mp->port, mp->gid_index);
	f = fopen(path, "re");
	if (f) {
		if (fgets(ndev, sizeof(ndev), f))
			ndev[strcspn(ndev, "\n")] = 0;
		fclose(f);
	}
	sin6->sin6_scope_id = ndev[0] ? if_nametoindex(ndev) : 0;
}

static int join(struct mcast *m)
{
	struct rdma_cm_join_mc_attr_ex attr = {
		.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
			     RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
		.join_flags = m->join == MCJ_SEND_ONLY
				      ? RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
				      : RDMA_MC_JOIN_FLAG_FULLMEMBER,
		.addr = (struct sockaddr *)&m->addr,
	};

	if (m->join == MCJ_FULL ? rdma_join_multicast(m->id, attr.addr, m)
				: rdma_join_multicast_ex(m->id, &attr, m))
		return -errno;
	m->joined = true;
	m->state = JOIN_JOINING;
	return 0;
}

/* Undo attach(): QPs detached, AH gone. */
static void detach(struct mcast *m)
{
	for (size_t i = 0; i < m->n_qps; i++)
		if (m->attached[i]) {
			ibv_detach_mcast(m->qps[i], &m->ah_attr.grh.dgid,
					 m->ah_attr.dlid);
			m->attached[i] = false;
		}
	if (m->ah)
		ibv_destroy_ah(m->ah);
	m->ah = NULL;
}

/* The join's answer: attach each QP (a send-only member receives
 * nothing: its QPs only send, through the AH), then the AH. */
static int attach(struct mcast *m, const struct rdma_ud_param *ud,
		  char **why)
{
	char text[GID_TEXT_SIZE];
	int r;

	m->ah_attr = ud->ah_attr;
	m->remote_qpn = ud->qp_num;
	m->qkey = ud->qkey;
	for (size_t i = 0; m->join == MCJ_FULL && i < m->n_qps; i++) {
		r = ibv_attach_mcast(m->qps[i], &m->ah_attr.grh.dgid,
				     m->ah_attr.dlid);
		if (r) {
			detach(m);
			return fail(why, r, "ibv_attach_mcast of qp '%s' to %s: %s",
				    m->qp_names[i],
				    gid_text(&m->ah_attr.grh.dgid, text),
				    strerror(r));
		}
		m->attached[i] = true;
	}
	m->ah = m->pd ? ibv_create_ah(m->pd, &m->ah_attr) : NULL;
	if (m->pd && !m->ah) {
		r = errno;
		detach(m);
		return fail(why, r, "ibv_create_ah to %s: %s",
			    gid_text(&m->ah_attr.grh.dgid, text), strerror(r));
	}
	m->state = JOIN_JOINED;
	free(m->reason);
	m->reason = NULL;
	return 0;
}

/* Wait for the answer to the first join (on a worker). */
static int wait_joined(struct mcast *m, char **why)
{
	struct pollfd pfd = { .fd = m->ch->fd, .events = POLLIN };
	char text[INET6_ADDRSTRLEN];
	struct rdma_cm_event *ev;
	struct rdma_ud_param ud;
	enum rdma_cm_event_type type;
	int status, r;

	do
		r = poll(&pfd, 1, MCAST_JOIN_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return fail(why, r ? errno : ETIMEDOUT,
			    "no answer to the join of %s in %d ms",
			    group_text(m, text, sizeof(text)),
			    MCAST_JOIN_TIMEOUT_MS);
	if (rdma_get_cm_event(m->ch, &ev))
		return fail(why, errno, "rdma_get_cm_event: %s",
			    strerror(errno));
	type = ev->event;
	status = ev->status;
	ud = ev->param.ud;
	rdma_ack_cm_event(ev);
	if (type != RDMA_CM_EVENT_MULTICAST_JOIN) {
		if (type == RDMA_CM_EVENT_MULTICAST_ERROR)
			m->joined = false;
		return fail(why, status < 0 ? -status : EPROTO,
			    "join of %s: %s (status %d)",
			    group_text(m, text, sizeof(text)),
			    rdma_event_str(type), status);
	}
	return attach(m, &ud, why);
}

static int init(struct mcast *m, const struct mcast_params *mp)
{
	const struct conf_mcast *c = mp->conf;

	m->profile = strdup(mp->profile);
	m->name = strdup(c->name);
	if (!m->profile || !m->name)
		return -ENOMEM;
	m->join = c->join;
	m->n_qps = mp->n_qps;
	m->pd = mp->pd;
	m->events = mp->events;
	m->owner = mp->owner;
	for (size_t i = 0; i < mp->n_qps; i++) {
		m->qps[i] = mp->qps[i];
		m->qp_names[i] = strdup(c->qps[i]);
		if (!m->qp_names[i])
			return -ENOMEM;
	}
	return 0;
}

int mcast_new(const struct mcast_params *mp, struct mcast **out, char **why)
{
	struct sockaddr_storage src;
	struct ibv_port_attr pa;
	const char *how, *dev;
	struct mcast *m;
	int r;

	*out = NULL;
	*why = NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	r = init(m, mp);
	if (r < 0)
		goto err;
	if (config_parse_mcast(mp->conf, &m->addr, &how) < 0) {
		r = fail(why, EINVAL, "%s", how);
		goto err;
	}
	r = mp->n_qps ? ibv_query_port(mp->qps[0]->context,
				       (uint8_t)mp->port, &pa)
		      : EINVAL;
	if (r) {
		r = fail(why, r, "ibv_query_port %s/%d: %s", mp->ibdev,
			 mp->port, strerror(r));
		goto err;
	}
	source_addr(mp, pa.link_layer == IBV_LINK_LAYER_INFINIBAND, &src);
	m->ch = rdma_create_event_channel();
	if (!m->ch) {
		r = fail(why, errno, "rdma_create_event_channel: %s",
			 strerror(errno));
		goto err;
	}
	if (rdma_create_id(m->ch, &m->id, m, RDMA_PS_UDP)) {
		r = fail(why, errno, "rdma_create_id: %s", strerror(errno));
		goto err;
	}
	if (rdma_bind_addr(m->id, (struct sockaddr *)&src)) {
		char gid[GID_TEXT_SIZE];

		r = fail(why, errno, "cannot bind to the profile's GID %s: %s",
			 gid_text(&mp->gid, gid), strerror(errno));
		goto err;
	}
	dev = m->id->verbs ? ibv_get_device_name(m->id->verbs->device)
			   : NULL;
	if (!dev || !streq(dev, mp->ibdev) || m->id->port_num != mp->port) {
		r = fail(why, EADDRNOTAVAIL,
			 "the profile's address is on %s port %d for rdma_cm, "
			 "not on %s port %d",
			 dev ? dev : "no RDMA device", m->id->port_num,
			 mp->ibdev, mp->port);
		goto err;
	}
	r = join(m);
	if (r < 0) {
		char text[INET6_ADDRSTRLEN];

		/* The kernel's ENOTSUPP (524), which has no text: RoCE v2
		 * joins no IPv6 group in Linux 6.1. */
		r = fail(why, r == -524 ? EOPNOTSUPP : -r,
			 "rdma_join_multicast %s: %s",
			 group_text(m, text, sizeof(text)),
			 r == -524 ? "not supported on this device and GID"
				   : strerror(-r));
		goto err;
	}
	r = wait_joined(m, why);
	if (r < 0)
		goto err;
	*out = m;
	return 0;
err:
	mcast_free(m);
	return r;
}

static void changed(struct mcast *m)
{
	if (m->owner)
		profile_touch(m->owner);
}

static void publish(struct mcast *m, enum event_kind what, const char *reason)
{
	char text[INET6_ADDRSTRLEN];

	events_publish(m->events,
		       &(struct event){
			       .kind = what,
			       .profile_name = m->profile,
			       .u.mcast = { m->name,
					    group_text(m, text, sizeof(text)),
					    reason } });
}

static void set_error(struct mcast *m, const char *fmt, ...) _printf_(2, 3);
static void set_error(struct mcast *m, const char *fmt, ...)
{
	va_list ap;

	free(m->reason);
	va_start(ap, fmt);
	if (vasprintf(&m->reason, fmt, ap) < 0)
		m->reason = NULL;
	va_end(ap);
	m->state = JOIN_ERROR;
	log_object(LOG_WARNING, 0, m->profile, "mcast", m->name, "%s",
		   m->reason ? m->reason : "error");
	publish(m, EV_MCAST_ERROR, m->reason);
}

/* The fabric dropped the group (or the address moved): detach, leave
 * what is left of the membership, and join again. */
static void rejoin(struct mcast *m, const char *why)
{
	char text[INET6_ADDRSTRLEN];
	int r;

	detach(m);
	if (m->joined)
		rdma_leave_multicast(m->id, (struct sockaddr *)&m->addr);
	m->joined = false;
	m->rejoins++;
	log_object(LOG_NOTICE, 0, m->profile, "mcast", m->name,
		   "group %s: %s, joining again",
		   group_text(m, text, sizeof(text)), why);
	r = join(m);
	if (r < 0)
		set_error(m, "rdma_join_multicast %s: %s",
			  group_text(m, text, sizeof(text)), strerror(-r));
	changed(m);
}

static void on_event(struct mcast *m, enum rdma_cm_event_type type,
		     int status, const struct rdma_ud_param *ud)
{
	char *why = NULL;

	switch (type) {
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		if (m->state == JOIN_JOINED)
			break;
		if (attach(m, ud, &why) < 0) {
			set_error(m, "%s", why ? why : "attach failed");
			free(why);
		} else {
			publish(m, EV_MCAST_JOIN, NULL);
		}
		changed(m);
		break;
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		m->joined = false;
		rejoin(m, status ? strerror(status < 0 ? -status : status)
				 : "multicast error");
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		rejoin(m, "the address changed");
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		detach(m);
		set_error(m, "the device went away");
		changed(m);
		break;
	default:
		break;
	}
}

static int on_cm(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	struct mcast *m = ud;
	struct rdma_cm_event *ev;

	(void)s;
	(void)fd;
	(void)revents;
	while (!rdma_get_cm_event(m->ch, &ev)) {
		enum rdma_cm_event_type type = ev->event;
		int status = ev->status;
		struct rdma_ud_param p = ev->param.ud;

		rdma_ack_cm_event(ev);
		on_event(m, type, status, &p);
	}
	return 0;
}

static int on_again(sd_event_source *s, void *ud)
{
	struct mcast *m = ud;

	(void)s;
	rejoin(m, m->again_why);
	return 0;
}

/* The device's events for this profile that drop memberships. */
static void on_stream(void *ud, const struct event *ev)
{
	struct mcast *m = ud;

	if (!ev->profile_name || !streq(ev->profile_name, m->profile) ||
	    !m->again)
		return;
	if (ev->kind == EV_PORT_ACTIVE)
		m->again_why = "the port is active again";
	else if (ev->kind == EV_GID_CHANGE)
		m->again_why = "the GID table changed";
	else
		return;
	sd_event_source_set_enabled(m->again, SD_EVENT_ONESHOT);
}

int mcast_start(struct mcast *m, sd_event *e)
{
	int fl = fcntl(m->ch->fd, F_GETFL);
	int r;

	if (fl < 0 || fcntl(m->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	r = sd_event_add_io(e, &m->io, m->ch->fd, EPOLLIN, on_cm, m);
	if (r < 0)
		return r;
	r = sd_event_add_defer(e, &m->again, on_again, m);
	if (r < 0)
		return r;
	r = sd_event_source_set_enabled(m->again, SD_EVENT_OFF);
	if (r < 0 || !m->events)
		return r;
	return events_subscribe(m->events, on_stream, m);
}

void mcast_drain(struct mcast *m)
{
	if (!m)
		return;
	detach(m);
	for (size_t i = 0; i < m->n_qps; i++)
		free(m->qp_names[i]);
	m->n_qps = 0;
	m->pd = NULL;
}

void mcast_set_owner(struct mcast *m, struct profile *owner)
{
	m->owner = owner;
}

struct mcast *mcast_free(struct mcast *m)
{
	if (!m)
		return NULL;
	if (m->events && m->again)
		events_unsubscribe(m->events, on_stream, m);
	sd_event_source_disable_unref(m->io);
	sd_event_source_disable_unref(m->again);
	detach(m);
	if (m->joined)
		rdma_leave_multicast(m->id, (struct sockaddr *)&m->addr);
	if (m->id)
		rdma_destroy_id(m->id);
	if (m->ch)
		rdma_destroy_event_channel(m->ch);
	for (size_t i = 0; i < m->n_qps; i++)
		free(m->qp_names[i]);
	free(m->reason);
	free(m->profile);
	free(m->name);
	free(m);
	return NULL;
}

uint64_t mcast_epoch(const struct mcast *m)
{
	return m ? (uint64_t)m->rejoins << 2 | m->state : 0;
}

static json_t *ah_json(const struct mcast *m)
{
	const struct ibv_ah_attr *a = &m->ah_attr;
	char text[GID_TEXT_SIZE];
	json_t *j = json_pack("{s:i, s:i, s:i, s:i, s:i, s:b}", "port_num",
			      a->port_num, "dlid", a->dlid, "sl", a->sl,
			      "src_path_bits", a->src_path_bits, "static_rate",
			      a->static_rate, "is_global", a->is_global);

	if (!j)
		return NULL;
	if (m->ah)
		json_object_set_new(j, "handle", json_integer(m->ah->handle));
	if (a->is_global) {
		json_object_set_new(j, "dgid",
				    json_string(gid_text(&a->grh.dgid, text)));
		json_object_set_new(j, "sgid_index",
				    json_integer(a->grh.sgid_index));
		json_object_set_new(j, "hop_limit",
				    json_integer(a->grh.hop_limit));
		json_object_set_new(j, "traffic_class",
				    json_integer(a->grh.traffic_class));
		json_object_set_new(j, "flow_label",
				    json_integer(a->grh.flow_label));
	}
	return j;
}

void mcast_json(const struct mcast *m, json_t *j)
{
	char text[INET6_ADDRSTRLEN];
	json_t *qps = json_array();

	json_object_set_new(j, "group",
			    json_string(group_text(m, text, sizeof(text))));
	json_object_set_new(j, "join", json_string(mcast_join_name(m->join)));
	json_object_set_new(j, "join_state",
			    json_string(join_state_names[m->state]));
	if (m->reason)
		json_object_set_new(j, "join_error", json_string(m->reason));
	json_object_set_new(j, "rejoins", json_integer(m->rejoins));
	for (size_t i = 0; qps && i < m->n_qps; i++)
		json_array_append_new(
			qps, json_pack("{s:s, s:i, s:b}", "name",
				       m->qp_names[i], "qp_num",
				       m->qps[i]->qp_num, "attached",
				       m->attached[i]));
	json_object_set_new(j, "qps", qps);
	if (m->state != JOIN_JOINED)
		return;
	json_object_set_new(j, "mgid", json_string(gid_text(
						&m->ah_attr.grh.dgid, text)));
	json_object_set_new(j, "mlid", json_integer(m->ah_attr.dlid));
	json_object_set_new(j, "qkey", json_integer(m->qkey));
	json_object_set_new(j, "remote_qpn", json_integer(m->remote_qpn));
	json_object_set_new(j, "ah", ah_json(m));
}

int mcast_attached(const struct mcast *m, struct proto_att_mcast *out)
{
	char text[INET6_ADDRSTRLEN];
	const struct ibv_ah_attr *a = &m->ah_attr;

	out->group = strdup(group_text(m, text, sizeof(text)));
	out->join = strdup(mcast_join_name(m->join));
	out->join_state = strdup(join_state_names[m->state]);
	out->has_rejoins = true;
	out->rejoins = m->rejoins;
	out->qps = calloc(m->n_qps ? m->n_qps : 1, sizeof(*out->qps));
	if (!out->group || !out->join || !out->join_state || !out->qps)
		return -ENOMEM;
	for (; out->n_qps < m->n_qps; out->n_qps++) {
		struct proto_att_mcast_qp *q = &out->qps[out->n_qps];

		q->name = strdup(m->qp_names[out->n_qps]);
		if (!q->name)
			return -ENOMEM;
		q->qp_num = m->qps[out->n_qps]->qp_num;
		q->attached = m->attached[out->n_qps];
	}
	if (m->state != JOIN_JOINED)
		return 0;
	out->has_mgid = out->has_mlid = out->has_qkey = true;
	out->has_remote_qpn = out->has_ah = true;
	memcpy(out->mgid, a->grh.dgid.raw, sizeof(out->mgid));
	out->mlid = a->dlid;
	out->qkey = m->qkey;
	out->remote_qpn = m->remote_qpn;
	out->ah = (struct proto_att_ah){
		.has_handle = m->ah != NULL,
		.handle = m->ah ? m->ah->handle : 0,
		.port_num = a->port_num, .dlid = a->dlid, .sl = a->sl,
		.src_path_bits = a->src_path_bits,
		.static_rate = a->static_rate, .is_global = a->is_global,
	};
	if (a->is_global) {
		out->ah.has_dgid = true;
		memcpy(out->ah.dgid, a->grh.dgid.raw, sizeof(out->ah.dgid));
		out->ah.sgid_index = a->grh.sgid_index;
		out->ah.hop_limit = a->grh.hop_limit;
		out->ah.traffic_class = a->grh.traffic_class;
		out->ah.flow_label = a->grh.flow_label;
	}
	return 0;
}

void mcast_handles(const struct mcast *m,
		   void (*add)(void *ud, enum uhandle_kind k, uint32_t h),
		   void *ud)
{
	if (m->ah)
		add(ud, UH_AH, m->ah->handle);
}
