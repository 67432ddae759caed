package broadcast

import (
	"math"

	"github.com/exo-rack/exo/exo"
	"golang.org/x/net/bpf"
)

// Offsets in the whole Ethernet frame, as the filter of a SOCK_RAW packet
// socket sees it.
const (
	offEtherType = 12
	offExoGroup  = exo.EthHeaderLen + exo.OffGroup
)

// pktMulticast is the largest accepted Linux skb->pkt_type
// (include/uapi/linux/if_packet.h): PACKET_HOST 0, PACKET_BROADCAST 1 and
// PACKET_MULTICAST 2 are accepted; PACKET_OTHERHOST 3 (another host's
// frame, seen in promiscuous mode) and PACKET_OUTGOING 4 are not.
const pktMulticast = 2

// FilterProgram returns the classic BPF socket filter PacketConn attaches
// for opts: it accepts a frame (whole) only if
//
//   - it carries no 802.1Q tag (the kernel strips a tag into the skb before
//     packet sockets see it, so a tagged Exo frame of another VLAN would
//     otherwise look untagged),
//   - it is addressed to this host, broadcast or multicast (not another
//     host's frame seen in promiscuous mode, not our own outgoing frame),
//   - its EtherType is 0x88B5, and
//   - with opts.FilterGroup, its group field (Exo offset 2) is opts.Group.
//
// Everything else is dropped in the kernel (return 0) and never reaches
// Go. The first two checks use Linux BPF extensions (ld vlan_avail,
// ld type), which golang.org/x/net/bpf's VM does not run; the tests run
// the rest (filterProgram(opts, false)) in that VM.
func FilterProgram(opts Options) []bpf.Instruction {
	return filterProgram(opts, true)
}

// filterProgram builds the filter, with the Linux-only checks if linux.
func filterProgram(opts Options, linux bool) []bpf.Instruction {
	var p []bpf.Instruction
	// Each check jumps to the final "ret #0" when it fails; the skips are
	// filled in below, once the length is known.
	var fails []int
	check := func(load bpf.Instruction, cond bpf.JumpTest, val uint32) {
		p = append(p, load)
		fails = append(fails, len(p))
		// SkipTrue (when the check fails) is patched below.
		p = append(p, bpf.JumpIf{Cond: cond, Val: val})
	}
	if linux {
		check(bpf.LoadExtension{Num: bpf.ExtVLANTagPresent}, bpf.JumpNotEqual, 0)
		check(bpf.LoadExtension{Num: bpf.ExtType}, bpf.JumpGreaterThan, pktMulticast)
	}
	check(bpf.LoadAbsolute{Off: offEtherType, Size: 2}, bpf.JumpNotEqual, exo.EtherType)
	if opts.FilterGroup {
		check(bpf.LoadAbsolute{Off: offExoGroup, Size: 2}, bpf.JumpNotEqual, uint32(opts.Group))
	}
	p = append(p,
		bpf.RetConstant{Val: math.MaxUint32}, // accept the whole frame
		bpf.RetConstant{Val: 0},              // drop
	)
	drop := len(p) - 1
	for _, i := range fails {
		j := p[i].(bpf.JumpIf)
		j.SkipTrue = uint8(drop - i - 1)
		p[i] = j
	}
	return p
}

// assembleFilter assembles FilterProgram(opts).
func assembleFilter(opts Options) ([]bpf.RawInstruction, error) {
	return bpf.Assemble(FilterProgram(opts))
}
