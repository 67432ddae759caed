package main

import (
	"context"
	"errors"
	"io"
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
