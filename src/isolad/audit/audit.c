/* SPDX-License-Identifier: Apache-2.0 */
/* audit: the tamper-evident trail — hash-chained JSON-lines segments, sealed with isolad's key. */
#include "audit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"

#define HASH_HEX     65		/* 32-byte BLAKE2b as hex + NUL */
#define MAC_HEX	     65		/* crypto_auth (HMAC-SHA-512/256) as hex + NUL */
#define MAX_LINE     (1u << 20) /* a record longer than this is damage, not a record */
#define MAX_SEGMENTS 100000
#define GENESIS_HASH "0000000000000000000000000000000000000000000000000000000000000000"

struct audit {
	struct audit_config cfg;		 /* copied */
	unsigned char key[crypto_auth_KEYBYTES]; /* seal key, never leaves isolad */
	pthread_mutex_t lock;			 /* protects everything below */
	int fd;			 /* active segment, O_APPEND, or -1 (opened lazily) */
	uint32_t segment;	 /* number of the active segment */
	uint64_t seq;		 /* seq of the last record written (head) */
	char head[HASH_HEX];	 /* hash of the last record (or the anchor's prev) */
	uint64_t seg_first;	 /* seq of the active segment's first record, 0 none */
	char seg_prev[HASH_HEX]; /* prev_hash of the active segment's first record */
	uint32_t seg_count;	 /* records in the active segment */
	double seg_started;	 /* wall time of its first record */
	char seg_last_time[40];	 /* time of its newest record */
	uint64_t append_errors;	 /* failed appends since start */
	uint64_t gap_lost;	 /* records lost since the last written one, 0 = no gap */
	char gap_from[40];	 /* time of the first lost record */
	char gap_to[40];	 /* time of the last lost record */
	char gap_reason[160];	 /* why the first one was lost */
	int gap_fd;		 /* GAP_FILE, preallocated, or -1 */
};

/*
 * GAP_FILE keeps a gap not yet written to the chain across a stop or crash: GAP_FILE_SIZE bytes
 * allocated at open and rewritten in place (no new blocks, so it works on a full filesystem),
 * holding the pending gap as authenticated JSON padded with spaces, or only spaces.
 */
#define GAP_FILE      "pending-gap"
#define GAP_FILE_SIZE 1024

void audit_format_time(double t, char *out, size_t n)
{
	time_t s = (time_t)t;
	struct tm tm;
	int ms = (int)((t - (double)s) * 1000.0);

	gmtime_r(&s, &tm);
	snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 ms < 0	    ? 0
		 : ms > 999 ? 999
			    : ms);
}

static void seg_path(const struct audit *a, uint32_t seg, const char *ext, char *out, size_t n)
{
	snprintf(out, n, "%s/%08u.%s", a->cfg.dir, seg, ext);
}

/* BLAKE2b-256 of the record's canonical form (sorted keys, compact, without `hash`). */
static int record_hash(json_t *rec, char *out)
{
	unsigned char h[32];
	char *canon;

	json_object_del(rec, "hash");
	canon = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
	if (!canon)
		return -ENOMEM;
	crypto_generichash(h, sizeof(h), (const unsigned char *)canon, strlen(canon), NULL, 0);
	free(canon);
	sodium_bin2hex(out, HASH_HEX, h, sizeof(h));
	return 0;
}

/* MAC over an object's canonical form without `mac`. */
static int object_mac(const struct audit *a, json_t *obj, char *out)
{
	unsigned char m[crypto_auth_BYTES];
	char *canon;

	json_object_del(obj, "mac");
	canon = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
	if (!canon)
		return -ENOMEM;
	crypto_auth(m, (const unsigned char *)canon, strlen(canon), a->key);
	free(canon);
	sodium_bin2hex(out, MAC_HEX, m, sizeof(m));
	return 0;
}

/* True when obj's `mac` field authenticates the rest (constant-time compare). */
static bool object_mac_ok(const struct audit *a, const json_t *obj)
{
	const char *have = json_string_value(json_object_get(obj, "mac"));
	json_t *copy = json_deep_copy(obj);
	char want[MAC_HEX];
	bool ok;

	if (!have || !copy || strlen(have) != MAC_HEX - 1 || object_mac(a, copy, want) < 0) {
		json_decref(copy);
		return false;
	}
	json_decref(copy);
	ok = sodium_memcmp(have, want, MAC_HEX - 1) == 0;
	return ok;
}

/* Writes obj with its MAC to path atomically. */
static int write_signed(const struct audit *a, json_t *obj, const char *path)
{
	char mac[MAC_HEX], *text;
	int r;

	if (object_mac(a, obj, mac) < 0)
		return -ENOMEM;
	json_object_set_new(obj, "mac", json_string(mac));
	text = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		return -ENOMEM;
	r = util_write_file_atomic(path, text, strlen(text), 0600);
	free(text);
	return r;
}

static json_t *read_json_file(const char *path)
{
	char *text = NULL;
	json_t *j;

	if (util_read_file(path, 65536, &text, NULL) < 0)
		return NULL;
	j = json_loads(text, 0, NULL);
	free(text);
	return j;
}

