package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/daemon/host"
)

func newDaemonCmd() *cobra.Command {
	var cfgPath, level, format, cpuProfile, memProfile string
	var join bool
	var offload string
	var profileFor time.Duration
	cmd := &cobra.Command{
		Use:   "daemon --config FILE",
		Short: "Run the rack broadcast daemon of this host",
		Long: `daemon runs this host's member of the rack: the Exo protocol on raw Ethernet
broadcast frames (AF_PACKET) on the configured interface, the out-of-band TCP
service for gap repair and reconciliation, the local API on a Unix socket
(exo send / tail / status, package client) and Prometheus metrics.

It needs CAP_NET_RAW (run as root). SIGTERM or SIGINT stops it gracefully:
pending publishes are answered "shutting down". The config file is JSON; see
docs/operator.md for every field and an example.

The --offload modes: software; xdp (the XDP program in front of the
socket); auto (xdp, else software with one log line); xdp-token (xdp with
xdp_token on: the program sends this host's frames); fpga-sim (the
simulated FPGA engine, in a binary built with -tags fpgasim);
fpga-sim-token (fpga-sim with fpga_token on: the engine sends this host's
frames).
`,
		Example: `  exo daemon --config /etc/exo/exo.json
  ip netns exec exo-A exo daemon --config /tmp/exo-lab/A.json   # in the lab`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfgPath == "" {
				return &exitError{code: 2, err: errors.New("--config is required")}
			}
			cfg, err := daemon.LoadConfig(cfgPath)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("%s: %w", cfgPath, err)}
			}
			if join {
				cfg.Join = true
			}
			if offload != "" {
				cfg.Offload = offload
				switch offload {
				case "xdp-token":
					cfg.Offload, cfg.XDPToken = "xdp", "on"
				case "fpga-sim-token":
					cfg.Offload, cfg.FPGAToken = "fpga-sim", "on"
				}
				if err := cfg.Validate(); err != nil {
					return &exitError{code: 2, err: fmt.Errorf("--offload: %w", err)}
				}
			}
			log, err := newLogger(level, format)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			if profileFor < 0 {
				return &exitError{code: 2, err: fmt.Errorf("--cpuprofile-for: %v must not be negative", profileFor)}
			}
			if profileFor > 0 && cpuProfile == "" {
				return &exitError{code: 2, err: errors.New("--cpuprofile-for needs --cpuprofile")}
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return &exitError{code: 2, err: fmt.Errorf("--cpuprofile: %w", err)}
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					f.Close()
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				var once sync.Once
				stop := func() { once.Do(func() { pprof.StopCPUProfile(); f.Close() }) }
				defer stop()
				if profileFor > 0 {
					t := time.AfterFunc(profileFor, func() {
						stop()
						log.Info("CPU profile written", "file", cpuProfile, "after", profileFor)
					})
					defer t.Stop()
				}
			}
			if memProfile != "" {
				f, err := os.Create(memProfile)
				if err != nil {
					return &exitError{code: 2, err: fmt.Errorf("--memprofile: %w", err)}
				}
				// Written as the stop begins, before the daemon lets go of
				// its log: the in-use figures are the live heap as of the
				// last collection of the running daemon.
				ctx, cancel := context.WithCancel(cmd.Context())
				written := make(chan struct{})
				go func() {
					defer close(written)
					<-ctx.Done()
					if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
						log.Error("heap profile", "file", memProfile, "err", err)
					}
					f.Close()
				}()
				defer func() { cancel(); <-written }()
				cmd.SetContext(ctx)
			}
			return host.Run(cmd.Context(), cfg, log)
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "the daemon's JSON config file")
	cmd.Flags().BoolVar(&join, "join", false, "start as a host that lost its state and rejoin the running rack")
	cmd.Flags().StringVar(&offload, "offload", "", "fast path, overriding the config: software, xdp, auto, xdp-token, fpga-sim or fpga-sim-token (see above)")
	cmd.Flags().StringVar(&level, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&format, "log-format", "text", "text or json")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of the whole run to this file, finished when the daemon stops (SIGTERM)")
	cmd.Flags().StringVar(&memProfile, "memprofile", "", "write a heap profile (pprof: what the daemon holds in memory and where it was allocated) to this file when the daemon is told to stop (SIGTERM), before it lets go of its state: the live heap of its last collection (a killed daemon writes none)")
	cmd.Flags().DurationVar(&profileFor, "cpuprofile-for", 0, "with --cpuprofile: profile only the first this long of the run, from the start (a restart's log read and catch-up), and write the file then (0: the whole run)")
	return cmd
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	if lv <= slog.LevelDebug {
		// Debug traces (a catch-up's fetches) are read merged by time
		// across hosts: microseconds, not the default milliseconds.
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.String(slog.TimeKey, a.Value.Time().UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
			}
			return a
		}
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither text nor json", format)
}
