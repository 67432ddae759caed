package client

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Batches (docs/api.md, "Batches"): one PublishBatch frame carries many
// messages, and one PublishedBatch frame answers with the outcome of each,
// in the order of the request.
//
//	PublishBatch   [req u64][count u16] then count times [len u32][payload]
//	PublishedBatch [req u64][count u16] then count results, each
//	               [code u16 = 0][seq u64][index u16]     agreed there
//	               [code u16 > 0][text_len u16][text]     failed: an error code
//
// count is at least 1. A batch refused as a whole (queue full: none of it
// was queued) is answered by one Error frame with the batch's req.

// MaxBatch bounds the messages of one batch (its count is a u16).
const MaxBatch = 65535

// MaxResultText bounds the text of one failed message in a PublishedBatch
// (longer texts are cut): a reply of MaxBatch results stays far below
// MaxFrame.
const MaxResultText = 256

// Sizes of the batch encodings.
const (
	batchHead   = 8 + 2  // req, count
	entryHead   = 4      // len of a message in PublishBatch
	resultOK    = 2 + 10 // code 0, seq, index
	resultError = 2 + 2  // code, text_len (then the text)
)

// PublishBatchLen returns the length field of the PublishBatch frame of
// payloads (type byte and body).
func PublishBatchLen(payloads [][]byte) int {
	n := 1 + batchHead
	for _, p := range payloads {
		n += entryHead + len(p)
	}
	return n
}

// WritePublishBatch writes one PublishBatch frame of payloads (1 to
// MaxBatch messages). Nothing is written when the batch does not fit one
// frame (an error wrapping ErrTooLarge). The payloads are written as they
// are, one Write each after its length: give a buffered writer.
func WritePublishBatch(w io.Writer, req uint64, payloads [][]byte) error {
	if len(payloads) == 0 || len(payloads) > MaxBatch {
		return fmt.Errorf("publish batch of %d messages: a batch has 1 to %d: %w", len(payloads), MaxBatch, ErrTooLarge)
	}
	n := PublishBatchLen(payloads)
	if n > MaxFrame {
		return fmt.Errorf("publish batch of %d messages, %d bytes: above the frame bound %d, send smaller batches: %w",
			len(payloads), n, MaxFrame, ErrTooLarge)
	}
	var hdr [5 + batchHead]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(n))
	hdr[4] = TypePublishBatch
	binary.BigEndian.PutUint64(hdr[5:], req)
	binary.BigEndian.PutUint16(hdr[13:], uint16(len(payloads)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	for _, p := range payloads {
		var l [entryHead]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(p)))
		if _, err := w.Write(l[:]); err != nil {
			return err
		}
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// ParsePublishBatch decodes the body of a PublishBatch frame; the payloads
// alias body. The whole body is checked before anything is allocated, so
// the only allocation, the slice of payloads, holds the messages the body
// really carries (at most one per 4 bytes of it), whatever count says. A
// count of 0, a count above the messages in the body, a length past the
// body's end and bytes after the last message are ErrFrame.
func ParsePublishBatch(body []byte) (req uint64, payloads [][]byte, err error) {
	if len(body) < batchHead {
		return 0, nil, fmt.Errorf("%w: publish batch of %d bytes, shorter than [req u64][count u16]", ErrFrame, len(body))
	}
	req = binary.BigEndian.Uint64(body)
	count := int(binary.BigEndian.Uint16(body[8:]))
	if count == 0 {
		return req, nil, fmt.Errorf("%w: publish batch of 0 messages", ErrFrame)
	}
	rest := body[batchHead:]
	for i := 0; i < count; i++ {
		if len(rest) < entryHead {
			return req, nil, fmt.Errorf("%w: publish batch: message %d of %d: the body ends (%d bytes left)", ErrFrame, i, count, len(rest))
		}
		n := uint64(binary.BigEndian.Uint32(rest))
		if n > uint64(len(rest)-entryHead) {
			return req, nil, fmt.Errorf("%w: publish batch: message %d of %d: length %d, %d bytes left", ErrFrame, i, count, n, len(rest)-entryHead)
		}
		rest = rest[entryHead+int(n):]
	}
	if len(rest) > 0 {
		return req, nil, fmt.Errorf("%w: publish batch: %d bytes after its %d messages", ErrFrame, len(rest), count)
	}
	payloads = make([][]byte, count)
	rest = body[batchHead:]
	for i := range payloads {
		n := int(binary.BigEndian.Uint32(rest))
		payloads[i] = rest[entryHead : entryHead+n : entryHead+n]
		rest = rest[entryHead+n:]
	}
	return req, payloads, nil
}

// resultText is the text of a failed message as a PublishedBatch carries
// it: at most MaxResultText bytes of valid UTF-8.
func resultText(s string) string {
	if len(s) > MaxResultText {
		s = s[:MaxResultText]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "")
	}
	return s
}

