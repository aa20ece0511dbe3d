/* SPDX-License-Identifier: Apache-2.0 */
/* opttab: the CLI's option tables — one row per option, read by the parser, --help, man and completion. */
#include "opttab.h"

#include <string.h>

const struct cli_opt cli_global_opts[] = {
	{"json", CLI_G_JSON, NULL, "machine-readable output; errors as JSON on stderr", 0},
	{"quiet", 'q', NULL, "print less (ls: only ids)", 0},
	{"socket", CLI_G_SOCKET, "PATH",
	 "isolad unix socket (env ISOLA_SOCKET, default /run/isola/isolad.sock)", 0},
	{"url", CLI_G_URL, "URL", "isolad over TCP, http://HOST:PORT (env ISOLA_URL)", 0},
	{"token", CLI_G_TOKEN, "TOKEN", "bearer token for --url (env ISOLA_TOKEN)", 0},
	{"help", 'h', NULL, "show help", 0},
	{NULL, 0, NULL, NULL, 0},
};

bool cli_opt_selected(const struct cli_opt *o, unsigned mask)
{
	return !o->only || (o->only & mask);
}

/* Appends the rows of t selected by mask to st's getopt tables. */
static void add_rows(struct cli_optstate *st, const struct cli_opt *t, unsigned mask, size_t *nl)
{
	size_t ns = strlen(st->sopts);

	for (; t && t->name; t++) {
		if (!cli_opt_selected(t, mask) ||
		    *nl + 1 >= sizeof(st->lopts) / sizeof(st->lopts[0]))
			continue;
		st->lopts[*nl] = (struct option){t->name, t->arg ? required_argument : no_argument,
						 NULL, t->key};
		(*nl)++;
		if (t->key > 0 && t->key < 128 && ns + 3 < sizeof(st->sopts) &&
		    !strchr(st->sopts + 2, t->key)) {
			st->sopts[ns++] = (char)t->key;
			if (t->arg)
				st->sopts[ns++] = ':';
			st->sopts[ns] = '\0';
		}
	}
}

static void build(struct cli_optstate *st)
{
	static const struct cli_opt help_only[] = {
		{"help", 'h', NULL, "show help", 0},
		{NULL, 0, NULL, NULL, 0},
	};
	size_t nl = 0;

	strcpy(st->sopts, "+:");
	add_rows(st, st->opts, st->mask, &nl);
	add_rows(st, st->g ? cli_global_opts : help_only, 0, &nl);
	st->lopts[nl] = (struct option){NULL, 0, NULL, 0};
	st->base = -1;
	st->ready = true;
	optind = 0;
	opterr = 0;
}

/* Moves argv[from] to argv[to] (to < from), shifting argv[to..from-1] up by one. */
static void move_back(char **argv, int to, int from)
{
	char *x = argv[from];

	memmove(argv + to + 1, argv + to, (size_t)(from - to) * sizeof(*argv));
	argv[to] = x;
}

static void finish(struct cli_optstate *st, char **argv)
{
	int end = optind;

	/* argv[base..base+nops) are operands, argv[base+nops..end) options: put the options
	 * first so that the operands run straight into the tail. */
	for (int i = 0; st->nops && i < end - (st->base + st->nops); i++)
		move_back(argv, st->base + i, st->base + st->nops + i);
	if (st->nops)
		optind = end - st->nops;
}

int cli_opt_next(struct cli_optstate *st, int argc, char **argv)
{
	int c;

	if (!st->ready)
		build(st);
	for (;;) {
		c = getopt_long(argc, argv, st->sopts, st->lopts, NULL);
		if (c == 'q' && st->g)
			c = CLI_G_QUIET;
		if (c >= CLI_G_JSON && st->g) {
			switch (c) {
			case CLI_G_JSON:
				st->g->json = true;
				break;
			case CLI_G_QUIET:
				st->g->quiet = true;
				break;
			case CLI_G_SOCKET:
				st->g->socket = optarg;
				break;
			case CLI_G_URL:
				st->g->url = optarg;
				break;
			case CLI_G_TOKEN:
				st->g->token = optarg;
				break;
			}
			continue;
		}
		if (c != -1)
			return c;
		if (optind >= argc || (optind > 0 && !strcmp(argv[optind - 1], "--") &&
				       optind - 1 >= (st->base < 0 ? 0 : st->base + st->nops)))
			break;
		if (st->free_tail && st->nops + 1 >= st->free_tail)
			break;
		if (st->base < 0)
			st->base = optind;
		else
			move_back(argv, st->base + st->nops, optind);
		st->nops++;
		optind++;
	}
	finish(st, argv);
	return -1;
}

void cli_opt_print(FILE *f, const struct cli_opt *opts, unsigned mask)
{
	for (const struct cli_opt *o = opts; o && o->name; o++) {
		char head[64];

		if (!cli_opt_selected(o, mask))
			continue;
		if (o->key > 0 && o->key < 128)
			snprintf(head, sizeof(head), "-%c, --%s%s%s", o->key, o->name,
				 o->arg ? " " : "", o->arg ? o->arg : "");
		else
			snprintf(head, sizeof(head), "    --%s%s%s", o->name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		fprintf(f, "  %-28s  %s\n", head, o->help);
	}
}
