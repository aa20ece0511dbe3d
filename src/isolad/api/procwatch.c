/* SPDX-License-Identifier: Apache-2.0 */
/* procwatch: audits the end of every background command — one small thread waits for each. */
#include "api-internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../core/agentconn.h"
#include "../core/core.h"

#define PROCWATCH_STACK	  (128u * 1024u) /* the thread only waits on one channel */
#define PROCWATCH_POLL_MS 500		 /* how often it checks for isolad stopping */

struct procwatch {
	struct api_server *srv;	      /* registered as a worker: outlives the thread */
	struct tenancy_principal who; /* who started the command */
	struct sandbox *s;	      /* reference, dropped by the thread */
	json_t *argv;		      /* owned */
	char user[64];		      /* user it runs as */
	long pid;		      /* in the sandbox */
	uint64_t started_ms;	      /* when it started */
};

/* Waits for the command's EXIT (or the sandbox's end) and appends its audit record. */
static void *procwatch_main(void *p)
{
	struct procwatch *w = p;
	struct agent_chan *ch = NULL;
	struct agent_conn *conn;
	json_t *req, *exit = NULL;
	bool stopping = false;

	req = json_pack("{s:s, s:I}", "op", "wait", "pid", (json_int_t)w->pid);
	if (req && sandbox_agent(w->s, &conn, NULL) == 0 &&
	    agent_chan_open(conn, req, &ch, NULL) == 0) {
		for (;;) {
			struct agent_msg m = {0};
			int r = agent_chan_recv(ch, &m, PROCWATCH_POLL_MS, NULL);

			if (r == -ETIMEDOUT) {
				if ((stopping = api_server_is_stopping(w->srv)))
					break;
				continue;
			}
			if (r < 0)
				break; /* the sandbox went away: its end was not seen */
			if (m.type == PROTO_EXIT)
				exit = json_incref(m.json);
			agent_msg_fini(&m);
			if (exit || m.type == PROTO_ERROR)
				break;
		}
	}
	agent_chan_close(ch);
	json_decref(req);
	/* isolad stopping is not the command ending: it keeps running, unaudited as ended. */
	if (!stopping)
		api_audit_command(w->srv, &w->who, sandbox_id(w->s), w->argv, w->user, w->pid, exit,
				  w->started_ms);
	json_decref(exit);
	json_decref(w->argv);
	sandbox_unref(w->s);
	api_server_worker_leave(w->srv);
	free(w);
	return NULL;
}

void api_procwatch_start(struct api_req *r, struct sandbox *s, const json_t *argv, const char *user,
			 long pid)
{
	struct procwatch *w;
	pthread_attr_t attr;
	pthread_t t;

	if (!api_server_worker_enter(r->srv))
		return;
	w = calloc(1, sizeof(*w));
	if (!w) {
		api_server_worker_leave(r->srv);
		return;
	}
	w->srv = r->srv;
	w->who = r->who;
	sandbox_ref(s);
	w->s = s;
	w->argv = json_incref((json_t *)argv);
	snprintf(w->user, sizeof(w->user), "%s", user ? user : "");
	w->pid = pid;
	w->started_ms = util_now_ms();
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, PROCWATCH_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, procwatch_main, w) != 0) {
		log_warn("sandbox %s: cannot watch pid %ld for the audit trail", sandbox_id(s),
			 pid);
		json_decref(w->argv);
		sandbox_unref(w->s);
		api_server_worker_leave(r->srv);
		free(w);
	}
	pthread_attr_destroy(&attr);
}
