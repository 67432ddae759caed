// Package measure measures exo on a lab rack of this machine (package lab:
// one network namespace per host, veth pairs, a bridge) against baselines
// measured in the same run on the same hosts, so that a ratio compares
// like with like on a shared, noisy machine. It is what exo bench, exo
// probe and exo demo run; cmd/exo holds only their flags and printing.
//
// What it measures, and how:
//
//   - Bench: the raw-frame baseline between hosts A and B (one-way latency
//     as half the round trip of a frame echoed by B, and the frame rate of
//     one sender), then the daemons of every offload mode asked for:
//     agreement latency (publish -> agreed at the publisher, one message
//     in flight), agreed 64-byte messages per second without batching (one
//     message per frame) and with it, daemon and whole-machine CPU per
//     agreed message (from /proc), memory, idle CPU, and the batched rate
//     under a flood of bad frames. Optionally etcd raft (tools/raftpeer,
//     one process per host namespace) with the same loads, interleaved
//     with exo's rounds; and several rack sizes, with a table and a plot.
//     Figures over several rounds are medians. docs/BENCHMARKS.md explains
//     every figure.
//   - Probe: the paths of the seed's latency table between A and B: TCP,
//     UDP, UDP broadcast ping-pongs, raw frames, and Exo agreement, as HDR
//     percentiles and a CDF plot.
//   - Demo: the appliance end to end: publish from every host at once,
//     check every host delivered the same stream, throughput and latency.
//
// Every run brings up its rack with cluster.WithLab, which also starts
// and stops the daemons and tears the rack down whatever happens.
//
// Some ends of a measurement must run inside a host's namespace: Raw (the
// raw-frame echo, ping, sink and flood, and the injector of bad frames)
// and Endpoint (one end of a probe's ping-pong). The exo binary runs
// itself there, as the hidden commands exo raw and exo probe-endpoint,
// and reads the one JSON object each prints (RawResult, EndpointResult).
//
// A measurement logs its figures to an io.Writer as it goes, for a person
// to follow, and returns them as a report whose JSON form is exo's --json
// output.
package measure
