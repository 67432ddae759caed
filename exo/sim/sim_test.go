package sim

import (
	"testing"
)

func runSeeds(t *testing.T, hosts int, seeds uint64, opt func(int, uint64) Options) {
	t.Helper()
	for seed := uint64(1); seed <= seeds; seed++ {
		o := opt(hosts, seed)
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(); err != nil {
			t.Fatalf("hosts=%d seed=%d: %v\nreplay: go run ./cmd/exo sim --hosts %d --seed %d --seeds 1 -v", hosts, seed, err, hosts, seed)
		}
	}
}

func TestSimNoFaults(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 7} {
		runSeeds(t, n, 5, NoFaults)
	}
}

func TestSimFaults(t *testing.T) {
	for _, n := range []int{3, 4, 5} {
		runSeeds(t, n, 20, DefaultOptions)
	}
}
