package exolayer

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// testPacketExo is the frame of docs/wire.md section 3: five hosts, E (4)
// sends seq 3 with history [D, C] and one record "hello"; 55 bytes padded
// to 60.
//
// Ethernet[Exo[Payload]] + 5 bytes of padding
//
// 0000   ff ff ff ff ff ff 02 00 00 00 00 04 88 b5 01 01   eth dst, src, type 0x88B5; version 1, type DATA
// 0010   00 01 04 02 00 07 00 00 00 01 00 01 00 00 00 00   group 1, sender 4, hist_len 2, payload_len 7, epoch 1, count 1, flags 0, seq...
// 0020   00 00 00 00 00 03 01 23 45 67 89 ab cd ef 03 02   ...seq 3, tag 0x0123456789abcdef, history D C
// 0030   00 05 68 65 6c 6c 6f 00 00 00 00 00               record: len 5 "hello"; padding (5 bytes)
var testPacketExo = []byte{
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // eth dst: broadcast
	0x02, 0x00, 0x00, 0x00, 0x00, 0x04, // eth src: E
	0x88, 0xb5, // EtherType 0x88B5
	0x01,       // version 1
	0x01,       // type DATA
	0x00, 0x01, // group 1
	0x04,       // sender 4 (E)
	0x02,       // hist_len 2
	0x00, 0x07, // payload_len 7
	0x00, 0x00, 0x00, 0x01, // epoch 1
	0x00, 0x01, // count 1
	0x00, 0x00, // flags 0
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, // seq 3
	0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, // tag
	0x03, 0x02, // history: D, C
	0x00, 0x05, 'h', 'e', 'l', 'l', 'o', // record 0: "hello"
	0x00, 0x00, 0x00, 0x00, 0x00, // Ethernet padding
}

// testFrame is testPacketExo's frame.
func testFrame() exo.Frame {
	return exo.Frame{
		Type: exo.FrameData, Group: 1, Sender: 4, Epoch: 1, Seq: 3, Count: 1,
		Tag: 0x0123456789abcdef, History: []uint8{3, 2},
		Payload: []byte{0x00, 0x05, 'h', 'e', 'l', 'l', 'o'},
	}
}

var (
	macBroadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	macE         = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x04}
)

func checkLayers(t *testing.T, p gopacket.Packet, want ...gopacket.LayerType) {
	t.Helper()
	var got []gopacket.LayerType
	for _, l := range p.Layers() {
		got = append(got, l.LayerType())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layers %v, want %v", got, want)
	}
}

func TestPacketExo(t *testing.T) {
	p := gopacket.NewPacket(testPacketExo, layers.LayerTypeEthernet, gopacket.Default)
	if p.ErrorLayer() != nil {
		t.Fatal("failed to decode packet:", p.ErrorLayer().Error())
	}
	checkLayers(t, p, layers.LayerTypeEthernet, LayerTypeExo, gopacket.LayerTypePayload)
	got, ok := p.Layer(LayerTypeExo).(*Exo)
	if !ok {
		t.Fatal("no Exo layer")
	}
	want := &Exo{
		BaseLayer: layers.BaseLayer{
			Contents: testPacketExo[14:48],
			Payload:  []byte{0x00, 0x05, 'h', 'e', 'l', 'l', 'o'},
		},
		Frame:      testFrame(),
		HistLen:    2,
		PayloadLen: 7,
		Padding:    []byte{0, 0, 0, 0, 0},
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("Exo layer mismatch,\nwant %#v\ngot  %#v", want, got)
	}
	if pl := p.ApplicationLayer(); pl == nil || !bytes.Equal(pl.Payload(), want.Payload) {
		t.Errorf("application layer %v, want the records only (no padding)", pl)
	}
	if eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); eth.EthernetType != EthernetTypeExo || eth.EthernetType.String() != "Exo" {
		t.Errorf("EtherType %v", eth.EthernetType)
	}
	if LayerTypeExo.String() != "Exo" {
		t.Errorf("layer type name %q", LayerTypeExo)
	}
	t.Log(p.Dump())
}

// TestPacketExoTokenPass: an empty payload gives no Payload layer, even
// with 12 bytes of padding after the frame.
func TestPacketExoTokenPass(t *testing.T) {
	f := testFrame()
	f.Payload, f.Count = nil, 0
	data := serialize(t, &Exo{Frame: f})
	if len(data) != 60 {
		t.Fatalf("%d bytes, want 60", len(data))
	}
	p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
	checkLayers(t, p, layers.LayerTypeEthernet, LayerTypeExo)
	e := p.Layer(LayerTypeExo).(*Exo)
	if len(e.Padding) != 60-14-34 || len(e.Payload) != 0 || p.ApplicationLayer() != nil {
		t.Errorf("padding %d bytes, payload %d bytes", len(e.Padding), len(e.Payload))
	}
}

