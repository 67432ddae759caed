package frames

import (
	"fmt"
	"net"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/exo-rack/exo/broadcast/exolayer"
)

// Ethernet is the Ethernet framing of an Exo frame: its MACs, its 802.1Q
// VLAN and the Ethernet payload, which holds the Exo frame and any
// padding.
type Ethernet struct {
	Dst, Src net.HardwareAddr
	VLAN     int // the 802.1Q VLAN id; -1: untagged
	Payload  []byte
}

// ethernetParser finds the Exo frame in Ethernet frames with gopacket's
// Ethernet and 802.1Q layers; one is reused over a capture.
type ethernetParser struct {
	eth     layers.Ethernet
	dot1q   layers.Dot1Q
	parser  *gopacket.DecodingLayerParser
	decoded []gopacket.LayerType
}

func newEthernetParser() *ethernetParser {
	p := &ethernetParser{}
	// The parser stops at the Exo layer (exolayer's EtherType), which it
	// has no decoder for: the Exo bytes are decoded by the caller, strictly
	// or leniently.
	p.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &p.eth, &p.dot1q)
	p.parser.IgnoreUnsupported = true
	return p
}

// parse returns the Ethernet framing of an Exo frame: EtherType 0x88B5
// directly or inside one 802.1Q tag; ok is false for any other frame (too
// short, another EtherType, stacked or 802.1ad tags).
func (p *ethernetParser) parse(data []byte) (e Ethernet, ok bool) {
	// A layer that fails to decode (a short frame or tag) ends the list
	// before it; what was decoded is all that counts.
	_ = p.parser.DecodeLayers(data, &p.decoded)
	switch {
	case len(p.decoded) == 1 && p.decoded[0] == layers.LayerTypeEthernet &&
		p.eth.EthernetType == exolayer.EthernetTypeExo:
		return Ethernet{Dst: p.eth.DstMAC, Src: p.eth.SrcMAC, VLAN: -1, Payload: p.eth.Payload}, true
	case len(p.decoded) == 2 && p.decoded[1] == layers.LayerTypeDot1Q &&
		p.eth.EthernetType == layers.EthernetTypeDot1Q && p.dot1q.Type == exolayer.EthernetTypeExo:
		return Ethernet{Dst: p.eth.DstMAC, Src: p.eth.SrcMAC, VLAN: int(p.dot1q.VLANIdentifier), Payload: p.dot1q.Payload}, true
	}
	return Ethernet{}, false
}

// ParseEthernet returns the Ethernet framing of the Exo frame in data, an
// Ethernet frame: EtherType 0x88B5, directly or inside one 802.1Q tag; ok
// is false for any other frame. The slices alias data.
func ParseEthernet(data []byte) (e Ethernet, ok bool) {
	return newEthernetParser().parse(data)
}

// EthernetFrame returns b (the bytes of an Exo frame, valid or not) behind
// an Ethernet header from src to dst with EtherType 0x88B5, padded with
// zeros to the 60-byte Ethernet minimum (gopacket's Ethernet layer).
func EthernetFrame(dst, src net.HardwareAddr, b []byte) ([]byte, error) {
	buf := gopacket.NewSerializeBuffer()
	eth := &layers.Ethernet{DstMAC: dst, SrcMAC: src, EthernetType: exolayer.EthernetTypeExo}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, eth, gopacket.Payload(b)); err != nil {
		return nil, fmt.Errorf("ethernet frame: %w", err)
	}
	return buf.Bytes(), nil
}
