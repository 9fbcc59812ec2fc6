// SPDX-License-Identifier: MIT
#include <sys/resource.h>

#include "config.h"
#include "budget.h"
#include "log.h"

#define PAUSE_MIN_MS 50
#define PAUSE_MAX_MS 1000

/* Descriptors the configuration itself will hold: one per memory object
 * and XRC domain file, a few per profile (context, async fd, channels). */
static unsigned int declared_fds(const struct config *c)
{
	unsigned int n = 0;

	for (size_t i = 0; i < c->n_profiles; i++) {
		const struct conf_profile *p = &c->profiles[i];

		n += 4 + (unsigned int)p->n_objs[OBJ_MEMORY] +
		     (unsigned int)p->n_objs[OBJ_XRCD] +
		     (unsigned int)p->n_objs[OBJ_CQ];
	}
	return n;
}

void front_caps(const struct config *c, struct front_caps *out)
{
	const struct conf_daemon *d = &c->daemon;
	unsigned long long want, avail, reserve;
	struct rlimit rl;

	*out = (struct front_caps){
		.sessions = (unsigned int)d->max_sessions,
		.sessions_per_uid = (unsigned int)d->max_sessions_per_uid,
		.http = (unsigned int)d->http_max_connections,
	};
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	out->nofile = (unsigned int)(rl.rlim_cur > 1u << 30 ? 1u << 30
							   : rl.rlim_cur);
	reserve = FRONT_RESERVED_FDS + declared_fds(c);
	avail = out->nofile > reserve + 2 ? out->nofile - reserve : 2;
	want = (unsigned long long)out->sessions + out->http;
	if (want <= avail)
		return;
	out->lowered = true;
	out->sessions = (unsigned int)(out->sessions * avail / want);
	out->http = (unsigned int)(out->http * avail / want);
	if (!out->sessions)
		out->sessions = 1;
	if (!out->http)
		out->http = 1;
	if (out->sessions_per_uid > out->sessions)
		out->sessions_per_uid = out->sessions;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *ud)
{
	struct accept_pause *ap = ud;

	(void)s;
	(void)usec;
	log_debug("%s: trying to accept again", ap->what);
	/* Accept again; the next EMFILE pauses again, for longer. */
	sd_event_source_set_enabled(ap->io, SD_EVENT_ON);
	return 0;
}

bool accept_pause_on_error(struct accept_pause *ap, int err)
{
	sd_event *e = sd_event_source_get_event(ap->io);
	uint64_t now;
	int r;

	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
		return false;
	if (!ap->paused)
		log_warn(err, "%s: not accepting connections for now", ap->what);
	ap->paused = true;
	ap->delay_ms = ap->delay_ms ? ap->delay_ms * 2 : PAUSE_MIN_MS;
	if (ap->delay_ms > PAUSE_MAX_MS)
		ap->delay_ms = PAUSE_MAX_MS;
	sd_event_source_set_enabled(ap->io, SD_EVENT_OFF);
	sd_event_now(e, CLOCK_MONOTONIC, &now);
	if (!ap->timer) {
		r = sd_event_add_time(e, &ap->timer, CLOCK_MONOTONIC,
				      now + ap->delay_ms * 1000ULL, 10000,
				      on_retry, ap);
		if (r >= 0)
			r = sd_event_source_set_priority(
				ap->timer, SD_EVENT_PRIORITY_IMPORTANT);
		if (r < 0) {
			log_warn(r, "%s: cannot pause", ap->what);
			/* Without a timer, spinning beats never accepting. */
			sd_event_source_set_enabled(ap->io, SD_EVENT_ON);
			return true;
		}
	} else {
		sd_event_source_set_time(ap->timer,
					 now + ap->delay_ms * 1000ULL);
	}
	sd_event_source_set_enabled(ap->timer, SD_EVENT_ONESHOT);
	return true;
}

void accept_pause_ok(struct accept_pause *ap)
{
	if (ap->paused)
		log_info("%s: accepting connections again", ap->what);
	ap->paused = false;
	ap->delay_ms = 0;
}

void accept_pause_done(struct accept_pause *ap)
{
	ap->timer = sd_event_source_disable_unref(ap->timer);
	ap->io = NULL;
}
