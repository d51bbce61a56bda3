#!/usr/bin/env bash
# Builds the images a Xen lab (klasy lab up --xen) boots, once, into
#   $KLASY_CACHE/xen-lab/images-KEY/
#     xen               Xen 4.17 from Debian's xen-hypervisor-4.17-amd64,
#                       gunzipped: a 32-bit ELF that QEMU's -kernel boots
#     dom0-root.cpio.gz Domain 0's root: a debootstrap --variant=minbase
#                       bookworm with Xen's user space (xl, xenstored,
#                       xenconsoled, the hotplug scripts), packed as an
#                       initramfs; klasy adds its init, agent and the
#                       domains' kernel modules as a second segment at boot
#     versions          the Debian versions inside
#     format            the layout's version (lab/xen.go checks it)
# and points $KLASY_CACHE/xen-lab/current at it. KEY hashes this script
# (its package list and steps), the suite and the mirror, so the slow steps
# run once; a second run takes a second. The kernel of every domain is
# Debian's 6.1 (make debian-kernel), not part of these images.
#
# Cold: about 4-8 minutes (debootstrap fetches about 60 MB); the result is
# about 75 MB.
source "$(dirname "$0")/lib.sh"

format=klasy-xen-images-1
suite=bookworm
xenver=4.17
# What Domain 0 runs: Xen's tools, and what libxl's hotplug scripts and the
# lab's init use (ip, bridge, insmod; busybox for nc, the lab's shell).
include=xen-utils-$xenver,xenstore-utils,iproute2,bridge-utils,kmod,busybox-static,procps

# The Debian mirror apt is configured with (not the security one).
mirror() {
	local m
	m=$( { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{for (i = 2; i <= NF; i++) print $i}'
		grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'; } |
		grep -v security | grep '/debian/\?$' | head -n1)
	echo "${m:-http://deb.debian.org/debian}"
}
mirror=$(mirror)

top=$KLASY_CACHE/xen-lab
mkdir -p "$top"
exec 9>"$top/.lock"
flock 9 || die "cannot lock $top/.lock"

key=$( { echo "$format $suite $mirror $include"; sha256sum <"$0"; } | sha256sum | cut -c1-16)
out=$top/images-$key
if [ -f "$out/.complete" ]; then
	ln -sfn "images-$key" "$top/current"
	log "Xen lab images ready in $out (cached)"
	echo "$out"
	exit 0
fi

need_pkgs debootstrap cpio gzip
start=$(date +%s)
step() { log "xen-lab [$(($(date +%s) - start))s] $*"; }

work=$top/.build-$key
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

# 1. Domain 0's root.
root=$work/root
step "debootstrap --variant=minbase $suite from $mirror with $include (a few minutes)"
debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
	tail -n 30 "$work/debootstrap.log" >&2
	die "debootstrap failed (log above)"
}
utils=$(chroot "$root" dpkg-query -W -f='${Version}' "xen-utils-$xenver") || die "xen-utils-$xenver missing in the root"
chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' >"$work/versions"
step "root done: xen-utils-$xenver $utils, $(wc -l <"$work/versions") packages, $(du -sm "$root" | cut -f1) MB"

# 2. The hypervisor of the same version as the tools (the toolstack and
# the hypervisor must agree on their interface).
step "fetching xen-hypervisor-$xenver-amd64 $utils"
mkdir -p "$work/deb"
(cd "$work/deb" && apt_get -o APT::Sandbox::User=root download "xen-hypervisor-$xenver-amd64=$utils") ||
	die "apt-get download xen-hypervisor-$xenver-amd64=$utils failed"
dpkg-deb -x "$work"/deb/xen-hypervisor-*.deb "$work/hv"
gz=$(ls "$work"/hv/boot/xen-$xenver-amd64.gz 2>/dev/null || ls "$work"/hv/boot/xen-*.gz | head -n1)
[ -f "$gz" ] || die "no /boot/xen-*.gz in xen-hypervisor-$xenver-amd64"
gunzip -c "$gz" >"$work/xen"
echo "xen-hypervisor-$xenver-amd64 $utils" >>"$work/versions"

# 3. Slim the root: what a lab never reads (documentation, manuals,
# locales, apt's lists and downloads), then pack it.
rm -rf "$root"/usr/share/{doc,man,info,locale,lintian} "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* \
	"$root"/var/cache/debconf/*-old "$root"/var/log/*.log
# The lab's init is added at boot; the root's own services are not run
# (no systemd, no udev: lab/guest/xen-dom0-rcS starts what Xen needs).
step "packing the root ($(du -sm "$root" | cut -f1) MB) as an initramfs"
(cd "$root" && find . -xdev -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet | gzip -6 -n) >"$work/dom0-root.cpio.gz" ||
	die "packing the root failed"

mkdir -p "$out.tmp"
mv "$work/xen" "$work/dom0-root.cpio.gz" "$work/versions" "$out.tmp/"
echo "$format" >"$out.tmp/format"
touch "$out.tmp/.complete"
rm -rf "$out"
mv "$out.tmp" "$out"
ln -sfn "images-$key" "$top/current"
# Images of older keys are outdated.
for d in "$top"/images-*; do
	[ "$d" = "$out" ] || rm -rf "$d"
done
step "Xen lab images ready in $out: xen $(du -h "$out/xen" | cut -f1), dom0 root $(du -h "$out/dom0-root.cpio.gz" | cut -f1)"
echo "$out"
