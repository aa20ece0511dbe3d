/* SPDX-License-Identifier: Apache-2.0 */
/* ws: RFC 6455 WebSocket codec — handshake accept key, frame encoder, incremental decoder. */
#ifndef ISOLA_WS_H
#define ISOLA_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opcodes (RFC 6455 section 5.2). */
#define WS_OP_CONT   0x0
#define WS_OP_TEXT   0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE  0x8
#define WS_OP_PING   0x9
#define WS_OP_PONG   0xA

/* Close status codes (section 7.4.1). */
#define WS_CLOSE_NORMAL	      1000
#define WS_CLOSE_GOING_AWAY   1001
#define WS_CLOSE_PROTOCOL     1002
#define WS_CLOSE_UNSUPPORTED  1003
#define WS_CLOSE_INVALID_DATA 1007
#define WS_CLOSE_POLICY	      1008
#define WS_CLOSE_TOO_BIG      1009
#define WS_CLOSE_INTERNAL     1011

#define WS_MAX_HEADER	   14  /* 2 + 8 (length) + 4 (mask) */
#define WS_MAX_CONTROL	   125 /* control frame payload limit */
#define WS_ACCEPT_KEY_SIZE 29  /* 28 base64 chars + NUL */
#define WS_CLIENT_KEY_SIZE 25  /* 24 base64 chars (16 random bytes) + NUL */

/*
 * Computes Sec-WebSocket-Accept for a client's Sec-WebSocket-Key: base64(SHA-1(key + GUID)).
 * The key must be 24 base64 characters that decode to 16 bytes (section 4.2.1). Returns 0,
 * or -EINVAL for a malformed key. Thread-safe.
 */
int ws_accept_key(const char *client_key, char out[WS_ACCEPT_KEY_SIZE]);

/* Generates a fresh Sec-WebSocket-Key (16 random bytes, base64) for a client. 0 or -errno. */
int ws_client_key(char out[WS_CLIENT_KEY_SIZE]);

/*
 * Writes a frame header with FIN set into hdr and returns its length (2..14). mask is NULL
 * for an unmasked (server) frame or 4 bytes for a masked (client) frame; the caller then
 * masks the payload with ws_mask(). Returns -EINVAL for an unknown opcode or a control
 * frame longer than WS_MAX_CONTROL.
 */
int ws_frame_header(uint8_t hdr[WS_MAX_HEADER], uint8_t opcode, const uint8_t *mask, uint64_t len);

/* XORs buf with the 4-byte mask, starting at payload offset `off` (for chunked masking). */
void ws_mask(uint8_t *buf, size_t len, const uint8_t mask[4], uint64_t off);

/*
 * Encodes one whole frame (FIN set) into a heap buffer *out (caller frees) of *out_len bytes.
 * mask as for ws_frame_header(). Returns 0, -EINVAL (see ws_frame_header) or -ENOMEM.
 */
int ws_frame_encode(uint8_t opcode, const uint8_t *mask, const void *payload, size_t len,
		    uint8_t **out, size_t *out_len);

/* True when buf is valid UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF). */
bool ws_utf8_valid(const uint8_t *buf, size_t len);

/* A message yielded by the decoder: a reassembled data message or one control frame. */
struct ws_message {
	uint8_t opcode;	     /* WS_OP_TEXT, WS_OP_BINARY, WS_OP_CLOSE, WS_OP_PING, WS_OP_PONG */
	const uint8_t *data; /* unmasked payload, owned by the decoder, valid until the next feed */
	size_t len;	     /* payload length */
};

/*
 * Incremental decoder for frames from the peer (UNTRUSTED). It reassembles fragmented data
 * messages, lets control frames interleave, unmasks, validates text as UTF-8, and refuses
 * anything outside its caps before allocating. After an error the stream is unusable and
 * `close_code` says what to send in the CLOSE frame.
 */
struct ws_decoder {
	bool expect_masked;	    /* true on a server (client frames must be masked, section 5.1);
				 false on a client (server frames must not be) */
	size_t max_message;	    /* cap on one reassembled data message, bytes */
	uint16_t close_code;	    /* set on error: WS_CLOSE_PROTOCOL, WS_CLOSE_TOO_BIG, ... */
	uint8_t hdr[WS_MAX_HEADER]; /* header bytes collected so far */
	size_t hdr_have;	    /* how many of them */
	size_t hdr_need;	    /* header size once known (2 until the length byte is read) */
	bool in_payload;	    /* header complete, collecting payload */
	uint8_t opcode;		    /* opcode of the frame in progress */
	bool fin;		    /* FIN of the frame in progress */
	uint8_t mask[4];	    /* masking key of the frame in progress */
	bool masked;		    /* frame in progress is masked */
	uint64_t frame_len;	    /* payload length of the frame in progress */
	uint64_t frame_have;	    /* payload bytes of it received */
	uint8_t ctrl[WS_MAX_CONTROL]; /* payload of a control frame */
	uint8_t msg_opcode; /* TEXT/BINARY of the fragmented message in progress, 0 if none */
	uint8_t *msg;	    /* reassembly buffer, owned */
	size_t msg_len;	    /* bytes in msg */
	size_t msg_cap;	    /* allocated size of msg */
	bool msg_ready;	    /* the last feed returned a data message: reset before more */
};

/* Initialises a decoder. max_message must be > 0. */
void ws_decoder_init(struct ws_decoder *d, bool expect_masked, size_t max_message);
void ws_decoder_fini(struct ws_decoder *d);

/*
 * Consumes up to len bytes of buf. Returns 1 when a message is complete (*out filled,
 * *consumed = bytes used; call again with the rest), 0 when all input was consumed without
 * completing one, or a negative errno on a protocol violation (-EPROTO), an over-cap frame
 * (-EMSGSIZE), invalid UTF-8 in a text message (-EILSEQ) or -ENOMEM; d->close_code is set.
 */
int ws_decoder_feed(struct ws_decoder *d, const uint8_t *buf, size_t len, size_t *consumed,
		    struct ws_message *out);

/* Parses a CLOSE payload: status code (1005 "no status" when empty) and reason. -EPROTO if
 * the payload is one byte, the code is not allowed on the wire, or the reason is not UTF-8. */
int ws_parse_close(const uint8_t *data, size_t len, uint16_t *code, const uint8_t **reason,
		   size_t *reason_len);

#endif
