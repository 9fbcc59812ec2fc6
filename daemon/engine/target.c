// SPDX-License-Identifier: MIT
/*
 * Targets: rdma_cm on the loop, the daemon's own QP per connection
 * (rdma_init_qp_attr + ibv_modify_qp, its qp_num in the accept), and
 * type-2 memory windows bound by work requests on that QP. The target's
 * CQ is the target's alone: the loop polls it while binds are under way.
 *
 * Every rdma_cm event is acknowledged before it is acted on (its private
 * data copied first): rdma_destroy_id() waits for the acknowledgement of
 * every event it delivered, so destroying an id with one outstanding
 * would hang.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <rdma/rdma_cma.h>
#include <uthash.h>

#include "events.h"
#include "log.h"
#include "profile_index.h"
#include "target.h"
#include "target_proto.h"
#include "util.h"

enum conn_state {
	CONN_BINDING,
	CONN_ACCEPTING,
	CONN_ESTABLISHED,
	CONN_REVOKED,
};

static const char *const conn_state_names[] = {
	[CONN_BINDING] = "binding",
	[CONN_ACCEPTING] = "accepting",
	[CONN_ESTABLISHED] = "established",
	[CONN_REVOKED] = "revoked",
};

struct conn {
	struct target *t;
	uint64_t id;
	struct rdma_cm_id *cm;
	struct ibv_qp *qp;
	struct ibv_mw *mw[CONF_TARGET_MAX_EXPOSE];
	uint32_t rkey[CONF_TARGET_MAX_EXPOSE];
	unsigned int binds; /* bind work requests not completed */
	uint8_t responder_resources, initiator_depth;
	enum conn_state state;
	char peer[INET6_ADDRSTRLEN + 8];
	uint64_t since; /* CLOCK_MONOTONIC usec */
	sd_event_source *linger;
	UT_hash_handle hh; /* by id */
};

struct target {
	char *profile, *name, *listen;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_comp_channel *channel; /* the CQ's, or NULL: poll */
	struct target_range_src range[CONF_TARGET_MAX_EXPOSE];
	size_t n_range;
	struct conf_prefix *allow;
	size_t n_allow;
	uint8_t token[TARGET_TOKEN_MAX];
	size_t token_len; /* 0: none */
	int max_connections;
	uint8_t max_rd_atom;
	int port;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listener;
	sd_event *event;
	sd_event_source *io, *poll, *cq_io;
	struct conn *conns; /* by id */
	uint64_t next_id;
	struct target_stats stats;
	struct events *events;
	struct profile *owner;
};

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void changed(struct target *t)
{
	if (t->owner)
		profile_touch(t->owner);
}

/* One event of the stream: what happened to connection c (or, c NULL,
 * to a request from peer). */
static void publish(struct target *t, enum event_kind what,
		    const struct conn *c, const char *peer, const char *reason)
{
	events_publish(t->events,
		       &(struct event){
			       .kind = what,
			       .profile_name = t->profile,
			       .u.target = { .name = t->name,
					     .peer = c ? c->peer : peer,
					     .reason = reason,
					     .conn = c ? c->id : 0,
					     .qp_num = c && c->qp
							       ? (int64_t)c->qp->qp_num
							       : -1 } });
}

#define conn_log(prio, c, ...)                                                 \
	log_object((prio), 0, (c)->t->profile, "target", (c)->t->name,         \
		   __VA_ARGS__)

/* ---- set-up, on a worker ---- */

/* The token of "@/path": the file's bytes, without one final newline. */
static int read_token(const char *spec, uint8_t *token, size_t *len,
		      char **why)
{
	char buf[TARGET_TOKEN_MAX + 2];
	ssize_t n;
	int fd;

	if (spec[0] != '@') {
		*len = strlen(spec);
		memcpy(token, spec, *len);
		return 0;
	}
	fd = open(spec + 1, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		int err = errno;

		if (asprintf(why, "token file %s: %s", spec + 1,
			     strerror(err)) < 0)
			*why = NULL;
		return -err;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n < 1 || n > TARGET_TOKEN_MAX) {
		if (asprintf(why,
			     "token file %s must hold 1 to %d bytes (a final "
			     "newline aside)",
			     spec + 1, TARGET_TOKEN_MAX) < 0)
			*why = NULL;
		return -EINVAL;
	}
	memcpy(token, buf, (size_t)n);
	*len = (size_t)n;
	return 0;
}

