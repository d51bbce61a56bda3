//go:build linux

package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klasy/klasy/agent/wire"
	"golang.org/x/sys/unix"
)

// openPTY returns the master side of a new pseudo-terminal and the path of
// its slave: the nearest thing to the guest's /dev/ttyS1 a host test has,
// with a real line discipline that echoes and rewrites bytes unless raw.
func openPTY(t testing.TB) (*os.File, string) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		t.Fatalf("unlocking pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(fd)
		t.Fatalf("pty number: %v", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), fmt.Sprintf("/dev/pts/%d", n)
}

// allBytes holds every byte value, the tty's special characters (^C, ^D,
// ^S, ^Q, CR, LF, DEL) included, several times over.
func allBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestOverRawPTY(t *testing.T) {
	master, slavePath := openPTY(t)
	slave, err := OpenSerial(slavePath)
	if err != nil {
		t.Fatalf("OpenSerial: %v", err)
	}
	c := serve(t, ServerOptions{AllowRun: true}, master, slave)
	ctx := testCtx(t)
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping over pty: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "bin")
	data := allBytes(300 << 10)
	if err := c.WriteFile(ctx, path, data, 0o600); err != nil {
		t.Fatalf("WriteFile over pty: %v", err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file written over the pty differs (%d bytes, %v)", len(got), err)
	}
	got, err := c.ReadFile(ctx, path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadFile over pty = %d bytes, %v", len(got), err)
	}
	res, err := c.Run(ctx, []string{"cat"}, data[:4096])
	if err != nil || !bytes.Equal(res.Stdout, data[:4096]) {
		t.Fatalf("Run(cat) over pty = %d bytes, %v", len(res.Stdout), err)
	}
	var streamed []byte
	if err := c.Stream(ctx, path, func(b []byte) error { streamed = append(streamed, b...); return nil }); err != nil || !bytes.Equal(streamed, data) {
		t.Fatalf("Stream over pty = %d bytes, %v", len(streamed), err)
	}
	if _, err := c.ReadFile(ctx, filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadFile(missing) over pty = %v", err)
	}
	if s := c.Stats(); s.SkippedBytes != 0 || s.DamagedFrames != 0 {
		t.Errorf("clean raw line: Stats = %+v, want nothing discarded", s)
	}
}

// Garbage on the line before the agent starts (a console, a getty) is
// skipped by the agent, and the first request after it is answered.
func TestPTYGarbageBeforeAgent(t *testing.T) {
	master, slavePath := openPTY(t)
	slave, err := OpenSerial(slavePath)
	if err != nil {
		t.Fatal(err)
	}
	// Bytes already in the raw line's input queue when Serve starts.
	if _, err := master.Write([]byte("\x1b[0mWelcome to the guest\r\n\xa9K")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	var log syncBuffer
	c := serve(t, ServerOptions{Log: &log}, master, slave)
	if err := c.Ping(testCtx(t)); err != nil {
		t.Fatalf("Ping after garbage: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	if !bytes.Contains([]byte(log.String()), []byte("skipped")) {
		t.Errorf("agent did not report the garbage it skipped; log %q", log.String())
	}
}

// On a line left cooked (the mistake the raw mode avoids), the tty
// rewrites bytes: the damage must be detected, reported as an error, and
// the request not executed.
func TestCookedPTYDamageIsDetected(t *testing.T) {
	master, slavePath := openPTY(t)
	fd, err := unix.Open(slavePath, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	slave := os.NewFile(uintptr(fd), slavePath)
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&unix.ICANON == 0 || tio.Iflag&unix.ICRNL == 0 {
		t.Skip("this pty does not start cooked")
	}
	// The cooked line holds back what follows the last newline: when the
	// client closes, the agent may be in the middle of a frame.
	c := serveTolerating(t, ServerOptions{}, master, slave, func(err error) bool { return errors.Is(err, wire.ErrTruncatedFrame) })
	dir := t.TempDir()
	target := filepath.Join(dir, "must-not-exist")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// CR becomes LF on the way in (ICRNL); the LF ends the line so the
	// agent gets the damaged frame at once.
	err = c.WriteFile(ctx, target, []byte("a\rb\nc"), 0o644)
	if err == nil {
		t.Fatal("WriteFile over a cooked line succeeded")
	}
	t.Logf("cooked line: %v (client discarded %+v)", err, c.Stats())
	if _, err := os.Stat(target); err == nil {
		t.Fatal("a request damaged by the cooked line was executed")
	}
}

func TestOpenSerialSettings(t *testing.T) {
	master, slavePath := openPTY(t)
	defer master.Close()
	// Start from a line with flow control on and modem control lines
	// honoured, which cfmakeraw alone leaves as they are.
	sfd, err := unix.Open(slavePath, unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tio, err := unix.IoctlGetTermios(sfd, unix.TCGETS); err != nil {
		t.Fatal(err)
	} else {
		tio.Iflag |= unix.IXOFF | unix.IXANY
		tio.Cflag |= unix.CRTSCTS
		tio.Cflag &^= unix.CLOCAL
		if err := unix.IoctlSetTermios(sfd, unix.TCSETS, tio); err != nil {
			t.Fatal(err)
		}
	}
	unix.Close(sfd)
	f, err := OpenSerial(slavePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var tio *unix.Termios
	sc.Control(func(fd uintptr) { tio, err = unix.IoctlGetTermios(int(fd), unix.TCGETS) })
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG|unix.IEXTEN) != 0 || tio.Iflag&(unix.ICRNL|unix.IXON) != 0 || tio.Oflag&unix.OPOST != 0 {
		t.Errorf("line not raw: lflag %#x iflag %#x oflag %#x", tio.Lflag, tio.Iflag, tio.Oflag)
	}
	if tio.Cflag&unix.CSIZE != unix.CS8 || tio.Cflag&unix.CBAUD != unix.B115200 || tio.Cc[unix.VMIN] != 1 {
		t.Errorf("cflag %#x vmin %d: want 8 bits, 115200 baud, VMIN 1", tio.Cflag, tio.Cc[unix.VMIN])
	}
	if tio.Cflag&(unix.CLOCAL|unix.CREAD) != unix.CLOCAL|unix.CREAD || tio.Cflag&unix.CRTSCTS != 0 || tio.Iflag&(unix.IXOFF|unix.IXANY) != 0 {
		t.Errorf("cflag %#x iflag %#x: want CLOCAL and CREAD, no flow control", tio.Cflag, tio.Iflag)
	}

	regular := filepath.Join(t.TempDir(), "file")
	os.WriteFile(regular, nil, 0o600)
	if _, err := OpenSerial(regular); err == nil || !strings.Contains(err.Error(), "not a character device") {
		t.Errorf("OpenSerial(regular file) = %v, want a refusal", err)
	}
}

// TestOpenPortWaitsForHost: a character device that is not a terminal (a
// virtio-serial port) reads as end of file while no host is connected;
// OpenPort's reader waits instead of ending, and Close still stops it.
func TestOpenPortWaitsForHost(t *testing.T) {
	p, err := OpenPort("/dev/null") // a non-tty character device that is always at EOF
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := p.Read(make([]byte, 16))
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("Read returned %v at once, want it to wait for a host", err)
	case <-time.After(300 * time.Millisecond):
	}
	p.Close()
	select {
	case err := <-read:
		if err == nil || err == io.EOF {
			t.Errorf("Read after Close = %v, want a closed-file error", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Read still waiting after Close")
	}
}
