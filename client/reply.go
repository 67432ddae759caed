package client

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// reply is a daemon->client frame decoded by parseReply: the fields of its
// type (docs/api.md), the others zero.
type reply struct {
	id    uint64    // Published, PublishedBatch, Error, RosterQueued, KeyDone, LossAccepted
	pos   Position  // Published
	msg   Message   // Message: its Payload aliases the body
	err   *APIError // Error
	acks  []Ack     // PublishedBatch
	hello Hello     // HelloReply
	json  []byte    // StatusReply: aliases the body
}

// parseReply decodes the body of a daemon->client frame of type typ: the
// one decoding of the replies, whichever connection reads them (readLoop,
// Subscribe, hello pick the types they expect). A body too short for its
// type, a malformed PublishedBatch (ParsePublishedBatch) or a type that no
// reply has is ErrFrame. Bytes after a fixed-size body are ignored.
// TestCDecoderReplay replays the fuzz corpus through it and through the C
// client's decoder (client/c).
func parseReply(typ byte, body []byte) (r reply, err error) {
	short := func(name string, n int) error {
		if len(body) < n {
			return fmt.Errorf("%w: short %s", ErrFrame, name)
		}
		return nil
	}
	switch typ {
	case TypePublished:
		if err := short("Published", 18); err != nil {
			return r, err
		}
		r.id = binary.BigEndian.Uint64(body)
		r.pos = Position{Seq: binary.BigEndian.Uint64(body[8:]), Index: binary.BigEndian.Uint16(body[16:])}
	case TypeMessage:
		if err := short("Message", 11); err != nil {
			return r, err
		}
		r.msg = Message{Position: Position{Seq: binary.BigEndian.Uint64(body), Index: binary.BigEndian.Uint16(body[8:])},
			Sender: body[10], Payload: body[11:]}
	case TypeError:
		if err := short("Error", 10); err != nil {
			return r, err
		}
		r.id = binary.BigEndian.Uint64(body)
		r.err = &APIError{Code: binary.BigEndian.Uint16(body[8:]), Text: string(body[10:])}
	case TypePublishedBatch:
		r.id, r.acks, err = ParsePublishedBatch(body)
	case TypeRosterQueued, TypeKeyDone, TypeLossAccepted:
		if err := short(fmt.Sprintf("reply %#x", typ), 8); err != nil {
			return r, err
		}
		r.id = binary.BigEndian.Uint64(body)
	case TypeStatusReply:
		r.json = body
	case TypeHelloReply:
		if err := short("HelloReply", 2); err != nil {
			return r, err
		}
		r.hello.Version = binary.BigEndian.Uint16(body)
		if f := string(body[2:]); f != "" {
			r.hello.Features = strings.Split(f, ",")
		}
	default:
		return r, fmt.Errorf("%w: unexpected type %#x", ErrFrame, typ)
	}
	return r, err
}
