#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install: puts a built isola (isola, isolad, isola-agent, man pages, completions, isolad.service,
# the `isola` group) on this machine, starts isolad, or takes all of it away (--uninstall).
#
# Usage: scripts/install.sh [--prefix DIR] [--build DIR] [--agent FILE] [--group NAME] [--no-group] [--start]
#        scripts/install.sh --uninstall [--prefix DIR] [--group NAME]
#
#   --prefix DIR  where to install (default /usr/local): DIR/bin/isola, DIR/bin/isolad,
#                 DIR/libexec/isola/isola-agent, DIR/share/man/man1/*.1, completions under
#                 DIR/share/{bash-completion/completions,zsh/site-functions,fish/vendor_completions.d}
#   DESTDIR       (environment) staged install: every path is put under $DESTDIR; the group is
#                 then neither created nor removed and nothing is started (packaging, tests)
#   --build DIR   the build tree to install from (default build/, made by scripts/build.sh)
#   --agent FILE  the isola-agent to install (default DIR/src/agent/isola-agent: a sanitizer
#                 build has none, its tests install the normal build's)
#   --group NAME  the group that may use isolad's socket (default isola; created with
#                 groupadd --system if missing). Its members are isolad's operator, as root is.
#   --start       start isolad: `systemctl enable --now isolad` when systemd runs, otherwise
#                 isolad directly in the background (as the unit would; log /var/log/isolad.log)
#   --uninstall   stop isolad if the unit runs, remove every file the install wrote (its manifest,
#                 DIR/share/isola/install-manifest, lists them), the unit, and the group if the
#                 install created it
#
# The unit (/etc/systemd/system/isolad.service) runs isolad as root with state in /var/lib/isola,
# the socket /run/isola/isolad.sock (0660, group isola) and the port-exposure listener on
# 127.0.0.1:8089 (isola expose). Files are installed with install(1), mode 0755 / 0644.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=/usr/local
BUILD=build
AGENT=
GROUP=isola
MAKE_GROUP=true
START=false
UNINSTALL=false
DESTDIR=${DESTDIR:-}
EXPOSE_LISTEN=${ISOLA_EXPOSE_LISTEN:-127.0.0.1:8089}
SOCKET=/run/isola/isolad.sock
PIDFILE=/run/isola/isolad.pid # only when --start ran isolad itself (no systemd)
STATE=/var/lib/isola

die() {
	echo "install: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; PREFIX=$2; shift ;;
	--prefix=*) PREFIX=${1#*=} ;;
	--build) [ $# -ge 2 ] || die "--build needs a directory"; BUILD=$2; shift ;;
	--agent) [ $# -ge 2 ] || die "--agent needs a file"; AGENT=$2; shift ;;
	--group) [ $# -ge 2 ] || die "--group needs a name"; GROUP=$2; shift ;;
	--no-group) MAKE_GROUP=false ;;
	--start) START=true ;;
	--uninstall) UNINSTALL=true ;;
	-h | --help) sed -n '3,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option \`$1\` (see --help)" ;;
	esac
	shift
