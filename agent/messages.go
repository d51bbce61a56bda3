package agent

// Payload layouts of each request and its result. Each encode function
// has a matching decode function; decoders reject trailing bytes.

import (
	"fmt"
	"os"
)

type runRequest struct {
	Argv  []string
	Stdin []byte
}

func (r runRequest) encode() []byte {
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

func decodeRunRequest(p []byte) (runRequest, error) {
	d := dec{b: p}
	r := runRequest{Argv: d.strs(), Stdin: d.bytes()}
	if err := d.done(); err != nil {
		return runRequest{}, fmt.Errorf("decoding run request: %w", err)
	}
	return r, nil
}

func (r RunResult) encode() []byte {
	var e enc
	e.bytes(r.Stdout)
	e.bytes(r.Stderr)
	e.int(int64(r.ExitCode))
	return e.b
}

func decodeRunResult(p []byte) (RunResult, error) {
	d := dec{b: p}
	r := RunResult{Stdout: d.bytes(), Stderr: d.bytes(), ExitCode: int(d.int())}
	if err := d.done(); err != nil {
		return RunResult{}, fmt.Errorf("decoding run result: %w", err)
	}
	return r, nil
}

type writeFileRequest struct {
	Path string
	Mode os.FileMode
	Data []byte
}

func (r writeFileRequest) encode() []byte {
	var e enc
	e.str(r.Path)
	e.uint(uint64(r.Mode))
	e.bytes(r.Data)
	return e.b
}

func decodeWriteFileRequest(p []byte) (writeFileRequest, error) {
	d := dec{b: p}
	r := writeFileRequest{Path: d.str(), Mode: os.FileMode(d.uint()), Data: d.bytes()}
	if err := d.done(); err != nil {
		return writeFileRequest{}, fmt.Errorf("decoding write-file request: %w", err)
	}
	return r, nil
}

// pathRequest is the payload of read-file and unload-module: one string.
func encodeString(s string) []byte {
	var e enc
	e.str(s)
	return e.b
}

func decodeString(what string, p []byte) (string, error) {
	d := dec{b: p}
	s := d.str()
	if err := d.done(); err != nil {
		return "", fmt.Errorf("decoding %s: %w", what, err)
	}
	return s, nil
}

func encodeBytes(b []byte) []byte {
	var e enc
	e.bytes(b)
	return e.b
}

func decodeBytes(what string, p []byte) ([]byte, error) {
	d := dec{b: p}
	b := d.bytes()
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", what, err)
	}
	return b, nil
}

type loadModuleRequest struct {
	Image  []byte
	Params string
}

func (r loadModuleRequest) encode() []byte {
	var e enc
	e.bytes(r.Image)
	e.str(r.Params)
	return e.b
}

func decodeLoadModuleRequest(p []byte) (loadModuleRequest, error) {
	d := dec{b: p}
	r := loadModuleRequest{Image: d.bytes(), Params: d.str()}
	if err := d.done(); err != nil {
		return loadModuleRequest{}, fmt.Errorf("decoding load-module request: %w", err)
	}
	return r, nil
}

func encodeModules(ms []Module) []byte {
	var e enc
	e.uint(uint64(len(ms)))
	for _, m := range ms {
		e.str(m.Name)
		e.int(m.Size)
		e.int(int64(m.Refs))
	}
	return e.b
}

func decodeModules(p []byte) ([]Module, error) {
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

type streamRequest struct {
	Path   string
	Window int // chunks the agent may send before it must wait for an ack
}

func (r streamRequest) encode() []byte {
	var e enc
	e.str(r.Path)
	e.uint(uint64(r.Window))
	return e.b
}

func decodeStreamRequest(p []byte) (streamRequest, error) {
	d := dec{b: p}
	path := d.str()
	w := d.uint()
	if err := d.done(); err != nil {
		return streamRequest{}, fmt.Errorf("decoding stream request: %w", err)
	}
	if w == 0 || w > maxStreamWindow {
		return streamRequest{}, fmt.Errorf("decoding stream request: window %d outside 1..%d", w, maxStreamWindow)
	}
	return streamRequest{Path: path, Window: int(w)}, nil
}

func encodeUint(v uint64) []byte {
	var e enc
	e.uint(v)
	return e.b
}

func decodeUint(what string, p []byte) (uint64, error) {
	d := dec{b: p}
	v := d.uint()
	if err := d.done(); err != nil {
		return 0, fmt.Errorf("decoding %s: %w", what, err)
	}
	return v, nil
}

// execRequest starts a command whose standard input (when Stdin is set;
// else it reads /dev/null) arrives in MsgStdin frames and whose output
// leaves in MsgExecOutput frames. Window is how many output chunks the
// agent may send ahead of the client's MsgStreamAck frames, StdinWindow
// how many stdin chunks the client may send ahead of the agent's
// MsgStdinAck frames.
type execRequest struct {
	Argv        []string
	Stdin       bool
	Window      int
	StdinWindow int
}

const execFlagStdin = 1

func (r execRequest) encode() []byte {
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

func decodeExecRequest(p []byte) (execRequest, error) {
	d := dec{b: p}
	r := execRequest{Argv: d.strs()}
	flags, w, sw := d.uint(), d.uint(), d.uint()
	if err := d.done(); err != nil {
		return execRequest{}, fmt.Errorf("decoding exec request: %w", err)
	}
	if flags&^execFlagStdin != 0 {
		return execRequest{}, fmt.Errorf("decoding exec request: unknown flags %#x", flags)
	}
	if w == 0 || w > maxStreamWindow || sw == 0 || sw > maxStreamWindow {
		return execRequest{}, fmt.Errorf("decoding exec request: windows %d and %d, want each in 1..%d", w, sw, maxStreamWindow)
	}
	r.Stdin, r.Window, r.StdinWindow = flags&execFlagStdin != 0, int(w), int(sw)
	return r, nil
}

// execOutput is the payload of MsgExecOutput: which stream (1 stdout,
// 2 stderr) and the bytes.
type execOutput struct {
	FD   int
	Data []byte
}

func (o execOutput) encode() []byte {
	var e enc
	e.uint(uint64(o.FD))
	e.bytes(o.Data)
	return e.b
}

func decodeExecOutput(p []byte) (execOutput, error) {
	d := dec{b: p}
	o := execOutput{FD: int(d.uint()), Data: d.bytes()}
	if err := d.done(); err != nil {
		return execOutput{}, fmt.Errorf("decoding exec output: %w", err)
	}
	if o.FD != 1 && o.FD != 2 {
		return execOutput{}, fmt.Errorf("decoding exec output: file descriptor %d, want 1 or 2", o.FD)
	}
	return o, nil
}

func encodeInt(v int64) []byte {
	var e enc
	e.int(v)
	return e.b
}

func decodeInt(what string, p []byte) (int64, error) {
	d := dec{b: p}
	v := d.int()
	if err := d.done(); err != nil {
		return 0, fmt.Errorf("decoding %s: %w", what, err)
	}
	return v, nil
}
