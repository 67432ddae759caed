package fpga

import (
	"fmt"

	"github.com/exo-rack/exo/hw/gen/regs"
)

// Block is one register block of a Corundum-style chain: every block
// starts with rb_type (+0x0), rb_version (+0x4) and rb_next_ptr (+0x8, the
// BAR offset of the next block, 0 = last).
type Block struct {
	Offset  uint32
	Type    uint32
	Version uint32
	Next    uint32
}

// maxBlocks bounds a walk of the chain (a corrupt BAR may loop).
const maxBlocks = 4096

// Discover walks the register block chain of a whole BAR (offsets relative
// to the BAR, not to a block) from offset 0 and returns every block in
// chain order. It stops with an error at a loop, an unaligned pointer or a
// read outside the BAR. An Exo engine alone in its BAR is one block at 0
// (its rb_next_ptr reads 0).
func Discover(bar Regs) ([]Block, error) {
	var out []Block
	seen := map[uint32]bool{}
	for off := uint32(0); ; {
		if seen[off] {
			return out, fmt.Errorf("fpga: discover: the register block chain loops back to 0x%x", off)
		}
		if len(out) == maxBlocks {
			return out, fmt.Errorf("fpga: discover: more than %d register blocks", maxBlocks)
		}
		seen[off] = true
		b := Block{Offset: off}
		var err error
		if b.Type, err = bar.Read32(off + regs.RbType); err == nil {
			if b.Version, err = bar.Read32(off + regs.RbVersion); err == nil {
				b.Next, err = bar.Read32(off + regs.RbNextPtr)
			}
		}
		if err != nil {
			return out, fmt.Errorf("fpga: discover: block at 0x%x: %w", off, err)
		}
		out = append(out, b)
		if b.Next == 0 {
			return out, nil
		}
		if b.Next%4 != 0 {
			return out, fmt.Errorf("fpga: discover: block at 0x%x: rb_next_ptr 0x%x is not 4-byte aligned", off, b.Next)
		}
		off = b.Next
	}
}
