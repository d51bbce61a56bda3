//go:build linux

package agent

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/klasy/klasy/agent/wire"
)

// LoadModule and UnloadModule really call init_module(2) and
// delete_module(2) here. On a test host they fail (no CAP_SYS_MODULE, no
// module support, or an image that is not a module); what is tested is
// that the kernel's errno travels back intact, compared with the same
// system call made directly.
func TestModuleErrorsTravelBack(t *testing.T) {
	c := pipeClient(t, ServerOptions{})
	ctx := testCtx(t)
	image := []byte("\x7fELF this is not a kernel module")
	direct := unix.InitModule(image, "")
	if direct == nil {
		t.Fatal("the host kernel accepted a garbage module image")
	}
	err := c.LoadModule(ctx, image, "")
	var re *wire.RemoteError
	if !errors.As(err, &re) || re.Errno != direct.(syscall.Errno) || !errors.Is(err, direct) {
		t.Fatalf("LoadModule = %v, want the errno of a direct init_module: %v", err, direct)
	}
	if !strings.Contains(err.Error(), "init_module: "+direct.Error()) {
		t.Errorf("LoadModule error %q does not carry the guest's message", err)
	}
	t.Logf("init_module on this host: %v", err)

	const name = "klasy_no_such_module"
	direct = unix.DeleteModule(name, unix.O_NONBLOCK)
	if direct == nil {
		t.Fatalf("delete_module(%s) succeeded on the host", name)
	}
	err = c.UnloadModule(ctx, name)
	if !errors.Is(err, direct) || !strings.Contains(err.Error(), name) {
		t.Fatalf("UnloadModule = %v, want %v naming the module", err, direct)
	}

	if err := c.LoadModule(ctx, nil, ""); !errors.Is(err, wire.ErrBadRequest) {
		t.Errorf("LoadModule(empty) = %v, want ErrBadRequest", err)
	}
	if err := c.UnloadModule(ctx, "../evil"); !errors.Is(err, wire.ErrBadRequest) {
		t.Errorf("UnloadModule(../evil) = %v, want ErrBadRequest", err)
	}
}
