#!/usr/bin/env bash
# Builds the lab's `built` kernel flavor: Debian's linux-source-6.1 with
# the lab config (scripts/lab-kernel.config on x86_64_defconfig) and,
# when available, the klasy GCC plugin (gcc-patches/), into
#   $KLASY_CACHE/lab-kernel/KEY/   bzImage, vmlinux (.debug_klasy), System.map,
#                                  modules/lib/modules/REL, build/ (the O= tree
#                                  out-of-tree modules build against), release
# and points $KLASY_CACHE/lab-kernel/current at it. KEY hashes the source
# version, the final .config, the plugin and this script, so a rebuild
# happens only when one of them changes. An interrupted build resumes
# (make is incremental; the directory is marked complete only at the end).
#
# KLASY_LAB_PLUGIN=auto (default) uses the plugin when gcc-patches/ has
# one, =1 requires it, =0 builds without it.
#
# KLASY_LAB_FLAVOR=debug builds the `debug` flavor instead: the same
# kernel plus scripts/lab-kernel-debug.config (lockdep, KASAN, atomic-sleep
# checks), into $KLASY_CACHE/lab-kernel-debug/ so that neither flavor's
# clean-up removes the other's build.
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")/.." && pwd)
jobs=${KLASY_JOBS:-2}
want_plugin=${KLASY_LAB_PLUGIN:-auto}
flavor=${KLASY_LAB_FLAVOR:-built}
fragments=("$here/scripts/lab-kernel.config")
case $flavor in
built) top=$KLASY_CACHE/lab-kernel ;;
debug)
	top=$KLASY_CACHE/lab-kernel-debug
	fragments+=("$here/scripts/lab-kernel-debug.config")
	;;
*) die "KLASY_LAB_FLAVOR=$flavor: want built or debug" ;;
esac

need_pkgs linux-source-6.1 xz-utils make gcc g++ gcc-12-plugin-dev bc flex bison libelf-dev libssl-dev

# 1. The source tree (shared with the plugin's tests; built with O=).
if [ -x "$here/scripts/setup-linux-source.sh" ]; then
	src=$("$here/scripts/setup-linux-source.sh" | tail -n1)
else
	src=$KLASY_CACHE/linux-source-6.1/src
	if [ ! -f "$src/Makefile" ]; then
		tmp=$KLASY_CACHE/linux-source-6.1/src.tmp.$$
		rm -rf "$KLASY_CACHE"/linux-source-6.1/src.tmp.*
		mkdir -p "$tmp"
		log "extracting /usr/src/linux-source-6.1.tar.xz (about 15 s, 1.5 GB)"
		tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$tmp"
		mv "$tmp/linux-source-6.1" "$src"
		rmdir "$tmp"
	fi
fi
[ -f "$src/Makefile" ] || die "no kernel source in $src"
srcver="linux-source-6.1 $(dpkg-query -W -f='${Version}' linux-source-6.1) $(cat "$here/gcc-patches/kernel/prepare-tree.sh" 2>/dev/null | sha256sum | cut -c1-16)"

# 2. The plugin.
plugin=
plugin_hash=none
if [ "$want_plugin" != 0 ] && [ -f "$here/gcc-patches/Makefile" ]; then
	log "building the klasy GCC plugin"
	make -s -C "$here/gcc-patches" >&2 || die "building the GCC plugin failed"
	plugin=$here/gcc-patches/klasy.so
	[ -f "$plugin" ] || die "gcc-patches built no klasy.so"
	plugin_hash=$(sha256sum "$plugin" | cut -c1-64)
elif [ "$want_plugin" = 1 ]; then
	die "KLASY_LAB_PLUGIN=1 but gcc-patches/Makefile is missing"
else
	log "warning: building the lab kernel WITHOUT the klasy GCC plugin (no gcc-patches/ yet): vmlinux will have no .debug_klasy"
fi

# 3. The config, made in a scratch directory to compute the key.
mkdir -p "$top"
cfgdir=$(mktemp -d "$top/.config.XXXXXX")
trap 'rm -rf "$cfgdir"' EXIT
make -s -C "$src" O="$cfgdir" x86_64_defconfig >&2
args=()
for fragment in "${fragments[@]}"; do
while read -r line; do
	line=${line%%#*}
	line=$(echo "$line" | tr -d '[:space:]')
	case $line in
	"") ;;
	+*) args+=(-e "${line#+}") ;;
	-*) args+=(-d "${line#-}") ;;
	*=*) args+=(--set-val "${line%%=*}" "${line#*=}") ;;
	esac
done <"$fragment"
done
"$src/scripts/config" --file "$cfgdir/.config" "${args[@]}"
make -s -C "$src" O="$cfgdir" olddefconfig >&2
want=(KPROBES OPTPROBES DEBUG_INFO_DWARF5 RANDOMIZE_BASE VIRTIO_NET E1000 DEBUG_FS MODULE_UNLOAD ACPI)
[ "$flavor" = debug ] && want+=(PROVE_LOCKING KASAN KASAN_GENERIC KASAN_OUTLINE DEBUG_ATOMIC_SLEEP)
for o in "${want[@]}"; do
	grep -q "^CONFIG_$o=y" "$cfgdir/.config" || die "$flavor lab kernel config lacks CONFIG_$o=y after olddefconfig"
