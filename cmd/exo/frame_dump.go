package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
)

// frameDumpRecord is one payload record of dump --json.
type frameDumpRecord struct {
	Len    int    `json:"len"`                 // the length prefix
	Base64 string `json:"base64"`              // the bytes present (all of them unless truncated)
	Text   string `json:"text,omitempty"`      // the bytes, when they are printable UTF-8
	Cut    bool   `json:"truncated,omitempty"` // fewer than len bytes in the frame
}

// frameDumpFrame is one frame of exo frame dump: every field present in the
// bytes, even for a malformed frame (fields the frame is too short for
// are absent), and the codec's verdict.
type frameDumpFrame struct {
	Index       int               `json:"index"` // 1-based, among the Exo frames of the capture
	Time        string            `json:"time,omitempty"`
	Src         string            `json:"src,omitempty"`
	Dst         string            `json:"dst,omitempty"`
	VLAN        *int              `json:"vlan,omitempty"`
	Length      int               `json:"length"` // bytes after the Ethernet header, padding included
	Valid       bool              `json:"valid"`
	Reason      string            `json:"reason,omitempty"` // exo.ReasonOf of the codec's error
	Error       string            `json:"error,omitempty"`
	ErrorOffset *int              `json:"error_offset,omitempty"`
	Version     *uint8            `json:"version,omitempty"`
	Type        *uint8            `json:"type,omitempty"`
	Group       *uint16           `json:"group,omitempty"`
	Sender      *uint8            `json:"sender,omitempty"`
	HistLen     *uint8            `json:"hist_len,omitempty"`
	PayloadLen  *uint16           `json:"payload_len,omitempty"`
	Epoch       *uint32           `json:"epoch,omitempty"`
	Count       *uint16           `json:"count,omitempty"`
	Flags       *uint16           `json:"flags,omitempty"`
	ReadmitHost *uint8            `json:"readmit_host,omitempty"`
	Seq         *uint64           `json:"seq,omitempty"`
	Tag         string            `json:"tag,omitempty"` // 0x + 16 hex digits
	History     []int             `json:"history"`       // null if the frame is too short for hist_len
	Records     []frameDumpRecord `json:"records"`       // null if the frame is too short for its payload start
	Padding     int               `json:"padding"`       // bytes after 32 + hist_len + payload_len
	CaptureCut  bool              `json:"capture_truncated,omitempty"`
}

func framePtr[T any](v T) *T { return &v }

