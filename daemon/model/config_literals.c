// SPDX-License-Identifier: MIT
/*
 * The integer literals of a configuration file's text, read with
 * libconfig's own lexical rules, so that each integer setting can be
 * checked against what was written (struct source in config_internal.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

static bool name_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '*';
}

/* Length of libconfig's number token at t (the longest of its integer,
 * hex and float rules), and whether it is an integer. */
static size_t number_token(const char *t, bool *integer, bool *wide)
{
	size_t i = 0, digits;

	*integer = false;
	*wide = false;
	if (t[0] == '0' && (t[1] == 'x' || t[1] == 'X') &&
	    isxdigit((unsigned char)t[2])) {
		for (i = 2; isxdigit((unsigned char)t[i]); i++)
			;
		*integer = true;
	} else {
		if (t[i] == '-' || t[i] == '+')
			i++;
		for (digits = 0; isdigit((unsigned char)t[i]); i++)
			digits++;
		if (t[i] == '.') {
			for (i++; isdigit((unsigned char)t[i]); i++)
				;
		} else if (!digits) {
			return i; /* a lone sign: not a number */
		} else {
			*integer = true;
		}
		/* An exponent makes it a float, when it is complete. */
		if (t[i] == 'e' || t[i] == 'E') {
			size_t e = i + 1;

			if (t[e] == '-' || t[e] == '+')
				e++;
			if (isdigit((unsigned char)t[e])) {
				while (isdigit((unsigned char)t[e]))
					e++;
				*integer = false;
				return e;
			}
		}
		if (!*integer)
			return i;
	}
	if (t[i] == 'L') {
		*wide = true;
		i += 1 + (t[i + 1] == 'L');
	}
	return i;
}

static int add_literal(struct source *src, const char *t, size_t len,
		       int line, bool wide)
{
	struct literal *l = array_room(src->lit, src->n_lit, sizeof(*l));
	bool hex = t[0] == '0' && (t[1] == 'x' || t[1] == 'X');
	char *end;

	if (!l)
		return -ENOMEM;
	src->lit = l;
	l += src->n_lit++;
	errno = 0;
	/* libconfig reads decimal literals as decimal: 010 is ten. */
	l->value = strtoll(t, &end, hex ? 16 : 10);
	l->erange = errno == ERANGE;
	l->text = t;
	l->len = (int)len;
	l->line = line;
	l->wide = wide;
	return 0;
}

/*
 * One pass over the text with libconfig's lexical rules (comments,
 * strings with their escapes, names, numbers): every integer literal,
 * and the first line that libconfig would take for an @include.
 */
int source_scan(struct source *src, const char *text)
{
	const char *t = text;
	bool line_start = true;
	int line = 1;

	while (*t) {
		if (line_start) {
			const char *s = t + strspn(t, " \t");

			line_start = false;
			if (!strncmp(s, "@include", 8) && !src->include_line)
				src->include_line = line;
		}
		if (*t == '\n') {
			line++;
			line_start = true;
			t++;
		} else if (t[0] == '/' && t[1] == '*') {
			for (t += 2; *t && !(t[0] == '*' && t[1] == '/'); t++)
				line += *t == '\n';
			t += *t ? 2 : 0;
		} else if (*t == '#' || (t[0] == '/' && t[1] == '/')) {
			t = strchrnul(t, '\n');
		} else if (*t == '"') {
			for (t++; *t && *t != '"'; t++) {
				if (*t == '\\' && (t[1] == '"' || t[1] == '\\'))
					t++;
				line += *t == '\n';
			}
			t += *t ? 1 : 0;
		} else if (isalpha((unsigned char)*t) || *t == '*') {
			while (name_char(*t))
				t++;
		} else if (isdigit((unsigned char)*t) || *t == '-' ||
			   *t == '+' || *t == '.') {
			bool integer, wide;
			size_t len = number_token(t, &integer, &wide);

			if (!len)
				len = 1;
			if (integer && add_literal(src, t, len, line, wide) < 0)
				return -ENOMEM;
			t += len;
		} else {
			t++;
		}
	}
	return 0;
}

void source_free(struct source *src)
{
	free(src->lit);
}

bool source_pair(struct source *src, config_setting_t *s)
{
	int t = config_setting_type(s);

	if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
		struct literal *l;

		if (src->next >= src->n_lit)
			return false;
		l = &src->lit[src->next++];
		if (l->wide != (t == CONFIG_TYPE_INT64))
			return false;
		config_setting_set_hook(s, l);
		return true;
	}
	if (!config_setting_is_aggregate(s))
		return true;
	for (int i = 0, n = config_setting_length(s); i < n; i++)
		if (!source_pair(src, config_setting_get_elem(s, i)))
			return false;
	return true;
}