/* Loads the key, or creates it (0600, O_EXCL) at first start. */
static int load_key(struct audit *a, struct isola_err **err)
{
	cleanup_fd int fd = open(a->cfg.key_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;

	if (fd >= 0) {
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != sizeof(a->key) ||
		    util_read_exact(fd, a->key, sizeof(a->key)) < 0)
			return isola_err_set(err, EINVAL, "internal",
					     "audit key `%s` is not a %zu-byte regular file",
					     a->cfg.key_path, sizeof(a->key));
		if (st.st_mode & 077)
			fchmod(fd, 0600);
		return 0;
	}
	if (errno != ENOENT)
		return isola_err_sys(err, errno, NULL, "open audit key `%s`", a->cfg.key_path);
	crypto_auth_keygen(a->key);
	fd = open(a->cfg.key_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || util_write_all(fd, a->key, sizeof(a->key)) < 0 || fsync(fd) < 0)
		return isola_err_sys(err, errno, NULL, "create audit key `%s`", a->cfg.key_path);
	return 0;
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

/* Sorted numbers of the NNNNNNNN.log files in dir; *out heap-owned. */
static int list_segments(const struct audit *a, uint32_t **out, size_t *n)
{
	DIR *d = opendir(a->cfg.dir);
	uint32_t *v = NULL;
	size_t used = 0, cap = 0;
	struct dirent *de;

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		unsigned long num;

		if (strlen(de->d_name) != 12 || strcmp(de->d_name + 8, ".log"))
			continue;
		num = strtoul(de->d_name, &end, 10);
		if (end != de->d_name + 8 || num == 0 || num > UINT32_MAX)
			continue;
		if (used == cap) {
			uint32_t *nv;

			if (cap >= MAX_SEGMENTS)
				break;
			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				closedir(d);
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		v[used++] = (uint32_t)num;
	}
	closedir(d);
	if (used) /* qsort's base must not be NULL, even for zero elements */
		qsort(v, used, sizeof(*v), cmp_u32);
	*out = v;
	*n = used;
	return 0;
}

/* State while checking a chain. */
struct chain {
	uint64_t next_seq;   /* seq the next record must carry */
	char prev[HASH_HEX]; /* hash it must name as prev_hash */
	uint64_t records;    /* records read */
	json_t *problems;    /* array, or NULL to stop at the first problem */
	json_t *gaps;	     /* array of the audit.gap records seen, or NULL */
	bool broken;	     /* a problem was seen */
};

/* Lists an `audit.gap` record (a stated loss, chained like any record) for the report. */
static void note_gap(struct chain *ch, uint32_t seg, json_int_t seq, json_t *rec)
{
	json_t *d = json_object_get(rec, "detail");

	if (!ch->gaps || json_array_size(ch->gaps) >= 100 ||
	    strcmp(json_string_value(json_object_get(rec, "action")) ?: "", "audit.gap") != 0)
		return;
	json_array_append_new(
		ch->gaps,
		json_pack("{s:I, s:I, s:s, s:O?, s:O?, s:O?, s:O?}", "segment", (json_int_t)seg,
			  "seq", seq, "time", json_string_value(json_object_get(rec, "time")) ?: "",
			  "lost", json_object_get(d, "lost"), "from", json_object_get(d, "from"),
			  "to", json_object_get(d, "to"), "reason", json_object_get(d, "reason")));
}

static void problem(struct chain *ch, uint32_t seg, uint64_t seq, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void problem(struct chain *ch, uint32_t seg, uint64_t seq, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	ch->broken = true;
	if (!ch->problems || json_array_size(ch->problems) >= 100)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_array_append_new(ch->problems, json_pack("{s:I, s:I, s:s}", "segment", (json_int_t)seg,
						      "seq", (json_int_t)seq, "problem", msg));
}

/* What one segment held, for comparing with its seal. */
struct seg_summary {
	uint64_t first_seq, last_seq, count;
	char first_prev[HASH_HEX], last_hash[HASH_HEX];
	char last_time[40];
};

/*
 * Reads a segment and checks every record against ch (advancing it). Stops after
 * `upto` (the in-memory head; 0 = no limit) so appends racing the check are not judged.
 */
static int check_segment(const struct audit *a, uint32_t seg, uint64_t upto, struct chain *ch,
			 struct seg_summary *sum)
{
	char path[PATH_MAX];
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	uint64_t lineno = 0;

	memset(sum, 0, sizeof(*sum));
	seg_path(a, seg, "log", path, sizeof(path));
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while ((len = getline(&line, &cap, f)) > 0) {
		json_t *rec;
		const char *have, *prev;
		char want[HASH_HEX];
		json_int_t seq;

		lineno++;
		/* UNTRUSTED: a file an attacker with disk access may have edited. */
		if (line[len - 1] != '\n') {
			problem(ch, seg, ch->next_seq, "line %llu is incomplete (torn write)",
				(unsigned long long)lineno);
			break;
		}
		if ((size_t)len > MAX_LINE) {
			problem(ch, seg, ch->next_seq, "line %llu is too long",
				(unsigned long long)lineno);
			continue;
		}
		rec = json_loadb(line, (size_t)len - 1, 0, NULL);
		if (!json_is_object(rec) || !json_is_integer(json_object_get(rec, "seq")) ||
		    !json_is_string(json_object_get(rec, "hash")) ||
		    !json_is_string(json_object_get(rec, "prev_hash"))) {
			problem(ch, seg, ch->next_seq, "line %llu is not an audit record",
				(unsigned long long)lineno);
			json_decref(rec);
			continue;
		}
		seq = json_integer_value(json_object_get(rec, "seq"));
		if (upto && (uint64_t)seq > upto) {
			json_decref(rec);
			break;
		}
		have = json_string_value(json_object_get(rec, "hash"));
		prev = json_string_value(json_object_get(rec, "prev_hash"));
		char have_copy[HASH_HEX], prev_copy[HASH_HEX];

		snprintf(have_copy, sizeof(have_copy), "%s", have);
		snprintf(prev_copy, sizeof(prev_copy), "%s", prev);
		if (seq <= 0 || (uint64_t)seq != ch->next_seq)
			problem(ch, seg, (uint64_t)seq,
				"record %lld found where %llu was expected: a record was deleted, "
				"inserted or reordered",
				(long long)seq, (unsigned long long)ch->next_seq);
		else if (strcmp(prev_copy, ch->prev) != 0)
			problem(ch, seg, (uint64_t)seq,
				"record %lld does not link to its predecessor (prev_hash mismatch)",
				(long long)seq);
		if (record_hash(rec, want) < 0 || strcmp(want, have_copy) != 0)
			problem(ch, seg, (uint64_t)seq,
				"record %lld was edited (its hash does not match its content)",
				(long long)seq);
		else
			note_gap(ch, seg, seq, rec);
		if (!sum->count) {
			sum->first_seq = (uint64_t)seq;
			snprintf(sum->first_prev, sizeof(sum->first_prev), "%s", prev_copy);
		}
		sum->count++;
		sum->last_seq = (uint64_t)seq;
		snprintf(sum->last_hash, sizeof(sum->last_hash), "%s", have_copy);
		snprintf(sum->last_time, sizeof(sum->last_time), "%s",
			 json_string_value(json_object_get(rec, "time")) ?: "");
		/* Resynchronise on what the file says, so one problem is reported once. */
		ch->next_seq = (uint64_t)(seq > 0 ? seq : 0) + 1;
		snprintf(ch->prev, sizeof(ch->prev), "%s", have_copy);
		ch->records++;
		json_decref(rec);
	}
	free(line);
	fclose(f);
	return 0;
}

/* Checks a segment's seal against what was read. */
static void check_seal(const struct audit *a, uint32_t seg, const struct seg_summary *sum,
		       struct chain *ch)
{
	char path[PATH_MAX];
	json_t *seal;

	seg_path(a, seg, "seal", path, sizeof(path));
	seal = read_json_file(path);
	if (!seal) {
		problem(ch, seg, sum->last_seq, "segment %u is not sealed", seg);
		return;
	}
	if (!object_mac_ok(a, seal))
		problem(ch, seg, sum->last_seq,
			"seal of segment %u is not authentic (forged or edited)", seg);
	else if ((uint64_t)json_integer_value(json_object_get(seal, "first_seq")) !=
			 sum->first_seq ||
		 (uint64_t)json_integer_value(json_object_get(seal, "last_seq")) != sum->last_seq ||
		 (uint64_t)json_integer_value(json_object_get(seal, "count")) != sum->count ||
		 strcmp(json_string_value(json_object_get(seal, "last_hash")) ?: "",
			sum->last_hash) != 0 ||
		 strcmp(json_string_value(json_object_get(seal, "first_prev_hash")) ?: "",
			sum->first_prev) != 0)
		problem(ch, seg, sum->last_seq,
			"segment %u no longer matches its seal (records %llu-%llu, %llu sealed): "
			"records were edited, deleted or rewritten",
			seg,
			(unsigned long long)json_integer_value(json_object_get(seal, "first_seq")),
			(unsigned long long)json_integer_value(json_object_get(seal, "last_seq")),
			(unsigned long long)json_integer_value(json_object_get(seal, "count")));
	json_decref(seal);
}

/* The anchor (chain start after retention), or the genesis. */
static int load_anchor(const struct audit *a, uint32_t *seg, uint64_t *seq, char *prev,
		       bool *authentic)
{
	char path[PATH_MAX];
	json_t *j;

	*seg = 1;
	*seq = 1;
	snprintf(prev, HASH_HEX, "%s", GENESIS_HASH);
	*authentic = true;
	snprintf(path, sizeof(path), "%s/anchor.json", a->cfg.dir);
	if (access(path, F_OK) < 0)
		return 0;
	j = read_json_file(path);
	if (!j || !object_mac_ok(a, j)) {
		*authentic = false;
		json_decref(j);
		return 0;
	}
	*seg = (uint32_t)json_integer_value(json_object_get(j, "segment"));
	*seq = (uint64_t)json_integer_value(json_object_get(j, "seq"));
	snprintf(prev, HASH_HEX, "%s", json_string_value(json_object_get(j, "prev_hash")) ?: "");
	json_decref(j);
	return 1;
}

/* Seals the active segment (lock held). */
static int seal_locked(struct audit *a)
{
	char path[PATH_MAX];
	json_t *seal;
	int r;

	if (a->fd < 0 || a->seg_count == 0)
		return 0;
	if (fsync(a->fd) < 0)
		log_warn("audit: fsync segment %u: %s", a->segment, strerror(errno));
	seal = json_pack("{s:I, s:I, s:I, s:I, s:s, s:s, s:s}", "segment", (json_int_t)a->segment,
			 "first_seq", (json_int_t)a->seg_first, "last_seq", (json_int_t)a->seq,
			 "count", (json_int_t)a->seg_count, "first_prev_hash", a->seg_prev,
			 "last_hash", a->head, "last_time", a->seg_last_time);
	if (!seal)
		return -ENOMEM;
	seg_path(a, a->segment, "seal", path, sizeof(path));
	r = write_signed(a, seal, path);
	json_decref(seal);
	if (r < 0) {
		log_error("audit: seal segment %u: %s", a->segment, strerror(-r));
		return r;
	}
	close(a->fd);
	a->fd = -1;
	log_info("audit: segment %u sealed (records %llu-%llu)", a->segment,
		 (unsigned long long)a->seg_first, (unsigned long long)a->seq);
	a->segment++;
	a->seg_first = 0;
	a->seg_count = 0;
	return 0;
}

static int prune_locked(struct audit *a, uint64_t max_age, json_t *removed, json_t **anchor_out);

static int open_active(struct audit *a)
{
	char path[PATH_MAX];

	seg_path(a, a->segment, "log", path, sizeof(path));
	a->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (a->fd < 0)
		return -errno;
	return 0;
}

/*
 * Writes one record with the next seq, chained to the head (lock held). A failed write is cut
 * back to the segment's previous length, so a full filesystem never leaves a torn line in the
 * chain; the chain's head moves only when the whole line is written.
 */
static int write_record_locked(struct audit *a, double now, const char *when, const char *who,
			       const char *tenant, const char *action, const char *target,
			       const char *outcome, const json_t *detail)
{
	char hash[HASH_HEX], *line = NULL;
	struct stat st;
	json_t *rec;
	int r;

	rec = json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s}", "seq", (json_int_t)(a->seq + 1),
			"time", when, "who", who ? who : "", "tenant", tenant ? tenant : "",
			"action", action ? action : "", "target", target ? target : "", "outcome",
			outcome ? outcome : "");
	if (!rec)
		return -ENOMEM;
	if (detail)
		json_object_set(rec, "detail", (json_t *)detail);
	json_object_set_new(rec, "prev_hash", json_string(a->head));
	if (record_hash(rec, hash) < 0) {
		r = -ENOMEM;
		goto out;
	}
	json_object_set_new(rec, "hash", json_string(hash));
	line = json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!line) {
		r = -ENOMEM;
		goto out;
	}
	if (a->fd < 0 && (r = open_active(a)) < 0)
		goto out;
	if (fstat(a->fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	{
		size_t n = strlen(line);

		line[n] = '\n'; /* json_dumps NUL-terminates; the newline replaces it for write */
		r = util_write_all(a->fd, line, n + 1);
		line[n] = '\0';
	}
	if (r < 0) {
		/* Shrinking needs no space: the part written goes, the chain stays whole. */
		if (ftruncate(a->fd, st.st_size) < 0)
			log_error("audit: cut segment %u back after a failed write: %s", a->segment,
				  strerror(errno));
		goto out;
	}
	if (!a->seg_count) {
		a->seg_first = a->seq + 1;
		snprintf(a->seg_prev, sizeof(a->seg_prev), "%s", a->head);
		a->seg_started = now;
	}
	a->seq++;
	a->seg_count++;
	snprintf(a->head, sizeof(a->head), "%s", hash);
	snprintf(a->seg_last_time, sizeof(a->seg_last_time), "%s", when);
out:
	free(line);
	json_decref(rec);
	return r;
}

/* Rewrites GAP_FILE in place with the pending gap, or blank when there is none (lock held). */
static void gap_save_locked(struct audit *a)
{
	char buf[GAP_FILE_SIZE], mac[MAC_HEX];
	cleanup_free char *text = NULL;
	json_t *j = NULL;
	size_t n = 0;

	if (a->gap_fd < 0)
		return;
	memset(buf, ' ', sizeof(buf));
	buf[sizeof(buf) - 1] = '\n';
	if (a->gap_lost) {
		j = json_pack("{s:I, s:s, s:s, s:s}", "lost", (json_int_t)a->gap_lost, "from",
			      a->gap_from, "to", a->gap_to, "reason", a->gap_reason);
		if (j && object_mac(a, j, mac) == 0)
			json_object_set_new(j, "mac", json_string(mac));
		text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(j);
		n = text ? strlen(text) : 0;
		if (n >= sizeof(buf))
			n = 0;
		memcpy(buf, text ? text : "", n);
	}
	if (pwrite(a->gap_fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf) ||
	    fdatasync(a->gap_fd) < 0)
		log_warn("audit: record the pending gap in `%s/" GAP_FILE "`: %s", a->cfg.dir,
			 strerror(errno));
}

/* At open: allocates GAP_FILE and takes back a gap an earlier isolad could not write. */
static void gap_load(struct audit *a)
{
	char path[PATH_MAX], buf[GAP_FILE_SIZE + 1];
	json_t *j;
	ssize_t got;

	snprintf(path, sizeof(path), "%s/" GAP_FILE, a->cfg.dir);
	a->gap_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (a->gap_fd < 0) {
		log_warn("audit: open `%s`: %s", path, strerror(errno));
		return;
	}
	/* UNTRUSTED: a file on disk; only an authentic object counts. */
	got = pread(a->gap_fd, buf, GAP_FILE_SIZE, 0);
	buf[got > 0 ? got : 0] = '\0';
	j = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	if (j && object_mac_ok(a, j) && json_integer_value(json_object_get(j, "lost")) > 0) {
		a->gap_lost = (uint64_t)json_integer_value(json_object_get(j, "lost"));
		snprintf(a->gap_from, sizeof(a->gap_from), "%s",
			 json_string_value(json_object_get(j, "from")) ?: "");
		snprintf(a->gap_to, sizeof(a->gap_to), "%s",
			 json_string_value(json_object_get(j, "to")) ?: "");
		snprintf(a->gap_reason, sizeof(a->gap_reason), "%s",
			 json_string_value(json_object_get(j, "reason")) ?: "");
		log_warn("audit: %llu record(s) lost before the last stop; the next record states "
			 "it",
			 (unsigned long long)a->gap_lost);
	} else if (j || (got > 0 && buf[0] != ' ')) {
		log_warn("audit: `%s` is not an authentic pending gap; ignored", path);
	}
	json_decref(j);
	if (got != GAP_FILE_SIZE && fallocate(a->gap_fd, 0, 0, GAP_FILE_SIZE) < 0)
		log_warn("audit: allocate `%s`: %s", path, strerror(errno));
	gap_save_locked(a);
}

/* Counts a record that could not be written into the pending gap (lock held). */
static void gap_add_locked(struct audit *a, const char *when, const char *why)
{
	if (!a->gap_lost++) {
		snprintf(a->gap_from, sizeof(a->gap_from), "%s", when);
		snprintf(a->gap_reason, sizeof(a->gap_reason), "%s", why);
	}
	snprintf(a->gap_to, sizeof(a->gap_to), "%s", when);
	gap_save_locked(a);
}

/*
 * Records lost appends as one `audit.gap` record before the next record (lock held): how many,
 * between which times, why. It is chained like any other record, so the trail stays verifiable
 * and the gap is stated instead of silent. Returns 0 when there is no gap or it was written.
 */
static int write_gap_locked(struct audit *a, double now, const char *when)
{
	json_t *detail;
	int r;

	if (!a->gap_lost)
		return 0;
	detail = json_pack("{s:I, s:s, s:s, s:s}", "lost", (json_int_t)a->gap_lost, "from",
			   a->gap_from, "to", a->gap_to, "reason", a->gap_reason);
	if (!detail)
		return -ENOMEM;
	r = write_record_locked(a, now, when, "isolad", "", "audit.gap", "", "lost", detail);
	json_decref(detail);
	if (r == 0) {
		log_warn("audit: recorded a gap of %llu record(s) lost between %s and %s (%s)",
			 (unsigned long long)a->gap_lost, a->gap_from, a->gap_to, a->gap_reason);
		a->gap_lost = 0;
		gap_save_locked(a);
	}
	return r;
}

int audit_append(struct audit *a, const char *who, const char *tenant, const char *action,
		 const char *target, const char *outcome, const json_t *detail)
{
	char when[40];
	double now = util_wall_time();
	int r;

	if (!a)
		return 0;
	audit_format_time(now, when, sizeof(when));
	pthread_mutex_lock(&a->lock);
	r = write_gap_locked(a, now, when);
	if (r == 0)
		r = write_record_locked(a, now, when, who, tenant, action, target, outcome, detail);
	if (r < 0) {
		char why[160];

		snprintf(why, sizeof(why), "append failed: %s", strerror(-r));
		gap_add_locked(a, when, why);
		a->append_errors++;
		log_error("audit: append `%s` by %s failed: %s", action ? action : "",
			  who ? who : "", strerror(-r));
		goto out;
	}
	if (a->seg_count >= a->cfg.segment_records ||
	    now - a->seg_started >= a->cfg.seal_interval_s) {
		if (seal_locked(a) == 0 && a->cfg.retention_s)
			prune_locked(a, a->cfg.retention_s, NULL, NULL);
	}
out:
	pthread_mutex_unlock(&a->lock);
	return r;
}

int audit_seal(struct audit *a, struct isola_err **err)
{
	int r;

	pthread_mutex_lock(&a->lock);
	r = seal_locked(a);
	pthread_mutex_unlock(&a->lock);
	return r < 0 ? isola_err_sys(err, -r, NULL, "seal audit segment") : 0;
}

/* Removes segments (lock held). removed/anchor_out may be NULL. */
static int prune_locked(struct audit *a, uint64_t max_age, json_t *removed, json_t **anchor_out)
{
	char cutoff[40], path[PATH_MAX];
	uint32_t *segs;
	size_t n;
	int r = list_segments(a, &segs, &n);

	if (r < 0)
		return r;
	audit_format_time(util_wall_time() - (double)max_age, cutoff, sizeof(cutoff));
	for (size_t i = 0; i < n; i++) {
		json_t *seal, *anchor;
		const char *last_time;

		/* Never the active segment, never one without an authentic seal. */
		if (segs[i] >= a->segment)
			break;
		seg_path(a, segs[i], "seal", path, sizeof(path));
		seal = read_json_file(path);
		last_time = json_string_value(json_object_get(seal, "last_time"));
		if (!seal || !object_mac_ok(a, seal) || !last_time ||
		    strcmp(last_time, cutoff) >= 0) {
			json_decref(seal);
			break;
		}
		/* Anchor first: a crash between the two steps leaves a segment the next prune
		 * removes, never a chain start that points at nothing. */
		anchor = json_pack(
			"{s:I, s:I, s:O, s:f}", "segment", (json_int_t)segs[i] + 1, "seq",
			(json_int_t)json_integer_value(json_object_get(seal, "last_seq")) + 1,
			"prev_hash", json_object_get(seal, "last_hash"), "pruned_at",
			util_wall_time());
		snprintf(path, sizeof(path), "%s/anchor.json", a->cfg.dir);
		r = anchor ? write_signed(a, anchor, path) : -ENOMEM;
		if (r < 0) {
			json_decref(anchor);
			json_decref(seal);
			break;
		}
		seg_path(a, segs[i], "log", path, sizeof(path));
		unlink(path);
		seg_path(a, segs[i], "seal", path, sizeof(path));
		unlink(path);
		log_info("audit: retention removed sealed segment %u (records %lld-%lld)", segs[i],
			 (long long)json_integer_value(json_object_get(seal, "first_seq")),
			 (long long)json_integer_value(json_object_get(seal, "last_seq")));
		if (removed)
			json_array_append_new(removed, json_integer(segs[i]));
		if (anchor_out) {
			json_decref(*anchor_out);
			*anchor_out = json_incref(anchor);
		}
		json_decref(anchor);
		json_decref(seal);
	}
	free(segs);
	return r < 0 ? r : 0;
}

int audit_prune(struct audit *a, uint64_t max_age_s, json_t **out, struct isola_err **err)
{
	json_t *removed = json_array(), *anchor = NULL;
	int r;

	pthread_mutex_lock(&a->lock);
	r = prune_locked(a, max_age_s ? max_age_s : a->cfg.retention_s, removed, &anchor);
	pthread_mutex_unlock(&a->lock);
	if (r < 0) {
		json_decref(removed);
		json_decref(anchor);
		return isola_err_sys(err, -r, NULL, "audit retention in `%s`", a->cfg.dir);
	}
	if (out)
		*out = json_pack("{s:o, s:o}", "removed", removed, "anchor",
				 anchor ? anchor : json_null());
	else {
		json_decref(removed);
		json_decref(anchor);
	}
	return 0;
}

int audit_verify(struct audit *a, json_t **out, struct isola_err **err)
{
	struct chain ch = {0};
	uint32_t *segs, first_seg, active;
	uint64_t head_seq, first_seq;
	char head[HASH_HEX];
	size_t n, sealed = 0;
	bool authentic;
	int r;

	/* Capture the head, then check without the lock: appends go on meanwhile and records
	 * past the captured head are not judged. */
	pthread_mutex_lock(&a->lock);
	head_seq = a->seq;
	snprintf(head, sizeof(head), "%s", a->head);
	active = a->segment;
	pthread_mutex_unlock(&a->lock);

	ch.problems = json_array();
	ch.gaps = json_array();
	load_anchor(a, &first_seg, &ch.next_seq, ch.prev, &authentic);
	first_seq = ch.next_seq;
	if (!authentic)
		problem(&ch, 0, 0, "anchor.json is not authentic (forged or edited)");
	r = list_segments(a, &segs, &n);
	if (r < 0) {
		json_decref(ch.problems);
		json_decref(ch.gaps);
		return isola_err_sys(err, -r, NULL, "list audit segments in `%s`", a->cfg.dir);
	}
	for (size_t i = 0; i < n; i++) {
		struct seg_summary sum;

		if (segs[i] < first_seg)
			continue; /* removed by retention; a crash left the file */
		if (segs[i] > active)
			problem(&ch, segs[i], 0, "segment %u is beyond the active segment %u",
				segs[i], active);
		if (i > 0 && segs[i - 1] >= first_seg && segs[i] != segs[i - 1] + 1)
			problem(&ch, segs[i], ch.next_seq, "segments %u-%u are missing",
				segs[i - 1] + 1, segs[i] - 1);
		else if ((i == 0 || segs[i - 1] < first_seg) && segs[i] != first_seg)
			problem(&ch, segs[i], ch.next_seq,
				"segments %u-%u are missing (the chain starts at %u)", first_seg,
				segs[i] - 1, first_seg);
		r = check_segment(a, segs[i], segs[i] == active ? head_seq : 0, &ch, &sum);
		if (r < 0) {
			problem(&ch, segs[i], ch.next_seq, "segment %u cannot be read: %s", segs[i],
				strerror(-r));
			continue;
		}
		if (segs[i] != active) {
			check_seal(a, segs[i], &sum, &ch);
			sealed++;
		}
	}
	free(segs);
	/* The tail: what isolad wrote must all be there. */
	if (ch.next_seq != head_seq + 1 || (head_seq >= first_seq && strcmp(ch.prev, head) != 0))
		problem(&ch, active, head_seq,
			"the trail ends at record %llu but isolad wrote up to %llu: records were "
			"deleted or rewritten at the end",
			(unsigned long long)(ch.next_seq - 1), (unsigned long long)head_seq);
	*out = json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "ok", !ch.broken, "records",
			 (json_int_t)ch.records, "segments", (json_int_t)n, "sealed",
			 (json_int_t)sealed, "first_seq", (json_int_t)first_seq, "last_seq",
			 (json_int_t)head_seq, "problems", ch.problems, "gaps", ch.gaps);
	return 0;
}

