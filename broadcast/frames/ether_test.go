package frames

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/exo-rack/exo/exo"
)

// refExoPayload is the hand-written Ethernet and 802.1Q parsing that
// ParseEthernet (gopacket's layers) replaced, kept as the reference of
// FuzzParseEthernet: EtherType 0x88B5, directly or inside one 0x8100 tag.
func refExoPayload(data []byte) (payload []byte, dst, src net.HardwareAddr, vlan int, ok bool) {
	if len(data) < exo.EthHeaderLen {
		return nil, nil, nil, -1, false
	}
	dst, src = net.HardwareAddr(data[0:6]), net.HardwareAddr(data[6:12])
	et := binary.BigEndian.Uint16(data[12:14])
	vlan = -1
	off := exo.EthHeaderLen
	if et == 0x8100 && len(data) >= exo.EthHeaderLen+4 {
		vlan = int(binary.BigEndian.Uint16(data[14:16]) & 0x0fff)
		et = binary.BigEndian.Uint16(data[16:18])
		off += 4
	}
	if et != exo.EtherType {
		return nil, nil, nil, -1, false
	}
	return data[off:], dst, src, vlan, true
}

// refEthernet is the hand-written Ethernet header EthernetFrame replaced.
func refEthernet(dst, src net.HardwareAddr, b []byte) []byte {
	out := make([]byte, max(exo.EthHeaderLen+len(b), exo.MinEthFrame))
	copy(out[0:6], dst)
	copy(out[6:12], src)
	binary.BigEndian.PutUint16(out[12:14], exo.EtherType)
	copy(out[exo.EthHeaderLen:], b)
	return out
}

var (
	macA  = net.HardwareAddr{0x02, 0xe0, 0, 0, 0, 0x01}
	bcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// tagged returns an Ethernet header with the EtherTypes (and tag control
// words) given, then b.
func tagged(b []byte, words ...uint16) []byte {
	out := append(append([]byte{}, bcast...), macA...)
	for _, w := range words {
		out = binary.BigEndian.AppendUint16(out, w)
	}
	return append(out, b...)
}

func TestParseEthernet(t *testing.T) {
	frame := mustMarshal(t, exo.Frame{Type: exo.FrameData, Group: 1, Sender: 0, Seq: 7, History: []uint8{exo.HistoryNone}})
	for _, c := range []struct {
		name string
		data []byte
		ok   bool
		vlan int
	}{
		{"untagged", tagged(frame, 0x88b5), true, -1},
		{"untagged, no payload", tagged(nil, 0x88b5), true, -1},
		{"802.1Q vlan 42", tagged(frame, 0x8100, 0xe02a, 0x88b5), true, 42},
		{"802.1Q tag cut", tagged([]byte{0x00}, 0x8100), false, 0},
		{"802.1Q, IPv4 inside", tagged(frame, 0x8100, 42, 0x0800), false, 0},
		{"two 802.1Q tags", tagged(frame, 0x8100, 1, 0x8100, 2, 0x88b5), false, 0},
		{"802.1ad tag", tagged(frame, 0x88a8, 1, 0x88b5), false, 0},
		{"IPv4", tagged(frame, 0x0800), false, 0},
		{"802.3 length", tagged(frame, uint16(len(frame))), false, 0},
		{"short", tagged(nil, 0x88b5)[:13], false, 0},
	} {
		e, ok := ParseEthernet(c.data)
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v", c.name, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if e.VLAN != c.vlan || !bytes.Equal(e.Dst, bcast) || !bytes.Equal(e.Src, macA) || !bytes.Equal(e.Payload, c.data[len(c.data)-len(e.Payload):]) {
			t.Errorf("%s: %+v", c.name, e)
		}
	}
}

// FuzzParseEthernet: ParseEthernet (gopacket) finds the same Exo frames as
// the hand-written parser it replaced.
func FuzzParseEthernet(f *testing.F) {
	frame := []byte{1, 1, 0, 1, 0, 0, 0, 0}
	f.Add(tagged(frame, 0x88b5))
	f.Add(tagged(frame, 0x8100, 0xe02a, 0x88b5))
	f.Add(tagged(frame, 0x8100, 1, 0x8100, 2, 0x88b5))
	f.Add(tagged(frame, 0x88a8, 1, 0x88b5))
	f.Add(tagged(nil, 0x8100, 7))
	f.Add(tagged(frame, 0x0006))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, ok := ParseEthernet(data)
		payload, dst, src, vlan, rok := refExoPayload(data)
		if ok != rok {
			t.Fatalf("% x: ok %v, reference %v", data, ok, rok)
		}
		if ok && (e.VLAN != vlan || !bytes.Equal(e.Payload, payload) || !bytes.Equal(e.Dst, dst) || !bytes.Equal(e.Src, src)) {
			t.Fatalf("% x: %+v, reference vlan %d payload % x", data, e, vlan, payload)
		}
	})
}

// TestEthernetFrame: gopacket's Ethernet layer gives the header and the
// zero padding to 60 bytes, for short and long frames, malformed ones too.
func TestEthernetFrame(t *testing.T) {
	for _, n := range []int{0, 20, 46, 47, 1500} {
		b := bytes.Repeat([]byte{0xAB}, n)
		got, err := EthernetFrame(bcast, macA, b)
		if err != nil {
			t.Fatal(err)
		}
		if want := refEthernet(bcast, macA, b); !bytes.Equal(got, want) {
			t.Errorf("%d bytes:\n% x\nwant\n% x", n, got, want)
		}
	}
	if _, err := EthernetFrame(bcast, macA[:5], nil); err == nil {
		t.Error("a 5-byte MAC: no error")
	}
}
