/*
Package exo is the pure core of Exo, a rack atomic broadcast: the hosts of
one rack agree on one total order of messages by taking turns (token
order) broadcasting frames that carry a sequence number and the ids of the
previous floor(n/2) senders; an entry is agreed once a chain of a majority
of distinct senders follows it (docs/protocol.md).

The core does no I/O, reads no clock and starts no goroutine, in the shape
of etcd raft: an embedder feeds it inputs (frames heard, out-of-band
messages, proposals, ticks) and carries out what it asks for in a Ready.
The daemon (package daemon) is one embedder, the simulator (package
exo/sim) and the explorer (package exo/explore) are others; they drive the
very same code.

# Starting a node

A host that starts a rack calls NewNode; one restarted with its durable
state calls RestartNode with the HardState it persisted; one that lost its
state (a wiped disk, a new host joining a running rack) calls
NewAmnesiacNode and rejoins by state transfer (transfer.go).

	nd, err := exo.NewNode(exo.Config{ID: 2, Hosts: 5, Group: 7})
	// or: exo.RestartNode(cfg, hardStateFromDisk)
	// or: exo.NewAmnesiacNode(cfg)

# The loop

Every input may leave work in the node's Ready. The embedder takes it,
carries it out in this order, and then calls Advance:

	for {
		select {
		case f := <-framesHeard:
			nd.StepFrame(&f) // a frame from the broadcast segment
		case m := <-oobReceived:
			nd.Step(m) // an out-of-band message from another host
		case p := <-proposals:
			if err := nd.Propose(p); err != nil {
				// queue full, too large, not a member: tell the publisher
			}
		case <-ticker.C:
			nd.Tick()
		}
		if !nd.HasReady() {
			continue
		}
		rd := nd.Ready()
		// 1. Fetches may leave first: they ask, and promise nothing.
		// 2. Persist: cut the log back to rd.Truncate (when
		//    rd.HasTruncate), append rd.Appended, and the meta of
		//    nd.HardStateMeta(); sync under the fsync policy. Nothing below
		//    may leave before the disk holds what it depends on (a promise
		//    must survive a crash).
		// 3. Broadcast rd.Frames, in order.
		// 4. Send rd.Messages (out of band; a message whose ArchiveHi is
		//    set is completed from the embedder's retained log first:
		//    FillFromArchive).
		// 5. Deliver rd.Agreed to applications, in order, each once; tell
		//    the publishers of rd.Dropped; act on rd.Events and count
		//    rd.Rejects.
		nd.Advance()
	}

The slices of a Ready stay valid until Advance and no longer: Advance
recycles them. A Ready may be empty of all but events.

# Time

Tick is one protocol tick (the daemon's default is 250 us). NextTick says
how many ticks may pass with no input before one of them can do anything:
an embedder that keeps wall-clock time sleeps that long and then calls Tick
once per tick that elapsed; an idle rack costs a wake-up per deadline, not
one per tick. The simulator checks that promise on every tick of every run.

# Threading

A Node is not safe for concurrent use: one goroutine (or one lock) owns
it, from StepFrame to Advance. The embedder's I/O (the broadcast socket,
the OOB transport, the durable log) runs outside it and hands inputs in.

# Where the rules live

The fast-path rules, those that an XDP program and an FPGA engine also
implement, are defined once here and checked against the same golden
vectors by all three (docs/vectors.md): Pointers.Classify and
Pointers.Accept (receive: pointers.go), Engine.Step (transmit, token mode:
engine.go), the frame codec (frame.go, wire_gen.go generated from
hw/wire.json) and the frame tag (tag.go, siphash.go). Everything those
rules cannot decide alone (a gap, a divergence, another epoch, a view
change) is a slow-path verdict left to the Node: gap repair and catch-up
(catchup.go), token takeover and the failure detector (detector.go), view
changes (viewchange.go), membership changes (membership.go), key rotation
(keys.go), state transfer (transfer.go), what the members hold (held.go)
and the control of a fast path that sends (fastpath.go).

# Durable state and retention

HardStateMeta is the state besides the log to persist with every Ready
(the daemon writes it to its durable log's meta file). Compact drops agreed
entries from the front of the in-memory log, never inside a configuration
change; an embedder that keeps more on disk tells the node where that
archive starts (SetArchive), and fetches from below the log are answered
from it.
*/
package exo
