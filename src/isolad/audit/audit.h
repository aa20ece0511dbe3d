/* SPDX-License-Identifier: Apache-2.0 */
/* audit: the tamper-evident trail — hash-chained JSON-lines segments, sealed with isolad's key. */
#ifndef ISOLA_AUDIT_H
#define ISOLA_AUDIT_H

#include <jansson.h>
#include <stdint.h>

#include "../../common/err.h"

/*
 * Layout under dir (docs/compliance.md):
 *   NNNNNNNN.log   records, one JSON object per line: {seq, time, who, tenant, action, target,
 *                  outcome, [detail], prev_hash, hash}; hash = BLAKE2b-256 of the record's
 *                  canonical JSON (sorted keys, compact) without `hash`, so each record names
 *                  its predecessor and editing, deleting or reordering one breaks the chain.
 *   NNNNNNNN.seal  written when a segment closes: its first/last seq, count and last hash,
 *                  authenticated with HMAC-SHA-512/256 (crypto_auth) under the key file, so a
 *                  rewritten chain (recomputed hashes) is still detected.
 *   anchor.json    after retention removed the oldest segments: where the chain now starts
 *                  (segment, seq, prev_hash), also authenticated.
 * The key (32 random bytes, mode 0600) lives in the state dir, readable only by isolad's uid.
 */
struct audit;

struct audit_config {
	char dir[600];		  /* <state>/audit */
	char key_path[600];	  /* <state>/audit.key */
	uint32_t segment_records; /* seal and rotate after this many records (0 = 10000) */
	uint32_t seal_interval_s; /* ... or when the active segment is this old (0 = 3600) */
	uint64_t retention_s; /* delete sealed segments whose newest record is older (0 = keep) */
};

/* Opens the trail: creates dir and key if missing, continues the chain after the last
 * record, seals a segment an earlier isolad left open when its chain checks out, applies
 * retention. One audit per dir (isolad holds the state-dir lock). */
int audit_open(const struct audit_config *cfg, struct audit **out, struct isola_err **err);

/* Seals the active segment and frees. NULL is fine. */
void audit_close(struct audit *a);

/*
 * Appends one record. Strings may be NULL (written as ""); detail (borrowed, may be NULL) is
 * an object stored as is — callers never put command output or secrets there. Thread-safe.
 * Returns 0 or -errno (also logged): the caller's operation has already happened and is not
 * undone, but the failure is visible in the log and in audit_status().
 */
int audit_append(struct audit *a, const char *who, const char *tenant, const char *action,
		 const char *target, const char *outcome, const json_t *detail);

/* Seals the active segment now (if it holds records) and starts the next one. */
int audit_seal(struct audit *a, struct isola_err **err);

/*
 * Checks every segment from the anchor to the head: seq continuity, prev_hash links, each
 * record's hash, each seal's MAC and contents, the anchor's MAC, and that the active
 * segment ends at the head isolad holds in memory. *out: {ok, records, segments, sealed,
 * first_seq, last_seq, problems:[{segment, seq, problem}]} (new reference).
 */
int audit_verify(struct audit *a, json_t **out, struct isola_err **err);

/* Removes the oldest sealed segments whose newest record is older than max_age_s (0 = the
 * configured retention), never the active one, never a part of a segment. *out (may be NULL):
 * {removed:[segment...], anchor:{...}}. */
int audit_prune(struct audit *a, uint64_t max_age_s, json_t **out, struct isola_err **err);

/* {dir, key_file, records (head seq), segments, active_segment, segment_records,
 * seal_interval_s, retention_s, append_errors} (new reference). */
json_t *audit_status(struct audit *a);

/* Reading records in order, for export: only records at or after `since` (unix time; 0 =
 * all). */
struct audit_cursor;
int audit_cursor_open(struct audit *a, double since, struct audit_cursor **out,
		      struct isola_err **err);
/* 1 with *line (borrowed until the next call, no newline), 0 at the end, -errno. */
int audit_cursor_next(struct audit_cursor *c, const char **line);
void audit_cursor_free(struct audit_cursor *c);

/* Formats unix time t as the trail's RFC 3339 form (UTC, milliseconds). */
void audit_format_time(double t, char *out, size_t n);

#endif
