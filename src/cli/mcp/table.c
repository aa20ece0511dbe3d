/* SPDX-License-Identifier: Apache-2.0 */
/* table: the MCP tool table — names, descriptions, input/output JSON Schemas and annotations. */
#include "mcp.h"

/* The schemas read best as written, one property per line. */
/* clang-format off */

/* Schema fragments. Every input schema is an object with additionalProperties false. */
#define OBJ(props)     "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{" props "}}"
#define OBJ_REQ(req, props)                                                                        \
	"{\"type\":\"object\",\"additionalProperties\":false,\"required\":[" req                   \
	"],\"properties\":{" props "}}"
#define STR(name, desc)	 "\"" name "\":{\"type\":\"string\",\"description\":\"" desc "\"}"
#define BOOL(name, desc) "\"" name "\":{\"type\":\"boolean\",\"description\":\"" desc "\"}"
#define SMAP(name, desc)                                                                           \
	"\"" name "\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"        \
	"\"description\":\"" desc "\"}"
#define ID_OPT                                                                                     \
	STR("sandbox_id", "id of the sandbox; absent: the session's default sandbox (created on "  \
			  "first use, destroyed when the client disconnects)")
#define ID_REQ STR("sandbox_id", "id of the sandbox")
#define PID    "\"pid\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"process id\"}"
#define HOST   STR("host_path", "absolute host path inside a directory the operator allowed")
#define CMD                                                                                        \
	STR("command", "shell command line, run by /bin/sh -c") ","                               \
	"\"argv\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,"             \
	"\"description\":\"program and arguments (instead of command)\"},"                         \
	STR("cwd", "working directory") "," SMAP("env", "extra environment") ","                   \
	STR("user", "user to run as")

#define RO  (MCP_HINT_READONLY | MCP_HINT_IDEMPOTENT)
#define ADD 0u
#define DEL (MCP_HINT_DESTRUCTIVE)

static const char out_create[] =
	"{\"type\":\"object\",\"required\":[\"id\"],\"properties\":{\"id\":{\"type\":\"string\"},"
	"\"state\":{\"type\":\"string\"},\"tier\":{\"type\":\"string\"},\"template\":{\"type\":"
	"\"string\"}}}";
static const char out_list[] =
	"{\"type\":\"object\",\"required\":[\"sandboxes\"],\"properties\":{\"sandboxes\":{\"type\":"
	"\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},"
	"\"state\":{\"type\":\"string\"}}}}}}";
static const char out_run[] =
	"{\"type\":\"object\",\"required\":[\"sandbox_id\"],\"properties\":{\"sandbox_id\":{"
	"\"type\":\"string\"},\"exit_code\":{\"type\":\"integer\"},\"signal\":{\"type\":"
	"\"integer\"},\"timed_out\":{\"type\":\"boolean\"},\"stdout_bytes\":{\"type\":\"integer\"},"
	"\"stderr_bytes\":{\"type\":\"integer\"},\"stdout_file\":{\"type\":\"string\"},"
	"\"stderr_file\":{\"type\":\"string\"},\"pid\":{\"type\":\"integer\"},\"background\":{"
	"\"type\":\"boolean\"}}}";
static const char out_ps[] =
	"{\"type\":\"object\",\"required\":[\"processes\"],\"properties\":{\"processes\":{\"type\":"
	"\"array\",\"items\":{\"type\":\"object\",\"required\":[\"pid\",\"running\"],"
	"\"properties\":{\"pid\":{\"type\":\"integer\"},\"running\":{\"type\":\"boolean\"}}}}}}";
static const char out_ls[] =
	"{\"type\":\"object\",\"required\":[\"entries\",\"truncated\"],\"properties\":{\"entries\":"
	"{\"type\":\"array\",\"items\":{\"type\":\"object\",\"required\":[\"path\",\"type\"],"
	"\"properties\":{\"path\":{\"type\":\"string\"},\"type\":{\"type\":\"string\"},\"size\":{"
	"\"type\":\"integer\"}}}},\"truncated\":{\"type\":\"boolean\"}}}";
