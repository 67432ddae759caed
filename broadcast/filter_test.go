package broadcast

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/exo-rack/exo/exo"
	"golang.org/x/net/bpf"
)

// ethFrame prepends an Ethernet header (broadcast, 02:..:01, etherType).
func ethFrame(etherType uint16, body []byte) []byte {
	b := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0, 0}
	binary.BigEndian.PutUint16(b[12:], etherType)
	b = append(b, body...)
	for len(b) < exo.MinEthFrame {
		b = append(b, 0)
	}
	return b
}

// vmProgram replaces the Linux extension loads of FilterProgram by
// constant loads (same length, so the jumps are unchanged) so that
// x/net/bpf's VM can run the whole kernel program.
func vmProgram(t *testing.T, opts Options, vlanPresent, pktType uint32) *bpf.VM {
	t.Helper()
	p := FilterProgram(opts)
	for i, ins := range p {
		if e, ok := ins.(bpf.LoadExtension); ok {
			switch e.Num {
			case bpf.ExtVLANTagPresent:
				p[i] = bpf.LoadConstant{Dst: bpf.RegA, Val: vlanPresent}
			case bpf.ExtType:
				p[i] = bpf.LoadConstant{Dst: bpf.RegA, Val: pktType}
			default:
				t.Fatalf("unexpected extension %v", e)
			}
		}
	}
	vm, err := bpf.NewVM(p)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func TestFilterProgram(t *testing.T) {
	g1 := exoFrameBytes(t, 1)
	g2 := exoFrameBytes(t, 2)
	const accept, drop = math.MaxUint32, 0
	cases := []struct {
		name        string
		opts        Options
		frame       []byte
		vlan, ptype uint32
		want        uint32
	}{
		{"exo broadcast", Options{}, ethFrame(exo.EtherType, g1), 0, 1, accept},
		{"exo to us", Options{}, ethFrame(exo.EtherType, g1), 0, 0, accept},
		{"exo multicast", Options{}, ethFrame(exo.EtherType, g1), 0, 2, accept},
		{"exo other group, no group filter", Options{}, ethFrame(exo.EtherType, g2), 0, 1, accept},
		{"exo group 1, filter 1", Options{FilterGroup: true, Group: 1}, ethFrame(exo.EtherType, g1), 0, 1, accept},
		{"exo group 2, filter 1", Options{FilterGroup: true, Group: 1}, ethFrame(exo.EtherType, g2), 0, 1, drop},
		{"exo group 0, filter 0", Options{FilterGroup: true}, ethFrame(exo.EtherType, exoFrameBytes(t, 0)), 0, 1, accept},
		{"IPv4", Options{}, ethFrame(0x0800, g1), 0, 1, drop},
		{"IPv6", Options{}, ethFrame(0x86dd, g1), 0, 1, drop},
		{"next experimental EtherType", Options{}, ethFrame(0x88b6, g1), 0, 1, drop},
		{"VLAN-tagged exo", Options{}, ethFrame(exo.EtherType, g1), 1, 1, drop},
		{"other host's exo (promiscuous)", Options{}, ethFrame(exo.EtherType, g1), 0, 3, drop},
		{"our own outgoing exo", Options{}, ethFrame(exo.EtherType, g1), 0, 4, drop},
		{"runt: no EtherType", Options{}, make([]byte, 12), 0, 1, drop},
		{"runt: no group, group filter", Options{FilterGroup: true, Group: 1}, ethFrame(exo.EtherType, nil)[:15], 0, 1, drop},
	}
	for _, c := range cases {
		got, err := vmProgram(t, c.opts, c.vlan, c.ptype).Run(c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if uint32(got) != c.want {
			t.Errorf("%s: filter returned %d, want %d", c.name, got, c.want)
		}
		// The portable part alone, as the VM runs it.
		if c.vlan == 0 && c.ptype <= pktMulticast {
			vm, err := bpf.NewVM(filterProgram(c.opts, false))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := vm.Run(c.frame); uint32(got) != c.want {
				t.Errorf("%s (portable part): %d, want %d", c.name, got, c.want)
			}
		}
	}
	for _, o := range []Options{{}, {FilterGroup: true, Group: 0xfffe}} {
		if _, err := assembleFilter(o); err != nil {
			t.Errorf("assemble %+v: %v", o, err)
		}
	}
}

func exoFrameBytes(t *testing.T, group uint16) []byte { return exoFrame(t, 1, group, 5) }

func ExampleFilterProgram() {
	for i, ins := range FilterProgram(Options{FilterGroup: true, Group: 1}) {
		fmt.Printf("%d: %v\n", i, ins)
	}
	// Output:
	// 0: ld #vlan_avail
	// 1: jneq #0,7
	// 2: ld #type
	// 3: jgt #2,5
	// 4: ldh [12]
	// 5: jneq #34997,3
	// 6: ldh [16]
	// 7: jneq #1,1
	// 8: ret #4294967295
	// 9: ret #0
}
