/* SPDX-License-Identifier: Apache-2.0 */
/* core-internal: what the core's own files share (sandbox struct, manager struct). */
#ifndef ISOLA_CORE_INTERNAL_H
#define ISOLA_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "../store/store.h"
#include "core.h"

#define CORE_MAX_SANDBOXES 4096	    /* uid slots; also the hard cap on live sandboxes */
#define CORE_UID_BASE	   1048576u /* first host uid handed to sandboxes (above subuid ranges) */

enum sandbox_state {
	SANDBOX_CREATING,
	SANDBOX_RUNNING,
	SANDBOX_ERROR,
	SANDBOX_DESTROYING,
};

struct sandbox {
	atomic_int refs;	       /* references; the core's list holds one */
	pthread_mutex_t lock;	       /* protects everything below */
	struct core *core;	       /* owner, borrowed */
	char id[40];		       /* public id */
	enum sandbox_state state;      /* lifecycle state */
	char *error;		       /* reason when state is ERROR, owned */
	const struct tier_ops *tier;   /* tier implementation */
	struct tier_sandbox *ts;       /* tier handle, NULL once destroyed or lost */
	struct agent_conn *conn;       /* current agent connection or NULL */
	struct agent_conn **old_conns; /* replaced connections, freed with the sandbox */
	size_t n_old_conns;	       /* entries of old_conns */
	struct sandbox_spec spec;      /* what the tier built */
	int uid_slot;		       /* index of the host uid range */
	char template_id[65];	       /* template id */
	char template_name[64];	       /* template name as requested */
	json_t *env;		       /* merged template + request env {K:V}, owned */
	json_t *labels;		       /* {K:V}, owned */
	char workdir[256];	       /* default cwd for commands */
	char user[64];		       /* default user for commands */
	double created_at;	       /* unix time */
	double expires_at;	       /* unix time, 0 = never */
	double last_active;	       /* unix time of the last API use */
	char tenant[64];	       /* owning tenant; set before the list add, never changed */
};

/* Resources a create in flight was admitted for (core.c's admission). */
struct core_reservation {
	char tenant[64];	       /* who */
	uint64_t cpu_millis;	       /* CPU limit */
	uint64_t memory_bytes;	       /* memory limit */
	uint64_t disk_bytes;	       /* writable layer */
	struct core_reservation *next; /* list under core.lock */
};

struct core {
	struct core_config cfg;			 /* settings, copied */
	struct store *store;			 /* durable state */
	pthread_mutex_t lock;			 /* protects sandboxes, n_sandboxes, slots */
	struct sandbox **sandboxes;		 /* live sandboxes (one reference each) */
	size_t n_sandboxes;			 /* used entries */
	size_t cap_sandboxes;			 /* allocated entries */
	unsigned char slots[CORE_MAX_SANDBOXES]; /* 1 = uid slot in use */
	char token[65];				 /* API bearer token (hex) */
	pthread_t monitor;			 /* TTL and liveness thread */
	int monitor_running;			 /* 1 while the thread runs */
	int stop_fd;				 /* eventfd that stops the monitor */
	int lock_fd; /* flock on <state>/isolad.lock: one isolad per state dir */
	struct core_reservation *pending; /* admitted creates not yet in the list (under lock) */
	struct tenancy *tenancy;	  /* tenants, tokens, rate buckets */
	struct audit *audit;		  /* the audit trail */
	uint32_t host_cpus;		  /* online CPUs at start */
	uint64_t host_memory;		  /* MemTotal at start */
};

/* Allocates a sandbox object (one reference) with state CREATING. */
struct sandbox *sandbox_alloc(struct core *c, const char *id);

/* Serialises the parts of a sandbox the store keeps in `spec` (heap string). */
char *sandbox_spec_dump(struct sandbox *s);

/* Restores those parts from a stored row; -EINVAL on a malformed row. */
int sandbox_spec_load(struct sandbox *s, const char *json, struct isola_err **err);

/* State names as the API shows them. */
const char *sandbox_state_name(enum sandbox_state st);

/* Registers / unregisters a sandbox in the core's list (takes / drops the list's ref). */
int core_list_add(struct core *c, struct sandbox *s, struct isola_err **err);
void core_list_remove(struct core *c, struct sandbox *s);

/* Writes <state>/sandboxes/<id> into out; -ENAMETOOLONG if it does not fit. */
int core_sandbox_dir(const struct core *c, const char *id, char *out, size_t n);

/* Finds the tier named `name`, or NULL. */
const struct tier_ops *core_tier_by_name(const char *name);

/* Releases a sandbox's tier resources and marks it ERROR with reason (keeps the record). */
void core_sandbox_fail(struct core *c, struct sandbox *s, const char *reason);

/* Destroys a sandbox found in the list (any state). */
int core_sandbox_destroy_obj(struct core *c, struct sandbox *s, struct isola_err **err);

/* Re-attaches or cleans up the sandboxes in the store (startup). */
int core_reconcile(struct core *c, struct isola_err **err);

/* The TTL and liveness thread. */
int core_monitor_start(struct core *c, struct isola_err **err);
void core_monitor_stop(struct core *c);

#endif
