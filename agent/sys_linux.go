//go:build linux

package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
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

// MakeRaw puts the terminal fd in raw mode (cfmakeraw(3) plus CLOCAL and
// CREAD, VMIN 1, VTIME 0) and flushes pending input.
func MakeRaw(fd int) error {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("reading terminal settings: %w", err)
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON | unix.IXOFF | unix.IXANY
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB | unix.CRTSCTS | unix.CBAUD
	// 115200 baud, the fastest rate of a 16550. QEMU does not pace bytes
	// by it, but its receive-timeout interrupt comes after four character
	// times, so the default 9600 baud delays every partly filled FIFO by
	// about 4 ms. Measured under TCG on a loaded host: host-to-guest
	// 11-14 KB/s at 9600, 20-23 KB/s at 115200.
	t.Cflag |= unix.CS8 | unix.CLOCAL | unix.CREAD | unix.B115200
	t.Ispeed, t.Ospeed = 115200, 115200
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	// TCSETSF: apply after output drains and drop input received while
	// the line was cooked (it may hold echoes and half frames).
	if err := unix.IoctlSetTermios(fd, unix.TCSETSF, t); err != nil {
		return fmt.Errorf("setting raw mode: %w", err)
	}
	return nil
}
