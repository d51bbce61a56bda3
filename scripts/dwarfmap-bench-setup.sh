#!/usr/bin/env bash
# Prepares what the dwarfmap benchmark compares klasy against, for the
# Debian vmlinux that fetch-debian-kernel.sh put in $KLASY_CACHE/debian/current:
#   linux-perf and systemtap (Debian's packages)
#   $KLASY_CACHE/dwarfmap-bench/src     the two source files the queries
#                                       show (perf probe -s needs source)
#   $KLASY_CACHE/dwarfmap-bench/kbuild  a kernel "build tree" for stap -r:
#                                       the headers package plus vmlinux
# Idempotent and fast once done; interrupted steps leave only *.tmp behind.
source "$(dirname "$0")/lib.sh"

need_pkgs linux-perf systemtap xz-utils linux-source-6.1

cur=$KLASY_CACHE/debian/current
[ -f "$cur/vmlinux" ] || die "no $cur/vmlinux: run make debian-kernel"
headers=$(readlink -f "$cur/headers")
[ -f "$headers/.config" ] || die "no kernel headers at $cur/headers: run make debian-kernel"
tarball=$(ls /usr/src/linux-source-6.1.tar.xz 2>/dev/null || true)
[ -n "$tarball" ] || die "no /usr/src/linux-source-6.1.tar.xz (apt install linux-source-6.1)"

bench=$KLASY_CACHE/dwarfmap-bench
mkdir -p "$bench"

# Only the files the benchmark lists: xz has no index, so this still
# decompresses the whole archive once (about a minute), then never again.
files=(net/core/skbuff.c net/ipv4/tcp.c)
if [ ! -f "$bench/src/.complete" ]; then
	log "extracting ${files[*]} from $(basename "$tarball") (about a minute, once)"
	rm -rf "$bench/src.tmp"
	mkdir -p "$bench/src.tmp"
	members=()
	for f in "${files[@]}"; do members+=("linux-source-6.1/$f"); done
	tar -xJf "$tarball" -C "$bench/src.tmp" --strip-components=1 "${members[@]}" ||
		die "extracting ${files[*]} from $tarball failed"
	touch "$bench/src.tmp/.complete"
	rm -rf "$bench/src"
	mv "$bench/src.tmp" "$bench/src"
fi

# stap -r DIR wants a kbuild tree (.config, Makefile, Module.symvers,
# include/config/kernel.release) with the vmlinux in it.
if [ "$(readlink "$bench/kbuild/vmlinux" 2>/dev/null)" != "$cur/vmlinux" ] ||
	[ "$(readlink "$bench/kbuild/.config" 2>/dev/null)" != "$headers/.config" ]; then
	log "linking a stap build tree in $bench/kbuild"
	rm -rf "$bench/kbuild.tmp"
	mkdir -p "$bench/kbuild.tmp"
	for f in "$headers"/* "$headers"/.config; do ln -s "$f" "$bench/kbuild.tmp/"; done
	ln -s "$cur/vmlinux" "$bench/kbuild.tmp/vmlinux"
	rm -rf "$bench/kbuild"
	mv "$bench/kbuild.tmp" "$bench/kbuild"
fi
