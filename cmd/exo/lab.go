package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/lab"
)

// labOptions are the flags and arguments of exo lab and its subcommands.
type labOptions struct {
	Prefix   string
	Hosts    int
	MTU      int
	Force    bool
	JSON     bool
	Spec     string // partition: A,B/C,D,E or, with OneWay, A,B:C,D,E
	OneWay   bool
	Host     string // link, loss, exec; probe's source
	To       string // probe's destination
	Up       bool   // link
	Dir      string // cut: ingress, egress or "" (none)
	Fraction float64
	Timeout  time.Duration
	Argv     []string // exec
	In       io.Reader
	Out      io.Writer
	Err      io.Writer
}

// newLabCmd builds exo lab; runF, when set, runs instead of every
// subcommand once its arguments are read and checked (tests).
func newLabCmd(runF func(context.Context, *labOptions) error) *cobra.Command {
	o := &labOptions{}
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Build a real local rack of network namespaces, and partition it",
		Long: `lab builds a rack on this machine out of Linux network namespaces: one namespace
per host (<prefix>-A, <prefix>-B, ...) whose interface exo0 is one end of a veth
pair, the other end a port of the bridge br0 in a switch namespace
(<prefix>-sw). Every host has a fixed MAC (02:e0:00:00:00:<id+1>) and an OOB
address (10.77.0.<id+1>/16) that exists only inside the rack. Frames really
cross the bridge, and faults are real: partitions and losses are nftables drop
rules on the bridge (table bridge exo_lab, in the switch namespace), a link
down is a switch port set down. Nothing is added to the root namespace.

exo lab needs root (network namespaces, veth, nftables). See docs/lab.md.`,
		Example: `  sudo exo lab up --hosts 5
  sudo exo lab exec A -- ip -br addr
  sudo exo lab partition A,B/C,D,E          # {A,B} | {C,D,E}
  sudo exo lab partition --one-way A:B,C    # A's frames to B and C are dropped
  sudo exo lab probe                        # who reaches whom, right now
  sudo exo lab status
  sudo exo lab heal
  sudo exo lab down`,
	}
	cmd.PersistentFlags().StringVar(&o.Prefix, "prefix", lab.DefaultPrefix, "name of the rack: its namespaces are <prefix>-A, <prefix>-B, ..., <prefix>-sw")

	// sub adds subcommand c: its RunE reads the arguments into o with args,
	// checks them with check, then runs run.
	sub := func(c *cobra.Command, args func(*cobra.Command, []string) error, check func(*labOptions) error, run func(context.Context, *labOptions) error) *cobra.Command {
		c.RunE = func(cc *cobra.Command, a []string) error {
			o.In, o.Out, o.Err = cc.InOrStdin(), cc.OutOrStdout(), cc.ErrOrStderr()
			if args != nil {
				if err := args(cc, a); err != nil {
					return &exitError{code: 2, err: fmt.Errorf("lab %s: %w", cc.Name(), err)}
				}
			}
			err := lab.ValidPrefix(o.Prefix)
			if err != nil {
				err = fmt.Errorf("--prefix: %w", err)
			} else if check != nil {
				err = check(o)
			}
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("lab %s: %w", cc.Name(), err)}
			}
			if runF != nil {
				return runF(cc.Context(), o)
			}
			return labExit(run(cc.Context(), o))
		}
		cmd.AddCommand(c)
		return c
	}

	up := sub(&cobra.Command{
		Use:   "up",
		Short: "Create a rack of --hosts namespaces on one bridge and print its hosts",
		Long: `up creates the namespaces, the bridge, one veth pair per host, the MACs, the
MTU and the OOB addresses, with every link up, IPv6 off (no DAD or router
solicitation noise) and static neighbour entries (no ARP: a one-way cut stays
one-way). It refuses when a rack with the same prefix exists; --force removes
that rack first, unless a running exo demo, bench, probe or lab chaos uses it
(it then names that process).`,
		Example: `  sudo exo lab up --hosts 5
  sudo exo lab up --hosts 3 --prefix r2 --mtu 9000 --json
  sudo exo lab up --hosts 5 --force         # rebuild from scratch`,
		Args: cobra.NoArgs,
	}, nil, checkLabUp, runLabUp)
	up.Flags().IntVar(&o.Hosts, "hosts", 5, "number of hosts (1..255), named A, B, C, ...")
	up.Flags().IntVar(&o.MTU, "mtu", lab.DefaultMTU, "MTU of every link (68..65535; 9000 for jumbo frames)")
	up.Flags().BoolVar(&o.Force, "force", false, "remove a rack with the same prefix first")
	up.Flags().BoolVar(&o.JSON, "json", false, "print the rack as JSON")

	down := sub(&cobra.Command{
		Use:   "down",
		Short: "Remove the rack: stop its processes, delete its namespaces and state",
		Long: `down stops the processes still running in the rack's namespaces (SIGTERM, then
SIGKILL after 2 s), deletes the namespaces (and with them the veth pairs, the
bridge and the nftables table) and the state file. It is safe on a half-built
rack and on no rack at all. It refuses a rack that a live process still uses
(an exo lab chaos or exo demo run, or a test: it names the process), unless
--force.`,
		Example: `  sudo exo lab down
  sudo exo lab down --prefix r2
  sudo exo lab down --prefix exochaos --force   # even while a run uses it`,
		Args: cobra.NoArgs,
	}, nil, nil, runLabDown)
	down.Flags().BoolVar(&o.Force, "force", false, "remove the rack even while a live process uses it (its run then fails)")

	status := sub(&cobra.Command{
		Use:   "status",
		Short: "Show the rack's hosts, links, faults and the nftables rules in force",
		Example: `  sudo exo lab status
  sudo exo lab status --json`,
		Args: cobra.NoArgs,
	}, nil, nil, runLabStatus)
	status.Flags().BoolVar(&o.JSON, "json", false, "print the status as JSON")

	part := sub(&cobra.Command{
		Use:   "partition GROUPS",
		Short: "Partition the rack: the bridge drops frames between groups",
		Long: `partition loads drop rules into the bridge so that frames only flow between hosts
of one group. Groups are separated by "/", hosts (names or ids) by ","; every
host appears at most once, and the hosts named nowhere form one more group:
"partition A" isolates A. A new partition replaces the one in force.

With --one-way FROM:TO, frames from the hosts of FROM to the hosts of TO are
dropped while the other direction flows; one-way cuts add up until heal.`,
		Example: `  sudo exo lab partition A,B/C,D,E
  sudo exo lab partition A                   # A alone, the others together
  sudo exo lab partition 0,1/2,3,4           # ids work too
  sudo exo lab partition --one-way A,B:C,D,E`,
		Args: cobra.ExactArgs(1),
	}, func(_ *cobra.Command, a []string) error { o.Spec = a[0]; return nil }, checkLabPartition, runLabPartition)
	part.Flags().BoolVar(&o.OneWay, "one-way", false, "cut one direction only: FROM:TO")

	sub(&cobra.Command{
		Use:     "heal",
		Short:   "Remove every fault: partitions, one-way cuts, losses, links down",
		Example: `  sudo exo lab heal`,
		Args:    cobra.NoArgs,
	}, nil, nil, runLabHeal)

	sub(&cobra.Command{
		Use:   "link HOST up|down",
		Short: "Set a host's switch port down (a pulled cable) or up",
		Example: `  sudo exo lab link C down
  sudo exo lab link C up`,
		Args: cobra.ExactArgs(2),
	}, func(_ *cobra.Command, a []string) error {
		o.Host = a[0]
		switch a[1] {
		case "up":
			o.Up = true
		case "down":
			o.Up = false
		default:
			return fmt.Errorf("%q: want up or down", a[1])
		}
		return nil
	}, nil, runLabLink)

	sub(&cobra.Command{
		Use:   "cut HOST ingress|egress|none",
		Short: "Cut one direction of a host's own interface (a failing NIC), or remove the cut",
		Long: `cut drops every frame in one direction on HOST's own interface, inside its
namespace (table netdev exo_lab on exo0): ingress, the host hears nothing and
still sends; egress, nothing it sends leaves (its writes fail) and it still
hears. Raw frames and OOB traffic alike. Unlike partition --one-way, which
acts on the bridge, the host itself sees the failure. none removes the cut;
heal removes them all.`,
		Example: `  sudo exo lab cut G ingress
  sudo exo lab cut G none`,
		Args: cobra.ExactArgs(2),
	}, func(_ *cobra.Command, a []string) error {
		o.Host = a[0]
		switch a[1] {
		case lab.CutIngress, lab.CutEgress:
			o.Dir = a[1]
		case "none":
			o.Dir = ""
		default:
			return fmt.Errorf("%q: want ingress, egress or none", a[1])
		}
		return nil
	}, nil, runLabCut)

	sub(&cobra.Command{
		Use:   "loss HOST FRACTION",
		Short: "Drop a fraction (0..1) of the frames a host sends and receives",
		Long: `loss makes the bridge drop FRACTION of the frames that HOST sends and,
independently, of those it receives (nft numgen random mod 1000 < k). 0 removes
the loss; heal removes them all.`,
		Example: `  sudo exo lab loss B 0.1
  sudo exo lab loss B 0`,
		Args: cobra.ExactArgs(2),
	}, func(_ *cobra.Command, a []string) error {
		o.Host = a[0]
		f, err := strconv.ParseFloat(strings.TrimSuffix(a[1], "%"), 64)
		if err != nil {
			return fmt.Errorf("fraction %q: %w", a[1], err)
		}
		if strings.HasSuffix(a[1], "%") {
			f /= 100
		}
		o.Fraction = f
		return nil
	}, checkLabLoss, runLabLoss)

	probe := sub(&cobra.Command{
		Use:   "probe [FROM TO]",
		Short: "Send UDP datagrams across the bridge and report who reaches whom",
		Long: `probe sends UDP datagrams between the hosts' OOB addresses, from sockets opened
inside their namespaces, so each one is a real frame across the bridge. With no
argument it prints the matrix of every ordered pair; with FROM TO it checks
both directions between two hosts. Probes are one-way: a one-way cut shows.`,
		Example: `  sudo exo lab probe
  sudo exo lab probe A C --timeout 200ms`,
		Args: func(_ *cobra.Command, a []string) error {
			if len(a) != 0 && len(a) != 2 {
				return fmt.Errorf("want no argument or FROM TO")
			}
			return nil
		},
	}, func(_ *cobra.Command, a []string) error {
		if len(a) == 2 {
			o.Host, o.To = a[0], a[1]
		}
		return nil
	}, checkLabProbe, runLabProbe)
	probe.Flags().DurationVar(&o.Timeout, "timeout", time.Second, "how long to wait for a datagram")
	probe.Flags().BoolVar(&o.JSON, "json", false, "print the matrix as JSON")

	sub(&cobra.Command{
		Use:   "exec HOST -- COMMAND [ARGS...]",
		Short: "Run a command inside a host's network namespace",
		Long: `exec runs COMMAND inside HOST's namespace (ip netns exec): it sees the host's
loopback and its exo0 only. Its exit status is exo's.`,
		Example: `  sudo exo lab exec A -- ip -br addr
  sudo exo lab exec C -- ./bin/exo daemon --config c.toml`,
		Args: cobra.MinimumNArgs(2),
	}, func(c *cobra.Command, a []string) error {
		// Everything after "--" is the command, flags included; without
		// "--", a command with flags would have them taken as exo's.
		if dash := c.ArgsLenAtDash(); dash >= 0 && dash != 1 {
			return fmt.Errorf("want exactly one HOST before --, got %q", a[:dash])
		}
		o.Host, o.Argv = a[0], a[1:]
		return nil
	}, nil, runLabExec)
	cmd.AddCommand(newChaosCmd())
	return cmd
}

