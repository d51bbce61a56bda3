// Package wire is what the klasy agent protocol puts on the line (package
// agent holds its two ends): frames, the payload of each message type,
// and the error a failed request answers with. It reads frames from a
// line that may damage them and never delivers a damaged one.
//
// # Frames
//
// Both directions carry frames. A frame is a 24-byte header followed by
// its payload; integers in the header are big-endian:
//
//	offset size field
//	0      4    magic 0xA9 'K' 'L' 'S'
//	4      1    version (1)
//	5      1    type (MsgType: requests < 0x80, responses >= 0x80)
//	6      2    flags: bit 0 = payload is DEFLATE-compressed; others 0
//	8      4    request id (chosen by the client, never 0)
//	12     4    payload length (at most MaxPayload, 16 MiB)
//	16     4    CRC32C (Castagnoli) of the payload
//	20     4    CRC32C of header bytes 0..19
//
// The header has its own checksum so that a damaged length is caught
// before the reader waits for (or allocates) a payload that never comes.
// The checksums cover the bytes on the wire; a compressed payload must
// inflate to at most MaxPayload bytes. The client compresses what it sends
// when that saves an eighth or more (AppendFrameCompressed: a serial line
// into a guest under TCG carries tens of KB/s, and a kernel module
// shrinks about threefold); the agent sends plain payloads, sparing the
// guest's emulated CPU.
//
// A FrameReader skips bytes until the next magic (its first byte is not
// ASCII, so console text never matches) and returns a frame only when
// both checksums, the version and the length limit check out; a damaged
// one is a *FrameError, naming the request when its header was intact.
//
// # Payloads
//
// Payload fields are unsigned varints, zig-zag signed varints and byte
// strings prefixed by their length as an unsigned varint, in an order
// fixed per type (messages.go); decoders reject trailing bytes. A
// MsgError carries a RemoteError: its kind, errno, operation and the
// agent's message.
package wire
