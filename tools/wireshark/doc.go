// Package wireshark holds the Wireshark dissector of Exo frames, exo.lua
// (copy it to Wireshark's plugins directory: docs/frames.md). Its tests
// generate the layout constants in exo.lua from hw/wire.json (go test
// ./tools/wireshark -update) and check them against package exo's
// generated constants; the dissector is compared field by field with
// `exo frame dump` (broadcast/frames, TestGolden).
package wireshark
