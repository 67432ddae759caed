package frames

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Snaplen is the snapshot length of the captures this package writes: the
// largest Exo frame (14 + 32 + 128 + 65535) fits.
const Snaplen = 65536 + 256

// Packet is one captured Ethernet frame (no FCS).
type Packet struct {
	Time    time.Time
	Data    []byte // the captured bytes
	OrigLen int    // the length on the wire (> len(Data) if cut by the snaplen)
}

// WritePcap writes pkts to w as a pcap (microsecond timestamps) or, with
// ng, a pcapng file of link type Ethernet.
func WritePcap(w io.Writer, pkts []Packet, ng bool) error {
	ci := func(p Packet) gopacket.CaptureInfo {
		return gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(p.Data), Length: max(len(p.Data), p.OrigLen)}
	}
	if ng {
		nw, err := pcapgo.NewNgWriter(w, layers.LinkTypeEthernet)
		if err != nil {
			return fmt.Errorf("pcapng: %w", err)
		}
		for i, p := range pkts {
			if err := nw.WritePacket(ci(p), p.Data); err != nil {
				return fmt.Errorf("pcapng: packet %d: %w", i+1, err)
			}
		}
		if err := nw.Flush(); err != nil {
			return fmt.Errorf("pcapng: %w", err)
		}
		return nil
	}
	pw := pcapgo.NewWriter(w)
	if err := pw.WriteFileHeader(Snaplen, layers.LinkTypeEthernet); err != nil {
		return fmt.Errorf("pcap: %w", err)
	}
	for i, p := range pkts {
		if err := pw.WritePacket(ci(p), p.Data); err != nil {
			return fmt.Errorf("pcap: packet %d: %w", i+1, err)
		}
	}
	return nil
}

// pcapngMagic is the block type of a pcapng section header.
const pcapngMagic = "\x0a\x0d\x0d\x0a"

// ReadPcap reads every packet of a pcap or pcapng file (gzip-compressed
// pcap too). A file that is not a capture, or is cut or corrupt anywhere,
// is an error naming the file and the packet: nothing is returned, so
// nothing is sent from half a file.
func ReadPcap(path string) ([]Packet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	magic, _ := br.Peek(4)
	type reader interface {
		ReadPacketData() ([]byte, gopacket.CaptureInfo, error)
		LinkType() layers.LinkType
	}
	var r reader
	format := "pcap"
	if string(magic) == pcapngMagic {
		format = "pcapng"
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("%s: corrupt pcapng file: %v", path, err)
		}
		r = ng
	} else {
		if len(magic) < 4 {
			return nil, fmt.Errorf("%s: not a pcap or pcapng file: only %d bytes", path, len(magic))
		}
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: not a pcap or pcapng file (first bytes % x): %v", path, magic, err)
		}
		r = pr
	}
	if lt := r.LinkType(); lt != layers.LinkTypeEthernet {
		return nil, fmt.Errorf("%s: link type %v: want Ethernet (%d)", path, lt, layers.LinkTypeEthernet)
	}
	var pkts []Packet
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return pkts, nil
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%s: corrupt %s file: packet %d is cut short (file truncated?)", path, format, len(pkts)+1)
			}
			return nil, fmt.Errorf("%s: corrupt %s file at packet %d: %v", path, format, len(pkts)+1, err)
		}
		if ci.CaptureLength != len(data) {
			return nil, fmt.Errorf("%s: corrupt %s file at packet %d: capture length %d, %d bytes", path, format, len(pkts)+1, ci.CaptureLength, len(data))
		}
		pkts = append(pkts, Packet{Time: ci.Timestamp, Data: append([]byte(nil), data...), OrigLen: ci.Length})
	}
}

// PcapWriter writes Ethernet frames to a pcap file as they come.
type PcapWriter struct {
	f *os.File
	b *bufio.Writer
	w *pcapgo.Writer
}

// CreatePcap creates (or truncates) the pcap file path and writes its
// header.
func CreatePcap(path string) (*PcapWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	b := bufio.NewWriter(f)
	w := pcapgo.NewWriter(b)
	if err := w.WriteFileHeader(Snaplen, layers.LinkTypeEthernet); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &PcapWriter{f: f, b: b, w: w}, nil
}

// Write adds one Ethernet frame captured at t.
func (c *PcapWriter) Write(t time.Time, eth []byte) error {
	if err := c.w.WritePacket(gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(eth), Length: len(eth)}, eth); err != nil {
		return fmt.Errorf("%s: %w", c.f.Name(), err)
	}
	return nil
}

// Close flushes and closes the file.
func (c *PcapWriter) Close() error {
	err := c.b.Flush()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.f.Name(), err)
	}
	return nil
}

// exoPackets returns the Exo frames of a capture, untagged and whole
// (their Ethernet payloads, padding included, as captured), their
// offsets from the first one, and the number of other frames: what send
// and replay put on the wire again.
func exoPackets(path string) (frames [][]byte, at []time.Duration, skipped int, err error) {
	pkts, err := ReadPcap(path)
	if err != nil {
		return nil, nil, 0, err
	}
	p := newEthernetParser()
	var t0 time.Time
	for i, pkt := range pkts {
		e, ok := p.parse(pkt.Data)
		if !ok || e.VLAN >= 0 {
			skipped++
			continue
		}
		if pkt.OrigLen > len(pkt.Data) {
			return nil, nil, 0, fmt.Errorf("%s: packet %d was cut by the capture's snaplen (%d of %d bytes): cannot send it whole", path, i+1, len(pkt.Data), pkt.OrigLen)
		}
		if len(frames) == 0 {
			t0 = pkt.Time
		}
		frames = append(frames, e.Payload)
		at = append(at, max(pkt.Time.Sub(t0), 0))
	}
	if len(frames) == 0 {
		return nil, nil, 0, fmt.Errorf("%s: no Exo frame (EtherType 0x88B5) in %d packets", path, len(pkts))
	}
	return frames, at, skipped, nil
}
