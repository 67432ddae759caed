package lab

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestHostNames(t *testing.T) {
	for _, c := range []struct {
		id   int
		name string
	}{{0, "A"}, {1, "B"}, {25, "Z"}, {26, "AA"}, {27, "AB"}, {51, "AZ"}, {52, "BA"}, {254, "IU"}} {
		if got := HostName(c.id); got != c.name {
			t.Errorf("HostName(%d) = %q, want %q", c.id, got, c.name)
		}
		if id, ok := ParseHostName(strings.ToLower(c.name)); !ok || id != c.id {
			t.Errorf("ParseHostName(%q) = %d, %v, want %d", c.name, id, ok, c.id)
		}
	}
	for id := range 255 {
		if got, ok := ParseHostName(HostName(id)); !ok || got != id {
			t.Fatalf("round trip of %d: %d %v", id, got, ok)
		}
	}
	for _, bad := range []string{"", "1", "A1", "sw-", "ABCD"} {
		if _, ok := ParseHostName(bad); ok {
			t.Errorf("ParseHostName(%q) accepted", bad)
		}
	}
}

func TestPrefix(t *testing.T) {
	for _, ok := range []string{"exo", "exot12345", "a", "rack2"} {
		if err := ValidPrefix(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Exo", "1exo", "exo-a", "exo_a", "abcdefghijklm", "../x"} {
		if ValidPrefix(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestLayout(t *testing.T) {
	r := newRack("exo", 3, 1500, DefaultSubnet)
	h := r.Hosts[2]
	if h.Name != "C" || h.Netns != "exo-C" || h.Ifname != "exo0" || h.Port != "port-C" ||
		h.MAC.String() != "02:e0:00:00:00:03" || h.OOBAddr != netip.MustParseAddr("10.77.0.3") {
		t.Errorf("host C = %+v", h)
	}
	if r.SwitchNetns != "exo-sw" || r.Bridge != "br0" {
		t.Errorf("switch = %s %s", r.SwitchNetns, r.Bridge)
	}
	if got := HostAddr(netip.MustParsePrefix("10.77.0.0/16"), 254); got != netip.MustParseAddr("10.77.0.255") {
		t.Errorf("HostAddr(254) = %s", got)
	}
	o := Options{Hosts: 255}
	if err := o.setDefaults(); err != nil {
		t.Errorf("255 hosts in the default /16: %v", err)
	}
	o = Options{Hosts: 255, Subnet: netip.MustParsePrefix("10.9.9.0/24")}
	if err := o.setDefaults(); err == nil {
		t.Errorf("255 hosts fit a /24?")
	}
	for _, o := range []Options{{Hosts: 0}, {Hosts: 256}, {Hosts: 3, MTU: 20}, {Hosts: 3, Prefix: "X"}, {Hosts: 3, Subnet: netip.MustParsePrefix("fd00::/64")}} {
		if err := o.setDefaults(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestPartitionGroups(t *testing.T) {
	r := newRack("exo", 5, 1500, DefaultSubnet)
	g, err := r.normalizeGroups([][]int{{1, 0}, {4, 2}})
	if err != nil || !slices.EqualFunc(g, [][]int{{0, 1}, {2, 4}, {3}}, slices.Equal) {
		t.Errorf("groups = %v, %v; want the rest (D) as a third group", g, err)
	}
	if g, err := r.normalizeGroups([][]int{{0, 1, 2, 3, 4}}); err != nil || g != nil {
		t.Errorf("one group = %v, %v; want no partition", g, err)
	}
	if _, err := r.normalizeGroups([][]int{{0, 1}, {1, 2}}); err == nil || !strings.Contains(err.Error(), "host B (id 1) appears more than once") {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := r.normalizeGroups([][]int{{0}, {5}}); err == nil {
		t.Errorf("id 5 of 5 hosts accepted")
	}
	f := Faults{Groups: [][]int{{0}, {1, 2}}, OneWay: []OneWayCut{{From: []int{1}, To: []int{2}}}}
	want := [][2]int{{0, 1}, {0, 2}, {1, 0}, {1, 2}, {2, 0}}
	if got := f.Cuts(); !slices.Equal(got, want) {
		t.Errorf("cuts = %v, want %v", got, want)
	}
}

func TestRuleset(t *testing.T) {
	r := newRack("exo", 3, 1500, DefaultSubnet)
	if got := r.Ruleset(Faults{LinksDown: []int{1}}); got != "" {
		t.Errorf("no drop rule needed, got %q", got)
	}
	got := r.Ruleset(Faults{Groups: [][]int{{0}, {1, 2}}, Loss: map[int]float64{2: 0.25}})
	want := `table bridge exo_lab {
	set cut {
		type ifname . ifname
		elements = {
			"port-A" . "port-B", "port-A" . "port-C", "port-B" . "port-A", "port-C" . "port-A"
		}
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		iifname . oifname @cut counter drop
		iifname "port-C" numgen random mod 1000 < 250 counter drop
		oifname "port-C" numgen random mod 1000 < 250 counter drop
	}
}
`
	if got != want {
		t.Errorf("ruleset:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseGroups(t *testing.T) {
	r := newRack("exo", 5, 1500, DefaultSubnet)
	g, err := r.ParseGroups("A,b/2,D,E")
	if err != nil || fmt.Sprint(g) != "[[0 1] [2 3 4]]" {
		t.Errorf("ParseGroups = %v, %v", g, err)
	}
	for spec, want := range map[string]string{
		"A,B/B,C": "host B appears more than once (B and B)",
		"B,0/A":   "host A appears more than once (0 and A)",
		"A,,B":    "empty host name",
		"A/F":     `host "F": the rack has hosts A..E`,
		"A/x1":    `want a name (A, B, ...) or an id`,
	} {
		if _, err := r.ParseGroups(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseGroups(%q) = %v, want %q", spec, err, want)
		}
	}
	from, to, err := r.ParseOneWay("A,B:C,D,E")
	if err != nil || fmt.Sprint(from, to) != "[0 1] [2 3 4]" {
		t.Errorf("ParseOneWay = %v %v %v", from, to, err)
	}
	for _, bad := range []string{"A,B", "A:B:C", "A/B:C", "A:A"} {
		if _, _, err := r.ParseOneWay(bad); err == nil {
			t.Errorf("ParseOneWay(%q) accepted", bad)
		}
	}
}
