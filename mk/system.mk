# A Debian system lab (klasy lab up --system; lab/system.go) and klasy's
# Debian package.
#
#   make system-lab  the lab's root image, once: debootstrap'd bookworm with
#                    systemd, gcc-12, make and Debian's headers for the lab
#                    kernel, as an ext4 image under $KLASY_CACHE/system-lab
#                    (scripts/build-system-lab.sh; 4-7 minutes cold,
#                    a second warm)
#   make deb         bin/klasy_VERSION_amd64.deb (scripts/build-deb.sh):
#                    the static klasy, its man page, bash completion and
#                    the klasy-agent systemd unit; dpkg-deb only
#
# make test boots the system lab twice (lab/systemlab/, a package of its
# own, so its 15 cold minutes have their own -timeout):
# klasy run as root in it with no --lab (the local target), and the
# package installed with apt, its agent woven through from the host and
# removed again.
.PHONY: system-lab deb
system-lab: lab-setup
	./scripts/build-system-lab.sh >/dev/null

deb:
	./scripts/build-deb.sh

TEST_SETUP += system-lab
