// SPDX-License-Identifier: MIT
/*
 * devwatch_probe [--hold] IBDEV: daemon/verbs/devwatch.c on a real device, for
 * tests/integration/test_devwatch.py.
 *
 * Opens IBDEV, watches devices (devwatch) and IBDEV's async events
 * (asyncwatch) on one sd-event loop, and does what the daemon must: on
 * REMOVE of IBDEV (or DEVICE_FATAL) it frees its objects and closes the
 * context; on ADD of IBDEV it opens it again. With --hold it keeps the
 * context after REMOVE until SIGUSR1 (to show that the kernel waits).
 * While open it holds a PD, an MR, a CQ and a QP, so that closing has
 * something to free. One line per event on stdout:
 *
 *   READY
 *   DEVWATCH ADD|REMOVE <ibdev>
 *   OPENED <ibdev> | OPEN_FAILED <ibdev> <errno name>
 *   ASYNC <ibdev> <event> [port <n>]      e.g. ASYNC rxe0 PORT_ERR port 1
 *   HOLDING <ibdev>
 *   CLOSED <ibdev> <0 or the first failing call and its return value>
 *   EXIT
 *
 * Exits 0 on SIGTERM or SIGINT after releasing everything, 1 on a failure.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "devwatch.h"
#include "util.h"

struct probe {
	const char *ibdev;
	bool hold;
	sd_event *e;
	struct devwatch *dw;
	/* While IBDEV is open: */
	struct ibv_context *ctx;
	struct asyncwatch *aw;
	struct ibv_pd *pd;
	void *buf;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	bool holding;
};

#define BUF_SIZE 65536

static void say(const char *fmt, ...) _printf_(1, 2);
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static const char *event_name(enum ibv_event_type t)
{
	static const char *const names[] = {
		[IBV_EVENT_CQ_ERR] = "CQ_ERR",
		[IBV_EVENT_QP_FATAL] = "QP_FATAL",
		[IBV_EVENT_QP_REQ_ERR] = "QP_REQ_ERR",
		[IBV_EVENT_QP_ACCESS_ERR] = "QP_ACCESS_ERR",
		[IBV_EVENT_COMM_EST] = "COMM_EST",
		[IBV_EVENT_SQ_DRAINED] = "SQ_DRAINED",
		[IBV_EVENT_PATH_MIG] = "PATH_MIG",
		[IBV_EVENT_PATH_MIG_ERR] = "PATH_MIG_ERR",
		[IBV_EVENT_DEVICE_FATAL] = "DEVICE_FATAL",
		[IBV_EVENT_PORT_ACTIVE] = "PORT_ACTIVE",
		[IBV_EVENT_PORT_ERR] = "PORT_ERR",
		[IBV_EVENT_LID_CHANGE] = "LID_CHANGE",
		[IBV_EVENT_PKEY_CHANGE] = "PKEY_CHANGE",
		[IBV_EVENT_SM_CHANGE] = "SM_CHANGE",
		[IBV_EVENT_SRQ_ERR] = "SRQ_ERR",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ_LIMIT_REACHED",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "QP_LAST_WQE_REACHED",
		[IBV_EVENT_CLIENT_REREGISTER] = "CLIENT_REREGISTER",
		[IBV_EVENT_GID_CHANGE] = "GID_CHANGE",
		[IBV_EVENT_WQ_FATAL] = "WQ_FATAL",
	};

	if ((size_t)t < ARRAY_SIZE(names) && names[t])
		return names[t];
	return "UNKNOWN";
}

static bool is_port_event(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		return true;
	default:
		return false;
	}
}

/* Free the objects, then the context; report the first failure. */
static void probe_close(struct probe *p)
{
	const char *failed = NULL;
	int r, first = 0;

#define STEP(call, what)                                                       \
	do {                                                                   \
		r = (call);                                                    \
		if (r && !failed) {                                            \
			failed = (what);                                       \
			first = r;                                             \
		}                                                              \
	} while (0)

	if (!p->ctx)
		return;
	p->aw = asyncwatch_free(p->aw);
	if (p->qp)
		STEP(ibv_destroy_qp(p->qp), "ibv_destroy_qp");
	if (p->cq)
		STEP(ibv_destroy_cq(p->cq), "ibv_destroy_cq");
	if (p->mr)
		STEP(ibv_dereg_mr(p->mr), "ibv_dereg_mr");
	if (p->pd)
		STEP(ibv_dealloc_pd(p->pd), "ibv_dealloc_pd");
	STEP(ibv_close_device(p->ctx), "ibv_close_device");
#undef STEP
	if (p->buf)
		munmap(p->buf, BUF_SIZE);
	p->qp = NULL;
	p->cq = NULL;
	p->mr = NULL;
	p->pd = NULL;
	p->buf = NULL;
	p->ctx = NULL;
	p->holding = false;
	if (failed)
		say("CLOSED %s %s=%d", p->ibdev, failed, first);
	else
		say("CLOSED %s 0", p->ibdev);
}

