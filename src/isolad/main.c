/* SPDX-License-Identifier: Apache-2.0 */
/* isolad: the daemon — parse flags, start the core and the API, wait for a stop signal. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/err.h"
#include "../common/log.h"
#include "../common/util.h"
#include "api/api.h"
#include "core/core.h"
#include "core/pool.h"
#include "expose/expose.h"
#include "net/net.h"
#include "tiers/process/process.h"
#include "images/ext4.h"
#include "tiers/microvm/microvm.h"

#define DEFAULT_SOCKET "/run/isola/isolad.sock"

static void usage(FILE *f)
{
	fprintf(f, "usage: isolad [--state-dir DIR] [--socket PATH] [--listen 127.0.0.1:PORT]\n"
		   "              [--agent PATH] [--log-level debug|info|warn|error]\n"
		   "              [--idle-timeout SECONDS]\n"
		   "              [--audit-segment-records N] [--audit-seal-interval SECONDS]\n"
		   "              [--audit-retention SECONDS] [--cpu-overcommit X]\n"
		   "              [--admission-wait DURATION]\n"
		   "              [--memory-overcommit X] [--accel auto|kvm|tcg]\n"
		   "              [--microvm-image small|full]\n"
		   "              [--snapshot-dir DIR] [--tombstone-ttl DURATION] [--uid-base N]\n"
		   "              [--socket-group GROUP] [--console on|off] [--allow-host-netns]\n"
		   "              [--expose-listen HOST:PORT] [--expose-domain DOMAIN]\n"
		   "              [--expose-max-conns N] [--pool TEMPLATE:TIER:N]...\n"
		   "              [--layer-slots N] [--pool-auto MAX]\n" NET_USAGE);
	fprintf(f,
		"  --pool-auto MAX  automatic warm pool of host/process sandboxes, sized from the\n"
		"                   recent create rate, capped at MAX and at 1/64 of "
		"MemAvailable;\n"
		"                   on by default (MAX %d) unless stored otherwise, 0 = off\n",
		POOL_AUTO_DEFAULT_MAX);
}

/* Finds the static agent: flag, $ISOLA_AGENT, next to isolad, the build tree, libexec. */
static void find_agent(const char *flag, char *out, size_t n)
{
	char exe[PATH_MAX], *dir;
	const char *env = getenv("ISOLA_AGENT");
	ssize_t len;
	const char *rel[] = {"isola-agent", "../agent/isola-agent", "../libexec/isola/isola-agent"};

	if (flag) {
		snprintf(out, n, "%s", flag);
		return;
	}
	if (env && *env) {
		snprintf(out, n, "%s", env);
		return;
	}
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len > 0) {
		exe[len] = '\0';
		dir = dirname(exe);
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(out, n, "%s/%s", dir, rel[i]);
			if (access(out, X_OK) == 0)
				return;
		}
	}
	snprintf(out, n, "/usr/local/libexec/isola/isola-agent");
}

