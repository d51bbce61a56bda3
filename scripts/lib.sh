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

_apt_updated=
apt_update_once() {
	[ -n "$_apt_updated" ] && return 0
	log "apt-get update"
	apt-get -o DPkg::Lock::Timeout=900 update -qq >&2 || die "apt-get update failed"
	_apt_updated=1
}

# need_pkgs PKG... installs the Debian packages that are not installed yet.
need_pkgs() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	apt_update_once
	log "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${missing[@]}" >&2 ||
		die "apt-get install ${missing[*]} failed"
}

# atomic_mv TMP DEST moves a finished file into place so an interrupted
# step never leaves a half-written DEST behind.
atomic_mv() { mv -f "$1" "$2"; }