static int fail(char **why, int err, const char *fmt, ...) _printf_(3, 4);
static int fail(char **why, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(why, fmt, ap) < 0)
		*why = NULL;
	va_end(ap);
	return err < 0 ? err : -err;
}

int target_new(const struct target_params *tp, struct target **out,
	       char **why)
{
	const struct conf_target *c = tp->conf;
	struct sockaddr_storage ss;
	struct ibv_device_attr da;
	struct target *t;
	const char *dev;
	int r;

	*out = NULL;
	*why = NULL;
	if (config_parse_sockaddr(c->listen, &ss) < 0)
		return fail(why, EINVAL, "listen %s is not an address",
			    c->listen);
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->profile = strdup(tp->profile);
	t->name = strdup(c->name);
	t->listen = strdup(c->listen);
	t->allow = calloc(c->n_allow + 1, sizeof(*t->allow));
	if (!t->profile || !t->name || !t->listen || !t->allow) {
		r = -ENOMEM;
		goto err;
	}
	for (size_t i = 0; i < c->n_allow; i++)
		if (!config_parse_prefix(c->allow[i], &t->allow[t->n_allow]))
			t->n_allow++;
	t->ctx = tp->ctx;
	t->pd = tp->pd;
	t->cq = tp->cq;
	t->channel = tp->channel;
	t->port = tp->port;
	t->n_range = tp->n_range;
	memcpy(t->range, tp->range, sizeof(t->range));
	t->max_connections = c->max_connections;
	t->owner = tp->owner;
	t->events = tp->events;
	if (c->token && (r = read_token(c->token, t->token, &t->token_len,
					why)) < 0)
		goto err;
	t->max_rd_atom = 16;
	if (!ibv_query_device(t->ctx, &da))
		t->max_rd_atom = (uint8_t)(da.max_qp_rd_atom < 255
						   ? da.max_qp_rd_atom
						   : 255);
	t->ch = rdma_create_event_channel();
	if (!t->ch) {
		r = fail(why, errno, "rdma_create_event_channel: %s",
			 strerror(errno));
		goto err;
	}
	if (rdma_create_id(t->ch, &t->listener, t, RDMA_PS_TCP)) {
		r = fail(why, errno, "rdma_create_id: %s", strerror(errno));
		goto err;
	}
	if (rdma_bind_addr(t->listener, (struct sockaddr *)&ss)) {
		r = fail(why, errno, "cannot listen on %s: %s", c->listen,
			 strerror(errno));
		goto err;
	}
	dev = t->listener->verbs
		      ? ibv_get_device_name(t->listener->verbs->device)
		      : NULL;
	if (!dev || !streq(dev, tp->ibdev) ||
	    t->listener->port_num != tp->port) {
		r = fail(why, EADDRNOTAVAIL,
			 "listen %s is on %s port %d, not on the profile's "
			 "device %s port %d",
			 c->listen, dev ? dev : "no RDMA device",
			 t->listener->port_num, tp->ibdev, tp->port);
		goto err;
	}
	if (rdma_listen(t->listener, c->max_connections < 1024
					     ? c->max_connections
					     : 1024)) {
		r = fail(why, errno, "rdma_listen on %s: %s", c->listen,
			 strerror(errno));
		goto err;
	}
	*out = t;
	return 0;
err:
	target_free(t);
	return r;
}

/* ---- connections, on the loop ---- */

