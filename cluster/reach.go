package cluster

import (
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/lab"
)

// connected returns, for the faults in force and the hosts down, whether
// frames from a reach b (conn[a][b]): no partition, one-way cut on the
// bridge or cut on either host's own interface stands between them, and
// both run. Frame loss is not a cut (most frames still cross).
func connected(n int, f lab.Faults, dead map[int]bool) [][]bool {
	conn := make([][]bool, n)
	for a := range conn {
		conn[a] = make([]bool, n)
		for b := range conn[a] {
			conn[a][b] = !dead[a] && !dead[b]
		}
	}
	for _, c := range f.Cuts() {
		if c[0] < n && c[1] < n {
			conn[c[0]][c[1]] = false
		}
	}
	for h, dir := range f.HostCuts {
		if h >= n {
			continue
		}
		for x := 0; x < n; x++ {
			if x == h {
				continue
			}
			switch dir {
			case lab.CutIngress:
				conn[x][h] = false
			case lab.CutEgress:
				conn[h][x] = false
			}
		}
	}
	for _, h := range f.LinksDown {
		for x := 0; x < n && h < n; x++ {
			conn[x][h], conn[h][x] = false, false
		}
	}
	return conn
}

// majorityConnected reports whether a majority of the n hosts run and reach
// each other both ways: the condition under which the protocol promises
// that agreement moves (PROTOCOL.md section 8, liveness). It tries every
// set of hosts (n is small on a lab rack).
func majorityConnected(conn [][]bool) bool {
	n := len(conn)
	need := exo.Majority(n)
	if n > 20 {
		return false // not a lab rack's size: no claim
	}
	for set := 0; set < 1<<n; set++ {
		if popcount(set) < need {
			continue
		}
		ok := true
		for a := 0; a < n && ok; a++ {
			if set&(1<<a) == 0 {
				continue
			}
			for b := 0; b < n && ok; b++ {
				if a != b && set&(1<<b) != 0 && !(conn[a][b] && conn[b][a]) {
					ok = false
				}
			}
			if !conn[a][a] { // a host down is connected to nobody
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func popcount(x int) int {
	c := 0
	for ; x != 0; x &= x - 1 {
		c++
	}
	return c
}