func checkLabUp(o *labOptions) error {
	if o.Hosts < 1 || o.Hosts > 255 {
		return fmt.Errorf("--hosts: %d is outside 1..255", o.Hosts)
	}
	if o.MTU < 68 || o.MTU > 65535 {
		return fmt.Errorf("--mtu: %d is outside 68..65535", o.MTU)
	}
	return nil
}

func checkLabPartition(o *labOptions) error {
	if o.OneWay != strings.Contains(o.Spec, ":") {
		if o.OneWay {
			return fmt.Errorf("--one-way wants FROM:TO, e.g. A,B:C,D,E; got %q", o.Spec)
		}
		return fmt.Errorf("%q: FROM:TO is a one-way cut: add --one-way", o.Spec)
	}
	return nil
}

func checkLabLoss(o *labOptions) error {
	if o.Fraction < 0 || o.Fraction > 1 {
		return fmt.Errorf("fraction %g is outside 0..1", o.Fraction)
	}
	return nil
}

func checkLabProbe(o *labOptions) error {
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout must be positive")
	}
	return nil
}

// labExit gives an error of the lab its exit code: 1 without root, 2 for
// the rest (exo lab exec: its command's status).
func labExit(err error) error {
	if errors.Is(err, lab.ErrNotRoot) {
		return &exitError{code: 1, err: err}
	}
	return err
}

