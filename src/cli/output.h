/* SPDX-License-Identifier: Apache-2.0 */
/* output: human tables and values vs --json documents, so every command prints the same way. */
#ifndef ISOLA_CLI_OUTPUT_H
#define ISOLA_CLI_OUTPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct table;

/* Whether to colour output to f: a terminal, NO_COLOR unset or empty, TERM not "dumb". */
bool out_color(FILE *f);

/* A table with ncols columns titled by headers (borrowed, must outlive the table). NULL: ENOMEM. */
struct table *table_new(const char *const *headers, size_t ncols);

/* Appends a row of ncols cells (copied; NULL prints as empty). Returns 0 or -ENOMEM. */
int table_add(struct table *t, const char *const *cells);

/* Prints headers and rows, columns separated by three spaces and padded to the widest cell
 * (widths counted in UTF-8 characters); the last column is not padded. */
void table_print(const struct table *t, FILE *out);

void table_free(struct table *t);

/*
 * Prints a JSON value as --json output: two-space indentation, keys sorted, one trailing
 * newline. The format is part of the CLI contract (docs/cli.md); keep it stable.
 */
void out_json(FILE *out, const json_t *v);

/* Prints one compact JSON line (NDJSON passthrough of streamed events, keys sorted). */
void out_json_line(FILE *out, const json_t *v);

/* Formats bytes as 512M / 1.5G / 100K / 12B into buf. */
void out_fmt_size(uint64_t bytes, char *buf, size_t len);

/* Formats a time value (epoch seconds as a number, or an RFC 3339 string) relative to now:
 * "12 seconds ago", "3 hours ago"; anything else is printed as-is ("" for null). */
void out_fmt_age(const json_t *t, double now, char *buf, size_t len);

/* Formats unix time t as "2026-12-01 14:03:05 UTC (3 minutes ago)" (or "in 5 minutes"). */
void out_fmt_time(double t, double now, char *buf, size_t len);

/* Formats a scalar for `key: value` output: strings raw, numbers, true/false, "-" for null,
 * objects {k:v} as "k=v,k2=v2" (keys sorted), arrays as space-joined. Heap string; NULL: ENOMEM. */
char *out_fmt_value(const json_t *v);

#endif
