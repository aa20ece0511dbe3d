/* SPDX-License-Identifier: Apache-2.0 */
/* test_mcp_core: the transport-independent MCP core (mcp_handle) through a recording transport. */
#include <string.h>

#include "../tap.h"
#include "cli/mcp/mcp.h"

/* What the core sent: every message, in order. */
static json_t *sent;

static int rec_send(struct mcp_session *s, json_t *msg, const char *str, size_t len)
{
	(void)s;
	ok(strlen(str) == len && !strchr(str, '\n'), "one compact line per message");
	json_array_append(sent, msg);
	return 0;
}

static const struct mcp_transport_ops rec_ops = {.send = rec_send};

/* Handles the JSON text and returns the one message it produced (borrowed), or NULL. */
static json_t *one(struct mcp_session *s, const char *text)
{
	json_t *m = json_loads(text, 0, NULL);

	json_array_clear(sent);
	mcp_handle(s, m);
	json_decref(m);
	return json_array_size(sent) == 1 ? json_array_get(sent, 0) : NULL;
}

static int err_code(json_t *m)
{
	return (int)json_integer_value(json_object_get(json_object_get(m, "error"), "code"));
}

int main(void)
{
	/* Nothing listens here: the inline methods never reach the API. */
	struct client_conf conf = {.socket = "/nonexistent/isolad.sock"};
	struct mcp_session s = {0};
	struct isola_err *err = NULL;
	json_t *m;

	sent = json_array();
	ok(mcp_session_init(&s, &rec_ops, &conf, &err) == 0, "session init");

	m = one(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
		    "{\"protocolVersion\":\"2025-03-26\"}}");
	ok(m && json_integer_value(json_object_get(m, "id")) == 1,
	   "initialize answered with its id");
	ok(m && !strcmp(json_string_value(
				json_object_get(json_object_get(m, "result"), "protocolVersion"))
				?: "",
			"2025-03-26"),
	   "the client's known version is echoed");
	m = one(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"initialize\",\"params\":"
		    "{\"protocolVersion\":\"1999-01-01\"}}");
	ok(m && !strcmp(json_string_value(
				json_object_get(json_object_get(m, "result"), "protocolVersion"))
				?: "",
			"2025-11-25"),
	   "an unknown version gets the newest");
	ok(mcp_version_known("2025-06-18") && mcp_version_known("2025-03-26") &&
		   !mcp_version_known("2025-01-01") && !mcp_version_known(NULL),
	   "mcp_version_known");

	m = one(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
	ok(m && json_is_object(json_object_get(m, "result")) &&
		   !strcmp(json_string_value(json_object_get(m, "id")) ?: "", "p"),
	   "ping answered, string id kept");
	m = one(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	ok(m && json_array_size(json_object_get(json_object_get(m, "result"), "tools")) ==
			   mcp_ntools,
	   "tools/list lists every tool of the table");
	m = one(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"nope\"}");
	ok(m && err_code(m) == RPC_METHOD_NOT_FOUND, "unknown method: -32601");
	m = one(&s, "{\"jsonrpc\":\"1.0\",\"id\":4,\"method\":\"ping\"}");
	ok(m && err_code(m) == RPC_INVALID_REQUEST, "not JSON-RPC 2.0: -32600");
	m = one(&s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":[1]}");
	ok(m && err_code(m) == RPC_INVALID_PARAMS, "params not an object: -32602");
	m = one(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	ok(!m && json_array_size(sent) == 0, "a notification gets no answer");
	m = one(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
		    "\"params\":{\"requestId\":99}}");
	ok(!m && json_array_size(sent) == 0, "cancelling an unknown request sends nothing");
	m = one(&s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}");
	ok(!m && json_array_size(sent) == 0, "a response from the client is ignored");

	mcp_progress_tick(&s);
	ok(json_array_size(sent) == 0, "no progress without running calls");
	{
		static volatile sig_atomic_t stop = 1;

		mcp_session_end(&s, &stop); /* no calls, no default sandbox: returns at once */
	}
	mcp_session_fini(&s);
	json_decref(sent);
	return tap_done();
}
