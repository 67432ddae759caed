package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/lab"
)

// TestLabArgs reads exo lab's subcommands' arguments and flags without
// running them (no root needed): what each leaves in labOptions, and the
// usage errors (exit 2, "lab <subcommand>: ...").
func TestLabArgs(t *testing.T) {
	// The flags' defaults are in o whatever the subcommand.
	def := func(f func(o *labOptions)) labOptions {
		o := labOptions{Prefix: lab.DefaultPrefix, Hosts: 5, MTU: lab.DefaultMTU, Timeout: time.Second}
		f(&o)
		return o
	}
	for _, tc := range []struct {
		args []string
		want labOptions // compared without the streams
		err  string     // a usage error, instead
	}{
		{args: []string{"up"}, want: def(func(*labOptions) {})},
		{args: []string{"up", "--hosts", "3", "--prefix", "r2", "--mtu", "9000", "--force", "--json"},
			want: def(func(o *labOptions) { o.Prefix, o.Hosts, o.MTU, o.Force, o.JSON = "r2", 3, 9000, true, true })},
		{args: []string{"up", "--hosts", "0"}, err: "lab up: --hosts: 0 is outside 1..255"},
		{args: []string{"up", "--mtu", "67"}, err: "lab up: --mtu: 67 is outside 68..65535"},
		{args: []string{"down", "--prefix", "Bad"}, err: `lab down: --prefix: prefix "Bad": want lower-case`},
		{args: []string{"down", "--prefix", "r2", "--force"}, want: def(func(o *labOptions) { o.Prefix, o.Force = "r2", true })},
		{args: []string{"status", "--json"}, want: def(func(o *labOptions) { o.JSON = true })},
		{args: []string{"partition", "A,B/C"}, want: def(func(o *labOptions) { o.Spec = "A,B/C" })},
		{args: []string{"partition", "--one-way", "A:B,C"}, want: def(func(o *labOptions) { o.Spec, o.OneWay = "A:B,C", true })},
		{args: []string{"partition", "A:B"}, err: `lab partition: "A:B": FROM:TO is a one-way cut: add --one-way`},
		{args: []string{"partition", "--one-way", "A,B"}, err: `lab partition: --one-way wants FROM:TO`},
		{args: []string{"heal"}, want: def(func(*labOptions) {})},
		{args: []string{"link", "C", "down"}, want: def(func(o *labOptions) { o.Host = "C" })},
		{args: []string{"link", "C", "up"}, want: def(func(o *labOptions) { o.Host, o.Up = "C", true })},
		{args: []string{"link", "C", "off"}, err: `lab link: "off": want up or down`},
		{args: []string{"cut", "G", "egress"}, want: def(func(o *labOptions) { o.Host, o.Dir = "G", lab.CutEgress })},
		{args: []string{"cut", "G", "none"}, want: def(func(o *labOptions) { o.Host = "G" })},
		{args: []string{"cut", "G", "both"}, err: `lab cut: "both": want ingress, egress or none`},
		{args: []string{"loss", "B", "10%"}, want: def(func(o *labOptions) { o.Host, o.Fraction = "B", 0.1 })},
		{args: []string{"loss", "B", "0.25"}, want: def(func(o *labOptions) { o.Host, o.Fraction = "B", 0.25 })},
		{args: []string{"loss", "B", "2"}, err: "lab loss: fraction 2 is outside 0..1"},
		{args: []string{"loss", "B", "x"}, err: `lab loss: fraction "x"`},
		{args: []string{"probe"}, want: def(func(*labOptions) {})},
		{args: []string{"probe", "A", "C", "--timeout", "200ms", "--json"},
			want: def(func(o *labOptions) { o.Host, o.To, o.Timeout, o.JSON = "A", "C", 200*time.Millisecond, true })},
		{args: []string{"probe", "--timeout", "0"}, err: "lab probe: --timeout must be positive"},
		{args: []string{"exec", "A", "--", "ip", "-br", "addr"}, want: def(func(o *labOptions) { o.Host, o.Argv = "A", []string{"ip", "-br", "addr"} })},
		{args: []string{"exec", "A", "B", "--", "true"}, err: `lab exec: want exactly one HOST before --, got ["A" "B"]`},
	} {
		name := strings.Join(tc.args, " ")
		var got *labOptions
		cmd := newLabCmd(func(_ context.Context, o *labOptions) error { got = o; return nil })
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.ExecuteContext(context.Background())
		if tc.err != "" {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != 2 || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s: got error %v, want exit 2 with %q", name, err, tc.err)
			}
			if got != nil {
				t.Errorf("%s: ran despite the usage error", name)
			}
			continue
		}
		if err != nil || got == nil {
			t.Errorf("%s: got error %v, ran %v", name, err, got != nil)
			continue
		}
		o := *got
		o.In, o.Out, o.Err = nil, nil, nil
		if !reflect.DeepEqual(o, tc.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", name, o, tc.want)
		}
	}
}

