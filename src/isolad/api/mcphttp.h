/* SPDX-License-Identifier: Apache-2.0 */
/* mcphttp: MCP Streamable HTTP at /mcp on isolad's listeners (docs/mcp.md "Streamable HTTP"). */
#ifndef ISOLA_API_MCPHTTP_H
#define ISOLA_API_MCPHTTP_H

#include <stdbool.h>

#include "api-internal.h"

#define MCPH_MAX_BODY	   (16u << 20) /* one POST (write_file content is inline) */
#define MCPH_MAX_BATCH	   64	       /* messages in one POST */
#define MCPH_MAX_PER_TOKEN 16	       /* open sessions per token (principal) */
#define MCPH_MAX_SESSIONS  256	       /* open sessions in all */
#define MCPH_IDLE_S	   1800	       /* a session with no request and no call expires */
#define MCPH_KEEPALIVE_S   15	       /* SSE comment on an answer stream with nothing else */

/* Routes (server.c's table): POST /mcp streams its body to begin/data, then post. */
int api_mcp_post_begin(struct api_req *r);
int api_mcp_post_data(struct api_req *r, const char *buf, size_t len);
enum MHD_Result api_mcp_post(struct api_req *r);
enum MHD_Result api_mcp_delete(struct api_req *r);

/* Starts the ticker (progress, idle expiry) once srv serves; stop ends every session
 * (calls cancelled, default sandboxes kept) before the daemons are quiesced. */
void mcp_http_start(struct api_server *srv);
void mcp_http_stop(void);

/* origin.c (pure): true when a request with this Origin (NULL: none) may use /mcp on a listener the
 * client reached as `host` (the Host header): no Origin, or an http(s) Origin whose
 * authority is exactly Host and names the listener by IP literal or localhost — a DNS name
 * could be an attacker's pointing at this machine (DNS rebinding). */
bool api_origin_ok(const char *origin, const char *host);

#endif