done
# The recipe's version stands for the build steps below: change it when
# they change. (It is what the key used to hash, this script's sha256 at
# the time, so that editing the flavor handling above does not rebuild an
# unchanged `built` kernel, shared by every checkout.)
recipe="4e758ea7e5b13ae98be3e5b67019d46a6fff01b52301d27143fb8357090bea4d  -"
key=$( {
	echo "$srcver"
	echo "plugin $plugin_hash"
	echo "$recipe"
	grep -v '^#' "$cfgdir/.config"
} | sha256sum | cut -c1-16)
out=$top/$key
build=$out/build

if [ -f "$out/.complete" ]; then
	touch "$out/.complete" # used now: see the clean-up below
	ln -sfn "$key" "$top/current.tmp" && mv -T "$top/current.tmp" "$top/current"
	log "lab kernel $(cat "$out/release") up to date in $out"
	echo "$out"
	exit 0
fi

# 4. Build (resumes an interrupted one: same key, same directory).
mkdir -p "$build"
cp "$cfgdir/.config" "$build/.config"
make -s -C "$src" O="$build" olddefconfig >&2
kcflags=
if [ -n "$plugin" ]; then
	# Compile with a private copy: gcc loads the plugin for every file, and
	# gcc-patches/klasy.so may be rebuilt (make plugin) while this runs.
	cp "$plugin" "$out/klasy.so.tmp" && mv -f "$out/klasy.so.tmp" "$out/klasy.so"
	[ "$(sha256sum <"$out/klasy.so" | cut -c1-64)" = "$plugin_hash" ] || die "$plugin changed while being copied; rerun"
	plugin=$out/klasy.so
	kcflags="-fplugin=$plugin"
fi
log "building the lab kernel in $build (make -j$jobs; cold: 6-15 min on 2 cores)${plugin:+ with plugin $plugin}"
start=$(date +%s)
make -C "$src" O="$build" -j"$jobs" KCFLAGS="$kcflags" bzImage modules >"$out/build.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$cfgdir"' EXIT
while kill -0 "$pid" 2>/dev/null; do
	sleep 30
	log "$flavor lab kernel: $(grep -c '^  CC' "$out/build.log" || true) files compiled, $(($(date +%s) - start)) s"
done
if ! wait "$pid"; then
	grep -E 'error|Error' "$out/build.log" | head -n 20 >&2 || true
	tail -n 20 "$out/build.log" >&2
	die "kernel build failed; full log: $out/build.log (rerun make lab-kernel to resume)"
fi
trap 'rm -rf "$cfgdir"' EXIT
rel=$(make -s -C "$src" O="$build" kernelrelease)
rm -rf "$out/modules"
make -s -C "$src" O="$build" INSTALL_MOD_PATH="$out/modules" INSTALL_MOD_STRIP= DEPMOD=/bin/true modules_install >&2
# The installed tree's build link would point into the O= tree by an
# absolute path; the lab finds the tree as $out/build instead.
rm -f "$out/modules/lib/modules/$rel/build" "$out/modules/lib/modules/$rel/source"
cp "$build/arch/x86/boot/bzImage" "$out/bzImage"
ln -f "$build/vmlinux" "$out/vmlinux" 2>/dev/null || cp "$build/vmlinux" "$out/vmlinux"
cp "$build/System.map" "$out/System.map"
echo "$rel" >"$out/release"
echo "$plugin_hash" >"$out/plugin"
touch "$out/.complete"
ln -sfn "$key" "$top/current.tmp" && mv -T "$top/current.tmp" "$top/current"
# Builds for other keys are outdated (1.5-3 GB each): running labs keep
# their kernel in QEMU's memory, so only current is kept, and the builds
# used or built in the last two days: checkouts of other branches share
# this cache, and removing their build would cost them a cold one.
for d in "$top"/*; do
	[ "$d" = "$out" ] || [ -L "$d" ] || [ ! -d "$d" ] && continue
	[[ $(basename "$d") =~ ^[0-9a-f]{16}$ ]] || continue
	[ -n "$(find "$d/.complete" "$d/build.log" -maxdepth 0 -mmin -2880 2>/dev/null)" ] && continue
	log "removing outdated build $d"
	rm -rf "$d"
done
# CPU seconds too: on a shared machine the wall time says little.
times >"$cfgdir/times" # in this shell: in $(...) it would time a subshell
cpu=$(tail -n1 "$cfgdir/times" | awk '{ split($1, u, /[ms]/); split($2, k, /[ms]/); printf "%d", u[1] * 60 + u[2] + k[1] * 60 + k[2] }')
log "$flavor lab kernel $rel built in $(($(date +%s) - start)) s (CPU ${cpu} s) into $out"
echo "$out"