func TestPacketExoErrors(t *testing.T) {
	for _, c := range []struct {
		name      string
		data      []byte
		reason    exo.Reason
		truncated bool
	}{
		{"header cut", testPacketExo[:30], exo.ReasonMalformed, true},
		{"payload beyond frame", testPacketExo[:14+36], exo.ReasonBadPayload, false},
		{"version 2", append(append([]byte(nil), testPacketExo[:14]...), append([]byte{2}, testPacketExo[15:]...)...), exo.ReasonBadVersion, false},
	} {
		p := gopacket.NewPacket(c.data, layers.LayerTypeEthernet, gopacket.Default)
		el := p.ErrorLayer()
		if el == nil {
			t.Errorf("%s: decoded without error", c.name)
			continue
		}
		if r := exo.ReasonOf(el.Error()); r != c.reason {
			t.Errorf("%s: reason %v (%v), want %v", c.name, r, el.Error(), c.reason)
		}
		if p.Metadata().Truncated != c.truncated {
			t.Errorf("%s: truncated %v", c.name, p.Metadata().Truncated)
		}
	}
}

func TestDecodingLayerParserExo(t *testing.T) {
	var (
		eth     layers.Ethernet
		e       Exo
		payload gopacket.Payload
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &e, &payload)
	decoded := make([]gopacket.LayerType, 0, 4)
	if err := parser.DecodeLayers(testPacketExo, &decoded); err != nil {
		t.Fatal(err)
	}
	if want := []gopacket.LayerType{layers.LayerTypeEthernet, LayerTypeExo, gopacket.LayerTypePayload}; !reflect.DeepEqual(decoded, want) {
		t.Errorf("decoded %v, want %v", decoded, want)
	}
	if f := testFrame(); !e.Frame.Equal(&f) || string(payload) != "\x00\x05hello" {
		t.Errorf("frame %+v, payload %q", e.Frame, payload)
	}
	// Ethernet's payload holds the padding; Exo's does not.
	if len(eth.Payload) != 46 || len(e.Payload) != 7 {
		t.Errorf("Ethernet payload %d bytes, Exo payload %d", len(eth.Payload), len(e.Payload))
	}
	// Without a Payload decoder, the parser stops at the records.
	parser2 := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &e)
	err := parser2.DecodeLayers(testPacketExo, &decoded)
	var unsupported gopacket.UnsupportedLayerType
	if !errors.As(err, &unsupported) || gopacket.LayerType(unsupported) != gopacket.LayerTypePayload {
		t.Errorf("no Payload decoder: %v", err)
	}
	if allocs := testing.AllocsPerRun(100, func() { parser.DecodeLayers(testPacketExo, &decoded) }); allocs != 0 {
		t.Errorf("DecodeLayers: %v allocations, want 0", allocs)
	}
}