// AppendPublishedBatch appends the whole PublishedBatch frame answering
// batch req with acks (one per message, in order; 1 to MaxBatch). An error
// that is no *APIError is sent as CodeShuttingDown with its text.
func AppendPublishedBatch(dst []byte, req uint64, acks []Ack) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, TypePublishedBatch)
	dst = binary.BigEndian.AppendUint64(dst, req)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(acks)))
	for _, a := range acks {
		if a.Err == nil {
			dst = binary.BigEndian.AppendUint16(dst, 0)
			dst = binary.BigEndian.AppendUint64(dst, a.Pos.Seq)
			dst = binary.BigEndian.AppendUint16(dst, a.Pos.Index)
			continue
		}
		code, text := CodeShuttingDown, a.Err.Error()
		if ae, ok := a.Err.(*APIError); ok {
			code, text = ae.Code, ae.Text
		}
		if code == 0 {
			code = CodeShuttingDown // 0 means agreed
		}
		text = resultText(text)
		dst = binary.BigEndian.AppendUint16(dst, code)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(text)))
		dst = append(dst, text...)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ParsePublishedBatch decodes the body of a PublishedBatch frame: one Ack
// per message of the batch, in order (Err an *APIError for a failed one).
// As ParsePublishBatch it checks the whole body before it allocates: the
// acks are the results the body carries (at most one per 4 bytes of it).
func ParsePublishedBatch(body []byte) (req uint64, acks []Ack, err error) {
	if len(body) < batchHead {
		return 0, nil, fmt.Errorf("%w: published batch of %d bytes", ErrFrame, len(body))
	}
	req = binary.BigEndian.Uint64(body)
	count := int(binary.BigEndian.Uint16(body[8:]))
	if count == 0 {
		return req, nil, fmt.Errorf("%w: published batch of 0 results", ErrFrame)
	}
	rest := body[batchHead:]
	for i := 0; i < count; i++ {
		n, ok := resultLen(rest)
		if !ok {
			return req, nil, fmt.Errorf("%w: published batch: result %d of %d cut (%d bytes left)", ErrFrame, i, count, len(rest))
		}
		rest = rest[n:]
	}
	if len(rest) > 0 {
		return req, nil, fmt.Errorf("%w: published batch: %d bytes after its %d results", ErrFrame, len(rest), count)
	}
	acks = make([]Ack, count)
	rest = body[batchHead:]
	for i := range acks {
		n, _ := resultLen(rest)
		if code := binary.BigEndian.Uint16(rest); code == 0 {
			acks[i].Pos = Position{Seq: binary.BigEndian.Uint64(rest[2:]), Index: binary.BigEndian.Uint16(rest[10:])}
		} else {
			acks[i].Err = &APIError{Code: code, Text: string(rest[resultError:n])}
		}
		rest = rest[n:]
	}
	return req, acks, nil
}

// resultLen is the length of the result at the start of b.
func resultLen(b []byte) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	if binary.BigEndian.Uint16(b) == 0 {
		return resultOK, len(b) >= resultOK
	}
	if len(b) < resultError {
		return 0, false
	}
	n := resultError + int(binary.BigEndian.Uint16(b[2:]))
	return n, len(b) >= n
}

// BatchError is the error of a batch some of whose messages failed; the
// Acks returned with it tell which, and why.
type BatchError struct {
	Failed int   // messages of the batch that failed
	Of     int   // messages in the batch
	Index  int   // the first that failed: its index in the batch
	Err    error // its error
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("%d of %d messages of the batch failed; the first, message %d: %v", e.Failed, e.Of, e.Index, e.Err)
}

// Unwrap returns the first failed message's error: errors.Is(err,
// ErrTooLarge) says that at least that one was too large.
func (e *BatchError) Unwrap() error { return e.Err }

// batchError returns the BatchError of acks, or nil if every message was
// agreed.
func batchError(acks []Ack) error {
	var e *BatchError
	for i, a := range acks {
		if a.Err == nil {
			continue
		}
		if e == nil {
			e = &BatchError{Of: len(acks), Index: i, Err: a.Err}
		}
		e.Failed++
	}
	if e == nil {
		return nil
	}
	return e
}
