// Package labtest holds what tests of lab state share across packages.
package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/klasy/klasy/internal/testenv"
)

// IdleQEMU starts a QEMU that boots nothing (-machine none: no CPU, so it
// costs nothing) in place of the QEMU of the lab whose state directory is
// dir: its name, its agent socket, QMP socket and pidfile there, which is
// all the lab package goes by to find and stop a lab's QEMU. It returns
// QEMU's pid and a channel closed once it has exited, and kills it at the
// end of the test. Without QEMU it skips t (fails it under make test).
func IdleQEMU(t testing.TB, dir string) (pid int, exited <-chan struct{}) {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		err = fmt.Errorf("qemu-system-x86_64 not installed (make lab-setup)")
	}
	testenv.Need(t, "lab", err)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	qmp := filepath.Join(dir, "qmp.sock")
	cmd := exec.Command(qemu, "-name", "klasy-lab-"+filepath.Base(dir), "-machine", "none", "-nodefaults", "-display", "none",
		"-chardev", "socket,id=agent,path="+filepath.Join(dir, "agent.sock")+",server=on,wait=off",
		"-qmp", "unix:"+qmp+",server=on,wait=off", "-pidfile", filepath.Join(dir, "qemu.pid"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(qmp); err == nil {
			return cmd.Process.Pid, done
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle QEMU for %s did not create its sockets", dir)
		}
	}
}
