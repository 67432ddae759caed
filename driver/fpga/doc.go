// Package fpga is the Go driver of the Exo FPGA engine (hdl/rtl/exo_engine.v,
// register map hw/registers.json, docs/registers.md): the fast path in the
// NIC, whose state is exo.Pointers field for field.
//
// Two layers:
//
//   - Regs is a register-level back end: 32-bit reads and writes at byte
//     offsets of the engine's 4 KiB CSR block. MMIO maps a PCIe BAR
//     (/sys/bus/pci/devices/<BDF>/resource<N>, Linux); Sim drives the
//     Verilated RTL through its csr_* ports (build tag fpgasim, see below).
//   - Engine is the typed driver on any Regs: Open checks the register
//     block header (rb_type "EXO\0", major version 1), SetState/State load
//     and read the pointers in the documented order (halted first, 64-bit
//     values lo then hi, release last), SetRoster fills the roster MAC
//     table and enables ctrl.mac_check, SetKeys loads the two SipHash-2-4
//     key slots of the tag check (the frame's key phase picks one; SetKey
//     is slot 0 alone), Counters/ClearCounters/LastVerdict read the verdict
//     statistics. Every offset comes from the generated package
//     hw/gen/regs.
//
// The simulated engine also takes frames from the host (FrameEngine,
// Engine.Process), which a real NIC takes from the wire. It is cgo and
// Verilator: build the model with tools/build-fpga-sim.sh, then build or
// test with -tags fpgasim (and -count=1: the test cache does not see a
// rebuilt library). Without the tag, OpenSim returns ErrSimNotBuilt and
// nothing needs Verilator. See docs/fpga.md.
package fpga