static void conn_free(struct conn *c)
{
	struct target *t = c->t;

	/* Windows first: the peer's access ends before anything else. */
	for (size_t i = 0; i < t->n_range; i++)
		if (c->mw[i])
			ibv_dealloc_mw(c->mw[i]);
	if (c->cm && c->state != CONN_BINDING)
		rdma_disconnect(c->cm);
	if (c->qp)
		ibv_destroy_qp(c->qp);
	if (c->cm)
		rdma_destroy_id(c->cm);
	sd_event_source_disable_unref(c->linger);
	HASH_DEL(t->conns, c);
	free(c);
	changed(t);
}

/* Invalidate c's windows now; tear it down once the peer had the time to
 * find out. */
static int on_linger_end(sd_event_source *s, uint64_t usec, void *ud)
{
	(void)s;
	(void)usec;
	conn_free(ud);
	return 0;
}

static void conn_revoke(struct conn *c, const char *why)
{
	struct target *t = c->t;

	if (c->state == CONN_REVOKED)
		return;
	for (size_t i = 0; i < t->n_range; i++)
		if (c->mw[i]) {
			ibv_dealloc_mw(c->mw[i]);
			c->mw[i] = NULL;
		}
	conn_log(LOG_NOTICE, c, "connection %" PRIu64 " from %s %s", c->id,
		 c->peer, why);
	publish(t, EV_TARGET_REVOKE, c, NULL, why);
	if (c->state != CONN_ESTABLISHED ||
	    sd_event_add_time_relative(t->event, &c->linger, CLOCK_MONOTONIC,
				       TARGET_LINGER_MS * 1000ULL, 1000,
				       on_linger_end, c) < 0) {
		conn_free(c);
		return;
	}
	c->state = CONN_REVOKED;
	changed(t);
}

static void peer_text(struct rdma_cm_id *id, char *buf, size_t len);

static void reject(struct target *t, struct rdma_cm_id *id,
		   enum target_reject why, const char *text,
		   unsigned long long *counter)
{
	uint8_t buf[TARGET_REJECT_MAX];
	size_t n = target_reject_encode(buf, why, text);

	(*counter)++;
	log_object(LOG_NOTICE, 0, t->profile, "target", t->name,
		   "connection refused: %s", text);
	{
		char peer[INET6_ADDRSTRLEN + 8];

		peer_text(id, peer, sizeof(peer));
		publish(t, EV_TARGET_REJECT, NULL, peer, text);
	}
	rdma_reject(id, buf, (uint8_t)n);
	rdma_destroy_id(id);
}

static void peer_text(struct rdma_cm_id *id, char *buf, size_t len)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
}

static bool prefix_has(const struct conf_prefix *p, const uint8_t *addr)
{
	int bits = p->bits;
	int bytes = bits / 8;

	if (memcmp(p->addr, addr, (size_t)bytes))
		return false;
	bits %= 8;
	return !bits ||
	       !((p->addr[bytes] ^ addr[bytes]) & (uint8_t)(0xff << (8 - bits)));
}

static bool allowed(const struct target *t, const struct sockaddr *sa)
{
	const uint8_t *a4 = NULL, *a6 = NULL;

	if (sa->sa_family == AF_INET) {
		a4 = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *in6 =
			&((const struct sockaddr_in6 *)sa)->sin6_addr;

		a6 = in6->s6_addr;
		if (IN6_IS_ADDR_V4MAPPED(in6))
			a4 = in6->s6_addr + 12;
	}
	for (size_t i = 0; i < t->n_allow; i++) {
		const struct conf_prefix *p = &t->allow[i];

		if ((p->family == AF_INET && a4 && prefix_has(p, a4)) ||
		    (p->family == AF_INET6 && a6 && prefix_has(p, a6)))
			return true;
	}
	return false;
}

/* The token, then zeros: compared in constant time. */
static bool token_ok(const struct target *t, const uint8_t *pd, size_t len)
{
	uint8_t diff = 0;

	if (!t->token_len)
		return true;
	if (len < t->token_len)
		return false;
	for (size_t i = 0; i < len; i++)
		diff |= pd[i] ^ (i < t->token_len ? t->token[i] : 0);
	return diff == 0;
}

