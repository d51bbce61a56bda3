# Shared helpers for klasy's set-up scripts. Source it; do not run it.
# shellcheck shell=bash

set -euo pipefail

# Where klasy keeps what it downloads and builds, shared by scripts, tests
# and the klasy binary (which uses the same rule).
KLASY_CACHE=${KLASY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/klasy}
export KLASY_CACHE

# The Debian 6.1 kernel the lab boots and benchmarks read: image, headers
# and -dbg of this ABI are all in bookworm(-security). If the mirror no
# longer has it, fetch-debian-kernel.sh falls back to the newest complete
# ABI and says so.
KLASY_KERNEL_ABI_PIN=${KLASY_KERNEL_ABI_PIN:-6.1.0-56-amd64}

log() { printf '[klasy setup] %s\n' "$*" >&2; }
die() { printf '[klasy setup] error: %s\n' "$*" >&2; exit 1; }

_sudo=
[ "$(id -u)" -eq 0 ] || _sudo=sudo

# apt_get ARGS... runs apt-get without its chatter: what it prints on
# standard output (package lists, Get:, Unpacking, Setting up...) goes to
# a log shown only if it fails; its errors and warnings (standard error)
# stay visible; one line per tenth of the download and of the
# installation shows progress.
apt_get() {
	local aptlog rc=0
	aptlog=$(mktemp "${TMPDIR:-/tmp}/klasy-apt.XXXXXX")
	# fd 3 (APT::Status-Fd) feeds the progress filter; stdout goes to the log.
	DEBIAN_FRONTEND=noninteractive $_sudo apt-get -q -o DPkg::Lock::Timeout=900 -o Dpkg::Use-Pty=0 \
		-o APT::Status-Fd=3 "$@" 3>&1 >"$aptlog" | _apt_progress >&2 || rc=$?
	if [ "$rc" -ne 0 ]; then
		printf '[klasy setup] apt-get %s failed (exit %d); its last output:\n' "$*" "$rc" >&2
		tail -n 30 "$aptlog" >&2
	fi
	rm -f "$aptlog"
	return "$rc"
}

_apt_progress() {
	awk -F: -v OFS= '
		function say(what, pct, last,  p) {
			p = int(pct / 10)
			if (p <= last) return last
			print "[klasy setup]   ", what, " ", p * 10, "%"
			fflush()
			return p
		}
		$1 == "dlstatus" { dl = say("downloading", $3, dl) }
		$1 == "pmstatus" { pm = say("installing", $3, pm) }
	' dl=-1 pm=-1
}

_apt_updated=
apt_update_once() {
	[ -n "$_apt_updated" ] && return 0
	log "apt-get update"
	apt_get update || die "apt-get update failed"
	_apt_updated=1
}

# need_pkgs PKG... installs the Debian packages that are not installed yet.
need_pkgs() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	apt_update_once
	log "installing ${missing[*]}"
	apt_get install -y --no-install-recommends "${missing[@]}" || die "apt-get install ${missing[*]} failed"
}

# atomic_mv TMP DEST moves a finished file into place so an interrupted
# step never leaves a half-written DEST behind.
atomic_mv() { mv -f "$1" "$2"; }