json_t *audit_status(struct audit *a)
{
	json_t *j;

	pthread_mutex_lock(&a->lock);
	j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "dir", a->cfg.dir,
		      "key_file", a->cfg.key_path, "records", (json_int_t)a->seq, "active_segment",
		      (json_int_t)a->segment, "segment_records", (json_int_t)a->cfg.segment_records,
		      "seal_interval_s", (json_int_t)a->cfg.seal_interval_s, "retention_s",
		      (json_int_t)a->cfg.retention_s, "append_errors", (json_int_t)a->append_errors,
		      "gap_pending", (json_int_t)a->gap_lost);
	pthread_mutex_unlock(&a->lock);
	return j;
}

/*
 * Cuts an incomplete last line (a write a crash or a full filesystem cut short) off the
 * segment at path. Returns 1 when it cut one, 0 when the file ends with a whole line or
 * cannot be read. Shrinking a file needs no free space.
 */
static int trim_torn_tail(const char *path)
{
	cleanup_fd int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	char buf[4096];
	struct stat st;
	off_t end, pos;

	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0)
		return 0;
	end = st.st_size;
	for (pos = end; pos > 0;) {
		size_t want = pos < (off_t)sizeof(buf) ? (size_t)pos : sizeof(buf);
		ssize_t got = pread(fd, buf, want, pos - (off_t)want);

		if (got != (ssize_t)want)
			return 0;
		for (size_t i = want; i > 0; i--) {
			if (buf[i - 1] != '\n')
				continue;
			pos = pos - (off_t)want + (off_t)i;
			if (pos == end)
				return 0;
			return ftruncate(fd, pos) == 0 ? 1 : 0;
		}
		pos -= (off_t)want;
		if (end - pos > (off_t)MAX_LINE)
			return 0; /* not a torn record: check_segment reports it */
	}
	return ftruncate(fd, 0) == 0 ? 1 : 0;
}