// labRack is a 4-host rack as exo lab up would build it, without faults.
func labRack() *lab.Rack {
	r := &lab.Rack{Name: "exo", Bridge: "br0", SwitchNetns: "exo-sw", MTU: 1500, Subnet: netip.MustParsePrefix("10.77.0.0/16")}
	for i := range 4 {
		n := lab.HostName(i)
		r.Hosts = append(r.Hosts, lab.Host{ID: i, Name: n, Netns: "exo-" + n, Ifname: "exo0", MAC: lab.HostMAC(i), OOBAddr: lab.HostAddr(r.Subnet, i), Port: "port-" + n})
	}
	return r
}

// TestLabText: what exo lab up, status, probe and the fault commands print
// (package lab's text forms), for a rack without faults and one with every
// kind.
func TestLabText(t *testing.T) {
	var b strings.Builder
	check := func(what, want string) {
		t.Helper()
		if b.String() != want {
			t.Errorf("%s:\n%s\nwant:\n%s", what, b.String(), want)
		}
		b.Reset()
	}
	r := labRack()
	r.WriteHosts(&b, nil)
	check("hosts", `HOST  ID  NETNS  IFNAME  MAC                OOB ADDR   PORT    LINK  LOSS
A     0   exo-A  exo0    02:e0:00:00:00:01  10.77.0.1  port-A  up    -
B     1   exo-B  exo0    02:e0:00:00:00:02  10.77.0.2  port-B  up    -
C     2   exo-C  exo0    02:e0:00:00:00:03  10.77.0.3  port-C  up    -
D     3   exo-D  exo0    02:e0:00:00:00:04  10.77.0.4  port-D  up    -
`)
	r.WriteFaults(&b)
	check("no faults", "faults: none\n")
	r.Faults = lab.Faults{Groups: [][]int{{0, 1}, {2, 3}}, OneWay: []lab.OneWayCut{{From: []int{0}, To: []int{2, 3}}},
		Loss: map[int]float64{1: 0.1, 3: 0.255}, LinksDown: []int{2}, HostCuts: map[int]string{3: "egress", 0: "ingress"}}
	st := &lab.Status{Rack: r, LinksUp: []bool{true, true, false, true}, Ruleset: "table bridge exo_lab {\n}\n"}
	st.WriteText(&b)
	check("status", `rack exo: 4 hosts, bridge br0 in namespace exo-sw, MTU 1500, OOB subnet 10.77.0.0/16
HOST  ID  NETNS  IFNAME  MAC                OOB ADDR   PORT    LINK  LOSS
A     0   exo-A  exo0    02:e0:00:00:00:01  10.77.0.1  port-A  up    -
B     1   exo-B  exo0    02:e0:00:00:00:02  10.77.0.2  port-B  up    10.0%
C     2   exo-C  exo0    02:e0:00:00:00:03  10.77.0.3  port-C  DOWN  -
D     3   exo-D  exo0    02:e0:00:00:00:04  10.77.0.4  port-D  up    25.5%
partition:  A,B / C,D
one-way:    A -> C,D dropped
loss:       B 10.0% of frames sent and received
loss:       D 25.5% of frames sent and received
links down: C
host cut:   A ingress dropped on its own interface
host cut:   D egress dropped on its own interface
nftables ruleset in exo-sw (nft list table bridge exo_lab):
table bridge exo_lab {
}
`)
	m := [][]bool{{true, true, false, false}, {true, true, true, false}, {false, true, true, true}, {false, false, true, true}}
	r.WriteMatrix(&b, m)
	for _, p := range []lab.Path{{From: r.Hosts[0], To: r.Hosts[2], Reached: true}, {From: r.Hosts[2], To: r.Hosts[0]}} {
		fmt.Fprintln(&b, p)
	}
	check("probe", `FROM\TO  A   B   C   D
A        -   ok  X   X
B        ok  -   ok  X
C        X   ok  -   ok
D        X   X   ok  -
A -> C: ok
C -> A: dropped
`)
}

// TestLabDownInUse: exo lab down refuses a rack that a live process
// claims (a chaos run, a test: here this one), names it and says how to
// remove it anyway; --force does, and so does down once the claim ended.
func TestLabDownInUse(t *testing.T) {
	if err := lab.CheckRoot(); err != nil {
		t.Skipf("exo lab down needs root: %v", err)
	}
	const prefix = "exotdown"
	c, err := lab.ClaimPrefix(prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	o := &labOptions{Prefix: prefix, Out: &out}
	err = runLabDown(context.Background(), o)
	if !errors.Is(err, lab.ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("down of a claimed rack: %v; want ErrInUse naming pid %d and --force", err, os.Getpid())
	}
	if out.Len() > 0 {
		t.Errorf("down refused, yet printed %q", out.String())
	}
	o.Force = true
	if err := runLabDown(context.Background(), o); err != nil || !strings.Contains(out.String(), "rack exotdown down") {
		t.Fatalf("down --force: %v, printed %q", err, out.String())
	}
	c.Release()
	out.Reset()
	o.Force = false
	if err := runLabDown(context.Background(), o); err != nil || !strings.Contains(out.String(), "rack exotdown down") {
		t.Fatalf("down once the claim ended: %v, printed %q", err, out.String())
	}
}
