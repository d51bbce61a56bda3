package wire

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrorKind classifies a failure reported by the agent.
type ErrorKind uint8

const (
	KindErrno       ErrorKind = 1 // a system call failed; Errno says which error
	KindRunDisabled ErrorKind = 2 // Run on an agent started without --allow-run
	KindBadRequest  ErrorKind = 3 // the request did not decode or made no sense
	KindTooLarge    ErrorKind = 4 // the answer would not fit in a frame
	KindBadFrame    ErrorKind = 5 // the agent received this request damaged and did not run it
	KindUnsupported ErrorKind = 6 // the agent does not know this request type
	KindCanceled    ErrorKind = 7 // the request was canceled
	KindOther       ErrorKind = 8 // any other failure; Msg says what
)

// Sentinels matched by errors.Is against a *RemoteError of that kind.
var (
	ErrRunDisabled = errors.New("running commands is disabled on this agent")
	ErrBadRequest  = errors.New("bad request")
	ErrTooLarge    = errors.New("result too large")
	ErrUnsupported = errors.New("unsupported request")
)

// RemoteError is a failure the agent reported. Msg is the agent's own
// message. If Errno is set, errors.Is matches it and the os.Err* values it
// stands for (syscall.ENOENT matches os.ErrNotExist).
type RemoteError struct {
	Op    string // what the agent was doing: "read file", "load module"
	Kind  ErrorKind
	Errno syscall.Errno
	Msg   string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("agent: %s: %s", e.Op, e.Msg)
}

func (e *RemoteError) Unwrap() error {
	if e.Errno != 0 {
		return e.Errno
	}
	return nil
}

func (e *RemoteError) Is(target error) bool {
	switch target {
	case ErrRunDisabled:
		return e.Kind == KindRunDisabled
	case ErrBadRequest:
		return e.Kind == KindBadRequest
	case ErrTooLarge:
		return e.Kind == KindTooLarge
	case ErrUnsupported:
		return e.Kind == KindUnsupported
	case ErrCorruptFrame:
		return e.Kind == KindBadFrame
	}
	return false
}

func EncodeRemoteError(e *RemoteError) []byte {
	var b enc
	b.uint(uint64(e.Kind))
	b.uint(uint64(e.Errno))
	b.str(e.Op)
	b.str(e.Msg)
	return b.b
}

func DecodeRemoteError(p []byte) (*RemoteError, error) {
	d := dec{b: p}
	e := &RemoteError{Kind: ErrorKind(d.uint()), Errno: syscall.Errno(d.uint()), Op: d.str(), Msg: d.str()}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decoding error response: %w", err)
	}
	return e, nil
}
