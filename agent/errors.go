package agent

import (
	"errors"
	"fmt"
	"os/exec"
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
	// ErrConnLost is wrapped by every error caused by the connection to
	// the agent going away (EOF, a read or write error, Close).
	ErrConnLost = errors.New("agent connection lost")
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

func encodeRemoteError(e *RemoteError) []byte {
	var b enc
	b.uint(uint64(e.Kind))
	b.uint(uint64(e.Errno))
	b.str(e.Op)
	b.str(e.Msg)
	return b.b
}

func decodeRemoteError(p []byte) (*RemoteError, error) {
	d := dec{b: p}
	e := &RemoteError{Kind: ErrorKind(d.uint()), Errno: syscall.Errno(d.uint()), Op: d.str(), Msg: d.str()}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decoding error response: %w", err)
	}
	return e, nil
}

// remoteErrorFrom turns an error on the agent's side into what goes back
// on the wire, keeping the errno when there is one.
func remoteErrorFrom(op string, err error) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	e := &RemoteError{Op: op, Kind: KindOther, Msg: err.Error()}
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		e.Kind, e.Errno = KindErrno, errno
	case errors.Is(err, exec.ErrNotFound):
		// A missing program is a missing file to the caller.
		e.Kind, e.Errno = KindErrno, syscall.ENOENT
	}
	return e
}
