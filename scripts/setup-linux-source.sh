#!/usr/bin/env bash
# Extracts Debian's linux-source-6.1 once into
#   $KLASY_CACHE/linux-source-6.1/src            (plain tree, shared: build with O=)
# with the one linker-script line .debug_klasy needs (gcc-patches/kernel/
# prepare-tree.sh), and prepares the build directory the plugin tests use:
#   $KLASY_CACHE/linux-source-6.1/build-plugin-test  (x86_64_defconfig +
#                                                     DWARF 5, `make prepare`)
# Prints the source directory. Re-running is cheap; an interrupted run
# starts its step again (temp dir + rename, stamp files). Concurrent runs
# wait for each other ($top/.lock).
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)

need_pkgs linux-source-6.1 xz-utils make gcc bc flex bison libelf-dev libssl-dev

top=$KLASY_CACHE/linux-source-6.1
src=$top/src
build=$top/build-plugin-test
tarball=/usr/src/linux-source-6.1.tar.xz
[ -f "$tarball" ] || die "$tarball missing although linux-source-6.1 is installed"
mkdir -p "$top"
# Every worktree on the machine shares this tree (and the plugin tests hold
# the same lock while they build in it): one set-up at a time.
exec 9>"$top/.lock"
flock 9 || die "cannot lock $top/.lock"

if [ ! -f "$src/Makefile" ]; then
	tmp=$top/src.tmp.$$
	rm -rf "$top"/src.tmp.*
	mkdir -p "$tmp"
	log "extracting $tarball into $src (about 15 s, 1.5 GB)"
	tar -xJf "$tarball" -C "$tmp" || die "extracting $tarball failed"
	[ -f "$tmp/linux-source-6.1/Makefile" ] || die "$tarball has no linux-source-6.1/Makefile"
	"$here/gcc-patches/kernel/prepare-tree.sh" "$tmp/linux-source-6.1"
	mv "$tmp/linux-source-6.1" "$src"
	rmdir "$tmp"
fi
"$here/gcc-patches/kernel/prepare-tree.sh" "$src"

if [ ! -f "$build/.klasy-prepared" ]; then
	rm -rf "$build"
	mkdir -p "$build"
	log "configuring $build (x86_64_defconfig + DWARF 5 debug info)"
	make -s -C "$src" O="$build" x86_64_defconfig >&2
	"$src/scripts/config" --file "$build/.config" -d DEBUG_INFO_NONE -e DEBUG_KERNEL \
		-e DEBUG_INFO -e DEBUG_INFO_DWARF5 -d DEBUG_INFO_BTF -d DEBUG_INFO_REDUCED
	make -s -C "$src" O="$build" olddefconfig >&2
	log "make prepare in $build (about 30 s)"
	make -s -C "$src" O="$build" -j2 prepare >&2 || die "make prepare failed in $build"
	touch "$build/.klasy-prepared"
fi
echo "$src"
