// Package agent is the protocol between klasy on the host and the klasy
// agent inside a guest kernel (the lab's QEMU guests today, other domains
// later): run a command (lab only), read and write files, load and unload
// kernel modules, list modules, stream records from a device or file, and
// read the guest's CLOCK_MONOTONIC (to map its records' times onto the
// host's). It holds both ends, the Client on the host and Serve (or
// ServeTLS) in the guest, and the Mux that lets many clients share one
// line; what goes on the line, frames and the payload of each message,
// is package agent/wire's.
//
// # Requests
//
// Every request gets exactly one final answer with its id: MsgResult or
// MsgError (kind, errno, operation, the agent's message). A stream answers
// with MsgStreamData frames first; the agent sends at most the window the
// client asked for ahead of the client's MsgStreamAck frames, so a slow
// consumer never blocks the reader that also serves other requests.
// MsgCancel stops a request (a Run's process is killed).
//
// MsgExec runs a command with both directions streamed, so neither has a
// size limit: its output comes in MsgExecOutput frames (stdout or stderr),
// paced by MsgStreamAck as a stream is; its input, when the request says
// it has one, goes in MsgStdin frames of at most 64 KiB, an empty one
// ending it, the client sending at most the request's stdin window ahead
// of the agent's MsgStdinAck frames (one per chunk written to the
// command). An agent that receives more is sent a bad request. The final
// MsgResult carries the exit status. Run, which carries input and output
// whole in one frame each, stays for small commands; an agent older than
// MsgExec answers it as an unsupported request.
//
// A line takes one host connection at a time (QEMU's chardev socket).
// Mux shares it among many clients: it forwards frames whole, mapping
// each client's request ids to ids of its own, and cancels the requests
// of a client that goes away.
//
// # Damaged input
//
// A serial line is not a reliable pipe: a guest console may print onto it
// before the agent starts, and a tty that is not yet raw echoes and
// rewrites bytes. Readers (wire.FrameReader) therefore skip bytes until
// the next magic and accept a frame only when both checksums, the version
// and the length limit check out. A damaged frame is never executed. The
// agent answers a frame whose header is intact but whose payload is
// damaged or too large with an error for that id; the client fails the
// request it names. A damaged header names no request: the agent drops
// it, the client fails every request in flight, since one of their
// answers was lost. A connection that ends fails everything with
// ErrConnLost.
package agent