func runLabUp(ctx context.Context, o *labOptions) error {
	start := time.Now()
	r, err := lab.Up(ctx, lab.Options{Prefix: o.Prefix, Hosts: o.Hosts, MTU: o.MTU, Force: o.Force, BPFDir: daemon.DefaultBPFDir})
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(o.Out, r)
	}
	fmt.Fprintf(o.Out, "rack %s up in %v\n", r.Name, time.Since(start).Round(time.Millisecond))
	return r.WriteHosts(o.Out, nil)
}

func runLabDown(ctx context.Context, o *labOptions) error {
	start := time.Now()
	if !o.Force {
		if err := lab.CheckRoot(); err != nil {
			return err
		}
		// Held while the rack goes down: a run starting meanwhile waits
		// for nothing and builds its own afterwards.
		c, err := lab.ClaimPrefix(o.Prefix)
		if err != nil {
			if errors.Is(err, lab.ErrInUse) {
				return fmt.Errorf("lab down: %w (--force removes it anyway)", err)
			}
			return fmt.Errorf("lab down: %w", err)
		}
		defer c.Release()
	}
	if err := lab.Down(ctx, o.Prefix); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "rack %s down in %v\n", o.Prefix, time.Since(start).Round(time.Millisecond))
	return nil
}

func runLabStatus(ctx context.Context, o *labOptions) error {
	st, err := lab.ReadStatus(ctx, o.Prefix)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(o.Out, st)
	}
	return st.WriteText(o.Out)
}

