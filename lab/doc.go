// Package lab boots a real Linux kernel under QEMU (TCG) with a busybox
// initramfs and talks to the klasy agent inside it over a virtio-serial
// port (the second serial port, ttyS1, for a kernel without
// virtio_console).
//
// A lab is named; its state (QEMU's pid, sockets, console log) lives in
// Root()/NAME, so labs started by one process can be used and stopped by
// another (the klasy lab command, tests, the weaver), and by several at
// once: QEMU serves one connection on the agent's socket, so each lab has
// a mux process (mux.go) that owns that socket and shares it, started
// and stopped with the lab and never outliving QEMU. The record
// (lab.json) is written atomically; if it is damaged all the same, the
// lab's QEMU is still found by the pidfile it writes itself, or by its
// command line, so it is never taken for a stale lab nor left running
// with nothing to stop it:
//
//	l, err := lab.Up(ctx, lab.Config{Name: "a", Kernel: lab.Debian, Progress: os.Stderr})
//	code, err := l.Client().Exec(ctx, []string{"uname", "-r"}, nil, os.Stdout, os.Stderr)
//	err = l.Down(ctx)
//
// The guest runs busybox init from an initramfs built with package
// lab/initramfs: /etc/klasy/rcS mounts proc, sys, debugfs and devtmpfs,
// loads the virtio and e1000 modules and configures eth0 for QEMU user
// networking (10.0.2.15/24, the host is 10.0.2.2) and, for labs on the
// shared LAN, eth1; then `klasy agent --device PORT --allow-run` serves
// the host and a shell runs on the console (ttyS0).
//
// A Debian system lab (Config.System, system.go) boots the same kernel
// into a debootstrap'd Debian root with systemd, Debian's headers and the
// -dbg vmlinux shared from the host; the busybox initramfs is only its
// first stage, and the agent runs as a systemd service.
//
// A Xen lab (Config.Xen, a *xenlab.Config: package lab/xenlab builds and
// boots it, through Launch) boots Xen with a Domain 0 and Domain U guests
// instead; its agents are on the network, one per domain, reached over
// mutual TLS with the lab's own domains file (package domains). Once it
// runs, it is a Lab like any other (domains.go):
//
//	l, err := lab.Up(ctx, lab.Config{Name: "x", Xen: &xenlab.Config{}})
//	for _, d := range l.Domains() { // dom0, domU1: kernel, plugin-built modules
//		c, err := l.Dial(ctx, d.Name) // *agent.Client, a kmod.Target
//		...
//	}
package lab
