// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "progress.h"

#define N(pr, k) json_integer_value(json_object_get(pr, k))

static const char *mib_pair(long long a, long long b, const char *what,
			    char *buf, size_t len)
{
	if (!b)
		return "";
	snprintf(buf, len, ", %lld/%lld MiB %s", a >> 20, b >> 20, what);
	return buf;
}

/* "3/12 objects, 512/1024 MiB populated, 64/1088 MiB registered" */
static void counts(json_t *pr, char *buf, size_t len)
{
	char pop[64], reg[64];

	snprintf(buf, len, "%lld/%lld objects%s%s", N(pr, "objects"),
		 N(pr, "objects_total"),
		 mib_pair(N(pr, "populated"), N(pr, "populated_total"),
			  "populated", pop, sizeof(pop)),
		 mib_pair(N(pr, "bytes"), N(pr, "bytes_total"), "registered",
			  reg, sizeof(reg)));
}

const char *progress_text(json_t *profile, char *buf, size_t len)
{
	json_t *pr = json_object_get(profile, "progress");
	char text[192];

	if (!pr)
		return "";
	counts(pr, text, sizeof(text));
	snprintf(buf, len, " (%s)", text);
	return buf;
}

/* How far, 0 to 1: bytes where there are any (populating and
 * registering weigh alike), else objects. */
static double fraction(json_t *pr)
{
	double done = (double)(N(pr, "populated") + N(pr, "bytes"));
	double total = (double)(N(pr, "populated_total") + N(pr, "bytes_total"));

	if (total <= 0) {
		done = (double)N(pr, "objects");
		total = (double)N(pr, "objects_total");
	}
	return total > 0 && done < total ? done / total : total > 0 ? 1 : 0;
}

/* The profiles of doc being created: *out holds up to max of them. */
static size_t creating(json_t *doc, json_t **out, size_t max)
{
	size_t i, n = 0;
	json_t *p;

	if (json_is_object(doc))
		return json_object_get(doc, "progress") && max ? (out[0] = doc, 1)
							       : 0;
	json_array_foreach (doc, i, p)
		if (json_object_get(p, "progress") && n < max)
			out[n++] = p;
	return n;
}

static const char *name_of(json_t *p)
{
	const char *s = json_string_value(json_object_get(p, "name"));

	return s ? s : "?";
}

/* "ingest   [########............]  40%  3/12 objects, ..." */
static void bar(json_t *p)
{
	static const int width = 24;
	json_t *pr = json_object_get(p, "progress");
	double f = fraction(pr);
	int fill = (int)(f * width + 0.5);
	char text[192];

	counts(pr, text, sizeof(text));
	printf("\r\033[K%-16s [%.*s%.*s] %3d%%  %s\n", name_of(p), fill,
	       "########################", width - fill,
	       "........................", (int)(f * 100), text);
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&t, NULL);
}

int progress_follow(json_t **doc, progress_fetch_fn fetch, void *ud, bool tty)
{
	json_t *list[64];
	char last[64][192], text[192];
	size_t n, drawn = 0;
	int r;

	memset(last, 0, sizeof(last));
	while ((n = creating(*doc, list, 64)) > 0) {
		if (tty && drawn)
			printf("\033[%zuA", drawn); /* back over the bars */
		for (size_t i = 0; i < n; i++) {
			if (tty) {
				bar(list[i]);
				continue;
			}
			counts(json_object_get(list[i], "progress"), text,
			       sizeof(text));
			if (strcmp(text, last[i])) {
				printf("%s: creating, %s\n", name_of(list[i]),
				       text);
				snprintf(last[i], sizeof(last[i]), "%s", text);
			}
		}
		/* Bars of profiles done meanwhile: cleared. */
		for (size_t i = n; tty && i < drawn; i++)
			printf("\r\033[K\n");
		if (tty && drawn > n)
			printf("\033[%zuA", drawn - n);
		drawn = tty ? n : 0;
		fflush(stdout);
		sleep_ms(tty ? 250 : 1000);
		json_decref(*doc);
		*doc = NULL;
		r = fetch(ud, doc);
		if (r || !*doc)
			return r ? r : 1;
	}
	return 0;
}
