#!/usr/bin/env bash
# Fetches Debian's 6.1 kernel of one ABI into $KLASY_CACHE/debian/ABI:
#   vmlinuz       the image QEMU boots
#   root/         the image package unpacked (lib/modules/ABI: virtio, e1000...)
#   vmlinux       the DWARF vmlinux from the -dbg package (only this file is
#                 extracted: 633 MB instead of the package's 5 GB install)
#   headers       symlink to /usr/src/linux-headers-ABI (kbuild tree for modules)
#   headers-rt    symlink to the same ABI's PREEMPT_RT headers (-rt-amd64)
# and points $KLASY_CACHE/debian/current at it. Prints the directory.
# KLASY_DEBIAN_FLAVOR=rt fetches the same ABI's PREEMPT_RT kernel
# (ABI-rt: linux-image-6.1.0-N-rt-amd64) into $KLASY_CACHE/debian-rt/
# instead, the lab flavor debian-rt.
# Re-running is cheap; an interrupted run restarts the step it was in.
source "$(dirname "$0")/lib.sh"

need_pkgs xz-utils

pkg_known() { apt-cache show "$1" >/dev/null 2>&1; }

abi=$KLASY_KERNEL_ABI_PIN
# All there from an earlier run: skip asking apt (each apt-cache call takes
# seconds on a loaded machine, and make test runs this every time).
have_abi() {
	[ -f "$KLASY_CACHE/debian/$1/root/.complete" ] && [ -f "$KLASY_CACHE/debian/$1/vmlinux" ] &&
		dpkg-query -W -f='${Status}' "linux-headers-$1" 2>/dev/null | grep -q 'install ok installed'
}
if ! have_abi "$abi"; then
	if ! pkg_known "linux-image-$abi-dbg"; then
		apt_update_once
	fi
	if ! pkg_known "linux-image-$abi-dbg" || ! pkg_known "linux-headers-$abi" || ! pkg_known "linux-image-$abi-unsigned"; then
		# Newest ABI for which image, headers and -dbg all exist.
		newest=
		for a in $(apt-cache pkgnames linux-image-6.1.0- | sed -n 's/^linux-image-\(6\.1\.0-[0-9]*-amd64\)-dbg$/\1/p' | sort -V -r); do
			if pkg_known "linux-headers-$a" && pkg_known "linux-image-$a-unsigned"; then newest=$a; break; fi
		done
		[ -n "$newest" ] || die "no Debian 6.1 kernel ABI with image, headers and -dbg packages found (is bookworm-security in apt's sources?)"
		log "warning: pinned ABI $abi is not available here; using $newest"
		abi=$newest
	fi
fi

top=debian
if [ "${KLASY_DEBIAN_FLAVOR:-}" = rt ]; then
	abi=${abi%-amd64}-rt-amd64
	top=debian-rt
fi
dir=$KLASY_CACHE/$top/$abi
debs=$KLASY_CACHE/debs
mkdir -p "$dir" "$debs/partial"

fetch_deb() { # fetch_deb PKG -> prints path of the .deb
	local pkg=$1 f
	f=$(ls "$debs/${pkg}_"*.deb 2>/dev/null | head -n1 || true)
	if [ -z "$f" ]; then
		log "downloading $pkg"
		rm -f "$debs/partial/"*
		# Sandbox user root: _apt cannot write into a cache under /root,
		# and apt warns about that on every download.
		(cd "$debs/partial" && apt_get -o APT::Sandbox::User=root download "$pkg") || die "apt-get download $pkg failed"
		mv "$debs/partial/"*.deb "$debs/"
		f=$(ls "$debs/${pkg}_"*.deb | head -n1)
	fi
	echo "$f"
}

if [ ! -f "$dir/root/.complete" ]; then
	img=$(fetch_deb "linux-image-$abi-unsigned")
	log "unpacking $(basename "$img")"
	rm -rf "$dir/root" "$dir/root.tmp"
	dpkg-deb -x "$img" "$dir/root.tmp"
	touch "$dir/root.tmp/.complete"
	mv "$dir/root.tmp" "$dir/root"
fi
ln -sfn "root/boot/vmlinuz-$abi" "$dir/vmlinuz"

if [ ! -f "$dir/vmlinux" ]; then
	dbg=$(fetch_deb "linux-image-$abi-dbg")
	log "extracting vmlinux from $(basename "$dbg") (633 MB, about 15 s)"
	dpkg-deb --fsys-tarfile "$dbg" | tar -xO "./usr/lib/debug/boot/vmlinux-$abi" >"$dir/vmlinux.tmp" ||
		die "extracting vmlinux from $dbg failed"
	atomic_mv "$dir/vmlinux.tmp" "$dir/vmlinux"
	# The 858 MB package is not needed once its vmlinux is out.
	rm -f "$dbg"
fi

need_pkgs "linux-headers-$abi"
ln -sfn "/usr/src/linux-headers-$abi" "$dir/headers"
if [ "$top" = debian ]; then
	# The same ABI's PREEMPT_RT headers: the runtime is built against them
	# too (weaver/runtime's TestBuildsOnPreemptRT): its locks must not sleep there.
	rtabi=${abi%-amd64}-rt-amd64
	need_pkgs "linux-headers-$rtabi"
	ln -sfn "/usr/src/linux-headers-$rtabi" "$dir/headers-rt"
fi
echo "$abi" >"$dir/abi"
ln -sfn "$abi" "$KLASY_CACHE/$top/current"
log "Debian kernel $abi ready in $dir"
echo "$dir"