/* At start: continue after the last record; seal a segment left open if its chain holds. */
static int audit_recover(struct audit *a, struct isola_err **err)
{
	uint32_t *segs, first_seg;
	size_t n;
	bool authentic;
	uint64_t seq0;
	int r;

	load_anchor(a, &first_seg, &seq0, a->head, &authentic);
	a->seq = seq0 - 1;
	a->segment = first_seg;
	r = list_segments(a, &segs, &n);
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "list audit segments in `%s`", a->cfg.dir);
	if (n && segs[n - 1] >= first_seg) {
		uint32_t last = segs[n - 1];
		char path[PATH_MAX];
		struct chain ch = {0};
		struct seg_summary sum, prev_sum;
		json_t *prev_seal = NULL;

		/* The chain entering the last segment: the previous seal, else the anchor. */
		ch.next_seq = seq0;
		snprintf(ch.prev, sizeof(ch.prev), "%s", a->head);
		if (n >= 2 && segs[n - 2] >= first_seg) {
			seg_path(a, segs[n - 2], "seal", path, sizeof(path));
			prev_seal = read_json_file(path);
			if (prev_seal && object_mac_ok(a, prev_seal)) {
				ch.next_seq = (uint64_t)json_integer_value(
						      json_object_get(prev_seal, "last_seq")) +
					      1;
				snprintf(ch.prev, sizeof(ch.prev), "%s",
					 json_string_value(json_object_get(prev_seal, "last_hash"))
						 ?: "");
			} else {
				ch.broken = true;
			}
			json_decref(prev_seal);
		}
		(void)prev_sum;
		seg_path(a, last, "log", path, sizeof(path));
		if (trim_torn_tail(path) == 1) {
			char when[40];

			/* Stated in the trail by the next append, instead of a broken chain. */
			audit_format_time(util_wall_time(), when, sizeof(when));
			gap_add_locked(a, when,
				       "a record cut short by a crash or a full filesystem was "
				       "removed at start");
			log_warn("audit: segment %u ended in an incomplete record; it was cut off "
				 "and the next record states the gap",
				 last);
		}
		check_segment(a, last, 0, &ch, &sum);
		a->segment = last;
		if (sum.count) {
			a->seq = sum.last_seq;
			snprintf(a->head, sizeof(a->head), "%s", sum.last_hash);
		}
		seg_path(a, last, "seal", path, sizeof(path));
		if (access(path, F_OK) == 0) {
			a->segment = last + 1;
		} else if (sum.count && !ch.broken) {
			/* An isolad that crashed left it open: its chain holds, seal it. */
			a->seg_first = sum.first_seq;
			a->seg_count = (uint32_t)sum.count;
			snprintf(a->seg_prev, sizeof(a->seg_prev), "%s", sum.first_prev);
			snprintf(a->seg_last_time, sizeof(a->seg_last_time), "%s", sum.last_time);
			if (open_active(a) == 0)
				seal_locked(a);
		} else if (sum.count) {
			log_error("audit: segment %u was left unsealed and its chain is broken; it "
				  "stays unsealed and `isola audit verify` reports it",
				  last);
			a->segment = last + 1;
		}
	}
	free(segs);
	return 0;
}

