// Package xdp is the Exo fast path in the kernel: an XDP program
// (bpf/exo.c, compiled by bpf2go into exo_bpfel.o) that decodes Exo frames,
// classifies them against the pointer state exactly as exo.Frame.UnmarshalBinary,
// exo.Pointers.Classify and exo.Pointers.Accept do, updates the state in a
// BPF map on ACCEPT, counts every verdict per CPU, passes ACCEPT and the
// slow-path verdicts (GAP, DIVERGENCE, FUTURE_EPOCH, SEQ_TOO_FAR, HALTED)
// with the verdict in the XDP metadata area, and drops everything else. A
// passed frame goes to the AF_XDP socket registered for its RX queue in
// the program's XSKMAP, else to the stack (AF_PACKET).
//
// Load loads it; SetState and State write and read the pointer state;
// SetKeys (or SetKey, slot 0 alone) and SetRoster load the two tag key
// slots (the frame's key phase bit picks one) and the roster MACs;
// Counters reads the per-reason counters; Run runs one frame through the
// program with BPF_PROG_TEST_RUN (no network needed); Attach attaches it
// to an interface; NewXSKConn opens the AF_XDP sockets, registers them
// (RegisterXSK) and reads the passed frames with their verdicts.
// Program.Token is token mode's handle (docs/token.md, token.go): with the
// state's tx_on set, the program answers the frame of this host's
// predecessor with this host's next frame (XDP_TX), from a transmit queue
// the control plane fills, and records what it did in a ring buffer. See
// docs/xdp.md.
//
// The package needs Linux; Load needs CAP_BPF and CAP_NET_ADMIN (root).
package xdp