static int modify(struct conn *c, enum ibv_qp_state s)
{
	struct ibv_qp_attr attr = { .qp_state = s };
	int mask = 0;

	if (rdma_init_qp_attr(c->cm, &attr, &mask))
		return -errno;
	if (s == IBV_QPS_RTR && attr.max_dest_rd_atomic > c->t->max_rd_atom)
		attr.max_dest_rd_atomic = c->t->max_rd_atom;
	return -ibv_modify_qp(c->qp, &attr, mask);
}

/* QP to RTS and a bind per range: the accept follows their completion. */
static int conn_setup(struct conn *c, const char **step)
{
	struct target *t = c->t;
	struct ibv_qp_init_attr ia = {
		.send_cq = t->cq,
		.recv_cq = t->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = (uint32_t)t->n_range + 1,
			 .max_recv_wr = 1,
			 .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	int r;

	*step = "ibv_create_qp";
	c->qp = ibv_create_qp(t->pd, &ia);
	if (!c->qp)
		return -errno;
	*step = "modify_qp to init";
	if ((r = modify(c, IBV_QPS_INIT)) < 0)
		return r;
	*step = "modify_qp to rtr";
	if ((r = modify(c, IBV_QPS_RTR)) < 0)
		return r;
	*step = "modify_qp to rts";
	if ((r = modify(c, IBV_QPS_RTS)) < 0)
		return r;
	for (size_t i = 0; i < t->n_range; i++) {
		const struct target_range_src *rs = &t->range[i];
		struct ibv_send_wr *bad, wr = {
			.wr_id = c->id << 8 | i,
			.opcode = IBV_WR_BIND_MW,
			.send_flags = IBV_SEND_SIGNALED,
		};

		*step = "ibv_alloc_mw type 2";
		c->mw[i] = ibv_alloc_mw(t->pd, IBV_MW_TYPE_2);
		if (!c->mw[i])
			return -errno;
		c->rkey[i] = ibv_inc_rkey(c->mw[i]->rkey);
		wr.bind_mw.mw = c->mw[i];
		wr.bind_mw.rkey = c->rkey[i];
		wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
			.mr = rs->mr,
			.addr = rs->addr,
			.length = rs->length,
			.mw_access_flags = rs->access,
		};
		*step = "bind of a memory window";
		if ((r = ibv_post_send(c->qp, &wr, &bad)))
			return -r;
		c->binds++;
	}
	return 0;
}

