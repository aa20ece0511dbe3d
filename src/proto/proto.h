/* SPDX-License-Identifier: Apache-2.0 */
/* proto: the isolad <-> isola-agent wire format (docs/agent-protocol.md). Shared by both ends. */
#ifndef ISOLA_PROTO_H
#define ISOLA_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Every frame is a 12-byte header followed by `len` payload bytes:
 *
 *   u32 len      payload length, little endian, <= PROTO_MAX_PAYLOAD
 *   u32 channel  channel id, little endian; 0 is the connection itself
 *   u8  type     enum proto_type
 *   u8  flags    PROTO_F_* bits; unknown bits must be zero
 *   u16 reserved must be zero
 *
 * Channels are opened by isolad (odd ids are never used by the agent to open).
 * JSON payloads are UTF-8 objects, at most PROTO_MAX_JSON bytes.
 */
#define PROTO_VERSION	  1
#define PROTO_HEADER_SIZE 12
#define PROTO_MAX_PAYLOAD (64u * 1024u)	 /* data frames carry at most 64 KiB */
#define PROTO_MAX_JSON	  (60u * 1024u)	 /* JSON control payloads */
#define PROTO_WINDOW	  (256u * 1024u) /* initial credit per channel and direction, bytes */

/* What an agent's HELLO lists in "features" beyond version 1. isolad asks before it relies on
 * one: a sandbox keeps its agent across an isolad upgrade, and a microvm image or a memory
 * snapshot may carry an older one. */
#define PROTO_FEATURE_WRITE_PARENTS "write_parents" /* write's `parents`: mkdir -p first */

enum proto_type {
	PROTO_HELLO = 1,  /* ch 0, JSON {"version":1,...}: first frame each way */
	PROTO_OPEN = 2,	  /* isolad->agent, JSON request {"op":...}; opens the channel */
	PROTO_RESULT = 3, /* agent->isolad, JSON: success reply / progress of an op */
	PROTO_ERROR = 4,  /* agent->isolad, JSON {"code","errno","message"}; ends the channel */
	PROTO_STDIN = 5,  /* isolad->agent, raw bytes (process stdin, file contents, tar entries) */
	PROTO_STDOUT = 6, /* agent->isolad, raw bytes (process stdout, file contents) */
	PROTO_STDERR = 7, /* agent->isolad, raw bytes (process stderr) */
	PROTO_EOF = 8,	  /* either way, empty: no more STDIN / STDOUT data on this channel */
	PROTO_CREDIT = 9, /* either way, u32 LE: grants that many more data bytes */
	PROTO_CONTROL =
		10, /* isolad->agent, JSON: signal / resize / close_stdin on an open channel */
	PROTO_EXIT =
		11, /* agent->isolad, JSON {"exit_code","signal",...}: process ended; ends ch */
	PROTO_CLOSE = 12, /* either way, empty: abandon the channel; the peer frees its state */
	PROTO_ENTRY = 13, /* either way, JSON: one tar entry header (tar_get / tar_put) */
	PROTO_DROPPED =
		14, /* agent->isolad, JSON {"stream","bytes"}: output lost to the retention cap */
	PROTO_TYPE_MAX = 14,
};

#define PROTO_F_NONE 0u

struct proto_header {
	uint32_t len;	  /* payload length */
	uint32_t channel; /* channel id */
	uint8_t type;	  /* enum proto_type */
	uint8_t flags;	  /* PROTO_F_* */
};

/* Encodes h into out[PROTO_HEADER_SIZE]. */
void proto_header_encode(const struct proto_header *h, uint8_t out[PROTO_HEADER_SIZE]);

/*
 * Decodes and validates a header. Returns 0, or -EPROTO if the type is unknown, a
 * reserved field or flag is non-zero, HELLO is not on channel 0 (or another type is),
 * or len is outside the per-type range: JSON types 2..PROTO_MAX_JSON, data types
 * 1..PROTO_MAX_PAYLOAD, CREDIT exactly 4, EOF and CLOSE exactly 0.
 */
int proto_header_decode(const uint8_t in[PROTO_HEADER_SIZE], struct proto_header *h);

/* True for types whose payload counts against flow-control credit. */
static inline int proto_type_is_data(uint8_t type)
{
	return type == PROTO_STDIN || type == PROTO_STDOUT || type == PROTO_STDERR;
}

/* True for types whose payload counts against credit: data, and ENTRY headers (so a
 * tar stream of empty files is flow-controlled too). */
static inline int proto_type_uses_credit(uint8_t type)
{
	return proto_type_is_data(type) || type == PROTO_ENTRY;
}

/* True for types whose payload is a JSON object. */
bool proto_type_is_json(uint8_t type);

/*
 * An incremental decoder: feed it bytes as they arrive; it yields whole frames.
 * It never holds more than PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD bytes.
 */
struct proto_decoder {
	uint8_t hdr[PROTO_HEADER_SIZE]; /* header bytes collected so far */
	size_t hdr_have;		/* how many of them */
	struct proto_header cur;	/* decoded header of the frame in progress */
	uint8_t *payload;    /* PROTO_MAX_PAYLOAD + 1 buffer (NUL after the frame), owned */
	size_t payload_have; /* payload bytes collected */
};

/* 0 or -ENOMEM. */
int proto_decoder_init(struct proto_decoder *d);
void proto_decoder_fini(struct proto_decoder *d);

/*
 * Consumes up to len bytes from buf. When a whole frame is available, stops, sets
 * *consumed to the bytes used, fills *h and *payload (pointing into the decoder,
 * valid until the next call; the payload is followed by a NUL byte) and returns 1. Returns 0 when all input was consumed
 * without completing a frame, or -EPROTO on a malformed header (the stream is then
 * unusable).
 */
int proto_decoder_feed(struct proto_decoder *d, const uint8_t *buf, size_t len, size_t *consumed,
		       struct proto_header *h, const uint8_t **payload);

#endif
