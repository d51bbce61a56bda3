#!/usr/bin/env bash
# Builds klasy's Debian package, bin/klasy_VERSION_amd64.deb (make deb):
#   /usr/bin/klasy                            static (CGO_ENABLED=0)
#   /usr/share/man/man1/klasy.1.gz            klasy --help and every
#                                             klasy help COMMAND
#   /usr/share/bash-completion/completions/klasy   the commands
#   /lib/systemd/system/klasy-agent.service   klasy agent --listen :7070
#                                             with mutual TLS; postinst
#                                             makes /etc/klasy's domains
#                                             file and keys, and starts it
# Prints the package's path. VERSION is 0.1.0+gitN.HASH of this checkout;
# $KLASY_DEB_OUT, when set, is the directory it goes to instead of bin/.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

n=$(git rev-list --count HEAD 2>/dev/null || echo 0)
h=$(git rev-parse --short=8 HEAD 2>/dev/null || echo unknown)
version=0.1.0+git$n.$h
outdir=${KLASY_DEB_OUT:-bin}
out=$outdir/klasy_${version}_amd64.deb
work=$(mktemp -d "${TMPDIR:-/tmp}/klasy-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/man/man1" "$root/lib/systemd/system" \
	"$root/usr/share/bash-completion/completions" "$root/usr/share/doc/klasy"

CGO_ENABLED=0 ${GO:-go} build -trimpath -o "$root/usr/bin/klasy" ./cmd/klasy
klasy=$root/usr/bin/klasy

# The man page is the help klasy prints, unformatted (.nf), so it says
# exactly what klasy --help and klasy help COMMAND say.
cmds=$("$klasy" --help | awk '/^Commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {exit}' | grep -vx help)
[ -n "$cmds" ] || die "no commands in klasy --help"
roff() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
{
	printf '.TH KLASY 1 "" "klasy %s" "User Commands"\n' "$version"
	printf '.SH NAME\nklasy \\- a dynamic aspect-oriented weaver for Linux kernels\n'
	printf '.SH SYNOPSIS\n.B klasy\n.I COMMAND\n[\\fIARGS\\fR...]\n'
	printf '.SH DESCRIPTION\n.nf\n'
	"$klasy" --help | roff
	printf '.fi\n'
	for c in $cmds; do
		printf '.SH "klasy %s"\n.nf\n' "$c"
		"$klasy" help "$c" | roff
		printf '.fi\n'
	done
	printf '.SH FILES\n.TP\n/etc/klasy/domains.yaml\nthe agent service'"'"'s domains file, CA, certificates and keys (klasy agent keys)\n'
	printf '.TP\n/usr/lib/debug/boot/vmlinux-RELEASE, /lib/modules/RELEASE/build\nthe running kernel'"'"'s DWARF and headers a weave without --lab uses\n'
} | gzip -9n >"$root/usr/share/man/man1/klasy.1.gz"

printf 'complete -W "%s help" klasy\n' "$(echo $cmds)" >"$root/usr/share/bash-completion/completions/klasy"
install -m 0644 packaging/deb/klasy-agent.service "$root/lib/systemd/system/"
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$root/DEBIAN/"
gzip -9n <README.md >"$root/usr/share/doc/klasy/README.md.gz"
size=$(du -sk "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: klasy
Version: $version
Architecture: amd64
Maintainer: klasy developers <klasy@localhost>
Installed-Size: $size
Section: devel
Priority: optional
Recommends: gcc, make, kmod
Suggests: linux-headers-amd64, linux-image-amd64-dbg
Description: dynamic aspect-oriented weaver for a running Linux kernel
 klasy weaves aspects (C advice with pointcuts such as
 execution(setattr_prepare)) into the running kernel through kprobes and
 unweaves them again, without a rebuild or a reboot. As root it weaves into
 this machine's kernel with its -dbg vmlinux and headers; the klasy-agent
 service lets a controller weave into it over mutual TLS.
CONTROL
mkdir -p "$outdir"
dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
log "built $out ($(du -h "$out" | cut -f1))"
echo "$out"