// frameDecode decodes b (the bytes after the Ethernet header) leniently:
// every field the bytes hold, then the codec's verdict.
func frameDecode(b []byte) frameDumpFrame {
	d := frameDumpFrame{Length: len(b), Valid: true}
	var f exo.Frame
	if err := f.UnmarshalBinary(b); err != nil {
		d.Valid = false
		d.Reason = exo.ReasonOf(err).String()
		d.Error = err.Error()
		var de *exo.DecodeError
		if errors.As(err, &de) {
			d.ErrorOffset = framePtr(de.Offset)
			d.Error = de.Err.Error()
		}
	}
	has := func(off, size int) bool { return len(b) >= off+size }
	be16 := func(off int) uint16 { return binary.BigEndian.Uint16(b[off:]) }
	if has(exo.OffVersion, exo.SizeVersion) {
		d.Version = framePtr(b[exo.OffVersion])
	}
	if has(exo.OffType, exo.SizeType) {
		d.Type = framePtr(b[exo.OffType])
	}
	if has(exo.OffGroup, exo.SizeGroup) {
		d.Group = framePtr(be16(exo.OffGroup))
	}
	if has(exo.OffSender, exo.SizeSender) {
		d.Sender = framePtr(b[exo.OffSender])
	}
	if has(exo.OffHistLen, exo.SizeHistLen) {
		d.HistLen = framePtr(b[exo.OffHistLen])
	}
	if has(exo.OffPayloadLen, exo.SizePayloadLen) {
		d.PayloadLen = framePtr(be16(exo.OffPayloadLen))
	}
	if has(exo.OffEpoch, exo.SizeEpoch) {
		d.Epoch = framePtr(binary.BigEndian.Uint32(b[exo.OffEpoch:]))
	}
	if has(exo.OffCount, exo.SizeCount) {
		d.Count = framePtr(be16(exo.OffCount))
	}
	if has(exo.OffFlags, exo.SizeFlags) {
		fl := be16(exo.OffFlags)
		d.Flags = framePtr(fl)
		if fl&exo.FlagReadmit != 0 {
			d.ReadmitHost = framePtr(uint8(fl & exo.FlagHostMask))
		}
	}
	if has(exo.OffSeq, exo.SizeSeq) {
		d.Seq = framePtr(binary.BigEndian.Uint64(b[exo.OffSeq:]))
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
	d.Records = []frameDumpRecord{}
	off := 0
	for i := 0; i < int(*d.Count) && len(payload)-off >= exo.RecordLenSize; i++ {
		n := int(binary.BigEndian.Uint16(payload[off:]))
		off += exo.RecordLenSize
		rec := payload[off:min(off+n, len(payload))]
		r := frameDumpRecord{Len: n, Base64: base64.StdEncoding.EncodeToString(rec), Cut: len(rec) < n}
		if frameTextOK(rec) {
			r.Text = string(rec)
		}
		d.Records = append(d.Records, r)
		off += len(rec)
	}
	return d
}

// frameTextOK reports whether b is non-empty UTF-8 text without control
// characters other than tab and newline.
func frameTextOK(b []byte) bool {
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

// frameHostName is a host id as the docs write it: E(4), X for none.
func frameHostName(id int) string {
	if id == exo.HistoryNone {
		return "X"
	}
	return lab.HostName(id)
}

// line is the human form of d: one line.
func (d *frameDumpFrame) line() string {
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
		fmt.Fprintf(&b, " sender %s(%d)", frameHostName(int(*d.Sender)), *d.Sender)
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
			names[i] = frameHostName(id)
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
			fmt.Fprintf(&b, " readmit %s(%d)", frameHostName(int(*d.ReadmitHost)), *d.ReadmitHost)
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
				s = strconv.Quote(frameShorten(r.Text, 40))
			case len(raw) == 0:
				s = `""`
			default:
				h := fmt.Sprintf("%x", raw)
				s = "0x" + frameShorten(h, 40)
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

func frameShorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// frameDumpOptions are the flags of exo frame dump.
type frameDumpOptions struct {
	Interface string
	Pcap      string
	Group     int
	Sender    string
	SeqMin    uint64
	SeqMax    uint64
	JSON      bool
	Count     int
	Duration  time.Duration
	Write     string // a pcap file the frames shown are written to
	Out       io.Writer
	Err       io.Writer

	sender int                                                     // parsed --sender, -1 = any
	listen func(string, broadcast.Options) (broadcast.Conn, error) // nil: broadcast.Listen
}

func newFrameDumpCmd() *cobra.Command {
	o := &frameDumpOptions{}
	cmd := &cobra.Command{
		Use:   "dump (--interface IF | --pcap FILE)",
		Short: "Decode Exo frames live on an interface or from a pcap/pcapng file",
		Long: `dump decodes every Exo frame (EtherType 0x88B5) live on an interface (an
AF_PACKET socket: needs root or CAP_NET_RAW; it sees the frames of other
hosts, not its own host's) or from a pcap or pcapng file, one line per frame:
seq, sender, epoch, group, history, flags, records. --json prints one object
per frame with every field (records as base64, and as text when printable).
A malformed frame is shown with its reason code (MALFORMED, BAD_PAYLOAD, ...)
and every field it holds, never skipped. With a filter, a frame too short to
hold the filtered field is still shown. --write also writes the frames
shown to a pcap file (live, a frame's destination is written as broadcast:
the socket does not give it), e.g. to replay them later (exo frame
replay). In token mode (xdp_token) a host's own interface shows no Exo
frame: the XDP program consumes them before any socket; capture at the
switch (a mirror port; on the lab rack, the bridge in its switch
namespace).`,
		Example: `  exo frame dump --pcap run.pcap
  exo frame dump --pcap run.pcapng --json --sender E --seq-min 100 --seq-max 200
  sudo exo lab exec A -- exo frame dump --interface exo0 --count 10
  sudo ip netns exec exo-sw exo frame dump --interface br0 --duration 5s --write rack.pcap`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Out, o.Err = cmd.OutOrStdout(), cmd.ErrOrStderr()
			if !cmd.Flags().Changed("group") {
				o.Group = -1
			}
			if !cmd.Flags().Changed("seq-max") {
				o.SeqMax = ^uint64(0)
			}
			return runFrameDump(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Interface, "interface", "", "decode live on this interface")
	f.StringVar(&o.Pcap, "pcap", "", "decode this pcap or pcapng file")
	f.IntVar(&o.Group, "group", -1, "show only this group")
	f.StringVar(&o.Sender, "sender", "", "show only this sender (id or host name)")
	f.Uint64Var(&o.SeqMin, "seq-min", 0, "show only seq >= this")
	f.Uint64Var(&o.SeqMax, "seq-max", ^uint64(0), "show only seq <= this")
	f.BoolVar(&o.JSON, "json", false, "one JSON object per frame")
	f.IntVar(&o.Count, "count", 0, "stop after this many frames shown (0 = all, or until interrupted)")
	f.DurationVar(&o.Duration, "duration", 0, "live: stop after this long (0 = until interrupted or --count)")
	f.StringVar(&o.Write, "write", "", "also write the frames shown to this pcap file")
	return cmd
}

// validate checks the flags of dump.
func (o *frameDumpOptions) validate() error {
	if (o.Interface == "") == (o.Pcap == "") {
		return frameBadInput("dump: give one of --interface IF or --pcap FILE")
	}
	if o.Group < -1 || o.Group > 0xFFFF {
		return frameBadInput("--group %d: want 0..65535", o.Group)
	}
	o.sender = -1
	if o.Sender != "" {
		id, ok := frameHostID(o.Sender)
		if !ok {
			return frameBadInput("--sender %q: want an id 0..254 or a host name", o.Sender)
		}
		o.sender = int(id)
	}
	if o.SeqMin > o.SeqMax {
		return frameBadInput("--seq-min %d > --seq-max %d: nothing can match", o.SeqMin, o.SeqMax)
	}
	if o.Count < 0 || o.Duration < 0 {
		return frameBadInput("--count and --duration: want >= 0")
	}
	return nil
}

// match applies the filters; a frame too short for a filtered field
// matches (malformed frames are never hidden by a filter).
func (o *frameDumpOptions) match(d *frameDumpFrame) bool {
	if o.Group >= 0 && d.Group != nil && int(*d.Group) != o.Group {
		return false
	}
	if o.sender >= 0 && d.Sender != nil && int(*d.Sender) != o.sender {
		return false
	}
	if d.Seq != nil && (*d.Seq < o.SeqMin || *d.Seq > o.SeqMax) {
		return false
	}
	return true
}

// frameDumpStats is what a dump saw.
type frameDumpStats struct {
	Exo, Shown, Malformed, Other int
}

func runFrameDump(ctx context.Context, o *frameDumpOptions) (rerr error) {
	if err := o.validate(); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	w := bufio.NewWriter(o.Out)
	defer w.Flush()
	enc := json.NewEncoder(w)
	var st frameDumpStats
	var pw *frameCapWriter
	if o.Write != "" {
		var err error
		if pw, err = newFrameCapWriter(o.Write); err != nil {
			return frameFailed(err)
		}
		defer func() {
			if err := pw.Close(); err != nil && rerr == nil {
				rerr = frameFailed(err)
			}
		}()
	}
	// eth is the Ethernet frame of the frame being emitted (for --write).
	var eth []byte
	// emit prints d if it matches; it reports whether to stop.
	emit := func(d *frameDumpFrame) (bool, error) {
		st.Exo++
		d.Index = st.Exo
		if !d.Valid {
			st.Malformed++
		}
		if !o.match(d) {
			return false, nil
		}
		st.Shown++
		if pw != nil {
			if err := pw.Write(time.Now(), eth); err != nil {
				return true, err
			}
		}
		if o.JSON {
			if err := enc.Encode(d); err != nil {
				return true, err
			}
		} else if _, err := fmt.Fprintln(w, d.line()); err != nil {
			return true, err
		}
		return o.Count > 0 && st.Shown >= o.Count, nil
	}
	if o.Pcap != "" {
		pkts, err := frameReadCapture(o.Pcap)
		if err != nil {
			return frameFailed(err)
		}
		for _, p := range pkts {
			payload, dst, src, vlan, ok := frameExoPayload(p.Data)
			if !ok {
				st.Other++
				continue
			}
			d := frameDecode(payload)
			d.Time = p.Time.UTC().Format(time.RFC3339Nano)
			d.Src, d.Dst = src.String(), dst.String()
			if vlan >= 0 {
				d.VLAN = framePtr(vlan)
			}
			d.CaptureCut = p.OrigLen > len(p.Data)
			eth = p.Data
			stop, err := emit(&d)
			if err != nil {
				return frameFailed(err)
			}
			if stop {
				break
			}
		}
		if err := w.Flush(); err != nil {
			return frameFailed(err)
		}
		if !o.JSON {
			fmt.Fprintf(o.Err, "%s: %d Exo frames (%d malformed), %d shown, %d other frames skipped\n", o.Pcap, st.Exo, st.Malformed, st.Shown, st.Other)
		}
		return nil
	}
	conn, err := o.open(o.Interface, broadcast.Options{ReadBuffer: 4 << 20})
	if err != nil {
		return frameFailed(err)
	}
	defer conn.Close()
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	ms := make([]broadcast.Message, broadcast.MaxBatch)
	for i := range ms {
		ms[i].Buf = make([]byte, conn.MTU()+64)
	}
	for ctx.Err() == nil {
		// Wake up now and then to notice the context.
		if err := conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
			return frameFailed(err)
		}
		n, err := conn.ReadFrames(ms)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if err := w.Flush(); err != nil {
					return frameFailed(err)
				}
				continue
			}
			return frameFailed(err)
		}
		now := time.Now().UTC().Format(time.RFC3339Nano)
		for _, m := range ms[:n] {
			d := frameDecode(m.Buf[:m.N])
			d.Time, d.Src, d.CaptureCut = now, m.Src.String(), m.Truncated
			if pw != nil {
				eth = frameEth(frameBroadcastMAC, m.Src, m.Buf[:m.N])
			}
			stop, err := emit(&d)
			if err != nil {
				return frameFailed(err)
			}
			if stop {
				return frameFailed(w.Flush())
			}
		}
		if err := w.Flush(); err != nil {
			return frameFailed(err)
		}
	}
	return nil
}

// open opens the Conn of --interface.
func (o *frameDumpOptions) open(ifname string, opts broadcast.Options) (broadcast.Conn, error) {
	return frameOpenConn(o.listen, ifname, opts)
}

// frameOpenConn opens a Conn with listen, or broadcast.Listen if nil.
func frameOpenConn(listen func(string, broadcast.Options) (broadcast.Conn, error), ifname string, opts broadcast.Options) (broadcast.Conn, error) {
	if listen != nil {
		return listen(ifname, opts)
	}
	c, err := broadcast.Listen(ifname, opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}
