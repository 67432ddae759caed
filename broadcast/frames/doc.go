// Package frames is the toolkit of exo frame (docs/frames.md): it builds
// Exo frames by hand from a description, decodes them strictly or
// leniently, reads and writes captures, and sends and replays frames on
// an interface. It sits one layer below the daemon: nothing here takes
// part in the protocol.
//
// # Describing frames: Spec, from flags or JSON
//
// A Spec is one frame description before it is checked: group, sender,
// epoch, a sequence number or an inclusive range of them (one frame
// each), history ids (host names such as D, numbers, X for none),
// records, flags (0, readmit:HOST or a number) and tag. Its numbers are
// wider than the wire's so that an out-of-range value gets a message
// instead of wrapping. A Spec comes from the command line (Fields.Spec:
// the flags as typed) or from JSON (ReadSpecs: a stream of objects or
// arrays with the same fields). The JSON names are those of Decoded, so
// the JSON a dump prints can be edited and crafted again:
//
//	exo frame dump --pcap in.pcap --json | jq 'select(.valid) | .epoch += 1' | exo frame craft --json - --pcap out.pcap
//
// Spec.Build checks every field, against a rack size if one is given
// (sender < n, hist_len = floor(n/2), every id < n), and encodes the
// frames with the codec of package exo (exo.Frame.MarshalBinary). Build
// does it for a whole Source (flags or JSON) and, given the rack's group
// key file, seals every frame (exo.Seal under daemon.FrameKey); without
// one the frames keep the given tag and are unsigned. Craft adds the
// capture. Mistakes in the input are *InputError, so that the command
// can exit 2 for them and 1 for a failure while running; the messages
// name the flag of exo frame they come from, since the flags are this
// package's input.
//
// # Decoding: strict and lenient
//
// Decode is the codec's verdict on the bytes after the Ethernet header,
// through the gopacket layer of package broadcast/exolayer (itself
// exo.Frame.UnmarshalBinary): a frame, or a *exo.DecodeError whose
// exo.ReasonOf is the reason code a rack would count. It is what a
// receiver sees.
//
// DecodeLenient is for a person looking at the wire: it takes the same
// verdict, then reads every field the bytes hold at the offsets of the
// wire layout (exo's generated Off* and Size* constants) whatever the
// verdict, so that a malformed frame shows its seq, sender, history and
// records as far as they go, never only "malformed". Neither the codec
// nor the gopacket layer can do that: they stop at the first failed
// check. Decoded is the result, with a JSON form and a one-line human
// form (Decoded.Line); Dump decodes a capture or a live interface into
// either, with filters that never hide a frame too short for the
// filtered field.
//
// # Captures: pcap and pcapng in and out
//
// Captures are files of Ethernet frames, read and written with gopacket's
// pcapgo (pure Go, no libpcap): ReadPcap reads pcap, gzip-compressed pcap
// and pcapng, and refuses a cut or corrupt file as a whole so that
// nothing is sent from half a file; WritePcap writes pcap or pcapng,
// PcapWriter a pcap as frames come. The Ethernet framing is gopacket's
// too: ParseEthernet finds the Exo frame (EtherType 0x88B5, registered by
// exolayer) behind an Ethernet header and at most one 802.1Q tag with the
// layers.Ethernet and layers.Dot1Q decoders, EthernetFrame puts an Exo
// frame, valid or not, behind a header and pads it to the 60-byte minimum
// with layers.Ethernet.
//
// # Sending
//
// Send puts crafted frames, or the Exo frames of a capture, on an
// interface (a broadcast.Conn: AF_PACKET by default, Listener for
// another) at a rate; Replay sends a capture's frames keeping their
// gaps. Both build and check every frame, open the interface and check
// every frame against its MTU before the first is sent: an error sends
// nothing.
package frames