done
case "$PREFIX" in /*) ;; *) die "--prefix \`$PREFIX\`: must be an absolute path" ;; esac
[[ "$GROUP" =~ ^[a-z_][a-z0-9_-]{0,31}$ ]] || die "--group \`$GROUP\`: not a valid group name"

ROOT=${DESTDIR%/}
BINDIR=$PREFIX/bin
LIBEXEC=$PREFIX/libexec/isola
MANDIR=$PREFIX/share/man/man1
SHARE=$PREFIX/share/isola
MANIFEST=$SHARE/install-manifest
UNIT=/etc/systemd/system/isolad.service

systemd_runs() { [ -z "$ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; }

if $UNINSTALL; then
	[ -f "$ROOT$MANIFEST" ] || die "no install manifest at $ROOT$MANIFEST: nothing installed there"
	if systemd_runs && systemctl list-unit-files isolad.service >/dev/null 2>&1; then
		systemctl disable --now isolad.service || true
	fi
	# An isolad that --start ran directly (no systemd): stopped by the pid it recorded, if that
	# pid is still this install's isolad.
	if [ -z "$ROOT" ] && [ -f "$PIDFILE" ]; then
		pid=$(cat "$PIDFILE")
		if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$PREFIX/bin/isolad" ]; then
			kill -TERM "$pid" && echo "stopping isolad (pid $pid)"
			for _ in $(seq 1 200); do [ -d "/proc/$pid" ] || break; sleep 0.05; done
			[ -d "/proc/$pid" ] && echo "isolad (pid $pid) is still stopping" >&2
		fi
		rm -f "$PIDFILE"
	fi
	dirs=()
	while IFS= read -r line; do
		case "$line" in
		group:*)
			if [ -z "$ROOT" ] && getent group "${line#group:}" >/dev/null; then
				groupdel "${line#group:}" && echo "removed group ${line#group:}"
			fi ;;
		dir:*) dirs=("${line#dir:}" "${dirs[@]}") ;;
		/*) rm -f "$ROOT$line" ;;
		esac
	done <"$ROOT$MANIFEST"
	rm -f "$ROOT$MANIFEST"
	# The directories the install made, deepest first, if nothing else went into them.
	for d in $(printf '%s\n' "${dirs[@]}" | awk '{ print length($0) "\t" $0 }' | sort -rn | cut -f2-); do
		rmdir "$ROOT$d" 2>/dev/null || true
	done
	systemd_runs && systemctl daemon-reload || true
	echo "uninstalled isola from $ROOT$PREFIX"
	exit 0
fi

AGENT=${AGENT:-$BUILD/src/agent/isola-agent}
[ -x "$AGENT" ] || die "$AGENT is missing: build first (scripts/build.sh)"
for f in src/cli/isola src/isolad/isolad; do
	[ -x "$BUILD/$f" ] || die "$BUILD/$f is missing: build first (scripts/build.sh)"
done

MANIFEST_TMP=$(mktemp)
trap 'rm -f "$MANIFEST_TMP"' EXIT
# mkdirs DIR: creates DIR (and missing parents, 0755), recording each one it made so that
# --uninstall removes exactly those (never a /usr/local/bin that was there before).
mkdirs() {
	local d=$1 made=()
	while [ ! -d "$ROOT$d" ]; do
		[ "$d" != / ] || die "DESTDIR \`$ROOT\` is not a directory"
		made=("$d" "${made[@]}")
		d=$(dirname "$d")
	done
	for d in "${made[@]}"; do
		install -d -m 0755 "$ROOT$d"
		echo "dir:$d" >>"$MANIFEST_TMP"
	done
}
# put SRC DEST MODE: installs one file and records it for --uninstall.
put() {
	mkdirs "$(dirname "$2")"
	install -m "$3" "$1" "$ROOT$2"
	echo "$2" >>"$MANIFEST_TMP"
}

put "$BUILD/src/cli/isola" "$BINDIR/isola" 0755
put "$BUILD/src/isolad/isolad" "$BINDIR/isolad" 0755
put "$AGENT" "$LIBEXEC/isola-agent" 0755
# Man pages and completions: whatever the build made (the CLI generates them from its table).
n_man=0
for m in "$BUILD"/src/cli/*.1; do
	[ -f "$m" ] || continue
	put "$m" "$MANDIR/$(basename "$m")" 0644
	n_man=$((n_man + 1))
done
declare -A COMPLETION=(
	[bash]=$PREFIX/share/bash-completion/completions/isola
	[zsh]=$PREFIX/share/zsh/site-functions/_isola
	[fish]=$PREFIX/share/fish/vendor_completions.d/isola.fish
)
n_comp=0
for sh in bash zsh fish; do
	f=$BUILD/src/cli/isola.$sh
	[ -f "$f" ] || continue
	put "$f" "${COMPLETION[$sh]}" 0644
	n_comp=$((n_comp + 1))
done

EXEC_START="$BINDIR/isolad --state-dir $STATE --socket $SOCKET --socket-group $GROUP --expose-listen $EXPOSE_LISTEN"
UNIT_TMP=$(mktemp)
cat >"$UNIT_TMP" <<EOF
# Installed by isola's scripts/install.sh; removed by scripts/install.sh --uninstall.
[Unit]
Description=isola sandbox daemon (isolad)
Documentation=https://github.com/isola/isola/blob/main/README.md
After=network.target

[Service]
Type=simple
ExecStart=$EXEC_START
# isolad makes namespaces, cgroups and veths for its sandboxes: it runs as root. Its socket is
# 0660 with group $GROUP: members of $GROUP drive isolad as its operator.
Restart=on-failure
# Sandboxes outlive an isolad restart (it re-attaches them): stop only isolad itself.
KillMode=process
LimitNOFILE=1048576
TasksMax=infinity

[Install]
WantedBy=multi-user.target
EOF
put "$UNIT_TMP" "$UNIT" 0644
rm -f "$UNIT_TMP"

if [ -z "$ROOT" ] && $MAKE_GROUP && ! getent group "$GROUP" >/dev/null; then
	groupadd --system "$GROUP"
	echo "group:$GROUP" >>"$MANIFEST_TMP"
	echo "created group $GROUP (add users with: usermod -aG $GROUP USER)"
fi
# A reinstall keeps the record of what an earlier install created (group, directories).
if [ -f "$ROOT$MANIFEST" ]; then grep -E '^(group|dir):' "$ROOT$MANIFEST" >>"$MANIFEST_TMP" || true; fi
mkdirs "$SHARE"
awk '!seen[$0]++' "$MANIFEST_TMP" >"$MANIFEST_TMP.u" && mv "$MANIFEST_TMP.u" "$MANIFEST_TMP"
install -m 0644 "$MANIFEST_TMP" "$ROOT$MANIFEST"
echo "installed isola into $ROOT$PREFIX ($n_man man pages, $n_comp completions; unit $ROOT$UNIT)"

if $START; then
	[ -z "$ROOT" ] || die "--start with DESTDIR: nothing to start in a staged install"
	if systemd_runs; then
		systemctl daemon-reload
		systemctl enable --now isolad.service
		echo "isolad started by systemd (systemctl status isolad)"
	elif curl -sf --unix-socket "$SOCKET" http://x/v1/health >/dev/null 2>&1; then
		echo "isolad already answers on $SOCKET"
	else
		echo "systemd is not running here: starting isolad directly (log /var/log/isolad.log)"
		# shellcheck disable=SC2086 # EXEC_START is a command line of plain words
		nohup $EXEC_START >>/var/log/isolad.log 2>&1 &
		pid=$!
		for _ in $(seq 1 100); do
			[ -S "$SOCKET" ] && break
			sleep 0.05
		done
		[ -S "$SOCKET" ] || die "isolad did not create $SOCKET; see /var/log/isolad.log"
		echo "$pid" >"$PIDFILE"
	fi
fi
