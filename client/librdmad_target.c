// SPDX-License-Identifier: MIT
/*
 * The peer side of a target (rdmad.conf(5), "target"): connect the
 * caller's own RC QP over rdma_cm and read the memory windows the target
 * grants from its accept (proto/target_proto.h). The QP is the caller's,
 * so the connection is driven by hand: rdma_init_qp_attr() and
 * ibv_modify_qp() through INIT, RTR and RTS, then rdma_establish().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "rdmad.h"
#include "rdmad_internal.h"
#include "target_proto.h"

#define TIMEOUT_MS 5000

struct rdmad_target_conn {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
};

static int parse_address(const char *s, struct sockaddr_storage *ss)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM },
			*res = NULL;
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(s, ':');
	size_t len;

	if (!colon || colon == s)
		return -EINVAL;
	len = (size_t)(colon - s);
	if (s[0] == '[') {
		if (len < 3 || colon[-1] != ']')
			return -EINVAL;
		s++;
		len -= 2;
	}
	if (len >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, len);
	host[len] = '\0';
	if (getaddrinfo(host, colon + 1, &hints, &res) || !res)
		return -EINVAL;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

/* The next event, which must be want: 0, or -errno with the message
 * set. A reject's reason goes into the message. */
static int expect(struct rdmad_target_conn *c, enum rdma_cm_event_type want,
		  uint8_t *pdata, size_t *plen)
{
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type got;
	uint8_t data[256];
	size_t n = 0;
	int status;

	if (rdma_get_cm_event(c->ch, &ev))
		return client_set_error(errno, "rdma_get_cm_event: %s",
					strerror(errno));
	got = ev->event;
	status = ev->status;
	if (ev->param.conn.private_data) {
		/* At most 255 bytes: data holds them all. */
		n = ev->param.conn.private_data_len;
		memcpy(data, ev->param.conn.private_data, n);
	}
	rdma_ack_cm_event(ev);
	if (got == want) {
		if (pdata) {
			memcpy(pdata, data, n < *plen ? n : *plen);
			*plen = n < *plen ? n : *plen;
		}
		return 0;
	}
	if (got == RDMA_CM_EVENT_REJECTED && target_reject_reason(data, n)) {
		char text[TARGET_REJECT_MAX];
		size_t tl = n - TARGET_HEADER_SIZE;

		memcpy(text, data + TARGET_HEADER_SIZE, tl);
		text[tl < sizeof(text) ? tl : sizeof(text) - 1] = '\0';
		return client_set_error(ECONNREFUSED, "target refused: %s",
					text);
	}
	return client_set_error(got == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED
							      : EHOSTUNREACH,
				"rdma_cm: %s (status %d) where %s was due",
				rdma_event_str(got), status,
				rdma_event_str(want));
}

static int modify(struct rdmad_target_conn *c, enum ibv_qp_state s)
{
	struct ibv_qp_attr attr = { .qp_state = s };
	int mask = 0, r;

	if (rdma_init_qp_attr(c->id, &attr, &mask))
		return client_set_error(errno, "rdma_init_qp_attr: %s",
					strerror(errno));
	r = ibv_modify_qp(c->qp, &attr, mask);
	if (r)
		return client_set_error(r, "ibv_modify_qp to state %d: %s", s,
					strerror(r));
	return 0;
}

void rdmad_target_disconnect(struct rdmad_target_conn *c)
{
	if (!c)
		return;
	if (c->id) {
		rdma_disconnect(c->id);
		rdma_destroy_id(c->id);
	}
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	free(c);
}

int rdmad_target_connect(struct ibv_qp *qp, const char *address,
			 const void *token, size_t token_len,
			 struct rdmad_target_range *ranges, size_t max_ranges,
			 struct rdmad_target_conn **out)
{
	struct target_range r[TARGET_MAX_RANGES];
	uint8_t desc[TARGET_DESC_MAX];
	size_t dlen = sizeof(desc);
	struct rdma_conn_param param = {
		.responder_resources = 4,
		.initiator_depth = 4,
		.retry_count = 7,
		.rnr_retry_count = 7,
		.private_data = token,
		.private_data_len = (uint8_t)token_len,
	};
	struct sockaddr_storage ss;
	struct rdmad_target_conn *c;
	const char *dev;
	int n, e;

	*out = NULL;
	if (!qp || qp->qp_type != IBV_QPT_RC)
		return client_set_error(EINVAL, "an RC QP is needed");
	if (token_len > TARGET_TOKEN_MAX)
		return client_set_error(EINVAL, "a token has at most %d bytes",
					TARGET_TOKEN_MAX);
	if (!address || parse_address(address, &ss) < 0)
		return client_set_error(EINVAL,
					"'%s' is not IPV4:PORT or [IPV6]:PORT",
					address ? address : "");
	c = calloc(1, sizeof(*c));
	if (!c)
		return client_set_error(ENOMEM, "out of memory");
	c->qp = qp;
	c->ch = rdma_create_event_channel();
	if (!c->ch) {
		e = client_set_error(errno, "rdma_create_event_channel: %s",
				     strerror(errno));
		goto fail;
	}
	if (rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP)) {
		e = client_set_error(errno, "rdma_create_id: %s",
				     strerror(errno));
		goto fail;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&ss,
			      TIMEOUT_MS)) {
		e = client_set_error(errno, "rdma_resolve_addr %s: %s",
				     address, strerror(errno));
		goto fail;
	}
	if ((e = expect(c, RDMA_CM_EVENT_ADDR_RESOLVED, NULL, NULL)) < 0)
		goto fail;
	if (rdma_resolve_route(c->id, TIMEOUT_MS)) {
		e = client_set_error(errno, "rdma_resolve_route %s: %s",
				     address, strerror(errno));
		goto fail;
	}
	if ((e = expect(c, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL, NULL)) < 0)
		goto fail;
	/* The route leaves from one device: the QP must be on it. */
	dev = ibv_get_device_name(c->id->verbs->device);
	if (strcmp(dev, ibv_get_device_name(qp->context->device))) {
		e = client_set_error(EXDEV,
				     "%s is reached through %s, the QP is on "
				     "%s",
				     address, dev,
				     ibv_get_device_name(qp->context->device));
		goto fail;
	}
	if ((e = modify(c, IBV_QPS_INIT)) < 0)
		goto fail;
	param.qp_num = qp->qp_num;
	if (rdma_connect(c->id, &param)) {
		e = client_set_error(errno, "rdma_connect %s: %s", address,
				     strerror(errno));
		goto fail;
	}
	if ((e = expect(c, RDMA_CM_EVENT_CONNECT_RESPONSE, desc, &dlen)) < 0)
		goto fail;
	n = target_desc_decode(desc, dlen, r);
	if (n < 0) {
		e = client_set_error(EPROTO,
				     "%s is not an rdmad target (its accept "
				     "carries no descriptor)",
				     address);
		goto fail;
	}
	if ((e = modify(c, IBV_QPS_RTR)) < 0 ||
	    (e = modify(c, IBV_QPS_RTS)) < 0)
		goto fail;
	if (rdma_establish(c->id)) {
		e = client_set_error(errno, "rdma_establish: %s",
				     strerror(errno));
		goto fail;
	}
	for (int i = 0; i < n && (size_t)i < max_ranges; i++)
		ranges[i] = (struct rdmad_target_range){
			.addr = r[i].addr, .rkey = r[i].rkey,
			.length = r[i].length };
	*out = c;
	return n;
fail:
	rdmad_target_disconnect(c);
	return e;
}