func serialize(t *testing.T, e *Exo, more ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	eth := &layers.Ethernet{SrcMAC: macE, DstMAC: macBroadcast, EthernetType: EthernetTypeExo}
	ls := append([]gopacket.SerializableLayer{eth, e}, more...)
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSerializeExo(t *testing.T) {
	// Payload from Frame.Payload.
	if got := serialize(t, &Exo{Frame: testFrame()}); !bytes.Equal(got, testPacketExo) {
		t.Errorf("serialized\n% x\nwant\n% x", got, testPacketExo)
	}
	// Payload from a following gopacket.Payload layer; FixLengths sets
	// Count.
	f := testFrame()
	f.Payload, f.Count = nil, 0
	e := &Exo{Frame: f}
	if got := serialize(t, e, gopacket.Payload("\x00\x05hello")); !bytes.Equal(got, testPacketExo) {
		t.Errorf("serialized with a Payload layer\n% x\nwant\n% x", got, testPacketExo)
	}
	if e.Frame.Count != 1 || e.HistLen != 2 || e.PayloadLen != 7 {
		t.Errorf("FixLengths: count %d, hist_len %d, payload_len %d", e.Frame.Count, e.HistLen, e.PayloadLen)
	}

	// Without FixLengths the length fields are written as they are.
	buf := gopacket.NewSerializeBuffer()
	bad := &Exo{Frame: testFrame(), HistLen: 2, PayloadLen: 200}
	if err := bad.SerializeTo(buf, gopacket.SerializeOptions{}); err != nil {
		t.Fatal(err)
	}
	var g exo.Frame
	if err := g.UnmarshalBinary(buf.Bytes()); exo.ReasonOf(err) != exo.ReasonBadPayload {
		t.Errorf("payload_len 200 written without FixLengths: decode gives %v, want BAD_PAYLOAD", err)
	}

	// The codec's checks apply.
	for name, e := range map[string]*Exo{
		"repeated history id": {Frame: exo.Frame{Type: exo.FrameData, History: []uint8{1, 1}}},
		"bad type":            {Frame: exo.Frame{Type: 9}},
		"not records":         {Frame: exo.Frame{Type: exo.FrameData, Payload: []byte{0, 9, 1}}},
	} {
		err := gopacket.SerializeLayers(gopacket.NewSerializeBuffer(), gopacket.SerializeOptions{FixLengths: true}, e)
		if err == nil {
			t.Errorf("%s: serialized", name)
		}
	}
}

func TestIsomorphicPacketExo(t *testing.T) {
	f := testFrame()
	f.History = []uint8{7, exo.HistoryNone, 3}
	f.Flags = exo.FlagReadmit | 5
	f.Payload, f.Count = nil, 0
	for _, r := range []string{"a", "", "a longer record, long enough to need no padding at all"} {
		f.Payload, _ = exo.AppendRecord(f.Payload, []byte(r))
		f.Count++
	}
	data := serialize(t, &Exo{Frame: f})
	p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
	got, ok := p.Layer(LayerTypeExo).(*Exo)
	if !ok || !got.Frame.Equal(&f) || len(got.Padding) != 0 {
		t.Errorf("round trip: %+v", got)
	}
}

// TestPcap writes Exo frames to a pcap file with pcapgo (no cgo) and
// reads them back.
func TestPcap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exo.pcap")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(out)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 0)
	for seq := uint64(1); seq <= 5; seq++ {
		f := testFrame()
		f.Seq = seq
		data := serialize(t, &Exo{Frame: f})
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(seq) * time.Millisecond), CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}

	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r, err := pcapgo.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("link type %v", r.LinkType())
	}
	src := gopacket.NewPacketSource(r, r.LinkType())
	var seqs []uint64
	for p := range src.Packets() {
		e, ok := p.Layer(LayerTypeExo).(*Exo)
		if !ok {
			t.Fatalf("packet without Exo layer: %v", p)
		}
		seqs = append(seqs, e.Frame.Seq)
	}
	if !reflect.DeepEqual(seqs, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("read seqs %v", seqs)
	}
}

func FuzzExoLayer(f *testing.F) {
	f.Add(testPacketExo[14:])
	f.Fuzz(func(t *testing.T, data []byte) {
		var e Exo
		if e.DecodeFromBytes(data, gopacket.NilDecodeFeedback) != nil {
			return
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, &e); err != nil {
			t.Fatalf("decoded frame does not serialize: %v", err)
		}
		n := len(data) - len(e.Padding)
		if !bytes.Equal(buf.Bytes(), data[:n]) {
			t.Fatalf("round trip\n% x\nwant\n% x", buf.Bytes(), data[:n])
		}
	})
}

func BenchmarkDecodePacketExo(b *testing.B) {
	for b.Loop() {
		gopacket.NewPacket(testPacketExo, layers.LayerTypeEthernet, gopacket.NoCopy)
	}
}

func BenchmarkDecodingLayerParserExo(b *testing.B) {
	var (
		eth     layers.Ethernet
		e       Exo
		payload gopacket.Payload
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &e, &payload)
	decoded := make([]gopacket.LayerType, 0, 4)
	for b.Loop() {
		if err := parser.DecodeLayers(testPacketExo, &decoded); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSerializeExo(b *testing.B) {
	buf := gopacket.NewSerializeBuffer()
	eth := &layers.Ethernet{SrcMAC: macE, DstMAC: macBroadcast, EthernetType: EthernetTypeExo}
	e := &Exo{Frame: testFrame()}
	opts := gopacket.SerializeOptions{FixLengths: true}
	for b.Loop() {
		if err := gopacket.SerializeLayers(buf, opts, eth, e); err != nil {
			b.Fatal(err)
		}
	}
}
