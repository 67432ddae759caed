package frames

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gopacket/gopacket"

	"github.com/exo-rack/exo/broadcast/exolayer"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
)

// Decode decodes b, the bytes after the Ethernet header (padding
// included), strictly: exolayer's layer, which is the codec
// (exo.Frame.UnmarshalBinary). The error is the codec's *exo.DecodeError
// (exo.ReasonOf gives the verdict). The frame's History and Payload alias
// b.
func Decode(b []byte) (exo.Frame, error) {
	var l exolayer.Exo
	if err := l.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil {
		return exo.Frame{}, err
	}
	return l.Frame, nil
}

// Record is one payload record of a Decoded frame.
type Record struct {
	Len    int    `json:"len"`                 // the length prefix
	Base64 string `json:"base64"`              // the bytes present (all of them unless truncated)
	Text   string `json:"text,omitempty"`      // the bytes, when they are printable UTF-8
	Cut    bool   `json:"truncated,omitempty"` // fewer than len bytes in the frame
}

// Decoded is a frame decoded leniently: every field present in the bytes,
// even for a malformed frame (fields the frame is too short for are
// absent), and the codec's verdict. Its JSON is exo frame dump --json's,
// which ReadSpecs reads back.
type Decoded struct {
	Index       int      `json:"index"` // 1-based, among the Exo frames of the capture
	Time        string   `json:"time,omitempty"`
	Src         string   `json:"src,omitempty"`
	Dst         string   `json:"dst,omitempty"`
	VLAN        *int     `json:"vlan,omitempty"`
	Length      int      `json:"length"` // bytes after the Ethernet header, padding included
	Valid       bool     `json:"valid"`
	Reason      string   `json:"reason,omitempty"` // exo.ReasonOf of the codec's error
	Error       string   `json:"error,omitempty"`
	ErrorOffset *int     `json:"error_offset,omitempty"`
	Version     *uint8   `json:"version,omitempty"`
	Type        *uint8   `json:"type,omitempty"`
	Group       *uint16  `json:"group,omitempty"`
	Sender      *uint8   `json:"sender,omitempty"`
	HistLen     *uint8   `json:"hist_len,omitempty"`
	PayloadLen  *uint16  `json:"payload_len,omitempty"`
	Epoch       *uint32  `json:"epoch,omitempty"`
	Count       *uint16  `json:"count,omitempty"`
	Flags       *uint16  `json:"flags,omitempty"`
	ReadmitHost *uint8   `json:"readmit_host,omitempty"`
	Seq         *uint64  `json:"seq,omitempty"`
	Tag         string   `json:"tag,omitempty"` // 0x + 16 hex digits
	History     []int    `json:"history"`       // null if the frame is too short for hist_len
	Records     []Record `json:"records"`       // null if the frame is too short for its payload start
	Padding     int      `json:"padding"`       // bytes after 32 + hist_len + payload_len
	CaptureCut  bool     `json:"capture_truncated,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// DecodeLenient decodes b, the bytes after the Ethernet header, leniently:
// the codec's verdict (Decode's), then every field the bytes hold, read at
// the offsets of the wire layout whatever the verdict, so that a
// malformed frame shows what it carries. The Ethernet fields (Time, Src,
// ...) and Index are the caller's.
func DecodeLenient(b []byte) Decoded {
	d := Decoded{Length: len(b), Valid: true}
	if _, err := Decode(b); err != nil {
		d.Valid = false
		d.Reason = exo.ReasonOf(err).String()
		d.Error = err.Error()
		var de *exo.DecodeError
		if errors.As(err, &de) {
			d.ErrorOffset = ptr(de.Offset)
			d.Error = de.Err.Error()
		}
	}
	has := func(off, size int) bool { return len(b) >= off+size }
	be16 := func(off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }
	if has(exo.OffVersion, exo.SizeVersion) {
		d.Version = ptr(b[exo.OffVersion])
	}
	if has(exo.OffType, exo.SizeType) {
		d.Type = ptr(b[exo.OffType])
	}
	if has(exo.OffGroup, exo.SizeGroup) {
		d.Group = ptr(be16(exo.OffGroup))
	}
	if has(exo.OffSender, exo.SizeSender) {
		d.Sender = ptr(b[exo.OffSender])
	}
	if has(exo.OffHistLen, exo.SizeHistLen) {
		d.HistLen = ptr(b[exo.OffHistLen])
	}
	if has(exo.OffPayloadLen, exo.SizePayloadLen) {
		d.PayloadLen = ptr(be16(exo.OffPayloadLen))
	}
	if has(exo.OffEpoch, exo.SizeEpoch) {
		d.Epoch = ptr(binary.BigEndian.Uint32(b[exo.OffEpoch:]))
	}
	if has(exo.OffCount, exo.SizeCount) {
		d.Count = ptr(be16(exo.OffCount))
	}
	if has(exo.OffFlags, exo.SizeFlags) {
		fl := be16(exo.OffFlags)
		d.Flags = ptr(fl)
		if fl&exo.FlagReadmit != 0 {
			d.ReadmitHost = ptr(uint8(fl & exo.FlagHostMask))
		}
	}
	if has(exo.OffSeq, exo.SizeSeq) {
		d.Seq = ptr(binary.BigEndian.Uint64(b[exo.OffSeq:]))
	}
	if has(exo.OffTag, exo.SizeTag) {
		d.Tag = fmt.Sprintf("0x%016x", binary.BigEndian.Uint64(b[exo.OffTag:]))
	}
	if d.HistLen == nil || len(b) < exo.HeaderLen {
		return d
	}
	hl := int(*d.HistLen)
	d.History = []int{}
	for i := 0; i < hl && exo.OffHistory+i < len(b); i++ {
		d.History = append(d.History, int(b[exo.OffHistory+i]))
	}
	start := exo.OffHistory + hl
	if len(b) < start {
		return d
	}
	pl := int(*d.PayloadLen)
	end := min(start+pl, len(b))
	d.Padding = max(len(b)-(start+pl), 0)
	payload := b[start:end]
	d.Records = []Record{}
	off := 0
	for i := 0; i < int(*d.Count) && len(payload)-off >= exo.RecordLenSize; i++ {
		n := int(binary.BigEndian.Uint16(payload[off:]))
		off += exo.RecordLenSize
		rec := payload[off:min(off+n, len(payload))]
		r := Record{Len: n, Base64: base64.StdEncoding.EncodeToString(rec), Cut: len(rec) < n}
		if textOK(rec) {
			r.Text = string(rec)
		}
		d.Records = append(d.Records, r)
		off += len(rec)
	}
	return d
}

// textOK reports whether b is non-empty UTF-8 text without control
// characters other than tab and newline.
func textOK(b []byte) bool {
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f {
			return false
		}
	}
	return true
}

// hostName is a host id as the docs write it: E(4), X for none.
func hostName(id int) string {
	if id == exo.HistoryNone {
		return "X"
	}
	return lab.HostName(id)
}

// Line is the human form of d, one line: exo frame dump's output.
func (d *Decoded) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d", d.Index)
	if d.Time != "" {
		fmt.Fprintf(&b, " %s", d.Time)
	}
	if d.Src != "" {
		fmt.Fprintf(&b, " %s", d.Src)
		if d.Dst != "" {
			fmt.Fprintf(&b, " > %s", d.Dst)
		}
	}
	if d.VLAN != nil {
		fmt.Fprintf(&b, " vlan %d", *d.VLAN)
	}
	if !d.Valid {
		fmt.Fprintf(&b, " %s (%s", d.Reason, d.Error)
		if d.ErrorOffset != nil {
			fmt.Fprintf(&b, " at offset %d", *d.ErrorOffset)
		}
		b.WriteString("):")
	}
	if d.Seq != nil {
		fmt.Fprintf(&b, " seq %d", *d.Seq)
	}
	if d.Sender != nil {
		fmt.Fprintf(&b, " sender %s(%d)", hostName(int(*d.Sender)), *d.Sender)
	}
	if d.Epoch != nil {
		fmt.Fprintf(&b, " epoch %d", *d.Epoch)
	}
	if d.Group != nil {
		fmt.Fprintf(&b, " group %d", *d.Group)
	}
	if d.History != nil {
		names := make([]string, len(d.History))
		for i, id := range d.History {
			names[i] = hostName(id)
		}
		fmt.Fprintf(&b, " history [%s]", strings.Join(names, " "))
		if d.HistLen != nil && int(*d.HistLen) != len(d.History) {
			fmt.Fprintf(&b, " of %d", *d.HistLen)
		}
	} else if d.HistLen != nil {
		fmt.Fprintf(&b, " hist_len %d", *d.HistLen)
	}
	if d.Flags != nil && *d.Flags != 0 {
		if d.ReadmitHost != nil && exo.ValidFlags(*d.Flags) {
			fmt.Fprintf(&b, " readmit %s(%d)", hostName(int(*d.ReadmitHost)), *d.ReadmitHost)
		} else {
			fmt.Fprintf(&b, " flags %#04x", *d.Flags)
		}
	}
	if !d.Valid {
		if d.Version != nil && *d.Version != exo.Version {
			fmt.Fprintf(&b, " version %d", *d.Version)
		}
		if d.Type != nil && *d.Type != exo.TypeData {
			fmt.Fprintf(&b, " type %d", *d.Type)
		}
		if d.PayloadLen != nil {
			fmt.Fprintf(&b, " payload_len %d", *d.PayloadLen)
		}
	}
	if d.Count != nil {
		fmt.Fprintf(&b, " records %d", *d.Count)
	}
	if len(d.Records) > 0 {
		const show = 4
		parts := []string{}
		for i, r := range d.Records {
			if i == show {
				parts = append(parts, fmt.Sprintf("... %d more", len(d.Records)-show))
				break
			}
			raw, _ := base64.StdEncoding.DecodeString(r.Base64)
			var s string
			switch {
			case r.Text != "":
				s = strconv.Quote(shorten(r.Text, 40))
			case len(raw) == 0:
				s = `""`
			default:
				h := fmt.Sprintf("%x", raw)
				s = "0x" + shorten(h, 40)
			}
			if r.Cut {
				s += fmt.Sprintf("(cut: %d of %d bytes)", len(raw), r.Len)
			}
			parts = append(parts, s)
		}
		fmt.Fprintf(&b, " [%s]", strings.Join(parts, " "))
	}
	if d.Tag != "" && d.Tag != "0x0000000000000000" {
		fmt.Fprintf(&b, " tag %s", d.Tag)
	}
	fmt.Fprintf(&b, " len %d", d.Length-d.Padding)
	if d.Padding > 0 {
		fmt.Fprintf(&b, " (+%d padding)", d.Padding)
	}
	if d.CaptureCut {
		b.WriteString(" [cut by the capture's snaplen]")
	}
	return b.String()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
