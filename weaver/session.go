package weaver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/klasy/klasy/dwarfmap"
	"github.com/klasy/klasy/internal/cachedir"
	"github.com/klasy/klasy/weaver/joinpoint"
	"github.com/klasy/klasy/weaver/records"
	"github.com/klasy/klasy/weaver/resolve"
	"github.com/klasy/klasy/weaver/runtime"
	"github.com/klasy/klasy/weaver/target"
	"github.com/klasy/klasy/weaver/taskfilter"
)

// Session is a target with its kernel image indexed and checked: what
// weave, unweave, status and trace work on.
type Session struct {
	T target.Target
	X *dwarfmap.Index
	// Slide is the running kernel's KASLR slide (running address minus
	// image address), from the kprobe blacklist; SlideKnown is false if
	// it could not be worked out.
	Slide      uint64
	SlideKnown bool
	Blacklist  []target.BlacklistEntry
	// Modules are the modules given with --module, indexed; loaded says
	// where the target runs them (empty without a running kernel).
	Modules []*resolve.ModuleImage
	loaded  []*loadedModule
	log     io.Writer
	// Domain is the domain of a domains file the session is on (""
	// none): Plan resolves only the advice that goes to it.
	Domain string
	// FlowDomain and FlowDomains are the domain's index in its domains
	// file and their number: the runtime puts the index in the low bits
	// of every flow ID it makes, so IDs of different domains never
	// collide (klasy_flow.h, "IDs"). 0 and 0 outside a domains file.
	FlowDomain, FlowDomains int
	// BufferKB is the trace buffer per CPU, in KiB, that the runtime
	// gets when a weave of this session loads it; 0 is the runtime's
	// default (1024).
	BufferKB int
	// KprobesOnly loads the runtime with ftrace_ops=0: entry hooks are
	// kprobes on ftrace, as before the runtime had its ftrace_ops (make
	// bench compares the two).
	KprobesOnly bool
	// Tasks are the tasks a weave's advice runs for (klasy weave --pid,
	// --comm, --include-self); its SelfTGID is found at the weave.
	Tasks taskfilter.Filter
	// MaxJoinPoints and MaxCMiB bound a weave's join points and its
	// generated C; 0 is DefaultMaxJoinPoints, DefaultMaxCMiB.
	MaxJoinPoints, MaxCMiB int
	// MaxBuild bounds the advice module's build; 0 is DefaultMaxBuild.
	MaxBuild time.Duration
	// noSymbols is why KStacks could not read the image, once it tried.
	noSymbols error
}

// SessionOptions say which target to open and where progress goes.
type SessionOptions struct {
	target.TargetOptions
	// Log receives progress ("indexing ...") and warnings; nil discards.
	Log io.Writer
	// SkipIndex opens the target without reading its image (status and
	// trace need only the runtime's own view).
	SkipIndex bool
}

// ErrImageMismatch: the running kernel is not the image's build.
var ErrImageMismatch = errors.New("the running kernel is not the image's build")

// OpenSession opens the target, indexes its image, and refuses an image
// that is not the running kernel's build: a hook address from another
// build would patch the middle of some other instruction.
func OpenSession(ctx context.Context, opt SessionOptions) (*Session, error) {
	t, err := target.OpenTarget(ctx, opt.TargetOptions)
	if err != nil {
		return nil, err
	}
	return OpenSessionOn(ctx, t, opt)
}

