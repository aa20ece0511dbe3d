/* SPDX-License-Identifier: Apache-2.0 */
/* agentconn: isolad's end of one sandbox's agent stream: channel multiplexing and flow control. */
#ifndef ISOLA_AGENTCONN_H
#define ISOLA_AGENTCONN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"

/*
 * Threading: an agent_conn owns one stream fd and one reader thread that
 * demultiplexes frames into per-channel queues. Any thread may open channels
 * and call agent_chan_* on a channel it owns; a channel is used by one thread
 * at a time. Each channel's receive queue is bounded by PROTO_WINDOW data bytes
 * (credit is returned to the agent only as the owner consumes), so a stalled
 * consumer stalls only its own channel. A peer that violates the protocol
 * (bad frame, data beyond credit, oversized JSON) kills the connection: every
 * channel then reports -ECONNRESET.
 */
struct agent_conn;
struct agent_chan;

/* One received frame. `data` is heap-owned by the message (NUL-terminated for
 * convenience); `json` is set (owned) for JSON types. Release with agent_msg_fini(). */
struct agent_msg {
	uint8_t type;  /* enum proto_type */
	uint8_t *data; /* payload bytes, owned */
	size_t len;    /* payload length */
	json_t *json;  /* parsed payload for RESULT/ERROR/EXIT/ENTRY/DROPPED, owned */
};

void agent_msg_fini(struct agent_msg *m);

/* Takes ownership of a connected stream fd, exchanges HELLO (timeout_ms) and starts
 * the reader thread. On failure the fd is closed. */
int agent_conn_new(int fd, int timeout_ms, struct agent_conn **out, struct isola_err **err);

/* Shuts the stream down, wakes every waiter with -ECONNRESET, joins the reader
 * thread and frees. Channels must already be closed. */
void agent_conn_free(struct agent_conn *c);

/* False once the stream has failed or the agent closed it. */
bool agent_conn_is_alive(struct agent_conn *c);

/* Channels open and not yet ended (streams, calls in flight): idle detection (lifecycle.c). */
size_t agent_conn_channels(struct agent_conn *c);

/* The agent's HELLO payload (borrowed, valid for the connection's life). */
const json_t *agent_conn_hello(struct agent_conn *c);
/* Whether the agent's HELLO lists feature (PROTO_FEATURE_*) in "features". */
bool agent_conn_has(struct agent_conn *c, const char *feature);

/* Opens a channel with the JSON request `req` (borrowed; must contain "op"). */
int agent_chan_open(struct agent_conn *c, const json_t *req, struct agent_chan **out,
		    struct isola_err **err);

/*
 * Waits up to timeout_ms (-1 = forever) for the next frame on the channel. Returns
 * 0 with *msg filled, -ETIMEDOUT, or -ECONNRESET if the connection died. An ERROR
 * frame is returned as a message (type PROTO_ERROR), not as a failure. Consuming a
 * data frame returns its credit to the agent.
 */
int agent_chan_recv(struct agent_chan *ch, struct agent_msg *msg, int timeout_ms,
		    struct isola_err **err);

/* Sends a data frame (PROTO_STDIN), splitting at PROTO_MAX_PAYLOAD and blocking
 * while the agent has granted no credit. */
int agent_chan_send_data(struct agent_chan *ch, const void *buf, size_t len,
			 struct isola_err **err);

/* Sends a JSON frame (PROTO_CONTROL or PROTO_ENTRY); `j` borrowed. */
int agent_chan_send_json(struct agent_chan *ch, uint8_t type, const json_t *j,
			 struct isola_err **err);

/* Sends PROTO_EOF (end of our STDIN stream on this channel). */
int agent_chan_send_eof(struct agent_chan *ch, struct isola_err **err);

/* Sends PROTO_CLOSE unless the channel already ended, and frees it. NULL is fine. */
void agent_chan_close(struct agent_chan *ch);

/*
 * Convenience for one-shot ops (stat, mkdir, ps, ...): opens a channel with req,
 * waits for a RESULT (returned in *result, owned by caller) or ERROR (converted to
 * *err with the agent's code and message, returns -errno) and closes the channel.
 */
int agent_call(struct agent_conn *c, const json_t *req, int timeout_ms, json_t **result,
	       struct isola_err **err);

/*
 * Makes *result, the RESULT of the write op `write_req` (borrowed), the written file's entry
 * (the object the stat op answers). The agent answers with the entry itself; an older agent
 * (one in a microvm image built before) answers {path,size}, recognised by its missing
 * `type`: then a stat call as the write's user (write_req's `user`) fetches the entry and
 * replaces *result. If that call fails, *result stays as it was: the write itself succeeded.
 * Any thread.
 */
void agent_write_entry(struct agent_conn *c, const json_t *write_req, int timeout_ms,
		       json_t **result);

/* Converts an ERROR frame's JSON into *err; returns -errno. */
int agent_error_to_err(const json_t *j, struct isola_err **err);

#endif
