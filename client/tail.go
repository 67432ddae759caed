package client

import (
	"context"
	"errors"
	"fmt"
)

// errEnough ends Tail's subscription once it has seen its count.
var errEnough = errors.New("enough messages")

// Tail follows the agreed stream of the daemon at socket from seq from on,
// as Subscribe does, and calls fn for every message until count messages
// went by (0: no end), fn fails, the daemon ends the stream or ctx ends. It
// returns nil after count messages and when ctx was cancelled.
func Tail(ctx context.Context, socket string, from uint64, count int, fn func(Message) error) error {
	n := 0
	err := Subscribe(ctx, socket, from, func(m Message) error {
		if err := fn(m); err != nil {
			return err
		}
		n++
		if count > 0 && n >= count {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) || (errors.Is(err, context.Canceled) && ctx.Err() != nil) {
		return nil
	}
	return err
}

// IsText reports whether b reads as text: valid UTF-8 without control
// characters other than newline and tab.
func IsText(b []byte) bool {
	for _, c := range string(b) {
		if c == 0xFFFD || (c < 0x20 && c != '\n' && c != '\t') {
			return false
		}
	}
	return true
}

// Line is m as exo tail prints it: "seq.index from sender: payload",
// a text payload cut after 200 bytes (with its length), a binary one as
// its length.
func (m Message) Line() string {
	return fmt.Sprintf("%d.%d from %d: %s", m.Seq, m.Index, m.Sender, printable(m.Payload))
}

// printable is a payload in a line of text.
func printable(b []byte) string {
	if IsText(b) {
		if len(b) > 200 {
			return fmt.Sprintf("%s... (%d bytes)", b[:200], len(b))
		}
		return string(b)
	}
	return fmt.Sprintf("<%d bytes of binary>", len(b))
}

// Record is m as exo tail --json prints it: seq, index, sender, and the
// payload as text (payload) when it reads as text, else as base64
// (payload_b64).
func (m Message) Record() map[string]any {
	rec := map[string]any{"seq": m.Seq, "index": m.Index, "sender": m.Sender}
	if IsText(m.Payload) {
		rec["payload"] = string(m.Payload)
	} else {
		rec["payload_b64"] = m.Payload
	}
	return rec
}
