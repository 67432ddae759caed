//go:build !exo_broken_distinct && !exo_broken_history

package explore

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSoak is the long exploration, off unless EXO_EXPLORE_SOAK=1. One run
// per (hosts, seed), two at a time; each stops at its depth, its state
// budget or its timeout. A counterexample is minimised and written to
// EXO_EXPLORE_OUT (default: the test's temp dir, kept on failure).
//
//	EXO_EXPLORE_SOAK=1 \
//	EXO_EXPLORE_HOSTS=3,4 EXO_EXPLORE_DEPTH=16 EXO_EXPLORE_STATES=6000000 \
//	EXO_EXPLORE_SEEDS=4 EXO_EXPLORE_TIMEOUT=3m \
//	EXO_EXPLORE_FAULTS=broadcasts=2,restarts=1,amnesia=1 \
//	go test ./exo/explore -run Soak -v -timeout 4h
//
// EXO_EXPLORE_FAULTS is a comma list of name=value among proposals, ticks,
// inflight, broadcasts, drops, dups, restarts, amnesia, compacts,
// fingerprint (deep|exported) and keepdead (0|1).
func TestSoak(t *testing.T) {
	if os.Getenv("EXO_EXPLORE_SOAK") != "1" {
		t.Skip("set EXO_EXPLORE_SOAK=1 (see docs/explore.md)")
	}
	env := func(k, d string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return d
	}
	num := func(k string, d int) int {
		v, err := strconv.Atoi(env(k, strconv.Itoa(d)))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return v
	}
	depth, states, seeds := num("EXO_EXPLORE_DEPTH", 16), num("EXO_EXPLORE_STATES", 6_000_000), num("EXO_EXPLORE_SEEDS", 4)
	timeout, err := time.ParseDuration(env("EXO_EXPLORE_TIMEOUT", "3m"))
	if err != nil {
		t.Fatal(err)
	}
	out := env("EXO_EXPLORE_OUT", t.TempDir())
	for _, hs := range strings.Split(env("EXO_EXPLORE_HOSTS", "3,4"), ",") {
		n, err := strconv.Atoi(hs)
		if err != nil {
			t.Fatal(err)
		}
		for seed := 1; seed <= seeds; seed++ {
			o := Defaults(n)
			o.MaxDepth, o.MaxStates, o.Timeout, o.Seed = depth, states, timeout, uint64(seed)
			if err := setFaults(&o, os.Getenv("EXO_EXPLORE_FAULTS")); err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("n%d_seed%d", n, seed), func(t *testing.T) {
				t.Parallel()
				r, err := Explore(o)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%v", r.String())
				if r.Violation == nil {
					return
				}
				m, err := Minimize(r.Violation)
				if err != nil {
					m = r.Violation
				}
				f := filepath.Join(out, fmt.Sprintf("cex_n%d_seed%d.trace", n, seed))
				if err := os.WriteFile(f, []byte(m.String()), 0o644); err != nil {
					t.Log(err)
				}
				t.Errorf("violation (trace in %s):\n%s", f, m)
			})
		}
	}
}

func setFaults(o *Options, spec string) error {
	for _, kv := range strings.Split(spec, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if k == "fingerprint" {
			switch v {
			case "deep":
				o.Fingerprint = FingerprintDeep
			case "exported":
				o.Fingerprint = FingerprintExported
			default:
				return fmt.Errorf("fingerprint %q: deep or exported", v)
			}
			continue
		}
		x, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: %v", kv, err)
		}
		p := map[string]*int{"proposals": &o.Proposals, "ticks": &o.TicksPerHost, "inflight": &o.MaxInFlight,
			"broadcasts": &o.Broadcasts, "drops": &o.Drops, "dups": &o.Dups, "restarts": &o.Restarts,
			"amnesia": &o.Amnesia, "compacts": &o.Compacts}[k]
		switch {
		case k == "keepdead":
			o.KeepDead = x == 1
		case p == nil:
			return fmt.Errorf("unknown fault %q", k)
		default:
			*p = x
		}
	}
	return nil
}