/* Every live sandbox and API connection holds fds: the soft RLIMIT_NOFILE (often 1024) goes
 * up to the hard one. Nothing in isolad uses select(), so fd numbers past FD_SETSIZE are
 * fine (the API server polls, src/isolad/api/server.c). */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		log_warn("raise RLIMIT_NOFILE to %llu: %s", (unsigned long long)rl.rlim_max,
			 strerror(errno));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"state-dir", required_argument, NULL, 's'},
		{"socket", required_argument, NULL, 'S'},
		{"listen", required_argument, NULL, 'l'},
		{"agent", required_argument, NULL, 'a'},
		{"log-level", required_argument, NULL, 'L'},
		{"idle-timeout", required_argument, NULL, 'T'},
		{"help", no_argument, NULL, 'h'},
		{"audit-segment-records", required_argument, NULL, 1001},
		{"audit-seal-interval", required_argument, NULL, 1002},
		{"audit-retention", required_argument, NULL, 1003},
		{"cpu-overcommit", required_argument, NULL, 1004},
		{"memory-overcommit", required_argument, NULL, 1005},
		{"accel", required_argument, NULL, 1006},
		{"microvm-image", required_argument, NULL, 1010},
		{"snapshot-dir", required_argument, NULL, 1007},
		{"tombstone-ttl", required_argument, NULL, 1008},
		{"admission-wait", required_argument, NULL, 1013},
		{"socket-group", required_argument, NULL, 1009},
		{"uid-base", required_argument, NULL, 1011},
		{"allow-host-netns", no_argument, NULL, 1012},
		{"expose-listen", required_argument, NULL, 1101},
		{"expose-domain", required_argument, NULL, 1102},
		{"expose-max-conns", required_argument, NULL, 1103},
		{"pool", required_argument, NULL, 1301},
		{"pool-auto", required_argument, NULL, 1302},
		{"console", required_argument, NULL, 1401},
		{"layer-slots", required_argument, NULL, 1402},
		NET_LONG_OPTIONS(1200),
		{NULL, 0, NULL, 0},
	};
	cleanup_err struct isola_err *err = NULL;
	struct core_config cfg;
	struct api_config api = {
		.socket_path = DEFAULT_SOCKET, .max_upload_bytes = 8ull << 30, .socket_gid = -1};
	const char *agent_flag = NULL;
	char agent[PATH_MAX], spool[PATH_MAX];
	struct core *core = NULL;
	struct api_server *srv = NULL;
	struct expose_config xcfg = {0};
	struct expose *expose = NULL;
	struct net_config ncfg;
	struct net *net = NULL;
	const char *pool_flags[POOL_MAX_POOLS]; /* --pool, applied once the core runs */
	int n_pools = 0;
	unsigned layer_slots = 4; /* --layer-slots */
	long pool_auto = -1; /* --pool-auto MAX, 0 = off, -1 = not given (stored, else default) */
	sigset_t set;
	int c, sig;

	if (argc > 0 && !strcmp(argv[0], PROC_RESTORE_ARGV0))
		return tier_process_restore_main(argc, argv);
	core_config_defaults(&cfg);
	net_config_defaults(&ncfg);
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", optarg);
			break;
		case 'S':
			api.socket_path = optarg;
			break;
		case 'l':
			api.listen_addr = optarg;
			break;
		case 'a':
			agent_flag = optarg;
			break;
		case 'L':
			if (!strcmp(optarg, "debug"))
				log_set_level(LOG_DEBUG);
			else if (!strcmp(optarg, "warn"))
				log_set_level(LOG_WARN);
			else if (!strcmp(optarg, "error"))
				log_set_level(LOG_ERROR);
			else if (strcmp(optarg, "info")) {
				fprintf(stderr,
					"isolad: --log-level `%s` is not one of "
					"debug|info|warn|error\n",
					optarg);
				return 2;
			}
			break;
		case 'T': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*optarg < '1' || *optarg > '9' || *end || v > 86400) {
				fprintf(stderr,
					"isolad: --idle-timeout `%s` is not 1-86400 seconds\n",
					optarg);
				return 2;
			}
			api.idle_timeout_s = (unsigned)v;
			break;
		}
		case 1001: /* audit and admission settings (docs/compliance.md) */
		case 1002:
		case 1003:
		case 1004:
		case 1005: {
			char *end = NULL;
			double v = strtod(optarg, &end);

			if (!*optarg || *end || !(v >= 0) || v > 1e12 ||
			    ((c == 1001 || c == 1002) && v < 1) || (c >= 1004 && v <= 0)) {
				fprintf(stderr,
					"isolad: `%s` is not a valid value for that option\n",
					optarg);
				return 2;
			}
			if (c == 1001)
				cfg.audit_segment_records = (uint32_t)v;
			else if (c == 1002)
				cfg.audit_seal_interval_s = (uint32_t)v;
			else if (c == 1003)
				cfg.audit_retention_s = (uint64_t)v;
			else if (c == 1004)
				cfg.cpu_overcommit = v;
			else
				cfg.memory_overcommit = v;
			break;
		}
		case 1008: { /* records of ended sandboxes (docs/tombstones.md) */
			uint64_t v;

			if (util_parse_duration(optarg, 366ull * 86400, &v) < 0) {
				fprintf(stderr,
					"isolad: --tombstone-ttl `%s`: expected a duration such as "
					"24h, 90m or 0 (off), at most 366d\n",
					optarg);
				return 2;
			}
			cfg.tombstone_ttl_s = (uint32_t)v;
			break;
		}
		case 1013: { /* how long a create waits for room on a full host (docs/reliability.md) */
			uint64_t v;

			if (util_parse_duration(optarg, 600, &v) < 0) {
				fprintf(stderr,
					"isolad: --admission-wait `%s`: expected a duration such "
					"as "
					"10s, 1m or 0 (refuse at once), at most 10m\n",
					optarg);
				return 2;
			}
			cfg.admission_wait_ms = (uint32_t)(v * 1000);
			break;
		}
		case 1401: /* the web console at / (docs/console.md) */
			if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
				fprintf(stderr, "isolad: --console `%s`: expected on or off\n",
					optarg);
				return 2;
			}
			api.console_off = !strcmp(optarg, "off");
			break;
		case 1402: { /* writable layers made ahead (docs/process-tier.md) */
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*optarg < '0' || *optarg > '9' || *end ||
			    v > TIER_PROCESS_LAYER_SLOTS_MAX) {
				fprintf(stderr, "isolad: --layer-slots `%s` is not 0-%d\n", optarg,
					TIER_PROCESS_LAYER_SLOTS_MAX);
				return 2;
			}
			layer_slots = (unsigned)v;
			break;
		}
		case 1009: { /* the socket's group (scripts/install.sh: `isola`) */
			struct group *g = getgrnam(optarg);

			if (!g) {
				fprintf(stderr,
					"isolad: --socket-group `%s`: no such group (create it: "
					"groupadd --system %s)\n",
					optarg, optarg);
				return 2;
			}
			api.socket_gid = (long)g->gr_gid;
			break;
		}
		case 1301: /* --pool TEMPLATE:TIER:N, repeatable (docs/persistence.md) */
			if (n_pools >= POOL_MAX_POOLS) {
				fprintf(stderr, "isolad: at most %d --pool flags\n",
					POOL_MAX_POOLS);
				return 2;
			}
			pool_flags[n_pools++] = optarg;
			break;
		case 1302: { /* --pool-auto MAX: the automatic pool (docs/persistence.md) */
			char *end = NULL;
			unsigned long v = strtoul(optarg, &end, 10);

			if (!*optarg || *end || v > POOL_MAX_SIZE) {
				fprintf(stderr,
					"isolad: --pool-auto `%s`: expected a number of sandboxes "
					"0..%d\n",
					optarg, POOL_MAX_SIZE);
				return 2;
			}
			pool_auto = (long)v;
			break;
		}
		case 1006:
			if (tier_microvm_set_accel(optarg) < 0) {
				fprintf(stderr, "isolad: --accel `%s` is not one of auto|kvm|tcg\n",
					optarg);
				return 2;
			}
			break;
		case 1010: /* small (package closure) or full host /usr (docs/microvm.md) */
			if (images_ext4_set_mode(optarg) < 0) {
				fprintf(stderr,
					"isolad: --microvm-image `%s` is not one of small|full\n",
					optarg);
				return 2;
			}
			break;
		case 1007: /* snapshots and hibernation images (docs/persistence.md) */
			if (optarg[0] != '/' || strlen(optarg) >= sizeof(cfg.snapshot_dir) - 64) {
				fprintf(stderr,
					"isolad: --snapshot-dir `%s` must be an absolute "
					"path\n",
					optarg);
				return 2;
			}
			snprintf(cfg.snapshot_dir, sizeof(cfg.snapshot_dir), "%s", optarg);
			break;
		case 1011: { /* host uid ranges (docs/process-tier.md "Host uid ranges") */
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' ||
			    !core_uid_base_valid(v)) {
				fprintf(stderr,
					"isolad: --uid-base `%s` must be a multiple of 65536 from "
					"%u "
					"to %llu (each isolad on a host needs its own %llu host "
					"uids)\n",
					optarg, CORE_UID_BASE_MIN,
					(unsigned long long)UINT32_MAX - CORE_UID_SPAN - 65535,
					(unsigned long long)CORE_UID_SPAN);
				return 2;
			}
			cfg.uid_base = (uint32_t)v;
			break;
		}
		case 1012: /* the operator's `netns` may name the host's own (docs/oci.md) */
			tier_process_set_allow_host_netns(true);
			break;
		case 1101: /* port exposure (docs/network.md "Port exposure") */
			xcfg.listen_addr = optarg;
			break;
		case 1102:
			xcfg.domain = optarg;
			break;
		case 1103: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*optarg < '1' || *optarg > '9' || *end || v > 65536) {
				fprintf(stderr, "isolad: --expose-max-conns `%s` is not 1-65536\n",
					optarg);
				return 2;
			}
			xcfg.max_conns = (unsigned)v;
			break;
		}
		case 1200 ... 1200 + NET_OPT_SLOTS: /* sandbox network (docs/network.md) */
			if (net_config_option(&ncfg, (enum net_option)(c - 1200), optarg) < 0)
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "isolad: unexpected argument `%s`\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "isolad: must run as root (it creates namespaces, cgroups and "
				"uid ranges)\n");
		return 1;
	}
	find_agent(agent_flag, agent, sizeof(agent));
	if (access(agent, X_OK) < 0) {
		fprintf(stderr, "isolad: agent binary `%s`: %s (use --agent or ISOLA_AGENT)\n",
			agent, strerror(errno));
		return 1;
	}
	tier_process_set_agent_path(agent);
	tier_microvm_set_agent_path(agent);
	/* Build the host template's microvm image now, not at the first microvm create
	 * (docs/microvm.md); ISOLA_MICROVM_PREBUILD=0 leaves it to the first create. */
	cfg.microvm_prebuild = tier_microvm_usable(cfg.state_dir) &&
			       !(getenv("ISOLA_MICROVM_PREBUILD") &&
				 !strcmp(getenv("ISOLA_MICROVM_PREBUILD"), "0"));
	snprintf(spool, sizeof(spool), "%s/tmp", cfg.state_dir);
	api.spool_dir = spool;
	umask(077);
	raise_nofile();

	/* Signals are taken synchronously by the main thread; every other thread blocks them. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* The listeners' sockets before anything takes a kernel-picked port (api.h). */
	if (api_server_bind(&api, &srv, &err) < 0) {
		log_error("start API: %s", err->message);
		return 1;
	}
	if (expose_bind(&xcfg, &expose, &err) < 0) {
		log_error("start exposure listener: %s", err->message);
		api_server_stop(srv);
		return 1;
	}
	/* The network next: it takes back the interfaces of sandboxes that core re-attaches. */
	snprintf(ncfg.state_dir, sizeof(ncfg.state_dir), "%s", cfg.state_dir);
	if (!ncfg.disabled && net_start(&ncfg, &net, &err) < 0) {
		log_error("start: %s", err->message);
		expose_stop(expose);
		api_server_stop(srv);
		return 1;
	}
	if (core_new(&cfg, &core, &err) < 0) {
		log_error("start: %s", err->message);
		expose_stop(expose);
		api_server_stop(srv);
		net_stop(net);
		return 1;
	}
	/* Writable layers made ahead: the filler starts before the first create (warm pools
	 * included); a layer it cannot make is made by the create instead. */
	if (tier_process_layer_slots_start(cfg.state_dir, layer_slots, &err) < 0) {
		log_error("start: %s", err->message);
		expose_stop(expose);
		api_server_stop(srv);
		core_free(core);
		net_stop(net);
		return 1;
	}
	for (int i = 0; i <= n_pools; i++) {
		if (i < n_pools ? core_pool_set_flag(core, pool_flags[i], &err) < 0
				: pool_auto >= 0 &&
					  core_pool_auto(core, (uint32_t)pool_auto, &err) < 0) {
			log_error("start: %s", err->message);
			expose_stop(expose);
			api_server_stop(srv);
			core_free(core);
			net_stop(net);
			return 2;
		}
	}
	/* The automatic pool is on by default (POOL_AUTO_DEFAULT_MAX) where neither the flags
	 * (--pool-auto, --pool host:process:N) nor the store says otherwise; a default that cannot apply leaves creates cold. */
	if (pool_auto < 0 && core_pool_auto_default(core, POOL_AUTO_DEFAULT_MAX, &err) < 0) {
		log_warn("start: default automatic pool: %s", err->message);
		isola_err_free(err);
		err = NULL;
	}
	if (api_server_start(core, srv, &err) < 0) {
		log_error("start API: %s", err->message);
		expose_stop(expose);
		core_free(core);
		net_stop(net);
		return 1;
	}
	if (expose_start(core, expose, &err) < 0) {
		log_error("start exposure listener: %s", err->message);
		api_server_stop(srv);
		expose_stop(expose);
		core_free(core);
		net_stop(net);
		return 1;
	}
	log_info("isolad ready: socket %s%s%s, state %s, agent %s", api.socket_path,
		 api.listen_addr ? ", tcp " : "", api.listen_addr ? api.listen_addr : "",
		 cfg.state_dir, agent);
	do {
		if (sigwait(&set, &sig) != 0)
			sig = SIGTERM;
	} while (sig == SIGHUP);
	log_info("isolad stopping (signal %d); sandboxes keep running", sig);
	api_server_stop(srv);
	expose_stop(expose);
	core_free(core);
	tier_process_layer_slots_stop();
	net_stop(net);
	return 0;
}