static const char out_search[] =
	"{\"type\":\"object\",\"required\":[\"matches\",\"more\"],\"properties\":{\"matches\":{"
	"\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"more\":{\"type\":\"boolean\"}}}";
static const char out_code[] =
	"{\"type\":\"object\",\"required\":[\"sandbox_id\",\"results\",\"error\"],\"properties\":{"
	"\"sandbox_id\":{\"type\":\"string\"},\"results\":{\"type\":\"array\",\"items\":{\"type\":"
	"\"object\",\"properties\":{\"formats\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
	"\"is_main_result\":{\"type\":\"boolean\"},\"text\":{\"type\":\"string\"}}}},\"error\":{"
	"\"type\":[\"object\",\"null\"],\"properties\":{\"name\":{\"type\":\"string\"},\"value\":{"
	"\"type\":\"string\"},\"traceback\":{\"type\":\"string\"}}},\"stdout_bytes\":{\"type\":"
	"\"integer\"},\"stderr_bytes\":{\"type\":\"integer\"}}}";
static const char out_fork[] =
	"{\"type\":\"object\",\"required\":[\"children\"],\"properties\":{\"children\":{\"type\":"
	"\"array\",\"items\":{\"type\":\"string\"}}}}";
static const char out_expose[] =
	"{\"type\":\"object\",\"required\":[\"port\",\"public\"],\"properties\":{\"port\":{\"type\":"
	"\"integer\"},\"url\":{\"type\":\"string\"},\"path_url\":{\"type\":\"string\"},\"public\":{"
	"\"type\":\"boolean\"},\"token\":{\"type\":\"string\"}}}";

