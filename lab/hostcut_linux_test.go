package lab

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestCutHost: a cut on a host's own interface drops one direction only,
// inside the host (ingress: it hears nothing; egress: nothing it sends
// leaves), a second cut replaces the first, and Heal removes it.
func TestCutHost(t *testing.T) {
	needRack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := upOrSkip(t, ctx, Options{Prefix: "labcut", Hosts: 3, Force: true})
	if err := r.CutHost(ctx, 0, CutIngress); err != nil {
		t.Fatal(err)
	}
	reach(t, ctx, r, "B>A", "C>A")
	if live, err := r.LiveHostCut(ctx, 0); err != nil || !strings.Contains(live, "hook ingress") {
		t.Fatalf("A's netdev table: %q, %v", live, err)
	}
	if err := r.CutHost(ctx, 0, CutEgress); err != nil {
		t.Fatal(err)
	}
	reach(t, ctx, r, "A>B", "A>C")
	if got := r.Faults.HostCuts[0]; got != CutEgress {
		t.Fatalf("faults say %q for A, want %q", got, CutEgress)
	}
	if err := r.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if live, err := r.LiveHostCut(ctx, 0); err != nil || live != "" {
		t.Fatalf("after the heal, A still has %q (%v)", live, err)
	}
	reach(t, ctx, r)
	if err := r.CutHost(ctx, 9, CutEgress); err == nil {
		t.Fatal("a cut on host id 9 of a 3-host rack was accepted")
	}
	if err := r.CutHost(ctx, 1, "sideways"); err == nil || !strings.Contains(err.Error(), "ingress") {
		t.Fatalf("a bad direction: %v", err)
	}
}
