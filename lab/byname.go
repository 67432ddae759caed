package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// The operations of exo lab: each finds the running rack by its prefix and
// names its hosts as a person types them (A, b, 3: see [Rack.Host]). An
// error about the arguments (a host or a partition the rack does not have)
// starts with "lab <operation>:", like those of the [Rack] methods.

// Find is [Load] for a prefix a person typed: when no such rack is up, the
// error also names the racks that are.
func Find(ctx context.Context, prefix string) (*Rack, error) {
	r, err := Load(ctx, prefix)
	if errors.Is(err, ErrNoRack) {
		if racks, _ := Racks(); len(racks) > 0 {
			err = fmt.Errorf("%w (racks up: %s; pick one with --prefix)", err, strings.Join(racks, " "))
		}
	}
	return r, err
}

// Status is a rack with the state of its links and the nftables rules in
// force, as the kernel has them.
type Status struct {
	*Rack
	LinksUp []bool `json:"links_up"` // by host id: its switch port is up
	Ruleset string `json:"nft_ruleset"`
	// RulesetErr says why Ruleset is empty when nft is missing
	// ([ErrMissingTool]); nil otherwise.
	RulesetErr error `json:"-"`
}

// ReadStatus finds rack prefix and reads its links and ruleset.
func ReadStatus(ctx context.Context, prefix string) (*Status, error) {
	r, err := Find(ctx, prefix)
	if err != nil {
		return nil, err
	}
	st := &Status{Rack: r}
	if st.LinksUp, err = r.LinkStates(ctx); err != nil {
		return nil, err
	}
	st.Ruleset, err = r.LiveRuleset(ctx)
	if errors.Is(err, ErrMissingTool) {
		st.RulesetErr = err
	} else if err != nil {
		return nil, err
	}
	return st, nil
}

// PartitionSpec partitions rack prefix as spec says: groups as
// [Rack.ParseGroups] reads them, or with oneWay a cut FROM:TO as
// [Rack.ParseOneWay] reads it. It returns the rack with the faults now in
// force.
func PartitionSpec(ctx context.Context, prefix, spec string, oneWay bool) (*Rack, error) {
	r, err := Find(ctx, prefix)
	if err != nil {
		return nil, err
	}
	if oneWay {
		from, to, err := r.ParseOneWay(spec)
		if err != nil {
			return nil, fmt.Errorf("lab partition --one-way: %w", err)
		}
		return applied(r, r.PartitionOneWay(ctx, from, to))
	}
	groups, err := r.ParseGroups(spec)
	if err != nil {
		return nil, fmt.Errorf("lab partition: %w", err)
	}
	return applied(r, r.Partition(ctx, groups))
}

// Heal removes every fault of rack prefix; see [Rack.Heal].
func Heal(ctx context.Context, prefix string) (*Rack, error) {
	r, err := Find(ctx, prefix)
	if err != nil {
		return nil, err
	}
	return applied(r, r.Heal(ctx))
}

// Link sets host's switch port in rack prefix up or down; see
// [Rack.SetLink]. It returns the rack with the faults now in force.
func Link(ctx context.Context, prefix, host string, up bool) (*Rack, error) {
	r, h, err := findHost(ctx, prefix, host, "link")
	if err != nil {
		return nil, err
	}
	return applied(r, r.SetLink(ctx, h.ID, up))
}

// Cut cuts host's own interface one way (dir [CutIngress] or [CutEgress]),
// or removes the cut (""); see [Rack.CutHost]. It returns the rack with the
// faults now in force.
func Cut(ctx context.Context, prefix, host, dir string) (*Rack, error) {
	r, h, err := findHost(ctx, prefix, host, "cut")
	if err != nil {
		return nil, err
	}
	return applied(r, r.CutHost(ctx, h.ID, dir))
}

// Loss makes the bridge of rack prefix drop fraction of host's frames; see
// [Rack.DropRate]. It returns the rack with the faults now in force.
func Loss(ctx context.Context, prefix, host string, fraction float64) (*Rack, error) {
	r, h, err := findHost(ctx, prefix, host, "loss")
	if err != nil {
		return nil, err
	}
	return applied(r, r.DropRate(ctx, h.ID, fraction))
}

// Path is one direction probed between two hosts.
type Path struct {
	From, To Host
	Reached  bool
}

// ProbePair probes both directions between hosts a and b of rack prefix
// (a to b first); see [Rack.Reach].
func ProbePair(ctx context.Context, prefix, a, b string, timeout time.Duration) ([2]Path, error) {
	r, ha, err := findHost(ctx, prefix, a, "probe")
	if err != nil {
		return [2]Path{}, err
	}
	hb, err := r.Host(b)
	if err != nil {
		return [2]Path{}, fmt.Errorf("lab probe: %w", err)
	}
	got, err := r.Reach(ctx, [][2]int{{ha.ID, hb.ID}, {hb.ID, ha.ID}}, timeout)
	if err != nil {
		return [2]Path{}, err
	}
	return [2]Path{{ha, hb, got[0]}, {hb, ha, got[1]}}, nil
}

// ProbeMatrix probes every ordered pair of hosts of rack prefix; see
// [Rack.Matrix].
func ProbeMatrix(ctx context.Context, prefix string, timeout time.Duration) (*Rack, [][]bool, error) {
	r, err := Find(ctx, prefix)
	if err != nil {
		return nil, nil, err
	}
	m, err := r.Matrix(ctx, timeout)
	if err != nil {
		return nil, nil, err
	}
	return r, m, nil
}

// RunOn runs argv inside host's namespace of rack prefix with the given
// standard streams and waits for it. When the command ran and exited with
// a status above 0, the error wraps its *exec.ExitError and names argv.
func RunOn(ctx context.Context, prefix, host string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) == 0 {
		return fmt.Errorf("lab exec: no command")
	}
	r, h, err := findHost(ctx, prefix, host, "exec")
	if err != nil {
		return err
	}
	c := r.CommandContext(ctx, h.ID, argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	if err := c.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return fmt.Errorf("lab exec on %s: %s: %w", h.Name, strings.Join(argv, " "), err)
		}
		return fmt.Errorf("lab exec on %s: %w", h.Name, err)
	}
	return nil
}

// findHost finds rack prefix and its host named s; op names the operation
// in the error about s.
func findHost(ctx context.Context, prefix, s, op string) (*Rack, Host, error) {
	r, err := Find(ctx, prefix)
	if err != nil {
		return nil, Host{}, err
	}
	h, err := r.Host(s)
	if err != nil {
		return nil, Host{}, fmt.Errorf("lab %s: %w", op, err)
	}
	return r, h, nil
}

// applied returns r once a change to its faults succeeded.
func applied(r *Rack, err error) (*Rack, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}