static void on_request(struct target *t, struct rdma_cm_id *id,
		       const uint8_t *pdata, size_t plen,
		       uint8_t initiator_depth, uint8_t responder_resources)
{
	char peer[sizeof(((struct conn *)0)->peer)], text[160];
	const char *step = NULL;
	struct conn *c;
	int r;

	peer_text(id, peer, sizeof(peer));
	if (!allowed(t, rdma_get_peer_addr(id))) {
		snprintf(text, sizeof(text), "%s is not in the allow list of "
			 "target %s", peer, t->name);
		reject(t, id, TARGET_REJECT_ADDRESS, text,
		       &t->stats.rejected_address);
		return;
	}
	if (!token_ok(t, pdata, plen)) {
		snprintf(text, sizeof(text), "%s sent a wrong or no token for "
			 "target %s", peer, t->name);
		reject(t, id, TARGET_REJECT_TOKEN, text,
		       &t->stats.rejected_token);
		return;
	}
	if (HASH_COUNT(t->conns) >= (unsigned int)t->max_connections) {
		snprintf(text, sizeof(text), "target %s has its %d "
			 "connections (max_connections)", t->name,
			 t->max_connections);
		reject(t, id, TARGET_REJECT_FULL, text,
		       &t->stats.rejected_full);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		reject(t, id, TARGET_REJECT_RESOURCES, "out of memory",
		       &t->stats.failed);
		return;
	}
	c->t = t;
	c->id = ++t->next_id;
	c->cm = id;
	id->context = c;
	c->since = now_usec();
	/* What the peer reads from us, what it lets us read from it. */
	c->responder_resources = initiator_depth < t->max_rd_atom
					 ? initiator_depth
					 : t->max_rd_atom;
	c->initiator_depth = responder_resources < t->max_rd_atom
				     ? responder_resources
				     : t->max_rd_atom;
	memcpy(c->peer, peer, sizeof(peer));
	HASH_ADD(hh, t->conns, id, sizeof(c->id), c);
	r = conn_setup(c, &step);
	if (r < 0) {
		snprintf(text, sizeof(text), "target %s cannot take the "
			 "connection: %s: %s", t->name, step, strerror(-r));
		log_object(LOG_ERR, r, t->profile, "target", t->name,
			   "connection from %s: %s", peer, step);
		/* The id goes with the reject. */
		c->cm = NULL;
		conn_free(c);
		reject(t, id, TARGET_REJECT_RESOURCES, text,
		       &t->stats.failed);
		return;
	}
	changed(t);
	/* With a channel, the CQ is armed: its event comes. */
	if (!t->cq_io)
		sd_event_source_set_enabled(t->poll, SD_EVENT_ON);
}

/* Every window is bound: tell the peer where they are. */
static void conn_accept(struct conn *c)
{
	struct target *t = c->t;
	struct target_range r[CONF_TARGET_MAX_EXPOSE];
	uint8_t desc[TARGET_DESC_MAX];
	struct rdma_conn_param param = {
		.responder_resources = c->responder_resources,
		.initiator_depth = c->initiator_depth,
		.retry_count = 7,
		.rnr_retry_count = 7,
		.qp_num = c->qp->qp_num,
	};

	for (size_t i = 0; i < t->n_range; i++)
		r[i] = (struct target_range){ .addr = t->range[i].addr,
					      .rkey = c->rkey[i],
					      .length = t->range[i].length };
	param.private_data = desc;
	param.private_data_len =
		(uint8_t)target_desc_encode(desc, r, t->n_range);
	if (rdma_accept(c->cm, &param)) {
		log_object(LOG_ERR, errno, t->profile, "target", t->name,
			   "rdma_accept of %s", c->peer);
		t->stats.failed++;
		conn_free(c);
		return;
	}
	c->state = CONN_ACCEPTING;
	changed(t);
}

static struct conn *conn_by_id(struct target *t, uint64_t id)
{
	struct conn *c;

	HASH_FIND(hh, t->conns, &id, sizeof(id), c);
	return c;
}

/* The binds' completions: each connection whose windows are all bound
 * is accepted. Returns whether some connection still waits for binds. */
static bool reap(struct target *t)
{
	struct ibv_wc wc[16];
	bool binding = false;
	struct conn *c, *tmp;
	int n;

	while ((n = ibv_poll_cq(t->cq, ARRAY_SIZE(wc), wc)) > 0)
		for (int i = 0; i < n; i++) {
			c = conn_by_id(t, wc[i].wr_id >> 8);
			if (!c || c->state != CONN_BINDING)
				continue;
			if (wc[i].status != IBV_WC_SUCCESS) {
				log_object(LOG_ERR, 0, t->profile, "target",
					   t->name,
					   "binding a window for %s: %s",
					   c->peer,
					   ibv_wc_status_str(wc[i].status));
				t->stats.failed++;
				conn_free(c);
				continue;
			}
			if (--c->binds == 0)
				conn_accept(c);
		}
	HASH_ITER(hh, t->conns, c, tmp)
		binding |= c->state == CONN_BINDING;
	return binding;
}

/* Without a completion channel: poll every millisecond while binds run
 * (they take microseconds). */
