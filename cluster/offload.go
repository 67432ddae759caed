package cluster

import (
	"fmt"
	"slices"
	"strings"

	"github.com/exo-rack/exo/daemon"
)

// OffloadModes are the names WithOffload takes: the daemon's offload
// settings the bench and the lab runners compare.
var OffloadModes = []string{"software", "software-block", "software-busy", "software-allprocs",
	"xdp", "xdp-native", "xdp-generic", "xdp-afxdp", "xdp-token", "fpga-sim", "fpga-sim-token"}

// WithOffload returns a config hook that sets offload mode: software (the
// daemon's defaults), software-block and software-busy (rx_poll block or
// busy), software-allprocs (procs -1: GOMAXPROCS every CPU), xdp (the
// daemon's default attach mode), xdp-native, xdp-generic, xdp-afxdp
// (AF_XDP delivery), xdp-token (xdp_token on: the program sends the host's
// frames, docs/token.md), fpga-sim (the simulated FPGA engine in front of
// the core) or fpga-sim-token (fpga_token on: the simulated engine sends
// the host's frames). The fpga-sim modes need a binary built with -tags
// fpgasim. Unknown modes are an error.
func WithOffload(mode string) (func(*daemon.Config), error) {
	if !slices.Contains(OffloadModes, mode) {
		return nil, fmt.Errorf("offload %q: want one of %s", mode, strings.Join(OffloadModes, ", "))
	}
	return func(c *daemon.Config) {
		c.Offload = mode
		switch mode {
		case "xdp-native":
			c.Offload, c.XDPMode = "xdp", "native"
		case "xdp-generic":
			c.Offload, c.XDPMode = "xdp", "generic"
		case "xdp-token":
			c.Offload, c.XDPToken = "xdp", "on"
		case "fpga-sim-token":
			c.Offload, c.FPGAToken = "fpga-sim", "on"
		case "xdp-afxdp":
			c.Offload, c.XDPDelivery = "xdp", "afxdp"
		case "software-block", "software-busy":
			c.Offload, c.RxPoll = "software", strings.TrimPrefix(mode, "software-")
		case "software-allprocs":
			c.Offload, c.Procs = "software", -1
		}
	}, nil
}

// Hooks returns a config hook that applies every hook in order (nil ones
// skipped).
func Hooks(hooks ...func(*daemon.Config)) func(*daemon.Config) {
	return func(c *daemon.Config) {
		for _, h := range hooks {
			if h != nil {
				h(c)
			}
		}
	}
}
