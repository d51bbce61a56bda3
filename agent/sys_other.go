//go:build !linux

package agent

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
)

var errNotLinux = errors.New("only supported on Linux")

func ownProcessGroup(cmd *exec.Cmd) {}

func monotonicNS() (int64, error) { return 0, errNotLinux }

func initModule(image []byte, params string) error { return errNotLinux }
func deleteModule(name string) error               { return errNotLinux }

// OpenSerial is only available on Linux.
func OpenSerial(path string) (*os.File, error) { return nil, errNotLinux }

// OpenPort is only available on Linux.
func OpenPort(path string) (io.ReadWriteCloser, error) { return nil, errNotLinux }

func peerPID(conn net.Conn) (int, bool) { return 0, false }