static int on_poll(sd_event_source *s, uint64_t usec, void *ud)
{
	(void)usec;
	if (!reap(ud))
		return sd_event_source_set_enabled(s, SD_EVENT_OFF);
	sd_event_source_set_time_relative(s, 1000);
	return sd_event_source_set_enabled(s, SD_EVENT_ON);
}

/* With one: the CQ said it has completions. Each event is acked, the CQ
 * armed again, then polled (what came between is not missed). */
static int on_cq_event(sd_event_source *s, int fd, uint32_t revents,
		       void *ud)
{
	struct target *t = ud;
	struct ibv_cq *cq;
	void *cq_ctx;
	int r;

	(void)s;
	(void)fd;
	(void)revents;
	while (!ibv_get_cq_event(t->channel, &cq, &cq_ctx))
		ibv_ack_cq_events(cq, 1);
	r = ibv_req_notify_cq(t->cq, 0);
	if (r)
		log_object(LOG_ERR, -r, t->profile, "target", t->name,
			   "cannot arm the completion queue's events: %s",
			   strerror(r));
	reap(t);
	return 0;
}

static int on_cm(sd_event_source *s, int fd, uint32_t revents, void *ud)
{
	struct target *t = ud;
	struct rdma_cm_event *ev;

	(void)s;
	(void)fd;
	(void)revents;
	while (!rdma_get_cm_event(t->ch, &ev)) {
		enum rdma_cm_event_type type = ev->event;
		struct rdma_cm_id *id = ev->id;
		struct conn *c = id == t->listener ? NULL : id->context;
		uint8_t pdata[TARGET_TOKEN_MAX];
		size_t plen = 0;
		uint8_t depth = 0, resources = 0;

		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			plen = ev->param.conn.private_data_len < sizeof(pdata)
				       ? ev->param.conn.private_data_len
				       : sizeof(pdata);
			if (ev->param.conn.private_data)
				memcpy(pdata, ev->param.conn.private_data,
				       plen);
			else
				plen = 0;
			depth = ev->param.conn.initiator_depth;
			resources = ev->param.conn.responder_resources;
		}
		rdma_ack_cm_event(ev);
		switch (type) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			on_request(t, id, pdata, plen, depth, resources);
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (c && c->state == CONN_ACCEPTING) {
				c->state = CONN_ESTABLISHED;
				t->stats.accepted++;
				conn_log(LOG_INFO, c,
					 "connection %" PRIu64 " from %s, qp "
					 "%u",
					 c->id, c->peer, c->qp->qp_num);
				publish(t, EV_TARGET_CONNECT, c, NULL, NULL);
				changed(t);
			}
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			if (c && c->state != CONN_REVOKED) {
				t->stats.disconnected++;
				conn_log(LOG_INFO, c,
					 "connection %" PRIu64 " from %s "
					 "disconnected",
					 c->id, c->peer);
				publish(t, EV_TARGET_DISCONNECT, c, NULL,
					"the peer disconnected");
				conn_free(c);
			}
			break;
		case RDMA_CM_EVENT_REJECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
			if (c) {
				t->stats.failed++;
				conn_log(LOG_NOTICE, c,
					 "connection %" PRIu64 " from %s: %s",
					 c->id, c->peer,
					 rdma_event_str(type));
				conn_free(c);
			}
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL: {
			struct conn *x, *tmp;

			/* rdma_cm holds the device until every id on it
			 * goes. */
			HASH_ITER(hh, t->conns, x, tmp)
				conn_free(x);
			if (t->listener) {
				rdma_destroy_id(t->listener);
				t->listener = NULL;
			}
			changed(t);
			break;
		}
		default:
			break;
		}
	}
	return 0;
}

void target_set_owner(struct target *t, struct profile *owner)
{
	t->owner = owner;
}

