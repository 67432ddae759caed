// Package hdl holds the Verilog of the Exo FPGA engine: rtl/ (the receive
// rule, Pointers.Classify and Accept, and the transmit rule of token mode,
// Engine.Step) and tb/ (a self-checking bench). Its test runs the bench
// against the golden vectors of testdata/vectors under Icarus Verilog and
// Verilator, so that `go test ./...` covers the RTL; hdl/Makefile runs the
// same (`make -C hdl test`). docs/hardware.md describes the engine, and
// package driver/fpga drives its Verilated model.
package hdl