int audit_open(const struct audit_config *cfg, struct audit **out, struct isola_err **err)
{
	struct audit *a;
	int r;

	if (sodium_init() < 0)
		return isola_err_set(err, EIO, "internal", "libsodium failed to initialise");
	a = calloc(1, sizeof(*a));
	if (!a)
		return isola_err_set(err, ENOMEM, "internal", "audit: out of memory");
	a->cfg = *cfg;
	if (!a->cfg.segment_records)
		a->cfg.segment_records = 10000;
	if (!a->cfg.seal_interval_s)
		a->cfg.seal_interval_s = 3600;
	a->fd = -1;
	a->gap_fd = -1;
	pthread_mutex_init(&a->lock, NULL);
	r = util_mkdir_p(a->cfg.dir, 0700);
	if (r < 0) {
		isola_err_sys(err, -r, NULL, "create audit dir `%s`", a->cfg.dir);
		goto fail;
	}
	r = load_key(a, err);
	if (r < 0)
		goto fail;
	gap_load(a);
	r = audit_recover(a, err);
	if (r < 0)
		goto fail;
	if (a->cfg.retention_s)
		prune_locked(a, a->cfg.retention_s, NULL, NULL);
	*out = a;
	return 0;
fail:
	if (a->gap_fd >= 0)
		close(a->gap_fd);
	sodium_memzero(a->key, sizeof(a->key));
	pthread_mutex_destroy(&a->lock);
	free(a);
	return r;
}

