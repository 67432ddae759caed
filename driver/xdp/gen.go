package xdp

// The XDP program is compiled with clang by bpf2go; the generated
// exo_bpfel.go and exo_bpfel.o are committed, so building needs no clang.
// TestGeneratedFilesCurrent checks them when clang is installed.
//
// -I/usr/include/x86_64-linux-gnu: <asm/types.h> for <linux/bpf.h> (Debian).
//go:generate go tool bpf2go -tags linux -target bpfel -type exo_state -type exo_auth -type exo_key -type exo_mac -type exo_rec -type exo_slot exo bpf/exo.c -- -I../../hw/gen -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror -mcpu=v3
