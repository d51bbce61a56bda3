package wire

// Payload layouts of each request and its result. Each encode function
// has a matching decode function; decoders reject trailing bytes.

import (
	"fmt"
	"os"
)

// MaxWindow bounds the windows a request may ask for: the chunks the
// agent sends ahead of the client's MsgStreamAck frames (a stream's, an
// exec's output) and the stdin chunks the client sends ahead of the
// agent's MsgStdinAck frames.
const MaxWindow = 256

// RunRequest is the payload of MsgRun: a command and its whole input.
type RunRequest struct {
	Argv  []string
	Stdin []byte
}

func (r RunRequest) Encode() []byte {
	var e enc
	e.strs(r.Argv)
	e.bytes(r.Stdin)
	return e.b
}

// strs encodes a list of strings: their count, then each.
func (e *enc) strs(ss []string) {
	e.uint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

// strs decodes what enc.strs encoded.
func (d *dec) strs() []string {
	n := d.uint()
	if n > uint64(len(d.b)) { // each string takes at least one byte
		d.fail(fmt.Errorf("%d strings in %d bytes", n, len(d.b)))
		return nil
	}
	var ss []string
	for i := uint64(0); i < n && d.err == nil; i++ {
		ss = append(ss, d.str())
	}
	return ss
}

func DecodeRunRequest(p []byte) (RunRequest, error) {
	d := dec{b: p}
	r := RunRequest{Argv: d.strs(), Stdin: d.bytes()}
	if err := d.done(); err != nil {
		return RunRequest{}, fmt.Errorf("decoding run request: %w", err)
	}
	return r, nil
}

// RunResult is what a command run by the agent produced. ExitCode is
// 128+N when the command was killed by signal N, as in a shell.
type RunResult struct {
	Stdout, Stderr []byte
	ExitCode       int
}

func (r RunResult) Encode() []byte {
	var e enc
	e.bytes(r.Stdout)
	e.bytes(r.Stderr)
	e.int(int64(r.ExitCode))
	return e.b
}

func DecodeRunResult(p []byte) (RunResult, error) {
	d := dec{b: p}
	r := RunResult{Stdout: d.bytes(), Stderr: d.bytes(), ExitCode: int(d.int())}
	if err := d.done(); err != nil {
		return RunResult{}, fmt.Errorf("decoding run result: %w", err)
	}
	return r, nil
}

// WriteFileRequest is the payload of MsgWriteFile.
type WriteFileRequest struct {
	Path string
	Mode os.FileMode
	Data []byte
}

func (r WriteFileRequest) Encode() []byte {
	var e enc
	e.str(r.Path)
	e.uint(uint64(r.Mode))
	e.bytes(r.Data)
	return e.b
}

func DecodeWriteFileRequest(p []byte) (WriteFileRequest, error) {
	d := dec{b: p}
	r := WriteFileRequest{Path: d.str(), Mode: os.FileMode(d.uint()), Data: d.bytes()}
	if err := d.done(); err != nil {
		return WriteFileRequest{}, fmt.Errorf("decoding write-file request: %w", err)
	}
	return r, nil
}

// EncodeString is the payload of read-file and unload-module: one
// string.
func EncodeString(s string) []byte {
	var e enc
	e.str(s)
	return e.b
}

func DecodeString(what string, p []byte) (string, error) {
	d := dec{b: p}
	s := d.str()
	if err := d.done(); err != nil {
		return "", fmt.Errorf("decoding %s: %w", what, err)
	}
	return s, nil
}

// EncodeBytes is the payload of a read-file result: one byte string.
func EncodeBytes(b []byte) []byte {
	var e enc
	e.bytes(b)
	return e.b
}

func DecodeBytes(what string, p []byte) ([]byte, error) {
	d := dec{b: p}
	b := d.bytes()
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", what, err)
	}
	return b, nil
}

// LoadModuleRequest is the payload of MsgLoadModule: a .ko's bytes and
// its parameters.
type LoadModuleRequest struct {
	Image  []byte
	Params string
}

func (r LoadModuleRequest) Encode() []byte {
	var e enc
	e.bytes(r.Image)
	e.str(r.Params)
	return e.b
}

func DecodeLoadModuleRequest(p []byte) (LoadModuleRequest, error) {
	d := dec{b: p}
	r := LoadModuleRequest{Image: d.bytes(), Params: d.str()}
	if err := d.done(); err != nil {
		return LoadModuleRequest{}, fmt.Errorf("decoding load-module request: %w", err)
	}
	return r, nil
}

// Module is one line of the guest's /proc/modules.
type Module struct {
	Name string
	Size int64
	Refs int
}

// EncodeModules is the payload of a modules result.
func EncodeModules(ms []Module) []byte {
	var e enc
	e.uint(uint64(len(ms)))
	for _, m := range ms {
		e.str(m.Name)
		e.int(m.Size)
		e.int(int64(m.Refs))
	}
	return e.b
}