// OpenSessionOn is OpenSession on a target already open (a domain's
// agent); it closes t when it fails.
func OpenSessionOn(ctx context.Context, t target.Target, opt SessionOptions) (*Session, error) {
	log := opt.Log
	if log == nil {
		log = io.Discard
	}
	s := &Session{T: t, log: log}
	if opt.SkipIndex {
		return s, nil
	}
	if err := s.index(); err != nil {
		t.Close()
		return nil, err
	}
	if err := s.checkBuild(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.readBlacklist(ctx); err != nil {
		fmt.Fprintf(log, "klasy: warning: %v; join points the kernel refuses will fail the weave instead of being skipped\n", err)
	}
	if err := s.openModules(ctx, opt.Modules, true); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Session) index() error {
	img := s.T.Image()
	x, info, err := dwarfmap.Load(img, dwarfmap.Options{
		Log: func(f string, a ...any) { fmt.Fprintf(s.log, "klasy: "+f+"\n", a...) },
	})
	if err != nil {
		return fmt.Errorf("reading %s's image %s: %w", s.T.Name(), img, err)
	}
	if !info.FromCache {
		fmt.Fprintf(s.log, "klasy: indexed %s in %.1fs\n", img, info.Built.Seconds())
	}
	s.X = x
	return nil
}

// checkBuild compares the running kernel's build-id with the image's.
func (s *Session) checkBuild(ctx context.Context) error {
	notes, err := s.T.ReadFile(ctx, target.NotesPath)
	if err != nil {
		return fmt.Errorf("reading %s in %s: %w", target.NotesPath, s.T.Name(), err)
	}
	running, err := target.BuildIDFromNotes(notes)
	if err != nil {
		return fmt.Errorf("%s: %w", s.T.Name(), err)
	}
	if running != s.X.BuildID {
		return fmt.Errorf("%w: %s runs build-id %s, %s is build-id %s; give the running kernel's vmlinux with --vmlinux", ErrImageMismatch, s.T.Name(), running, s.T.Image(), s.X.BuildID)
	}
	return nil
}

func (s *Session) readBlacklist(ctx context.Context) error {
	b, err := s.T.ReadFile(ctx, target.BlacklistPath)
	if err != nil {
		return fmt.Errorf("reading the kprobe blacklist: %w", err)
	}
	bl, err := target.ParseBlacklist(b)
	if err != nil {
		return err
	}
	s.Blacklist = bl
	s.Slide, s.SlideKnown = target.Slide(bl, s.X)
	if !s.SlideKnown {
		return fmt.Errorf("no blacklist entry names a function of %s, so the KASLR slide is unknown", s.T.Image())
	}
	return nil
}

// NoPrecheckEnv, set to 1, makes the weaver hand the kernel join points
// it expects the kernel to refuse, so that the kernel's own error (and
// the rollback of a batch) can be seen.
const NoPrecheckEnv = "KLASY_WEAVE_NO_PRECHECK"

// Refused is the resolver's view of the blacklist (nil if unknown).
func (s *Session) Refused() joinpoint.Refusal {
	if os.Getenv(NoPrecheckEnv) == "1" {
		return nil
	}
	var blacklist joinpoint.Refusal
	if s.SlideKnown {
		blacklist = target.Refusals(s.Blacklist, s.Slide)
	}
	// Code the kernel patches itself, read from the image: known even
	// without the running kernel's blacklist.
	reserved, err := s.X.Image().Reserved()
	if err != nil {
		fmt.Fprintf(s.log, "klasy: warning: %s: %v; jump label and static call sites are not checked\n", s.T.Image(), err)
	}
	return func(addr uint64) string {
		if what := reserved.At(addr); what != "" {
			return "the kernel refuses kprobes in " + what + ", code it patches itself"
		}
		if blacklist != nil {
			return blacklist(addr)
		}
		return ""
	}
}

// Exec runs argv on the target's machine (Exec).
func (s *Session) Exec(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, error) {
	return target.Exec(ctx, s.T, argv, stdout, stderr)
}

// Close releases the target and the indexes.
func (s *Session) Close() error {
	if s.X != nil {
		s.X.Close()
	}
	for _, m := range s.Modules {
		m.X.Close()
	}
	return s.T.Close()
}

// Status reads the runtime's status; nil, nil when the runtime is not
// loaded.
func (s *Session) Status(ctx context.Context) (*records.Status, error) {
	b, err := s.T.ReadFile(ctx, runtime.StatusPath)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s in %s: %w", runtime.StatusPath, s.T.Name(), err)
	}
	st, err := records.ParseStatus(b)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", runtime.StatusPath, s.T.Name(), err)
	}
	if st.ABI != runtime.ABIVersion {
		return st, fmt.Errorf("%s runs a klasy runtime of ABI %d, this klasy speaks ABI %d: run 'klasy unweave --all' with the klasy that wove it", s.T.Name(), st.ABI, runtime.ABIVersion)
	}
	return st, nil
}

// StatusShown is Status with what klasy status adds to it: whether
// kprobes are disarmed in the whole kernel. Hooks keep their mechanism
// then, and only debugfs says none runs; one more read, which the
// weaver's own calls of Status (trace's polling, a weave's) do without.
//
// It also warns, on the session's log, of advice modules whose weave
// was killed before it finished (Orphans): status does not list them
// as aspects until they are live, and no weave reported them; and of
// what the kernel reported since the weaves (Troubles).
func (s *Session) StatusShown(ctx context.Context) (*records.Status, error) {
	if orphans, err := s.Orphans(ctx); err == nil {
		for _, o := range orphans {
			fmt.Fprintf(s.log, "klasy: warning: %s\n", o)
		}
	}
	s.WarnTroubles(ctx)
	st, err := s.Status(ctx)
	if st == nil || err != nil {
		return st, err
	}
	if b, err := s.T.ReadFile(ctx, target.KprobesEnabled); err == nil && strings.TrimSpace(string(b)) == "0" {
		st.Disarmed = true
	}
	return st, nil
}

func isNotExist(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT)
}

// stateDir is where klasy keeps host-side state for the target: records
// saved at unweave, the lock that orders weaves.
func (s *Session) stateDir() string {
	name := strings.NewReplacer(" ", "-", "/", "_").Replace(s.T.Name())
	return filepath.Join(cachedir.Root(), "weaver", "targets", name)
}

// lock takes the host-side lock that orders weaves and unweaves of one
// target, so that two klasy processes do not load or unload the runtime
// under each other. The kernel's module refcounts guard the rest.
func (s *Session) lock() (unlock func(), err error) {
	dir := s.stateDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// OpenImage opens only a kernel image, for klasy list: the one given
// with --vmlinux, a lab's, or this machine's debug vmlinux. No kernel is
// touched.
func OpenImage(opt target.TargetOptions, log io.Writer) (*Session, error) {
	if log == nil {
		log = io.Discard
	}
	image := opt.Vmlinux
	switch {
	case image != "":
	case opt.Lab != "":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		t, err := target.OpenTarget(ctx, opt)
		if err != nil {
			return nil, err
		}
		image = t.Image()
		t.Close()
	default:
		var uts unix.Utsname
		if err := unix.Uname(&uts); err != nil {
			return nil, err
		}
		image = filepath.Join("/usr/lib/debug/boot", "vmlinux-"+unix.ByteSliceToString(uts.Release[:]))
	}
	s := &Session{T: target.ImageOnly(image), log: log}
	if err := s.index(); err != nil {
		return nil, err
	}
	if err := s.openModules(context.Background(), opt.Modules, false); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}