const struct mcp_tool mcp_tools[] = {
	{"sandbox_create", "Create sandbox",
	 "Create and start a new isola sandbox (an isolated Linux environment) and return its id. "
	 "Tools called without sandbox_id use the session's default sandbox instead, so this is "
	 "only needed for more sandboxes or other settings.",
	 OBJ(STR("template", "template name (default: the daemon's, `host`)") ","
	     "\"cpu\":{\"type\":\"number\",\"minimum\":0.001,\"description\":\"CPUs\"},"
	     "\"memory\":{\"type\":[\"integer\",\"string\"],\"description\":\"bytes or a size like "
	     "512M\"},"
	     "\"pids\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"max processes\"},"
	     "\"ttl\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"seconds until the "
	     "sandbox is destroyed (0: daemon default)\"}," SMAP("env", "environment of every command")
	     "," STR("workdir", "default working directory (absolute)") ","
	     STR("user", "default user of commands") "," SMAP("labels", "labels to find it by") ","
	     "\"tier\":{\"type\":\"string\",\"enum\":[\"process\",\"microvm\"],\"description\":"
	     "\"isolation tier (default process; microvm = own kernel)\"},"
	     STR("snapshot", "start from this named snapshot instead of a template") ","
	     "\"network_allow\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":"
	     "\"egress allowlist (example.com, *.example.com, CIDR, optional :PORT); everything else "
	     "is denied\"}"),
	 out_create, ADD | MCP_HINT_OPENWORLD, mcp_tool_create},
	{"sandbox_run_command", "Run command in sandbox",
	 "Run a command in a sandbox and return its exit code, stdout and stderr. Long output is "
	 "cut to its head and tail; the whole output is saved in the sandbox (path in the "
	 "result). `background` starts it and returns its pid at once. The result is an error "
	 "when the command exits non-zero or times out.",
	 OBJ(ID_OPT "," CMD "," STR("stdin", "text fed to the command's stdin") ","
		    "\"timeout\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":3600,\"default\":60,"
		    "\"description\":\"seconds; the command is killed after it (0: none)\"},"
		    BOOL("background", "start it and return its pid without waiting")),
	 out_run, ADD | MCP_HINT_OPENWORLD, mcp_tool_run},
	{"sandbox_run_code", "Run code in sandbox",
	 "Run code in the sandbox's code interpreter, a live interpreter per context whose "
	 "variables, imports and working directory persist between calls (Python by default; "
	 "javascript, typescript, bash). Returns stdout/stderr, the last expression's value and "
	 "rich results (matplotlib figures come back as images); an exception is an error result "
	 "with its traceback. The first call in a sandbox starts the interpreter (seconds).",
	 OBJ_REQ("\"code\"",
		 ID_OPT "," STR("code", "the code to run") ","
			"\"language\":{\"type\":\"string\",\"description\":\"python (default), "
			"javascript, typescript or bash (aliases: py, js, ts, sh)\"},"
			STR("context", "a context id (from the API or SDK); absent: the language's "
				       "default context") ","
			SMAP("env", "environment variables for this run only") ","
			"\"timeout\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":3600,"
			"\"description\":\"seconds; the run is interrupted after it, the context "
			"kept (0: none)\"}"),
	 out_code, ADD | MCP_HINT_OPENWORLD, mcp_tool_run_code},
	{"sandbox_process_list", "List processes",
	 "List the processes of a sandbox (running ones and recently exited ones).",
	 OBJ(ID_OPT), out_ps, RO, mcp_tool_ps},
	{"sandbox_process_logs", "Process output",
	 "The buffered output (last 1 MiB per stream) of a process, e.g. one started with "
	 "background.",
	 OBJ_REQ("\"pid\"", ID_OPT "," PID), NULL, RO, mcp_tool_logs},
	{"sandbox_process_kill", "Signal process",
	 "Send a signal (default TERM) to a process of a sandbox.",
	 OBJ_REQ("\"pid\"", ID_OPT "," PID "," STR("signal", "signal name or number: TERM, KILL, INT, ...")),
	 NULL, DEL | MCP_HINT_IDEMPOTENT, mcp_tool_kill},
	{"sandbox_read_file", "Read file",
	 "Read a file in a sandbox, a page at a time: by lines (start_line/end_line, 1-based, "
	 "inclusive) or by bytes (offset/max_bytes). UTF-8 is returned as text, other bytes as "
	 "base64.",
	 OBJ_REQ("\"path\"",
		 ID_OPT "," STR("path", "absolute, or relative to the user's home") ","
			"\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"first byte\"},"
			"\"start_line\":{\"type\":\"integer\",\"minimum\":1},"
			"\"end_line\":{\"type\":\"integer\",\"minimum\":1},"
			"\"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":8388608,"
			"\"default\":262144}"),
	 NULL, RO, mcp_tool_read},
	{"sandbox_write_file", "Write file",
	 "Create or replace a file in a sandbox (atomically; missing parent directories are made).",
	 OBJ_REQ("\"path\",\"content\"",
		 ID_OPT "," STR("path", "file path") "," STR("content", "the file's content") ","
			"\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],"
			"\"default\":\"utf8\"}"),
	 NULL, DEL | MCP_HINT_IDEMPOTENT, mcp_tool_write},
	{"sandbox_edit_file", "Edit file",
	 "Replace an exact string in a file of a sandbox. Fails, naming the count, when "
	 "old_string matches no time or more than once (unless replace_all).",
	 OBJ_REQ("\"path\",\"old_string\",\"new_string\"",
		 ID_OPT "," STR("path", "file path") "," STR("old_string", "exact text to replace")
			"," STR("new_string", "replacement") ","
			BOOL("replace_all", "replace every occurrence")),
	 NULL, DEL, mcp_tool_edit},
	{"sandbox_list_files", "List files",
	 "List a directory of a sandbox (recursively with depth), optionally only the entries "
	 "whose path relative to `path` matches a glob (`*` also crosses `/`).",
	 OBJ(ID_OPT "," STR("path", "directory (default: the home directory)") ","
		    STR("glob", "shell pattern, e.g. *.py") ","
		    "\"depth\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16,\"default\":1}"),
	 out_ls, RO, mcp_tool_ls},
	{"sandbox_search", "Search files",
	 "Search files of a sandbox with a regular expression (grep -E): file:line:text lines, at "
	 "most max_results.",
	 OBJ_REQ("\"pattern\"",
		 ID_OPT "," STR("pattern", "extended regular expression") ","
			STR("path", "file or directory (default: the home directory)") ","
			STR("glob", "only files whose name matches, e.g. *.c") ","
			BOOL("ignore_case", "case-insensitive") ","
			"\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,"
			"\"default\":100}"),
	 out_search, RO, mcp_tool_search},
	{"sandbox_remove", "Remove path", "Remove a file or (with recursive) a directory tree.",
	 OBJ_REQ("\"path\"", ID_OPT "," STR("path", "path to remove") ","
				 BOOL("recursive", "remove a directory and its contents")),
	 NULL, DEL | MCP_HINT_IDEMPOTENT, mcp_tool_remove},
	{"sandbox_mkdir", "Make directory", "Create a directory (and its parents unless parents is false).",
	 OBJ_REQ("\"path\"", ID_OPT "," STR("path", "directory") ","
				 BOOL("parents", "create missing parents (default true)")),
	 NULL, ADD | MCP_HINT_IDEMPOTENT, mcp_tool_mkdir},
	{"sandbox_upload", "Upload host file",
	 "Copy a file from the host into a sandbox. Only host paths inside directories the operator "
	 "allowed (isola mcp --allow-host-path) are accepted.",
	 OBJ_REQ("\"host_path\",\"path\"", ID_OPT "," HOST "," STR("path", "destination in the sandbox")),
	 NULL, DEL | MCP_HINT_IDEMPOTENT, mcp_tool_upload},
	{"sandbox_download", "Download file to host",
	 "Copy a file from a sandbox to the host. Only host paths inside directories the operator "
	 "allowed (isola mcp --allow-host-path) are accepted.",
	 OBJ_REQ("\"path\",\"host_path\"", ID_OPT "," STR("path", "file in the sandbox") "," HOST),
	 NULL, DEL | MCP_HINT_IDEMPOTENT, mcp_tool_download},
	{"sandbox_expose_port", "Expose port",
	 "Make a TCP port of a sandbox reachable over HTTP and return its URL (and the access "
	 "token unless public).",
	 OBJ_REQ("\"port\"", ID_OPT ","
		 "\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535},"
		 BOOL("public", "no access token needed")),
	 out_expose, ADD | MCP_HINT_IDEMPOTENT | MCP_HINT_OPENWORLD, mcp_tool_expose},
	{"sandbox_snapshot", "Snapshot sandbox",
	 "Take an immutable named snapshot of a sandbox's state (its files; on the microvm tier "
	 "also its memory). New sandboxes start from it with sandbox_create `snapshot`.",
	 OBJ_REQ("\"name\"", ID_OPT ","
		 "\"name\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9_][A-Za-z0-9._-]{0,62}$\","
		 "\"description\":\"snapshot name\"}"),
	 NULL, ADD, mcp_tool_snapshot},
	{"sandbox_fork", "Fork sandbox",
	 "Make `count` new sandboxes that start with this sandbox's current state. Returns their "
	 "ids; the source keeps running.",
	 OBJ(ID_OPT ",\"count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":16,\"default\":1}"),
	 out_fork, ADD, mcp_tool_fork},
	{"sandbox_destroy", "Destroy sandbox",
	 "Destroy a sandbox and everything in it. The id is gone afterwards.",
	 OBJ_REQ("\"sandbox_id\"", ID_REQ), NULL, DEL | MCP_HINT_IDEMPOTENT, mcp_tool_destroy},
	{"sandbox_list", "List sandboxes",
	 "List sandboxes (id, state, tier, template, labels), optionally only those carrying "
	 "every given label.",
	 OBJ(SMAP("labels", "labels every listed sandbox carries")), out_list, RO, mcp_tool_list},
};

const size_t mcp_ntools = sizeof(mcp_tools) / sizeof(mcp_tools[0]);
/* clang-format on */
