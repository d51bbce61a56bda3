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
	"time"

	"github.com/klasy/klasy/internal/cachedir"
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
	// Mux says clients reach the agent through the lab's mux process
	// (mux.sock), which owns the agent's socket; a lab started by an
	// older klasy has none, and clients dial the agent's socket itself.
	Mux bool `json:"mux,omitempty"`
	// ICount: the guest's clock counts instructions (Config.ICount).
	ICount bool `json:"icount,omitempty"`
	// System is the root image of a Debian system lab (system.go).
	System string `json:"system,omitempty"`
	// SystemPort is the host's port (127.0.0.1) forwarded to the system
	// lab guest's TCP port 7070, where an installed klasy agent service
	// listens (system.go).
	SystemPort int `json:"system_port,omitempty"`
	// Xen is set for a Xen lab: QEMU boots Xen, Kernel is every
	// domain's, and the agents are on the network (domains.go).
	Xen *XenRecord `json:"xen,omitempty"`

	// problem, when set, says what was wrong with the lab's state and how
	// the record was rebuilt from what is left (see findLab).
	problem string
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
func (r record) qemuPidfile() string  { return filepath.Join(r.dir(), "qemu.pid") }
func (r record) muxSocket() string    { return filepath.Join(r.dir(), "mux.sock") }
func (r record) muxPidfile() string   { return filepath.Join(r.dir(), "mux.pid") }
func (r record) muxLog() string       { return filepath.Join(r.dir(), "mux.log") }
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

// save writes the record atomically: a reader sees the old record or the
// new one, never a part, and after a crash of the machine too (the data
// reaches the disk before the rename, the rename before save returns).
func (r record) save() error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(r.dir(), ".lab.json.tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), r.recordPath())
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("saving the record of lab %s: %w", r.Name, err)
	}
	if d, err := os.Open(r.dir()); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

var errNoLab = errors.New("no such lab")

// loadRecord reads the record of lab name as lab.json holds it. A record
// that does not parse, or names another lab or no pid, is damaged.
func loadRecord(name string) (record, error) {
	path := recordPathOf(name)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return record{}, fmt.Errorf("lab %s: %w", name, errNoLab)
	}
	if err != nil {
		return record{}, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return record{}, fmt.Errorf("%s is damaged: %w", path, err)
	}
	if r.Name != name || r.PID <= 0 {
		return record{}, fmt.Errorf("%s is damaged: it names lab %q and pid %d", path, r.Name, r.PID)
	}
	return r, nil
}

// findLab returns the state of lab name. When lab.json is damaged or
// missing, or names a QEMU that is gone while another QEMU serves the
// lab's directory, the record is rebuilt from what is left: the QEMU
// running for the directory (by the pidfile QEMU writes itself, else by
// its command line), with problem saying what was wrong. So a live QEMU
// is never taken for a stale lab: status shows it, up refuses to start a
// second, down stops it. errNoLab when there is neither a directory nor
// a QEMU.
func findLab(name string) (record, error) {
	dir := labDir(name)
	rec, err := loadRecord(name)
	if err == nil {
		if !rec.alive() {
			if pid := findQEMU(dir); pid > 0 {
				rec.problem = fmt.Sprintf("lab.json names pid %d, but the lab's QEMU runs as pid %d", rec.PID, pid)
				rec.PID = pid
			}
		}
		return rec, nil
	}
	_, statErr := os.Stat(dir)
	pid := findQEMU(dir)
	if errors.Is(err, errNoLab) && statErr != nil && pid == 0 {
		return record{}, err
	}
	rec = record{Name: name, PID: pid}
	switch {
	case statErr != nil:
		rec.problem = "its state directory " + dir + " is gone"
	case errors.Is(err, errNoLab):
		rec.problem = "it has no lab.json (an interrupted lab up?)"
	default:
		rec.problem = err.Error()
	}
	return rec, nil
}

// alive reports whether the lab's QEMU still runs: the pid exists, is no
// zombie, and is a QEMU serving this lab's directory (so a recycled pid
// is not mistaken for it).
func (r record) alive() bool { return r.PID > 0 && isQEMUOf(r.PID, r.dir()) }

// procArgs returns the command line of process pid, nil if it is gone
// or a zombie.
func procArgs(pid int) []string {
	p := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(p + "/stat")
	if err != nil {
		return nil
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
		return nil
	}
	cmdline, err := os.ReadFile(p + "/cmdline")
	if err != nil || len(cmdline) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
}

// qemuAgentArg is what the command line of the QEMU of the lab in dir
// holds (its agent chardev), and nothing else's.
func qemuAgentArg(dir string) string {
	return "socket,id=agent,path=" + filepath.Join(dir, "agent.sock") + ","
}

// isQEMUOf reports whether pid is the live QEMU of the lab in dir.
func isQEMUOf(pid int, dir string) bool {
	for _, a := range procArgs(pid) {
		if strings.HasPrefix(a, qemuAgentArg(dir)) {
			return true
		}
	}
	return false
}

// findQEMU returns the pid of a live QEMU serving the lab in dir, 0 if
// none: the pid in the pidfile QEMU writes, else any process whose
// command line says so.
func findQEMU(dir string) int {
	if b, err := os.ReadFile(filepath.Join(dir, "qemu.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && isQEMUOf(pid, dir) {
			return pid
		}
	}
	return labQEMUs(filepath.Dir(dir))[filepath.Base(dir)]
}

// labQEMUs returns the live QEMUs of labs under root, by lab name, read
// from every process's command line.
func labQEMUs(root string) map[string]int {
	out := map[string]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmdline), "socket,id=agent,path="+root+"/") {
			continue
		}
		for _, a := range procArgs(pid) {
			rest, ok := strings.CutPrefix(a, "socket,id=agent,path="+root+"/")
			if !ok {
				continue
			}
			if name, _, ok := strings.Cut(rest, "/agent.sock,"); ok && CheckName(name) == nil {
				out[name] = pid
			}
		}
	}
	return out
}

// lockRoot takes an exclusive lock on the labs' root directory for the
// short steps that check and change state (not for a whole boot or
// shutdown), so two commands do not start the same lab or take the same
// slot at once.
func lockRoot() (unlock func(), err error) {
	if err := os.MkdirAll(Root(), 0o755); err != nil {
		return nil, err
	}
	return cachedir.Lock(filepath.Join(Root(), ".lock"))
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
