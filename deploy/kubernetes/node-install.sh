#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# node-install: what the isola-node DaemonSet runs on a labelled node (daemonset.yaml).
#
# usage: node-install.sh [--once] [--no-restart]
#   --once        install and exit (default: install, then stay running so the DaemonSet's pod
#                 shows the node as ready; a new image version installs again)
#   --no-restart  do not touch the host's services (no systemctl): files only (tests, dry runs)
# environment:
#   ISOLA_HOST_ROOT   where the host's / is mounted (default /host)
#   ISOLA_NODE_STAGE  the staged install to copy (default: stage/ beside this script, made by
#                     `DESTDIR=... scripts/install.sh --prefix /opt/isola`, see Dockerfile)
#
# On the host it writes, each step replacing what an earlier run wrote (running it again is
# harmless, and leaves the same files):
#   /opt/isola/                  bin/{isolad,isola,isola-runc}, libexec/isola/isola-agent, share/,
#                                lib/ (the binaries' libraries and ELF interpreter; the binaries'
#                                interpreter and run path point there, so the host's distribution
#                                does not matter)
#   /usr/local/bin/isola-runc    (and isola) symbolic links into /opt/isola/bin
#   /etc/systemd/system/isolad.service   isolad as a unit, state in /var/lib/isola
#   /etc/containerd/conf.d/isola.toml    the `isola` runtime handler (containerd-isola.toml)
#   /etc/containerd/config.toml  made to import it: an `imports` line is added when there is none;
#                                an existing `imports` that lacks it is an error naming the line to
#                                add (the script never rewrites an operator's list)
# then (without --no-restart) enables isolad and restarts containerd through the host's systemd
# (nsenter into pid 1's namespaces: the pod runs with hostPID and privileged).
set -eu

HOST=${ISOLA_HOST_ROOT:-/host}
HERE=$(cd "$(dirname "$0")" && pwd)
STAGE=${ISOLA_NODE_STAGE:-$HERE/stage}
PREFIX=/opt/isola
DROPIN=/etc/containerd/conf.d/isola.toml
ONCE=false
RESTART=true

die() {
	echo "node-install: $*" >&2
	exit 1
}

for a in "$@"; do
	case "$a" in
	--once) ONCE=true ;;
	--no-restart) RESTART=false ;;
	-h | --help) sed -n 3,29p "$0"; exit 0 ;;
	*) die "unknown argument \`$a\` (see --help)" ;;
	esac
done

[ -d "$HOST/etc" ] || die "the host's root is not mounted at $HOST (ISOLA_HOST_ROOT; daemonset.yaml mounts it)"
for b in isolad isola isola-runc; do
	[ -x "$STAGE$PREFIX/bin/$b" ] || die "no staged $b at $STAGE$PREFIX/bin/$b (the image is built as deploy/kubernetes/Dockerfile says)"
done
[ -x "$STAGE$PREFIX/libexec/isola/isola-agent" ] || die "no staged agent at $STAGE$PREFIX/libexec/isola/isola-agent"
command -v patchelf >/dev/null || die "patchelf is missing from this image"

