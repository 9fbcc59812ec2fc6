// SPDX-License-Identifier: MIT
/*
 * What a load reports: errors and warnings, each at its file:line, kept
 * in the order found so that all of them are shown at once, and the
 * names of the files as messages show them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "utf8.h"

const char *parser_intern_file(struct parser *p, const char *file)
{
	struct config *c = p->c;
	_cleanup_free_ char *shown = NULL;
	char **n;

	if (!file)
		file = c->path;
	shown = utf8_sanitize(file);
	if (!shown)
		goto oom;
	for (size_t i = 0; i < c->n_files; i++)
		if (streq(c->files[i], shown))
			return c->files[i];
	n = array_room(c->files, c->n_files, sizeof(*n));
	if (!n)
		goto oom;
	c->files = n;
	n[c->n_files] = TAKE_PTR(shown);
	if (!n[c->n_files])
		goto oom;
	return n[c->n_files++];
oom:
	p->oom = 1;
	return "?";
}

struct conf_loc parser_loc(struct parser *p, const config_setting_t *s)
{
	return (struct conf_loc){
		.file = p->file,
		.line = config_setting_source_line(s),
	};
}

/* Record an error (or a warning) at loc: "prefix: message", or just the
 * message. */
static void add_notev(struct parser *p, bool warning, struct conf_loc loc,
		      const char *prefix, const char *fmt, va_list ap)
{
	struct config *c = p->c;
	struct conf_error **list = warning ? &c->warnings : &c->errors;
	size_t *count = warning ? &c->n_warnings : &c->n_errors;
	struct conf_error *n;
	char *body, *msg = NULL;

	if (vasprintf(&body, fmt, ap) < 0) {
		p->oom = 1;
		return;
	}
	if (prefix && asprintf(&msg, "%s: %s", prefix, body) < 0)
		msg = NULL;
	if (!prefix)
		msg = TAKE_PTR(body);
	free(body);
	/* Values are quoted as written, whatever bytes they hold: the
	 * message is shown as text and sent as JSON. */
	if (msg && !utf8_valid(msg)) {
		char *clean = utf8_sanitize(msg);

		free(msg);
		msg = clean;
	}
	n = msg ? array_room(*list, *count, sizeof(*n)) : NULL;
	if (!n) {
		free(msg);
		p->oom = 1;
		return;
	}
	*list = n;
	n[*count] = (struct conf_error){ .loc = loc, .msg = msg,
					 .seq = *count };
	(*count)++;
}

static void add_errorv(struct parser *p, struct conf_loc loc,
		       const char *prefix, const char *fmt, va_list ap)
{
	add_notev(p, false, loc, prefix, fmt, ap);
}

void parser_error(struct parser *p, struct conf_loc loc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_errorv(p, loc, NULL, fmt, ap);
	va_end(ap);
}

void parser_warning(struct parser *p, struct conf_loc loc, const char *fmt,
		    ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_notev(p, true, loc, NULL, fmt, ap);
	va_end(ap);
}

void parser_setting_error(struct parser *p, const config_setting_t *s,
			  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_errorv(p, parser_loc(p, s), NULL, fmt, ap);
	va_end(ap);
}

void parser_field_error(struct parser *p, const config_setting_t *s,
			const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_errorv(p, parser_loc(p, s), p->label[0] ? p->label : NULL, fmt, ap);
	va_end(ap);
}

void parser_field_warning(struct parser *p, const config_setting_t *s,
			  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_notev(p, true, parser_loc(p, s), p->label[0] ? p->label : NULL, fmt,
		  ap);
	va_end(ap);
}

void config_add_error(struct config *c, struct conf_loc loc, const char *fmt,
		      ...)
{
	struct parser p = { .c = c };
	va_list ap;

	va_start(ap, fmt);
	add_errorv(&p, loc, NULL, fmt, ap);
	va_end(ap);
}

void config_print_warnings(const struct config *c, FILE *f)
{
	for (size_t i = 0; i < c->n_warnings; i++) {
		const struct conf_error *w = &c->warnings[i];

		if (w->loc.line > 0)
			fprintf(f, "%s:%d: warning: %s\n", w->loc.file,
				w->loc.line, w->msg);
		else
			fprintf(f, "%s: warning: %s\n", w->loc.file, w->msg);
	}
}

void config_print_errors(const struct config *c, FILE *f)
{
	for (size_t i = 0; i < c->n_errors; i++) {
		const struct conf_error *e = &c->errors[i];

		if (e->loc.line > 0)
			fprintf(f, "%s:%d: %s\n", e->loc.file, e->loc.line,
				e->msg);
		else /* about the whole file */
			fprintf(f, "%s: %s\n", e->loc.file, e->msg);
	}
}