func runLabPartition(ctx context.Context, o *labOptions) error {
	return o.printFaultsAfter(lab.PartitionSpec(ctx, o.Prefix, o.Spec, o.OneWay))
}

func runLabHeal(ctx context.Context, o *labOptions) error {
	r, err := lab.Heal(ctx, o.Prefix)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "rack %s healed: no fault in force\n", r.Name)
	return nil
}

func runLabLink(ctx context.Context, o *labOptions) error {
	return o.printFaultsAfter(lab.Link(ctx, o.Prefix, o.Host, o.Up))
}

func runLabCut(ctx context.Context, o *labOptions) error {
	return o.printFaultsAfter(lab.Cut(ctx, o.Prefix, o.Host, o.Dir))
}

func runLabLoss(ctx context.Context, o *labOptions) error {
	return o.printFaultsAfter(lab.Loss(ctx, o.Prefix, o.Host, o.Fraction))
}

func runLabProbe(ctx context.Context, o *labOptions) error {
	if o.Host != "" {
		paths, err := lab.ProbePair(ctx, o.Prefix, o.Host, o.To, o.Timeout)
		if err != nil {
			return err
		}
		if o.JSON {
			m := map[string]bool{}
			for _, p := range paths {
				m[p.From.Name+">"+p.To.Name] = p.Reached
			}
			return writeJSON(o.Out, m)
		}
		for _, p := range paths {
			fmt.Fprintln(o.Out, p)
		}
		return nil
	}
	r, m, err := lab.ProbeMatrix(ctx, o.Prefix, o.Timeout)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(o.Out, m)
	}
	return r.WriteMatrix(o.Out, m)
}

func runLabExec(ctx context.Context, o *labOptions) error {
	err := lab.RunOn(ctx, o.Prefix, o.Host, o.Argv, o.In, o.Out, o.Err)
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() > 0 {
		return &exitError{code: ee.ExitCode(), err: err}
	}
	return err
}

// printFaultsAfter prints the faults in force after a change to them,
// unless it failed.
func (o *labOptions) printFaultsAfter(r *lab.Rack, err error) error {
	if err != nil {
		return err
	}
	r.WriteFaults(o.Out)
	return nil
}
