// Package exolayer is the gopacket (github.com/gopacket/gopacket) layer
// for Exo frames: importing it registers LayerTypeExo and routes
// EtherType 0x88B5 to it, so that gopacket.NewPacket and
// gopacket.DecodingLayerParser decode Ethernet / Exo / Payload, and pcap
// files (gopacket/pcapgo) of Exo traffic can be written and read.
//
// It is a separate package from broadcast so that the daemon's data path
// does not link gopacket. The layer uses the codec of package exo
// (exo.Frame.UnmarshalBinary, AppendBinary); it does not parse the frame
// itself.
package exolayer

import (
	"encoding/binary"
	"fmt"

	"github.com/exo-rack/exo/exo"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// LayerTypeID is the number LayerTypeExo is registered with: the
// EtherType, far above gopacket's own layer numbers (< 2000).
const LayerTypeID = exo.EtherType

// EthernetTypeExo is EtherType 0x88B5 as a gopacket layers.EthernetType.
const EthernetTypeExo layers.EthernetType = exo.EtherType

// LayerTypeExo is the gopacket layer type of an Exo frame.
var LayerTypeExo = gopacket.RegisterLayerType(LayerTypeID, gopacket.LayerTypeMetadata{
	Name:    "Exo",
	Decoder: gopacket.DecodeFunc(decodeExo),
})

func init() {
	layers.EthernetTypeMetadata[EthernetTypeExo] = layers.EnumMetadata{
		DecodeWith: gopacket.DecodeFunc(decodeExo),
		Name:       "Exo",
		LayerType:  LayerTypeExo,
	}
}

// Exo is an Exo frame (docs/wire.md) as a gopacket layer.
//
// Contents are the fixed header and the history (32 + hist_len bytes);
// Payload is the payload_len bytes of records, decoded next as a
// gopacket.Payload layer (no layer when empty: a token pass). Bytes after
// the payload (the Ethernet minimum-size padding) are neither: they are
// in Padding, so padding never becomes payload.
type Exo struct {
	layers.BaseLayer

	// Frame is the decoded frame; Frame.History and Frame.Payload alias
	// the packet data. For SerializeTo, Frame.Payload is the payload when
	// no layer follows Exo.
	Frame exo.Frame

	// HistLen and PayloadLen are the length fields as on the wire
	// (always len(Frame.History) and len(Frame.Payload) after a decode).
	// SerializeTo sets them with SerializeOptions.FixLengths and writes
	// them as they are without, like gopacket's other layers.
	HistLen    uint8
	PayloadLen uint16

	// Padding is what followed the frame in the Ethernet payload.
	Padding []byte
}

var (
	_ gopacket.DecodingLayer     = (*Exo)(nil)
	_ gopacket.SerializableLayer = (*Exo)(nil)
)

// LayerType returns LayerTypeExo.
func (e *Exo) LayerType() gopacket.LayerType { return LayerTypeExo }

// CanDecode returns LayerTypeExo.
func (e *Exo) CanDecode() gopacket.LayerClass { return LayerTypeExo }

// NextLayerType is gopacket.LayerTypePayload (the records), or
// gopacket.LayerTypeZero for an empty payload.
func (e *Exo) NextLayerType() gopacket.LayerType {
	if len(e.Payload) == 0 {
		return gopacket.LayerTypeZero
	}
	return gopacket.LayerTypePayload
}

// DecodeFromBytes decodes data, the bytes after the Ethernet header, with
// exo.Frame.UnmarshalBinary; its errors are the codec's *exo.DecodeError
// (exo.ReasonOf gives the verdict). A frame shorter than its header or
// history also marks the packet truncated.
func (e *Exo) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := e.Frame.UnmarshalBinary(data); err != nil {
		if exo.ReasonOf(err) == exo.ReasonMalformed {
			df.SetTruncated()
		}
		return err
	}
	hl, pl := len(e.Frame.History), len(e.Frame.Payload)
	end := exo.HeaderLen + hl + pl
	e.Contents = data[: exo.HeaderLen+hl : exo.HeaderLen+hl]
	e.Payload = e.Frame.Payload
	e.Padding = data[end:]
	e.HistLen, e.PayloadLen = uint8(hl), uint16(pl)
	return nil
}

// decodeExo is the gopacket.Decoder of LayerTypeExo.
func decodeExo(data []byte, p gopacket.PacketBuilder) error {
	e := &Exo{}
	if err := e.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(e)
	return p.NextDecoder(e.NextLayerType())
}

// SerializeTo writes the frame in front of b's bytes. The payload is b's
// bytes when layers follow Exo (e.g. a gopacket.Payload of records),
// else Frame.Payload. With opts.FixLengths, HistLen, PayloadLen and
// Frame.Count are set from the history and the payload (which must then
// be whole records); without, they are written as they are, so a
// mismatch makes a deliberately malformed frame. The header and history
// are encoded by exo.Frame.AppendBinary, which checks them (type, flags,
// history length and repeats), and the payload must frame Count records
// (exo.ErrPayload otherwise). Ethernet padding is the Ethernet layer's
// job (gopacket's pads to 60 bytes).
func (e *Exo) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	payload := b.Bytes()
	if len(payload) == 0 && len(e.Frame.Payload) > 0 {
		buf, err := b.AppendBytes(len(e.Frame.Payload))
		if err != nil {
			return err
		}
		copy(buf, e.Frame.Payload)
		payload = buf
	}
	if opts.FixLengths {
		n, ok := countRecords(payload)
		if !ok {
			return fmt.Errorf("exolayer: payload is not a sequence of [len u16][len bytes] records: %w", exo.ErrPayload)
		}
		e.Frame.Count = n
		e.HistLen = uint8(len(e.Frame.History))
		e.PayloadLen = uint16(len(payload))
	}
	if len(payload) > exo.MaxPayload {
		return fmt.Errorf("exolayer: payload of %d bytes: %w", len(payload), exo.ErrPayload)
	}
	if err := exo.ForEachRecord(payload, e.Frame.Count, func([]byte) error { return nil }); err != nil {
		return err
	}
	// Header and history through the codec: a copy of the frame without
	// payload (Count 0), then the payload fields.
	hdr := e.Frame
	hdr.Payload, hdr.Count = nil, 0
	n := hdr.EncodedLen()
	buf, err := b.PrependBytes(n)
	if err != nil {
		return err
	}
	if _, err := hdr.AppendBinary(buf[:0:n]); err != nil {
		return err
	}
	binary.BigEndian.PutUint16(buf[exo.OffCount:], e.Frame.Count)
	binary.BigEndian.PutUint16(buf[exo.OffPayloadLen:], uint16(len(payload)))
	if !opts.FixLengths {
		buf[exo.OffHistLen] = e.HistLen
		binary.BigEndian.PutUint16(buf[exo.OffPayloadLen:], e.PayloadLen)
	}
	return nil
}

// countRecords counts the [len u16][len bytes] records of payload; ok is
// false if they do not fill it exactly or there are more than 65535.
func countRecords(payload []byte) (n uint16, ok bool) {
	for off := 0; off < len(payload); n++ {
		if n == 0xffff || len(payload)-off < exo.RecordLenSize {
			return 0, false
		}
		l := int(binary.BigEndian.Uint16(payload[off:]))
		off += exo.RecordLenSize + l
		if off > len(payload) {
			return 0, false
		}
	}
	return n, true
}
