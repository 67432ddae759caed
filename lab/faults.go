package lab

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os/exec"
	"slices"
	"strings"
)

// Partition cuts the rack into groups: from then on the bridge forwards a
// frame only when its input and output ports belong to hosts of one group.
// Hosts named in no group form one more group together, so
// Partition(ctx, [][]int{{0}}) isolates host A from the rest. A host may
// appear at most once. It replaces the two-way partition in force, and
// keeps one-way cuts, losses and links down.
func (r *Rack) Partition(ctx context.Context, groups [][]int) error {
	g, err := r.normalizeGroups(groups)
	if err != nil {
		return fmt.Errorf("lab partition: %w", err)
	}
	return r.mutate(ctx, func(f *Faults) error {
		f.Groups = g
		return nil
	})
}

// PartitionOneWay drops every frame from a host of from to a host of to;
// frames the other way still flow. Cuts add up: each call adds one to those
// in force (a two-way partition included) until [Rack.Heal].
func (r *Rack) PartitionOneWay(ctx context.Context, from, to []int) error {
	g, err := r.normalizeGroups([][]int{from, to})
	if err != nil {
		return fmt.Errorf("lab partition --one-way: %w", err)
	}
	if len(from) == 0 || len(to) == 0 {
		return fmt.Errorf("lab partition --one-way: both sides need a host")
	}
	return r.mutate(ctx, func(f *Faults) error {
		f.OneWay = append(f.OneWay, OneWayCut{From: g[0], To: g[1]})
		return nil
	})
}

// DropRate makes the bridge drop fraction (0..1, in steps of 1/1000) of the
// frames that host id sends and, independently, of those it receives (for
// a flooded broadcast frame the draw is made per receiving port). 0 removes
// the loss.
func (r *Rack) DropRate(ctx context.Context, id int, fraction float64) error {
	if _, err := r.host(id); err != nil {
		return fmt.Errorf("lab loss: %w", err)
	}
	if math.IsNaN(fraction) || fraction < 0 || fraction > 1 {
		return fmt.Errorf("lab loss: fraction %g is outside 0..1", fraction)
	}
	k := int(math.Round(fraction * 1000))
	return r.mutate(ctx, func(f *Faults) error {
		if k == 0 {
			delete(f.Loss, id)
			return nil
		}
		if f.Loss == nil {
			f.Loss = map[int]float64{}
		}
		f.Loss[id] = float64(k) / 1000
		return nil
	})
}

// SetLink sets host id's switch port down or up: down is a pulled cable,
// the host sees its carrier go (NO-CARRIER) and no frame crosses in either
// direction; its own configuration is untouched.
func (r *Rack) SetLink(ctx context.Context, id int, up bool) error {
	h, err := r.host(id)
	if err != nil {
		return fmt.Errorf("lab link: %w", err)
	}
	return r.mutate(ctx, func(f *Faults) error {
		state := "down"
		if up {
			state = "up"
		}
		if _, err := run(ctx, "", "ip", "-n", r.SwitchNetns, "link", "set", h.Port, state); err != nil {
			return err
		}
		f.LinksDown = slices.DeleteFunc(f.LinksDown, func(x int) bool { return x == id })
		if !up {
			f.LinksDown = append(f.LinksDown, id)
			slices.Sort(f.LinksDown)
		}
		return nil
	})
}

// Directions of a host cut ([Rack.CutHost]).
const (
	CutIngress = "ingress" // the host hears nothing (it still sends)
	CutEgress  = "egress"  // nothing the host sends leaves it (it still hears)
)

// CutHost cuts host id's own interface one way, as a failing NIC or a
// host firewall does: dir is [CutIngress] or [CutEgress]; "" removes the
// cut. Unlike the bridge's cuts it acts inside the host (an nftables
// netdev table on its interface), so an egress cut makes the host's own
// writes fail. It replaces the cut in force on that host.
func (r *Rack) CutHost(ctx context.Context, id int, dir string) error {
	h, err := r.host(id)
	if err != nil {
		return fmt.Errorf("lab cut: %w", err)
	}
	if dir != "" && dir != CutIngress && dir != CutEgress {
		return fmt.Errorf("lab cut: direction %q: want %s or %s", dir, CutIngress, CutEgress)
	}
	return r.mutate(ctx, func(f *Faults) error {
		if err := r.loadHostCut(ctx, h, dir); err != nil {
			return err
		}
		delete(f.HostCuts, id)
		if dir != "" {
			if f.HostCuts == nil {
				f.HostCuts = map[int]string{}
			}
			f.HostCuts[id] = dir
		}
		return nil
	})
}

