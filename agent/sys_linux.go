//go:build linux

package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// monotonicNS reads CLOCK_MONOTONIC, the clock of the kernel's
// ktime_get_mono_fast_ns, in nanoseconds.
func monotonicNS() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("clock_gettime(CLOCK_MONOTONIC): %w", err)
	}
	return ts.Nano(), nil
}

func initModule(image []byte, params string) error {
	return unix.InitModule(image, params)
}

func deleteModule(name string) error {
	// O_NONBLOCK as rmmod does: fail with EWOULDBLOCK instead of waiting
	// for a module in use.
	return unix.DeleteModule(name, unix.O_NONBLOCK)
}

// OpenSerial opens a serial device (or a pty) for the agent protocol and
// puts it in raw mode: no echo, no line editing, no CR/LF translation, no
// signals, 8 data bits, reads return as soon as one byte is there. Input
// that arrived before, while the line was still cooked, is discarded. A
// character device that is not a terminal (a virtio-serial port) has no
// line discipline to configure and is used as it is.
func OpenSerial(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		unix.Close(fd)
		return nil, fmt.Errorf("opening %s: not a character device (want a serial line such as /dev/ttyS1)", path)
	}
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); errors.Is(err, unix.ENOTTY) {
		// Not a terminal (a virtio port): nothing to make raw.
	} else if err := MakeRaw(fd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	// Non-blocking so the Go runtime polls it and Close interrupts a read.
	return os.NewFile(uintptr(fd), path), nil
}

// OpenPort opens the agent's line: OpenSerial, and for a character device
// that is not a terminal (a virtio-serial port), a reader that waits for
// the host instead of ending: such a port reads as end of file while no
// host is connected to its socket, which on the lab's line is most of
// the time between two klasy commands.
func OpenPort(path string) (io.ReadWriteCloser, error) {
	f, err := OpenSerial(path)
	if err != nil {
		return nil, err
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); errors.Is(err, unix.ENOTTY) {
		return waitHost{f}, nil
	}
	return f, nil
}

type waitHost struct{ *os.File }

func (w waitHost) Read(p []byte) (int, error) {
	for {
		n, err := w.File.Read(p)
		if n > 0 || err != io.EOF {
			return n, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// MakeRaw puts the terminal fd in raw mode for the agent's serial line:
// term.MakeRaw (cfmakeraw(3): no echo, no line editing, no CR/LF
// translation, no signals, 8 data bits, VMIN 1, VTIME 0), then what a
// serial line needs beyond a terminal: no software or hardware flow
// control, CLOCAL (no modem control lines: QEMU's UART has none) and
// CREAD, 115200 baud; and it flushes pending input.
func MakeRaw(fd int) error {
	if _, err := term.MakeRaw(fd); err != nil {
		return fmt.Errorf("setting raw mode: %w", err)
	}
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("reading terminal settings: %w", err)
	}
	t.Iflag &^= unix.IXOFF | unix.IXANY
	t.Cflag &^= unix.CRTSCTS | unix.CBAUD
	// 115200 baud, the fastest rate of a 16550. QEMU does not pace bytes
	// by it, but its receive-timeout interrupt comes after four character
	// times, so the default 9600 baud delays every partly filled FIFO by
	// about 4 ms. Measured under TCG on a loaded host: host-to-guest
	// 11-14 KB/s at 9600, 20-23 KB/s at 115200.
	t.Cflag |= unix.CLOCAL | unix.CREAD | unix.B115200
	t.Ispeed, t.Ospeed = 115200, 115200
	// TCSETSF: apply after output drains and drop input received while
	// the line was cooked (it may hold echoes and half frames).
	if err := unix.IoctlSetTermios(fd, unix.TCSETSF, t); err != nil {
		return fmt.Errorf("setting raw mode: %w", err)
	}
	return nil
}

// peerPID is the process at the other end of a unix socket (SO_PEERCRED).
func peerPID(conn net.Conn) (int, bool) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, false
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	rc.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cred == nil || cred.Pid <= 0 {
		return 0, false
	}
	return int(cred.Pid), true
}