func DecodeModules(p []byte) ([]Module, error) {
	d := dec{b: p}
	n := d.uint()
	if n > uint64(len(p)) {
		return nil, fmt.Errorf("decoding module list: %d modules in %d bytes", n, len(p))
	}
	ms := make([]Module, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		ms = append(ms, Module{Name: d.str(), Size: d.int(), Refs: int(d.int())})
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decoding module list: %w", err)
	}
	return ms, nil
}

// StreamRequest is the payload of MsgStream.
type StreamRequest struct {
	Path   string
	Window int // chunks the agent may send before it must wait for an ack
}

func (r StreamRequest) Encode() []byte {
	var e enc
	e.str(r.Path)
	e.uint(uint64(r.Window))
	return e.b
}

func DecodeStreamRequest(p []byte) (StreamRequest, error) {
	d := dec{b: p}
	path := d.str()
	w := d.uint()
	if err := d.done(); err != nil {
		return StreamRequest{}, fmt.Errorf("decoding stream request: %w", err)
	}
	if w == 0 || w > MaxWindow {
		return StreamRequest{}, fmt.Errorf("decoding stream request: window %d outside 1..%d", w, MaxWindow)
	}
	return StreamRequest{Path: path, Window: int(w)}, nil
}

// EncodeUint is the payload of MsgStreamAck and MsgStdinAck: how many
// chunks were consumed.
func EncodeUint(v uint64) []byte {
	var e enc
	e.uint(v)
	return e.b
}

func DecodeUint(what string, p []byte) (uint64, error) {
	d := dec{b: p}
	v := d.uint()
	if err := d.done(); err != nil {
		return 0, fmt.Errorf("decoding %s: %w", what, err)
	}
	return v, nil
}

// ExecRequest starts a command whose standard input (when Stdin is set;
// else it reads /dev/null) arrives in MsgStdin frames and whose output
// leaves in MsgExecOutput frames. Window is how many output chunks the
// agent may send ahead of the client's MsgStreamAck frames, StdinWindow
// how many stdin chunks the client may send ahead of the agent's
// MsgStdinAck frames.
type ExecRequest struct {
	Argv        []string
	Stdin       bool
	Window      int
	StdinWindow int
}

const execFlagStdin = 1

func (r ExecRequest) Encode() []byte {
	var e enc
	e.strs(r.Argv)
	var flags uint64
	if r.Stdin {
		flags |= execFlagStdin
	}
	e.uint(flags)
	e.uint(uint64(r.Window))
	e.uint(uint64(r.StdinWindow))
	return e.b
}

func DecodeExecRequest(p []byte) (ExecRequest, error) {
	d := dec{b: p}
	r := ExecRequest{Argv: d.strs()}
	flags, w, sw := d.uint(), d.uint(), d.uint()
	if err := d.done(); err != nil {
		return ExecRequest{}, fmt.Errorf("decoding exec request: %w", err)
	}
	if flags&^execFlagStdin != 0 {
		return ExecRequest{}, fmt.Errorf("decoding exec request: unknown flags %#x", flags)
	}
	if w == 0 || w > MaxWindow || sw == 0 || sw > MaxWindow {
		return ExecRequest{}, fmt.Errorf("decoding exec request: windows %d and %d, want each in 1..%d", w, sw, MaxWindow)
	}
	r.Stdin, r.Window, r.StdinWindow = flags&execFlagStdin != 0, int(w), int(sw)
	return r, nil
}

// ExecOutput is the payload of MsgExecOutput: which stream (1 stdout,
// 2 stderr) and the bytes.
type ExecOutput struct {
	FD   int
	Data []byte
}

func (o ExecOutput) Encode() []byte {
	var e enc
	e.uint(uint64(o.FD))
	e.bytes(o.Data)
	return e.b
}

func DecodeExecOutput(p []byte) (ExecOutput, error) {
	d := dec{b: p}
	o := ExecOutput{FD: int(d.uint()), Data: d.bytes()}
	if err := d.done(); err != nil {
		return ExecOutput{}, fmt.Errorf("decoding exec output: %w", err)
	}
	if o.FD != 1 && o.FD != 2 {
		return ExecOutput{}, fmt.Errorf("decoding exec output: file descriptor %d, want 1 or 2", o.FD)
	}
	return o, nil
}

// EncodeInt is the payload of an exec result (its exit status) and a
// clock result (nanoseconds).
func EncodeInt(v int64) []byte {
	var e enc
	e.int(v)
	return e.b
}

func DecodeInt(what string, p []byte) (int64, error) {
	d := dec{b: p}
	v := d.int()
	if err := d.done(); err != nil {
		return 0, fmt.Errorf("decoding %s: %w", what, err)
	}
	return v, nil
}
