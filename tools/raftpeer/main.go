// Command raftpeer is the etcd raft peer of `exo bench --peer raft`: one
// raft node (go.etcd.io/raft/v3, a RawNode loop, raft.MemoryStorage, no
// fsync) talking to the other nodes over persistent TCP connections, and a
// client interface on which a load generator proposes and hears when its
// proposal is committed and applied at that node (see client.go).
//
// It is its own Go module so that exo itself does not depend on raft:
//
//	cd tools/raftpeer && go build -o /tmp/raftpeer .
//	raftpeer node --id 1 --peers 1=10.77.0.1:7400,2=10.77.0.2:7400,3=10.77.0.3:7400 \
//	    --client unix:/tmp/raft-1.sock --campaign
//	raftpeer version
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "raftpeer:", err)
		os.Exit(2)
	}
}

func usage() error {
	return fmt.Errorf("usage: raftpeer node --id N --peers 1=HOST:PORT,2=HOST:PORT,... [--listen HOST:PORT] --client unix:PATH|tcp:HOST:PORT [--campaign] [--tick 5ms] [--election-ticks 40] [--heartbeat-ticks 2] [--procs 1]\n       raftpeer version")
}

func run(args []string) error {
	if len(args) == 0 {
		return usage()
	}
	switch args[0] {
	case "version":
		fmt.Println(raftVersion())
		return nil
	case "node":
		return runNode(args[1:])
	default:
		return usage()
	}
}

// raftVersion names the raft module this binary was built with.
func raftVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "go.etcd.io/raft/v3" {
				return d.Path + " " + d.Version
			}
		}
	}
	return "go.etcd.io/raft/v3 (unknown version)"
}

// parsePeers reads "1=HOST:PORT,2=HOST:PORT".
func parsePeers(s string) (map[uint64]string, error) {
	peers := map[uint64]string{}
	for _, f := range strings.Split(s, ",") {
		ids, addr, ok := strings.Cut(strings.TrimSpace(f), "=")
		id, err := strconv.ParseUint(ids, 10, 64)
		if !ok || err != nil || id == 0 || addr == "" {
			return nil, fmt.Errorf("--peers: %q: want ID=HOST:PORT with ID >= 1", f)
		}
		if _, dup := peers[id]; dup {
			return nil, fmt.Errorf("--peers: id %d twice", id)
		}
		peers[id] = addr
	}
	return peers, nil
}

func runNode(args []string) error {
	fs := flag.NewFlagSet("raftpeer node", flag.ContinueOnError)
	id := fs.Uint64("id", 0, "this node's raft id (1..n), one of --peers")
	peersFlag := fs.String("peers", "", "every node of the group: ID=HOST:PORT,...")
	listen := fs.String("listen", "", "address of the peer listener (default: this node's address in --peers)")
	clientAddr := fs.String("client", "", "client interface: unix:PATH or tcp:HOST:PORT")
	campaign := fs.Bool("campaign", false, "start an election at once (makes this node the leader of a fresh group)")
	tick := fs.Duration("tick", 5*time.Millisecond, "raft tick")
	election := fs.Int("election-ticks", 40, "election timeout in ticks")
	heartbeat := fs.Int("heartbeat-ticks", 2, "heartbeat interval in ticks")
	timeout := fs.Duration("proposal-timeout", 3*time.Second, "answer 'dropped' to a proposal not applied here within this")
	verbose := fs.Bool("v", false, "log raft's messages to stderr")
	procs := fs.Int("procs", 1, "GOMAXPROCS of the node (0: Go's default, one per CPU); with several nodes on few CPUs, 1 saves the hand-offs between threads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	peers, err := parsePeers(*peersFlag)
	if err != nil {
		return err
	}
	if _, ok := peers[*id]; !ok {
		ids := make([]string, 0, len(peers))
		for k := range peers {
			ids = append(ids, strconv.FormatUint(k, 10))
		}
		sort.Strings(ids)
		return fmt.Errorf("--id %d is not among the --peers ids (%s)", *id, strings.Join(ids, ","))
	}
	if *listen == "" {
		*listen = peers[*id]
	}
	if *clientAddr == "" {
		return fmt.Errorf("--client: need unix:PATH or tcp:HOST:PORT")
	}
	pl, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	network, a := splitAddr(*clientAddr)
	if network == "unix" {
		os.Remove(a)
	}
	cl, err := net.Listen(network, a)
	if err != nil {
		pl.Close()
		return err
	}
	logger := log.New(os.Stderr, fmt.Sprintf("raftpeer %d: ", *id), log.Lmicroseconds)
	n, err := NewNode(Config{ID: *id, Peers: peers, PeerListener: pl, ClientListener: cl, Tick: *tick,
		ElectionTicks: *election, HeartbeatTicks: *heartbeat, Campaign: *campaign, ProposalTimeout: *timeout, Logger: logger, RaftVerbose: *verbose})
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		n.Stop()
	}()
	logger.Printf("%s, %d nodes, peers on %s, clients on %s", raftVersion(), len(peers), pl.Addr(), *clientAddr)
	err = n.Run()
	if network == "unix" {
		os.Remove(a)
	}
	if st, ok := n.finalStatus(); ok {
		logger.Printf("stopped: term %d, leader %d, applied %d (%d entries, hash %s)", st.Term, st.Leader, st.Applied, st.Entries, st.Hash)
	}
	return err
}

// quietWriter passes on raft's warnings and errors only (elections and
// leader changes are INFO: dropped unless -v).
type quietWriter struct{ l *log.Logger }

func (q quietWriter) Write(p []byte) (int, error) {
	s := string(p)
	if strings.Contains(s, "WARN") || strings.Contains(s, "ERROR") || strings.Contains(s, "PANIC") || strings.Contains(s, "FATAL") ||
		strings.Contains(s, "became leader") {
		q.l.Print(strings.TrimRight(s, "\n"))
	}
	return len(p), nil
}