int target_start(struct target *t, sd_event *e)
{
	int fl = fcntl(t->ch->fd, F_GETFL);
	int r;

	if (fl < 0 || fcntl(t->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	t->event = sd_event_ref(e);
	r = sd_event_add_io(e, &t->io, t->ch->fd, EPOLLIN, on_cm, t);
	if (r < 0)
		return r;
	/* Binds take microseconds: poll every millisecond while any runs. */
	r = sd_event_add_time_relative(e, &t->poll, CLOCK_MONOTONIC, 1000, 1,
				       on_poll, t);
	if (r < 0)
		return r;
	r = sd_event_source_set_enabled(t->poll, SD_EVENT_OFF);
	if (r < 0 || !t->channel)
		return r;
	/* The CQ's completion channel: wait for its events instead. */
	fl = fcntl(t->channel->fd, F_GETFL);
	if (fl < 0 || fcntl(t->channel->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	r = sd_event_add_io(e, &t->cq_io, t->channel->fd, EPOLLIN,
			    on_cq_event, t);
	if (r < 0)
		return r;
	r = ibv_req_notify_cq(t->cq, 0);
	return r ? -r : 0;
}

struct target *target_free(struct target *t)
{
	struct conn *c, *tmp;

	if (!t)
		return NULL;
	t->owner = NULL;
	HASH_ITER(hh, t->conns, c, tmp) {
		if (c->state == CONN_ESTABLISHED)
			publish(t, EV_TARGET_REVOKE, c, NULL,
				"the target stopped");
		conn_free(c);
	}
	if (t->listener)
		rdma_destroy_id(t->listener);
	sd_event_source_disable_unref(t->io);
	sd_event_source_disable_unref(t->poll);
	sd_event_source_disable_unref(t->cq_io);
	if (t->ch)
		rdma_destroy_event_channel(t->ch);
	sd_event_unref(t->event);
	free(t->allow);
	free(t->profile);
	free(t->name);
	free(t->listen);
	explicit_bzero(t->token, sizeof(t->token));
	free(t);
	return NULL;
}

int target_revoke(struct target *t, uint64_t id)
{
	struct conn *c = conn_by_id(t, id);

	if (!c || c->state == CONN_REVOKED)
		return -ENOENT;
	t->stats.revoked++;
	conn_revoke(c, "revoked");
	return 0;
}

json_t *target_connections_json(const struct target *t)
{
	json_t *a = json_array();
	uint64_t now = now_usec();
	struct conn *c, *tmp;

	HASH_ITER(hh, t->conns, c, tmp) {
		json_t *r = json_array();

		for (size_t i = 0; r && i < t->n_range; i++)
			json_array_append_new(
				r, json_pack("{s:I, s:I, s:I}", "addr",
					     (json_int_t)t->range[i].addr,
					     "rkey", (json_int_t)c->rkey[i],
					     "length",
					     (json_int_t)t->range[i].length));
		json_array_append_new(
			a, json_pack("{s:I, s:s, s:I, s:s, s:f, s:o}", "id",
				     (json_int_t)c->id, "peer", c->peer,
				     "qp_num",
				     (json_int_t)(c->qp ? c->qp->qp_num : 0),
				     "state", conn_state_names[c->state],
				     "age", (double)(now - c->since) / 1e6,
				     "ranges", r));
	}
	return a;
}

void target_json(const struct target *t, json_t *j)
{
	json_object_set_new(j, "port", json_integer(t->port));
	json_object_set_new(j, "listening", json_boolean(t->listener));
	json_object_set_new(j, "connections", target_connections_json(t));
}

void target_stats(const struct target *t, struct target_stats *out)
{
	*out = t->stats;
	out->connections = HASH_COUNT(t->conns);
}

void target_handles(const struct target *t,
		    void (*add)(void *ud, enum uhandle_kind k, uint32_t h),
		    void *ud)
{
	struct conn *c, *tmp;

	HASH_ITER(hh, t->conns, c, tmp) {
		if (c->qp)
			add(ud, UH_QP, c->qp->handle);
		for (size_t i = 0; i < t->n_range; i++)
			if (c->mw[i])
				add(ud, UH_MW, c->mw[i]->handle);
	}
}
