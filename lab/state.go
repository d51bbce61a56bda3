package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Root is the directory holding one subdirectory of state per lab:
// $KLASY_LAB_DIR when set, else $KLASY_CACHE/labs.
func Root() string {
	if d := os.Getenv("KLASY_LAB_DIR"); d != "" {
		return d
	}
	return filepath.Join(CacheDir(), "labs")
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// CheckName reports whether name can name a lab: it becomes a directory,
// the guest's hostname and part of socket paths.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("bad lab name %q: use 1-32 letters, digits, '-' or '_', starting with a letter or digit", name)
	}
	return nil
}

// record is what lab.json holds: enough for another process to find and
// describe the lab.
type record struct {
	Name      string    `json:"name"`
	PID       int       `json:"pid"`
	Kernel    Kernel    `json:"kernel"`
	MemMB     int       `json:"mem_mb"`
	CPUs      int       `json:"cpus"`
	Slot      int       `json:"slot"`
	Addr      string    `json:"addr"`
	LANAddr   string    `json:"lan_addr,omitempty"`
	Initramfs string    `json:"initramfs"`
	Started   time.Time `json:"started"`
	// AgentDevice is the guest's line the agent serves on, as the guest
	// said while booting: a virtio-serial port (/dev/vportNpM) or the
	// second UART (/dev/ttyS1).
	AgentDevice string `json:"agent_device,omitempty"`
}

func labDir(name string) string { return filepath.Join(Root(), name) }

func (r record) dir() string          { return labDir(r.Name) }
func (r record) consoleLog() string   { return filepath.Join(r.dir(), "console.log") }
func (r record) qemuLog() string      { return filepath.Join(r.dir(), "qemu.log") }
func (r record) agentSocket() string  { return filepath.Join(r.dir(), "agent.sock") }
func (r record) serialSocket() string { return filepath.Join(r.dir(), "agent-ttyS1.sock") }
func (r record) consoleSock() string  { return filepath.Join(r.dir(), "console.sock") }
func (r record) qmpSocket() string    { return filepath.Join(r.dir(), "qmp.sock") }
func (r record) recordPath() string   { return filepath.Join(r.dir(), "lab.json") }
func recordPathOf(name string) string { return filepath.Join(labDir(name), "lab.json") }

// agentConn is the socket that reaches the agent: the virtio port's
// (agent.sock) unless the guest serves on its UART. A lab started by an
// older klasy has no AgentDevice and its UART on agent.sock.
func (r record) agentConn() string {
	if strings.HasPrefix(r.AgentDevice, "/dev/ttyS") {
		return r.serialSocket()
	}
	return r.agentSocket()
}

func (r record) save() error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := r.recordPath() + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, r.recordPath())
}

var errNoLab = errors.New("no such lab")

func loadRecord(name string) (record, error) {
	data, err := os.ReadFile(recordPathOf(name))
	if errors.Is(err, os.ErrNotExist) {
		return record{}, fmt.Errorf("lab %s: %w", name, errNoLab)
	}
	if err != nil {
		return record{}, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return record{}, fmt.Errorf("reading %s: %w", recordPathOf(name), err)
	}
	return r, nil
}

// alive reports whether the lab's QEMU still runs: the pid exists, is no
// zombie, and is a QEMU whose command line names this lab's directory
// (so a recycled pid is not mistaken for it).
func (r record) alive() bool {
	if r.PID <= 0 {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(r.PID) + "/stat")
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(r.PID) + "/cmdline")
	if err != nil {
		return false
	}
	return strings.Contains(string(cmdline), r.agentSocket())
}

// lockRoot takes an exclusive lock on the labs' root directory for the
// short steps that check and change state (not for a whole boot or
// shutdown), so two commands do not start the same lab or take the same
// slot at once.
func lockRoot() (unlock func(), err error) {
	if err := os.MkdirAll(Root(), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(Root(), ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", Root(), err)
	}
	return func() { f.Close() }, nil
}

// consoleTail returns the last n lines of a console log, for errors.
func consoleTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no console output: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(strings.ReplaceAll(string(data), "\r", ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// consoleWatcher returns the console log's complete new lines.
type consoleWatcher struct {
	path    string
	off     int64
	partial string
}

func (w *consoleWatcher) newLines() []string {
	f, err := os.Open(w.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(w.off, io.SeekStart); err != nil {
		return nil
	}
	data, _ := io.ReadAll(f)
	w.off += int64(len(data))
	s := w.partial + strings.ReplaceAll(string(data), "\r", "")
	lines := strings.Split(s, "\n")
	w.partial = lines[len(lines)-1]
	return lines[:len(lines)-1]
}
