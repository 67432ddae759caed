package frames

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/exo-rack/exo/broadcast"
)

// Listener opens a broadcast.Conn on an interface; nil stands for
// broadcast.Listen (AF_PACKET), tests give an in-memory network.
type Listener func(ifname string, opts broadcast.Options) (broadcast.Conn, error)

// open opens ifname with l, or broadcast.Listen if l is nil.
func (l Listener) open(ifname string, opts broadcast.Options) (broadcast.Conn, error) {
	if l != nil {
		return l(ifname, opts)
	}
	c, err := broadcast.Listen(ifname, opts)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return c, nil
}

// DumpOptions say what to decode (one of Interface and Pcap), which frames
// to show, and how.
type DumpOptions struct {
	Interface string // decode live on this interface
	Pcap      string // decode this pcap or pcapng file
	// Filters: a frame too short to hold a filtered field is shown anyway
	// (malformed frames are never hidden by a filter).
	Group  int    // -1: any
	Sender string // id or host name; "": any
	SeqMin uint64 // seq >= SeqMin
	SeqMax uint64 // seq <= SeqMax; ^uint64(0) for no bound
	// JSON prints one Decoded object per line, else Decoded.Line.
	JSON     bool
	Count    int           // stop after this many frames shown; 0: no limit
	Duration time.Duration // live: stop after this long; 0: until ctx ends
	// Write is a pcap file the frames shown are also written to (live, as
	// broadcast frames: the socket does not give the destination).
	Write  string
	Out    io.Writer
	Listen Listener
}

// DumpStats is what a dump saw.
type DumpStats struct {
	Exo, Shown, Malformed int // Exo frames, shown, malformed among them
	Other                 int // other frames of the capture, skipped
}

// filter is the checked filters of DumpOptions.
type filter struct {
	group          int
	sender         int // -1: any
	seqMin, seqMax uint64
}

// check checks the options of a dump and returns its filter.
func (o *DumpOptions) check() (filter, error) {
	if (o.Interface == "") == (o.Pcap == "") {
		return filter{}, inputErr("dump: give one of --interface IF or --pcap FILE")
	}
	if o.Group < -1 || o.Group > 0xFFFF {
		return filter{}, inputErr("--group %d: want 0..65535", o.Group)
	}
	fl := filter{group: o.Group, sender: -1, seqMin: o.SeqMin, seqMax: o.SeqMax}
	if o.Sender != "" {
		id, ok := HostID(o.Sender)
		if !ok {
			return filter{}, inputErr("--sender %q: want an id 0..254 or a host name", o.Sender)
		}
		fl.sender = int(id)
	}
	if o.SeqMin > o.SeqMax {
		return filter{}, inputErr("--seq-min %d > --seq-max %d: nothing can match", o.SeqMin, o.SeqMax)
	}
	if o.Count < 0 || o.Duration < 0 {
		return filter{}, inputErr("--count and --duration: want >= 0")
	}
	return fl, nil
}

// match applies the filters; a frame too short for a filtered field
// matches.
func (fl filter) match(d *Decoded) bool {
	if fl.group >= 0 && d.Group != nil && int(*d.Group) != fl.group {
		return false
	}
	if fl.sender >= 0 && d.Sender != nil && int(*d.Sender) != fl.sender {
		return false
	}
	if d.Seq != nil && (*d.Seq < fl.seqMin || *d.Seq > fl.seqMax) {
		return false
	}
	return true
}

// Dump decodes every Exo frame of a capture or, live, of an interface
// leniently (DecodeLenient) and writes those that pass the filters to
// o.Out, one per line, as they come. A corrupt capture is an error before
// anything is written; live, it runs until ctx ends, o.Duration or
// o.Count.
func Dump(ctx context.Context, o DumpOptions) (st DumpStats, rerr error) {
	fl, err := o.check()
	if err != nil {
		return st, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	w := bufio.NewWriter(o.Out)
	defer w.Flush()
	enc := json.NewEncoder(w)
	var pw *PcapWriter
	if o.Write != "" {
		if pw, err = CreatePcap(o.Write); err != nil {
			return st, fmt.Errorf("--write: %w", err)
		}
		defer func() {
			if err := pw.Close(); err != nil && rerr == nil {
				rerr = fmt.Errorf("--write %w", err)
			}
		}()
	}
	// emit prints d if it matches, eth being its Ethernet frame (for
	// Write); it reports whether to stop.
	emit := func(d *Decoded, eth func() ([]byte, error)) (bool, error) {
		st.Exo++
		d.Index = st.Exo
		if !d.Valid {
			st.Malformed++
		}
		if !fl.match(d) {
			return false, nil
		}
		st.Shown++
		if pw != nil {
			b, err := eth()
			if err != nil {
				return true, err
			}
			if err := pw.Write(time.Now(), b); err != nil {
				return true, fmt.Errorf("--write %w", err)
			}
		}
		if o.JSON {
			if err := enc.Encode(d); err != nil {
				return true, err
			}
		} else if _, err := fmt.Fprintln(w, d.Line()); err != nil {
			return true, err
		}
		return o.Count > 0 && st.Shown >= o.Count, nil
	}
	if o.Pcap != "" {
		pkts, err := ReadPcap(o.Pcap)
		if err != nil {
			return st, err
		}
		p := newEthernetParser()
		for _, pkt := range pkts {
			e, ok := p.parse(pkt.Data)
			if !ok {
				st.Other++
				continue
			}
			d := DecodeLenient(e.Payload)
			d.Time = pkt.Time.UTC().Format(time.RFC3339Nano)
			d.Src, d.Dst = e.Src.String(), e.Dst.String()
			if e.VLAN >= 0 {
				d.VLAN = ptr(e.VLAN)
			}
			d.CaptureCut = pkt.OrigLen > len(pkt.Data)
			stop, err := emit(&d, func() ([]byte, error) { return pkt.Data, nil })
			if err != nil {
				return st, err
			}
			if stop {
				break
			}
		}
		return st, w.Flush()
	}
	conn, err := o.Listen.open(o.Interface, broadcast.Options{ReadBuffer: 4 << 20})
	if err != nil {
		return st, err
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
			return st, err
		}
		n, err := conn.ReadFrames(ms)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if err := w.Flush(); err != nil {
					return st, err
				}
				continue
			}
			return st, err
		}
		now := time.Now().UTC().Format(time.RFC3339Nano)
		for _, m := range ms[:n] {
			d := DecodeLenient(m.Buf[:m.N])
			d.Time, d.Src, d.CaptureCut = now, m.Src.String(), m.Truncated
			stop, err := emit(&d, func() ([]byte, error) { return EthernetFrame(broadcast.BroadcastMAC, m.Src, m.Buf[:m.N]) })
			if err != nil {
				return st, err
			}
			if stop {
				return st, w.Flush()
			}
		}
		if err := w.Flush(); err != nil {
			return st, err
		}
	}
	return st, nil
}