# 1. /opt/isola, made beside the old one and swapped in (a running isolad keeps its files).
new=$HOST$PREFIX.new
rm -rf "$new"
mkdir -p "$new/lib"
cp -a "$STAGE$PREFIX/." "$new/"
interp=
for b in "$new"/bin/*; do
	ldd "$b" >"$new/lib/.ldd" 2>/dev/null || continue # static or a script: nothing to carry
	while read -r line; do
		case "$line" in
		*"=> /"*) lib=${line#*=> }; lib=${lib%% (*} ;;
		/*) lib=${line%% (*}; interp=$(basename "$lib") ;;
		*) continue ;;
		esac
		cp -L "$lib" "$new/lib/"
	done <"$new/lib/.ldd"
	grep -q "not found" "$new/lib/.ldd" && die "$(basename "$b") needs libraries this image lacks: $(grep 'not found' "$new/lib/.ldd" | tr -s ' \t' ' ')"
done
rm -f "$new/lib/.ldd"
# glibc loads libgcc_s with dlopen (thread cancellation, unwinding): ldd does not list it
gcc_s=$(ldconfig -p | awk '/libgcc_s\.so\.1 .*x86-64/ {print $NF; exit}')
[ -z "$gcc_s" ] || cp -L "$gcc_s" "$new/lib/"
[ -n "$interp" ] || die "found no ELF interpreter for the binaries (are they dynamic executables?)"
for b in "$new"/bin/*; do
	patchelf --print-interpreter "$b" >/dev/null 2>&1 || continue
	# DT_RPATH, not RUNPATH: it also applies to what the libraries load (dlopen of libgcc_s)
	patchelf --set-interpreter "$PREFIX/lib/$interp" --force-rpath --set-rpath "$PREFIX/lib" "$b"
done
rm -rf "$HOST$PREFIX.old"
[ ! -e "$HOST$PREFIX" ] || mv "$HOST$PREFIX" "$HOST$PREFIX.old"
mv "$new" "$HOST$PREFIX"
rm -rf "$HOST$PREFIX.old"

# 2. The commands on the host's PATH: containerd's BinaryName is /usr/local/bin/isola-runc.
mkdir -p "$HOST/usr/local/bin"
for b in isola-runc isola; do
	ln -sfn "$PREFIX/bin/$b" "$HOST/usr/local/bin/$b"
done

# 3. isolad's unit (the one scripts/install.sh staged, ExecStart in /opt/isola/bin).
mkdir -p "$HOST/etc/systemd/system"
cp "$STAGE/etc/systemd/system/isolad.service" "$HOST/etc/systemd/system/isolad.service"

# 4. containerd: the drop-in and the import of it.
mkdir -p "$HOST$(dirname "$DROPIN")"
cp "$HERE/containerd-isola.toml" "$HOST$DROPIN"
cfg=$HOST/etc/containerd/config.toml
if [ ! -s "$cfg" ]; then
	printf '# Written by isola node-install.sh: containerd defaults plus the isola runtime.\nversion = 2\nimports = ["%s"]\n' "$DROPIN" >"$cfg"
elif grep -q "^[[:space:]]*imports[[:space:]]*=" "$cfg"; then
	grep "^[[:space:]]*imports[[:space:]]*=" "$cfg" | grep -qF "\"$DROPIN\"" ||
		grep "^[[:space:]]*imports[[:space:]]*=" "$cfg" | grep -qF '"/etc/containerd/conf.d/*.toml"' ||
		die "$cfg has an imports list without $DROPIN: add \"$DROPIN\" to it, then restart this pod"
else
	# a top-level key must come before the first table: put it first
	{ printf 'imports = ["%s"]\n' "$DROPIN"; cat "$cfg"; } >"$cfg.new" && mv "$cfg.new" "$cfg"
fi
echo "node-install: installed isola into $HOST$PREFIX, runtime handler \`isola\` in $HOST$DROPIN"

# 5. Start it on the host.
if $RESTART; then
	host() { nsenter --target 1 --mount --uts --ipc --net --pid -- "$@"; }
	# the unit gives the socket to group isola (scripts/install.sh's default)
	host getent group isola >/dev/null || host groupadd --system isola
	host systemctl daemon-reload
	host systemctl enable isolad.service
	host systemctl restart isolad.service
	host systemctl restart containerd.service
	i=0
	until host "$PREFIX/bin/isola" --socket /run/isola/isolad.sock ls -q >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 60 ] || die "isolad did not answer on the host's /run/isola/isolad.sock within 60 s (journalctl -u isolad on the node)"
		sleep 1
	done
	echo "node-install: isolad answers on the node; containerd restarted with the isola handler"
fi
$ONCE && exit 0
exec sleep infinity
