#!/usr/bin/env bash
# Builds the root a Debian system lab (klasy lab up --system) boots, once,
# into
#   $KLASY_CACHE/system-lab/image-KEY/
#     root.img   an ext4 image of a debootstrap'd bookworm with systemd,
#                udev, gcc-12, make, kmod and Debian's headers for the lab
#                kernel's ABI (linux-headers-ABI, /lib/modules/ABI/build)
#                and its modules; QEMU opens it with snapshot=on, so every
#                boot starts from the same root and the image stays as built
#     versions   the Debian packages inside
#     format     the layout's version (lab/system.go checks it)
# and points $KLASY_CACHE/system-lab/current at it. The kernel is Debian's
# 6.1 of make debian-kernel; its -dbg vmlinux (633 MB) is not in the image:
# the lab shares it read-only over virtio-9p at boot. KEY hashes this
# script, the suite, the mirror and the ABI, so the slow steps run once.
#
# Cold: debootstrap fetches about 90 MB; see the README for the time.
source "$(dirname "$0")/lib.sh"

format=klasy-system-image-1
suite=bookworm
abi=$(cat "$KLASY_CACHE/debian/current/abi" 2>/dev/null) || die "no Debian kernel: run make debian-kernel"
# systemd as init, udev for the devices, gcc-12/make/libc6-dev for kbuild,
# what kbuild's headers package needs beside them, and the usual tools.
include=systemd,systemd-sysv,udev,dbus,kmod,gcc-12,gcc,make,libc6-dev,libelf1,iproute2,procps,busybox,ca-certificates

mirror() {
	local m
	m=$( { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{for (i = 2; i <= NF; i++) print $i}'
		grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'; } |
		grep -v security | grep '/debian/\?$' | head -n1)
	echo "${m:-http://deb.debian.org/debian}"
}
mirror=$(mirror)

top=$KLASY_CACHE/system-lab
mkdir -p "$top"
exec 9>"$top/.lock"
flock 9 || die "cannot lock $top/.lock"

key=$( { echo "$format $suite $mirror $include $abi"; sha256sum <"$0"; } | sha256sum | cut -c1-16)
out=$top/image-$key
if [ -f "$out/.complete" ]; then
	ln -sfn "image-$key" "$top/current"
	log "system lab image ready in $out (cached)"
	echo "$out"
	exit 0
fi

need_pkgs debootstrap e2fsprogs
start=$(date +%s)
step() { log "system-lab [$(($(date +%s) - start))s] $*"; }

work=$top/.build-$key
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

root=$work/root
step "debootstrap --variant=minbase $suite from $mirror with $include (a few minutes)"
debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
	tail -n 30 "$work/debootstrap.log" >&2
	die "debootstrap failed (log above)"
}

# Debian's headers for the lab kernel, as a user installs them (they come
# from bookworm-security, which the host's apt knows and debootstrap not).
step "installing linux-headers-$abi in the root"
mkdir -p "$work/deb"
ver=$(dpkg-query -W -f='${Version}' "linux-headers-$abi" 2>/dev/null) || ver=
download() {
	(cd "$work/deb" && apt_get -o APT::Sandbox::User=root download "linux-headers-$abi${ver:+=$ver}" \
		"linux-headers-${abi%-amd64}-common${ver:+=$ver}" "linux-kbuild-6.1${ver:+=$ver}" \
		"linux-compiler-gcc-12-x86${ver:+=$ver}")
}
# apt's lists may be older than the host's headers: update them then.
download || { apt_update_once && download; } || die "apt-get download of linux-headers-$abi failed"
cp "$work"/deb/*.deb "$root/tmp/"
chroot "$root" sh -c 'dpkg -i /tmp/*.deb' >"$work/dpkg.log" 2>&1 || {
	tail -n 30 "$work/dpkg.log" >&2
	die "installing the headers in the root failed"
}
rm -f "$root"/tmp/*.deb
[ -e "$root/lib/modules/$abi/build/Makefile" ] || die "no /lib/modules/$abi/build in the root"

# The kernel's modules, from the image package make debian-kernel unpacked.
step "copying the modules of $abi"
cp -a "$KLASY_CACHE/debian/current/root/lib/modules/$abi/." "$root/lib/modules/$abi/"
chroot "$root" depmod "$abi"
mkdir -p "$root/usr/lib/debug/boot" "$root/mnt/kernel"

# The system: a root without a password on the console, the lab's
# network (QEMU user networking) by systemd-networkd, no getty but the
# serial console's, nothing waiting for a network that is not there.
echo klasy >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 klasy\n' >"$root/etc/hosts"
printf '/dev/vda / ext4 rw,noatime 0 1\n' >"$root/etc/fstab"
chroot "$root" passwd -d root >/dev/null
mkdir -p "$root/etc/systemd/network"
cat >"$root/etc/systemd/network/10-lab.network" <<'NET'
[Match]
Name=e*

[Network]
Address=10.0.2.15/24
Gateway=10.0.2.2
DNS=10.0.2.3
NET
chroot "$root" systemctl enable systemd-networkd.service >/dev/null 2>&1
chroot "$root" systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
	e2scrub_all.timer fstrim.timer man-db.timer >/dev/null 2>&1 || true
rm -rf "$root"/usr/share/{doc,man,info,locale,lintian} "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb

chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' >"$work/versions"
mb=$(du -sm "$root" | cut -f1)
step "root done: $(wc -l <"$work/versions") packages, $mb MB; making an ext4 image"
# Room for what a lab writes (modules built, the agent's files) besides
# what snapshot=on keeps outside the image anyway.
truncate -s "$((mb * 13 / 10 + 512))M" "$work/root.img"
mke2fs -q -t ext4 -L klasy-root -d "$root" "$work/root.img" || die "mke2fs failed"

mkdir -p "$out.tmp"
mv "$work/root.img" "$work/versions" "$out.tmp/"
echo "$abi" >"$out.tmp/abi"
echo "$format" >"$out.tmp/format"
touch "$out.tmp/.complete"
rm -rf "$out"
mv "$out.tmp" "$out"
ln -sfn "image-$key" "$top/current"
for d in "$top"/image-*; do
	[ "$d" = "$out" ] || rm -rf "$d"
done
step "system lab image ready in $out: $(du -h --apparent-size "$out/root.img" | cut -f1) (sparse: $(du -h "$out/root.img" | cut -f1))"
echo "$out"
