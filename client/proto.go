// Package client speaks the exo daemon's local API on its Unix socket:
// publish a message (returns when it is agreed, with its position), follow
// the agreed stream from a sequence number, read the status.
//
// The framing, documented in docs/api.md: every message in both directions
// is
//
//	[length u32 BE: bytes after this field][type u8][body]
//
// Requests: Publish [req u64][payload], Subscribe [from seq u64], Status [],
// Roster [req u64][op u8][member u8], PublishBatch [req u64][count u16] and
// count times [len u32][payload] (batch.go), AcceptLoss [req u64][from
// u64][to u64], Hello [version u16][client name] (the first request of a
// connection: Dial and Subscribe send it).
// Replies: Published [req u64][seq u64][index u16], Message [seq u64][index
// u16][sender u8][payload], StatusReply [JSON], RosterQueued [req u64],
// PublishedBatch [req u64][count u16][results], LossAccepted [req u64],
// HelloReply [version u16][features], Error [req u64][code u16][text].
// Publishes may be pipelined on one connection; replies carry the request id.
// A subscribing connection receives Message frames until it closes; the
// daemon writes many of them with one write when they queue up, so one
// read may return many frames.
package client

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame types of the local API.
const (
	TypePublish      byte = 0x01
	TypeSubscribe    byte = 0x02
	TypeStatus       byte = 0x03
	TypeRoster       byte = 0x04
	TypeKey          byte = 0x05 // [req u64][op u8][key file path]: KeyStage or KeyRetire
	TypePublishBatch byte = 0x06 // [req u64][count u16] count x [len u32][payload] (batch.go)
	TypeAcceptLoss   byte = 0x07 // [req u64][from u64][to u64]: the doubt shown in the status, accepted
	TypeHello        byte = 0x08 // [version u16][client name]: the first request of a connection
	TypeHelloReply   byte = 0x88 // [version u16][features, comma-separated]
	TypePublished    byte = 0x81
	TypeMessage      byte = 0x82
	TypeStatusReply  byte = 0x83
	TypeRosterQueued byte = 0x84
	TypeKeyDone      byte = 0x85 // [req u64]
	TypeLossAccepted byte = 0x87 // [req u64]
	// TypePublishedBatch answers a PublishBatch: [req u64][count u16] and
	// count results in order (batch.go).
	TypePublishedBatch byte = 0x86
	TypeError          byte = 0xFF
)

// Error codes of the local API.
const (
	CodeQueueFull      uint16 = 1 // the daemon's queue is full: back off and retry
	CodeTooLarge       uint16 = 2 // larger than the daemon's max_message_bytes
	CodeDropped        uint16 = 3 // removed by a reconciliation before it was agreed: retry
	CodeShuttingDown   uint16 = 4
	CodeBadRequest     uint16 = 5
	CodeCompacted      uint16 = 6 // subscribe from a seq no longer in memory
	CodeTooSlow        uint16 = 7 // the subscriber fell behind; resubscribe from the last seq
	CodeChangeInFlight uint16 = 8 // a membership change is in flight: wait until it took effect
	CodeBadChange      uint16 = 9 // the change does not apply (see the text)
	// CodeUnknownFate: the host fell behind every member's retained log
	// and lost its unagreed state (it rejoins by state transfer): the
	// message may or may not be agreed; look for it in the stream before
	// publishing it again.
	CodeUnknownFate uint16 = 10
	// CodeNotStalled: accept-loss refused: no view change of this host
	// waits on what only hosts that lost their state could decide, or the
	// doubt is not the one confirmed (read the status again).
	CodeNotStalled uint16 = 11
	// CodeVersion: the client's API version is one the daemon does not
	// serve (the text names both).
	CodeVersion uint16 = 12
)

// APIVersion is the version of the local API this package speaks
// (docs/api.md, "Versions"). A daemon serves clients of its version and of
// older ones back to MinAPIVersion; a client refuses a daemon older than
// its own version. Additions that old clients can ignore (a new request
// type, a new status field) name a feature in the HelloReply and keep the
// version; a change an old client would misread raises it.
const (
	APIVersion    uint16 = 1
	MinAPIVersion uint16 = 1
)

// Features returns the features a daemon of this API version names in its
// HelloReply: the requests it serves.
func Features() []string {
	return []string{"publish", "publish-batch", "subscribe", "status", "roster", "key", "accept-loss"}
}

// MaxFrame bounds one API frame (a 64 MiB message plus headers).
const MaxFrame = 64<<20 + 64

// APIError is an error reply of the daemon.
type APIError struct {
	Code uint16
	Text string
}

func (e *APIError) Error() string { return fmt.Sprintf("exo daemon: %s (code %d)", e.Text, e.Code) }

// Is makes errors.Is(err, ErrQueueFull) and friends work.
func (e *APIError) Is(target error) bool {
	t, ok := target.(*APIError)
	return ok && t.Code == e.Code
}

// Sentinel errors for errors.Is.
var (
	ErrQueueFull      = &APIError{Code: CodeQueueFull, Text: "queue full"}
	ErrTooLarge       = &APIError{Code: CodeTooLarge, Text: "message too large"}
	ErrDropped        = &APIError{Code: CodeDropped, Text: "dropped by reconciliation"}
	ErrShuttingDown   = &APIError{Code: CodeShuttingDown, Text: "shutting down"}
	ErrCompacted      = &APIError{Code: CodeCompacted, Text: "compacted"}
	ErrTooSlow        = &APIError{Code: CodeTooSlow, Text: "subscriber too slow"}
	ErrChangeInFlight = &APIError{Code: CodeChangeInFlight, Text: "membership change in flight"}
	ErrBadChange      = &APIError{Code: CodeBadChange, Text: "invalid membership change"}
	ErrUnknownFate    = &APIError{Code: CodeUnknownFate, Text: "fate unknown"}
	ErrNotStalled     = &APIError{Code: CodeNotStalled, Text: "not stalled on lost state"}
	ErrVersion        = &APIError{Code: CodeVersion, Text: "API version not served"}
)

// WriteFrame writes one API frame.
func WriteFrame(w io.Writer, typ byte, parts ...[]byte) error {
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	if n > MaxFrame {
		return fmt.Errorf("api frame of %d bytes: %w", n, ErrTooLarge)
	}
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(n))
	hdr[4] = typ
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// ErrFrame reports a malformed API frame.
var ErrFrame = errors.New("malformed api frame")

// ReadFrame reads one API frame; body is valid until the next call with the
// same buf.
func ReadFrame(r *bufio.Reader, buf []byte) (typ byte, body []byte, _ []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, buf, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 1 || n > MaxFrame {
		return 0, nil, buf, fmt.Errorf("%w: length %d", ErrFrame, n)
	}
	if cap(buf) < int(n-1) {
		buf = make([]byte, n-1)
	}
	body = buf[:n-1]
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF { // the header was there: a truncated frame
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, err
	}
	return hdr[4], body, buf, nil
}

// U64 encodes v big-endian.
func U64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// U16 encodes v big-endian.
func U16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
