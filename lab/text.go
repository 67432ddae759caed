package lab

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// The text forms of a rack, its faults and what the probes found, as exo
// lab prints them.

// WriteHosts writes the rack's host table, a host per row: namespace,
// interface, MAC, OOB address, bridge port, link and loss. linksUp is the
// state of each host's switch port by id; nil: all up (a rack just
// built).
func (r *Rack) WriteHosts(w io.Writer, linksUp []bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tID\tNETNS\tIFNAME\tMAC\tOOB ADDR\tPORT\tLINK\tLOSS")
	for _, h := range r.Hosts {
		link := "up"
		if linksUp != nil && !linksUp[h.ID] {
			link = "DOWN"
		}
		loss := "-"
		if f, ok := r.Faults.Loss[h.ID]; ok {
			loss = fmt.Sprintf("%.1f%%", f*100)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, h.ID, h.Netns, h.Ifname, h.MAC, h.OOBAddr, h.Port, link, loss)
	}
	return tw.Flush()
}

// WriteFaults writes the faults in force, one line each, hosts by name
// ("faults: none" when there is none).
func (r *Rack) WriteFaults(w io.Writer) {
	f := r.Faults
	if f.Empty() {
		fmt.Fprintln(w, "faults: none")
		return
	}
	names := func(ids []int) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = r.Hosts[id].Name
		}
		return strings.Join(s, ",")
	}
	if len(f.Groups) > 0 {
		g := make([]string, len(f.Groups))
		for i, ids := range f.Groups {
			g[i] = names(ids)
		}
		fmt.Fprintf(w, "partition:  %s\n", strings.Join(g, " / "))
	}
	for _, c := range f.OneWay {
		fmt.Fprintf(w, "one-way:    %s -> %s dropped\n", names(c.From), names(c.To))
	}
	for _, id := range slices.Sorted(maps.Keys(f.Loss)) {
		fmt.Fprintf(w, "loss:       %s %.1f%% of frames sent and received\n", r.Hosts[id].Name, f.Loss[id]*100)
	}
	if len(f.LinksDown) > 0 {
		fmt.Fprintf(w, "links down: %s\n", names(f.LinksDown))
	}
	for _, id := range slices.Sorted(maps.Keys(f.HostCuts)) {
		fmt.Fprintf(w, "host cut:   %s %s dropped on its own interface\n", r.Hosts[id].Name, f.HostCuts[id])
	}
}

// WriteText writes the status as exo lab status prints it: the rack, its
// host table with the links as the kernel has them, the faults in force
// and the nftables ruleset (or why there is none).
func (st *Status) WriteText(w io.Writer) error {
	r := st.Rack
	fmt.Fprintf(w, "rack %s: %d hosts, bridge %s in namespace %s, MTU %d, OOB subnet %s\n",
		r.Name, len(r.Hosts), r.Bridge, r.SwitchNetns, r.MTU, r.Subnet)
	if err := r.WriteHosts(w, st.LinksUp); err != nil {
		return err
	}
	r.WriteFaults(w)
	if st.RulesetErr != nil {
		fmt.Fprintf(w, "nftables: %v\n", st.RulesetErr)
	} else if st.Ruleset != "" {
		fmt.Fprintf(w, "nftables ruleset in %s (nft list table bridge %s):\n%s", r.SwitchNetns, NftTable, st.Ruleset)
	}
	return nil
}

// WriteMatrix writes who reaches whom ([Rack.Matrix]'s m): a row per
// sender, a column per receiver, ok or X.
func (r *Rack) WriteMatrix(w io.Writer, m [][]bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "FROM\\TO")
	for _, h := range r.Hosts {
		fmt.Fprintf(tw, "\t%s", h.Name)
	}
	fmt.Fprintln(tw)
	for a, row := range m {
		fmt.Fprint(tw, r.Hosts[a].Name)
		for b, ok := range row {
			switch {
			case a == b:
				fmt.Fprint(tw, "\t-")
			case ok:
				fmt.Fprint(tw, "\tok")
			default:
				fmt.Fprint(tw, "\tX")
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// String is the path as exo lab probe prints it: "A -> C: ok" or
// "A -> C: dropped".
func (p Path) String() string {
	result := "dropped"
	if p.Reached {
		result = "ok"
	}
	return fmt.Sprintf("%s -> %s: %s", p.From.Name, p.To.Name, result)
}