// loadHostCut replaces the exo_lab netdev table in host h's namespace by
// one that drops every frame in direction dir ("": none).
func (r *Rack) loadHostCut(ctx context.Context, h Host, dir string) error {
	if err := needTool("nft", "nftables"); err != nil {
		return err
	}
	rules := fmt.Sprintf("table netdev %s\ndelete table netdev %s\n", NftTable, NftTable)
	if dir != "" {
		rules += fmt.Sprintf("table netdev %s {\n\tchain cut {\n\t\ttype filter hook %s device %q priority filter; policy accept;\n\t\tcounter drop\n\t}\n}\n",
			NftTable, dir, h.Ifname)
	}
	if _, err := run(ctx, rules, "ip", "netns", "exec", h.Netns, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("loading the %s cut into %s: %w", dir, h.Netns, err)
	}
	return nil
}

// Heal removes every fault: it deletes the nftables tables (partitions,
// one-way cuts, losses on the bridge; cuts on hosts' interfaces) and sets
// every switch port up.
func (r *Rack) Heal(ctx context.Context) error {
	return r.mutate(ctx, func(f *Faults) error {
		var b strings.Builder
		for _, h := range r.Hosts {
			fmt.Fprintf(&b, "link set %s up\n", h.Port)
		}
		if _, err := run(ctx, b.String(), "ip", "-n", r.SwitchNetns, "-batch", "-"); err != nil {
			return err
		}
		for id := range f.HostCuts {
			if h, err := r.host(id); err == nil {
				if err := r.loadHostCut(ctx, h, ""); err != nil {
					return err
				}
			}
		}
		*f = Faults{}
		return nil
	})
}

// mutate changes the faults under the rack's lock, starting from those in
// the state file (another process may have changed them), loads the
// resulting ruleset into the bridge and saves the state.
func (r *Rack) mutate(ctx context.Context, change func(*Faults) error) error {
	if err := CheckRoot(); err != nil {
		return err
	}
	l, err := lock(r.Name)
	if err != nil {
		return err
	}
	defer l.release()
	if st, err := readState(r.Name); err == nil {
		r.Faults = st.Faults
	}
	f := r.Faults.clone()
	if err := change(&f); err != nil {
		return err
	}
	if err := r.loadRuleset(ctx, f); err != nil {
		return err
	}
	r.Faults = f
	return r.save()
}

func (f Faults) clone() Faults {
	c := Faults{Loss: maps.Clone(f.Loss), LinksDown: slices.Clone(f.LinksDown), HostCuts: maps.Clone(f.HostCuts)}
	for _, g := range f.Groups {
		c.Groups = append(c.Groups, slices.Clone(g))
	}
	for _, o := range f.OneWay {
		c.OneWay = append(c.OneWay, OneWayCut{slices.Clone(o.From), slices.Clone(o.To)})
	}
	return c
}

// normalizeGroups checks ids and that no host appears twice, sorts each
// group and adds the hosts named nowhere as one last group. One group (or
// none) means no partition: nil.
func (r *Rack) normalizeGroups(groups [][]int) ([][]int, error) {
	seen := map[int]bool{}
	var out [][]int
	for _, g := range groups {
		if len(g) == 0 {
			continue
		}
		for _, id := range g {
			if _, err := r.host(id); err != nil {
				return nil, err
			}
			if seen[id] {
				return nil, fmt.Errorf("host %s (id %d) appears more than once", HostName(id), id)
			}
			seen[id] = true
		}
		out = append(out, slices.Sorted(slices.Values(g)))
	}
	var rest []int
	for id := range r.Hosts {
		if !seen[id] {
			rest = append(rest, id)
		}
	}
	if len(rest) > 0 {
		out = append(out, rest)
	}
	if len(out) < 2 {
		return nil, nil
	}
	return out, nil
}

// Cuts returns the directed pairs (from, to) of host ids whose frames the
// bridge drops because of the partition and the one-way cuts, sorted.
func (f Faults) Cuts() [][2]int {
	set := map[[2]int]bool{}
	for i, gi := range f.Groups {
		for j, gj := range f.Groups {
			if i == j {
				continue
			}
			for _, a := range gi {
				for _, b := range gj {
					set[[2]int{a, b}] = true
				}
			}
		}
	}
	for _, o := range f.OneWay {
		for _, a := range o.From {
			for _, b := range o.To {
				if a != b {
					set[[2]int{a, b}] = true
				}
			}
		}
	}
	out := slices.Collect(maps.Keys(set))
	slices.SortFunc(out, func(x, y [2]int) int {
		if x[0] != y[0] {
			return x[0] - y[0]
		}
		return x[1] - y[1]
	})
	return out
}

