//go:build !linux

package agent

import (
	"errors"
	"os"
	"os/exec"
)

var errNotLinux = errors.New("only supported on Linux")

func ownProcessGroup(cmd *exec.Cmd) {}

func initModule(image []byte, params string) error { return errNotLinux }
func deleteModule(name string) error               { return errNotLinux }

// OpenSerial is only available on Linux.
func OpenSerial(path string) (*os.File, error) { return nil, errNotLinux }
