package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/exo-rack/exo/exo"
)

// Captures: pcap and pcapng files of Ethernet frames, read and written
// with gopacket's pcapgo (pure Go, no libpcap).

// frameSnaplen is the snapshot length of the captures craft writes: the
// largest Exo frame (14 + 32 + 128 + 65535) fits.
const frameSnaplen = 65536 + 256

// frameEtherTypeVLAN is an 802.1Q tag: dump looks inside it.
const frameEtherTypeVLAN = 0x8100

// frameCapPacket is one captured Ethernet frame (no FCS).
type frameCapPacket struct {
	Time    time.Time
	Data    []byte // the captured bytes
	OrigLen int    // the length on the wire (> len(Data) if cut by the snaplen)
}

// frameEth returns dst, src, EtherType 0x88B5 and b, padded with zeros to
// the 60-byte Ethernet minimum.
func frameEth(dst, src net.HardwareAddr, b []byte) []byte {
	n := max(exo.EthHeaderLen+len(b), exo.MinEthFrame)
	out := make([]byte, n)
	copy(out[0:6], dst)
	copy(out[6:12], src)
	binary.BigEndian.PutUint16(out[12:14], exo.EtherType)
	copy(out[exo.EthHeaderLen:], b)
	return out
}

// frameWriteCapture returns pkts as a pcap (microsecond timestamps) or pcapng
// file of link type Ethernet.
func frameWriteCapture(pkts []frameCapPacket, ng bool) ([]byte, error) {
	var buf bytes.Buffer
	ci := func(p frameCapPacket) gopacket.CaptureInfo {
		return gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(p.Data), Length: max(len(p.Data), p.OrigLen)}
	}
	if ng {
		w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
		if err != nil {
			return nil, err
		}
		for _, p := range pkts {
			if err := w.WritePacket(ci(p), p.Data); err != nil {
				return nil, err
			}
		}
		if err := w.Flush(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	w := pcapgo.NewWriter(&buf)
	if err := w.WriteFileHeader(frameSnaplen, layers.LinkTypeEthernet); err != nil {
		return nil, err
	}
	for _, p := range pkts {
		if err := w.WritePacket(ci(p), p.Data); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// framePcapngMagic is the block type of a pcapng section header.
var framePcapngMagic = []byte{0x0a, 0x0d, 0x0d, 0x0a}

// frameReadCapture reads every packet of a pcap or pcapng file (gzip-compressed
// pcap too). A file that is not a capture, or is cut or corrupt anywhere,
// is an error naming the file and the packet: nothing is returned, so
// nothing is sent from half a file.
func frameReadCapture(path string) ([]frameCapPacket, error) {
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
	if bytes.Equal(magic, framePcapngMagic) {
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
	var pkts []frameCapPacket
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
		pkts = append(pkts, frameCapPacket{Time: ci.Timestamp, Data: append([]byte(nil), data...), OrigLen: ci.Length})
	}
}

// frameExoPayload returns the Ethernet payload of an Exo frame (EtherType
// 0x88B5, directly or inside one 802.1Q tag), with its MACs; ok is false
// for any other frame.
func frameExoPayload(data []byte) (payload []byte, dst, src net.HardwareAddr, vlan int, ok bool) {
	if len(data) < exo.EthHeaderLen {
		return nil, nil, nil, -1, false
	}
	dst, src = net.HardwareAddr(data[0:6]), net.HardwareAddr(data[6:12])
	et := binary.BigEndian.Uint16(data[12:14])
	vlan = -1
	off := exo.EthHeaderLen
	if et == frameEtherTypeVLAN && len(data) >= exo.EthHeaderLen+4 {
		vlan = int(binary.BigEndian.Uint16(data[14:16]) & 0x0fff)
		et = binary.BigEndian.Uint16(data[16:18])
		off += 4
	}
	if et != exo.EtherType {
		return nil, nil, nil, -1, false
	}
	return data[off:], dst, src, vlan, true
}

// frameBroadcastMAC is the destination of every Exo frame.
var frameBroadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// frameCapWriter writes Ethernet frames to a pcap file as they come.
type frameCapWriter struct {
	f *os.File
	b *bufio.Writer
	w *pcapgo.Writer
}

func newFrameCapWriter(path string) (*frameCapWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--write: %w", err)
	}
	b := bufio.NewWriter(f)
	w := pcapgo.NewWriter(b)
	if err := w.WriteFileHeader(frameSnaplen, layers.LinkTypeEthernet); err != nil {
		f.Close()
		return nil, fmt.Errorf("--write %s: %w", path, err)
	}
	return &frameCapWriter{f: f, b: b, w: w}, nil
}

// Write adds one frame captured at t.
func (c *frameCapWriter) Write(t time.Time, eth []byte) error {
	if err := c.w.WritePacket(gopacket.CaptureInfo{Timestamp: t, CaptureLength: len(eth), Length: len(eth)}, eth); err != nil {
		return fmt.Errorf("--write %s: %w", c.f.Name(), err)
	}
	return nil
}

// Close flushes and closes the file.
func (c *frameCapWriter) Close() error {
	err := c.b.Flush()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--write %s: %w", c.f.Name(), err)
	}
	return nil
}
