package regs

// regs_gen.go, hw/gen/exo_regs.vh and docs/registers.md are generated from
// hw/registers.json (with the wire layout: hwgen's default inputs).
//go:generate go run ../../../tools/hwgen -root ../../..
