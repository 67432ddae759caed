// Package lab builds a real local rack out of Linux network namespaces: the
// lab in which the Exo daemons, the XDP fast path, the probes and the chaos
// nemesis run without any hardware.
//
// A rack of n hosts is n + 1 network namespaces:
//
//	<prefix>-sw                      the switch: bridge br0 and one port per host
//	  br0 ── port-A ── veth ── exo0  in <prefix>-A   02:e0:00:00:00:01  10.77.0.1/16
//	      ── port-B ── veth ── exo0  in <prefix>-B   02:e0:00:00:00:02  10.77.0.2/16
//	      ── ...
//
// Frames really cross the bridge; nothing is added to the root namespace, so
// the lab's traffic can only ever reach the namespaces the lab created.
// Faults are real too: [Rack.Partition], [Rack.PartitionOneWay] and
// [Rack.DropRate] load drop rules into an nftables table (family bridge,
// table exo_lab) in the switch namespace, [Rack.SetLink] sets a switch port
// down (the host sees its carrier go), and [Rack.Heal] removes every fault.
//
// The usage loop:
//
//	r, err := lab.Up(ctx, lab.Options{Hosts: 5})   // needs root
//	defer lab.Down(ctx, r.Name)
//	cmd := r.Command(0, "exo", "daemon", ...)       // runs inside host A's namespace
//	err = r.Partition(ctx, [][]int{{0, 1}, {2, 3, 4}})
//	ok, err := r.Probe(ctx, 0, 2, time.Second)      // false: the bridge drops A -> C
//	err = r.Heal(ctx)
//
// A later process finds a running rack with [Load]; the faults in force are
// kept in a small state file under /run/exo-lab. The implementation drives
// iproute2 (ip) and nftables (nft) with os/exec and enters namespaces with
// setns(2) only to open sockets (the probes) and to write per-namespace
// sysctls; see docs/lab.md.
package lab