static void on_async(void *ud, const struct ibv_async_event *ev)
{
	struct probe *p = ud;

	if (is_port_event(ev->event_type))
		say("ASYNC %s %s port %d", p->ibdev, event_name(ev->event_type),
		    ev->element.port_num);
	else
		say("ASYNC %s %s", p->ibdev, event_name(ev->event_type));
	if (ev->event_type == IBV_EVENT_DEVICE_FATAL)
		probe_close(p);
}

static int probe_objects(struct probe *p)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	p->pd = ibv_alloc_pd(p->ctx);
	if (!p->pd)
		return -errno;
	p->buf = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->buf == MAP_FAILED) {
		p->buf = NULL;
		return -errno;
	}
	p->mr = ibv_reg_mr(p->pd, p->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!p->mr)
		return -errno;
	p->cq = ibv_create_cq(p->ctx, 16, NULL, NULL, 0);
	if (!p->cq)
		return -errno;
	qa.send_cq = p->cq;
	qa.recv_cq = p->cq;
	p->qp = ibv_create_qp(p->pd, &qa);
	if (!p->qp)
		return -errno;
	return 0;
}

static int probe_open(struct probe *p)
{
	struct ibv_device **list;
	int n, r = -ENODEV;

	if (p->ctx)
		return 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		r = -errno;
		n = 0;
	}
	for (int i = 0; i < n; i++) {
		if (!streq(ibv_get_device_name(list[i]), p->ibdev))
			continue;
		p->ctx = ibv_open_device(list[i]);
		r = p->ctx ? 0 : -errno;
		break;
	}
	if (list)
		ibv_free_device_list(list);
	if (r == 0)
		r = asyncwatch_new(p->e, p->ctx, on_async, p, &p->aw);
	if (r == 0)
		r = probe_objects(p);
	if (r < 0) {
		if (p->ctx)
			probe_close(p);
		say("OPEN_FAILED %s %s", p->ibdev, strerrorname_np(-r));
		return r;
	}
	say("OPENED %s", p->ibdev);
	return 0;
}

static void on_dev(void *ud, const char *ibdev, enum devwatch_action a)
{
	struct probe *p = ud;

	say("DEVWATCH %s %s", a == DEVWATCH_ADD ? "ADD" : "REMOVE", ibdev);
	if (!streq(ibdev, p->ibdev))
		return;
	if (a == DEVWATCH_ADD) {
		(void)probe_open(p);
	} else if (p->ctx && p->hold) {
		p->holding = true;
		say("HOLDING %s", p->ibdev);
	} else {
		probe_close(p);
	}
}

static int on_release(sd_event_source *s _unused_,
		      const struct signalfd_siginfo *si _unused_, void *ud)
{
	struct probe *p = ud;

	if (p->holding)
		probe_close(p);
	return 0;
}

static int on_exit_signal(sd_event_source *s,
			  const struct signalfd_siginfo *si _unused_,
			  void *ud _unused_)
{
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

int main(int argc, char **argv)
{
	struct probe p = { 0 };
	sigset_t mask;
	int r, i = 1;

	if (argc > 1 && streq(argv[1], "--hold")) {
		p.hold = true;
		i++;
	}
	if (argc != i + 1) {
		fprintf(stderr, "usage: %s [--hold] IBDEV\n", argv[0]);
		return 2;
	}
	p.ibdev = argv[i];

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR1);
	/* sd-event (252) takes signals that are blocked. */
	r = sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ? -errno : 0;
	if (r == 0)
		r = sd_event_new(&p.e);
	if (r >= 0)
		r = sd_event_add_signal(p.e, NULL, SIGTERM, on_exit_signal, &p);
	if (r >= 0)
		r = sd_event_add_signal(p.e, NULL, SIGINT, on_exit_signal, &p);
	if (r >= 0)
		r = sd_event_add_signal(p.e, NULL, SIGUSR1, on_release, &p);
	/* Watch first, then open: a removal in between is not missed. */
	if (r >= 0)
		r = devwatch_new(p.e, on_dev, &p, &p.dw);
	if (r < 0) {
		fprintf(stderr, "devwatch_probe: setting up: %s\n",
			strerror(-r));
		sd_event_unref(p.e);
		return 1;
	}
	(void)probe_open(&p);
	say("READY");

	r = sd_event_loop(p.e);
	probe_close(&p);
	p.dw = devwatch_free(p.dw);
	/* Also frees the signal sources, which the loop owns. */
	sd_event_unref(p.e);
	say("EXIT");
	if (r < 0) {
		fprintf(stderr, "devwatch_probe: event loop: %s\n",
			strerror(-r));
		return 1;
	}
	return 0;
}