void audit_close(struct audit *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	seal_locked(a);
	if (a->fd >= 0)
		close(a->fd);
	if (a->gap_fd >= 0)
		close(a->gap_fd);
	pthread_mutex_unlock(&a->lock);
	sodium_memzero(a->key, sizeof(a->key));
	pthread_mutex_destroy(&a->lock);
	free(a);
}

struct audit_cursor {
	struct audit *a; /* borrowed */
	uint32_t *segs;	 /* segments to read, owned */
	size_t n, i;	 /* count, next index */
	FILE *f;	 /* current segment */
	char since[40];	 /* "" = everything */
	char *line;	 /* getline buffer, owned */
	size_t cap;	 /* its size */
};

int audit_cursor_open(struct audit *a, double since, struct audit_cursor **out,
		      struct isola_err **err)
{
	struct audit_cursor *c = calloc(1, sizeof(*c));
	uint32_t first_seg;
	uint64_t seq0;
	char prev[HASH_HEX];
	bool authentic;
	int r;

	if (!c)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	c->a = a;
	if (since > 0)
		audit_format_time(since, c->since, sizeof(c->since));
	r = list_segments(a, &c->segs, &c->n);
	if (r < 0) {
		free(c);
		return isola_err_sys(err, -r, NULL, "list audit segments in `%s`", a->cfg.dir);
	}
	load_anchor(a, &first_seg, &seq0, prev, &authentic);
	while (c->i < c->n && c->segs[c->i] < first_seg)
		c->i++;
	*out = c;
	return 0;
}

int audit_cursor_next(struct audit_cursor *c, const char **line)
{
	for (;;) {
		ssize_t len;

		if (!c->f) {
			char path[PATH_MAX];

			if (c->i >= c->n)
				return 0;
			seg_path(c->a, c->segs[c->i++], "log", path, sizeof(path));
			c->f = fopen(path, "re");
			if (!c->f)
				continue;
		}
		len = getline(&c->line, &c->cap, c->f);
		if (len <= 0) {
			fclose(c->f);
			c->f = NULL;
			continue;
		}
		if (c->line[len - 1] != '\n')
			continue; /* a record being written right now */
		c->line[len - 1] = '\0';
		if (c->since[0]) {
			/* "time":"..." is the second field we write; compare the RFC 3339 text. */
			const char *t = strstr(c->line, "\"time\":\"");

			if (t && strncmp(t + 8, c->since, strlen(c->since)) < 0) /* same format */
				continue;
		}
		*line = c->line;
		return 1;
	}
}

void audit_cursor_free(struct audit_cursor *c)
{
	if (!c)
		return;
	if (c->f)
		fclose(c->f);
	free(c->segs);
	free(c->line);
	free(c);
}