// Ruleset returns the nftables table that implements f on this rack's
// bridge, or "" when f needs no rule (no partition, cut or loss).
func (r *Rack) Ruleset(f Faults) string {
	cuts := f.Cuts()
	if len(cuts) == 0 && len(f.Loss) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table bridge %s {\n", NftTable)
	if len(cuts) > 0 {
		fmt.Fprintf(&b, "\tset cut {\n\t\ttype ifname . ifname\n\t\telements = {")
		for i, c := range cuts {
			if i > 0 {
				b.WriteString(",")
			}
			if i%4 == 0 {
				b.WriteString("\n\t\t\t")
			} else {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%q . %q", r.Hosts[c[0]].Port, r.Hosts[c[1]].Port)
		}
		b.WriteString("\n\t\t}\n\t}\n")
	}
	fmt.Fprintf(&b, "\tchain forward {\n\t\ttype filter hook forward priority filter; policy accept;\n")
	if len(cuts) > 0 {
		b.WriteString("\t\tiifname . oifname @cut counter drop\n")
	}
	for _, id := range slices.Sorted(maps.Keys(f.Loss)) {
		k := int(math.Round(f.Loss[id] * 1000))
		port := r.Hosts[id].Port
		draw := fmt.Sprintf("numgen random mod 1000 < %d ", k)
		if k >= 1000 {
			draw = "" // every frame: nft rejects "< 1000" on a value that is always below it
		}
		fmt.Fprintf(&b, "\t\tiifname %q %scounter drop\n", port, draw)
		fmt.Fprintf(&b, "\t\toifname %q %scounter drop\n", port, draw)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// loadRuleset replaces the exo_lab table in the switch namespace by the one
// for f, atomically (one nft transaction: create if absent, delete, add).
func (r *Rack) loadRuleset(ctx context.Context, f Faults) error {
	for _, id := range slices.Collect(maps.Keys(f.Loss)) {
		if _, err := r.host(id); err != nil {
			return err
		}
	}
	rules := r.Ruleset(f)
	reset := fmt.Sprintf("table bridge %s\ndelete table bridge %s\n", NftTable, NftTable)
	if _, err := exec.LookPath("nft"); err != nil {
		if rules == "" {
			return nil // nothing to load, and without nft nothing was ever loaded
		}
		return needTool("nft", "nftables")
	}
	if _, err := run(ctx, reset+rules, "ip", "netns", "exec", r.SwitchNetns, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("loading the nftables rules into %s: %w", r.SwitchNetns, err)
	}
	return nil
}

// LiveRuleset returns the exo_lab table as the kernel has it (with its
// counters), or "" when there is none.
func (r *Rack) LiveRuleset(ctx context.Context) (string, error) {
	if err := needTool("nft", "nftables"); err != nil {
		return "", err
	}
	out, err := run(ctx, "", "ip", "netns", "exec", r.SwitchNetns, "nft", "list", "table", "bridge", NftTable)
	if err != nil {
		if strings.Contains(err.Error(), "No such file or directory") {
			return "", nil
		}
		return "", err
	}
	return out, nil
}

// LinkStates returns whether each host's switch port is up (operationally).
func (r *Rack) LinkStates(ctx context.Context) ([]bool, error) {
	out, err := run(ctx, "", "ip", "-n", r.SwitchNetns, "-o", "link", "show", "master", r.Bridge)
	if err != nil {
		return nil, err
	}
	up := make([]bool, len(r.Hosts))
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(fields[1], ":"), "@")
		for i, h := range r.Hosts {
			if h.Port == name {
				up[i] = strings.Contains(fields[2], "LOWER_UP")
			}
		}
	}
	return up, nil
}

// LiveHostCut returns the exo_lab netdev table of host id's namespace as
// the kernel has it, or "" when there is none.
func (r *Rack) LiveHostCut(ctx context.Context, id int) (string, error) {
	h, err := r.host(id)
	if err != nil {
		return "", err
	}
	if err := needTool("nft", "nftables"); err != nil {
		return "", err
	}
	out, err := run(ctx, "", "ip", "netns", "exec", h.Netns, "nft", "list", "table", "netdev", NftTable)
	if err != nil {
		if strings.Contains(err.Error(), "No such file or directory") {
			return "", nil
		}
		return "", err
	}
	return out, nil
}
