package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Config is one node's configuration.
type Config struct {
	ID    uint64            // raft id, 1..n
	Peers map[uint64]string // raft id -> host:port of its peer listener (every node, this one included)
	// PeerListener accepts the other nodes' connections.
	PeerListener net.Listener
	// ClientListener accepts load generators (see client.go).
	ClientListener net.Listener
	Tick           time.Duration // one raft tick
	ElectionTicks  int
	HeartbeatTicks int
	// Campaign makes this node start an election at once (so that the
	// bench knows which node leads).
	Campaign bool
	// ProposalTimeout: a proposal not applied here within it is answered
	// "dropped" (the client retries): a proposal forwarded to a leader that
	// lost it, for example.
	ProposalTimeout time.Duration
	// Logger gets the node's own messages and raft's warnings (and raft's
	// info messages too with RaftVerbose).
	Logger      *log.Logger
	RaftVerbose bool
}

// Node runs one raft node: the RawNode loop, the peer transport and the
// client service.
type Node struct {
	cfg     Config
	rn      *raft.RawNode
	storage *raft.MemoryStorage

	recvc   chan raftpb.Message
	propc   chan proposal
	statusc chan chan Status
	stopc   chan struct{}
	done    chan struct{}
	stopped sync.Once

	peers map[uint64]*peer

	// loop state
	seq     uint64
	pending map[uint64]proposal
	applied uint64
	hash    [32]byte // chained over applied entries' data
	msgs    uint64   // applied normal entries

	mu      sync.Mutex
	clients map[*clientConn]struct{}
}

type proposal struct {
	c     *clientConn
	reqID uint64
	data  []byte
	at    time.Time
}

// Status is what a node reports on the client interface.
type Status struct {
	ID             uint64 `json:"id"`
	Leader         uint64 `json:"leader"`
	Term           uint64 `json:"term"`
	State          string `json:"state"`
	Commit         uint64 `json:"commit"`
	Applied        uint64 `json:"applied"`
	Entries        uint64 `json:"applied_entries"` // normal entries with data
	Hash           string `json:"applied_hash"`    // chained sha256 of their data
	PeersConnected int    `json:"peers_connected"` // outgoing connections up
	Pending        int    `json:"pending"`
}

// NewNode sets up a node; Run starts it.
func NewNode(cfg Config) (*Node, error) {
	if cfg.ID == 0 {
		return nil, errors.New("id 0: raft ids start at 1")
	}
	if _, ok := cfg.Peers[cfg.ID]; !ok {
		return nil, fmt.Errorf("id %d is not in the peers", cfg.ID)
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 5 * time.Millisecond
	}
	if cfg.HeartbeatTicks <= 0 {
		cfg.HeartbeatTicks = 2
	}
	if cfg.ElectionTicks <= cfg.HeartbeatTicks {
		cfg.ElectionTicks = 20 * cfg.HeartbeatTicks
	}
	if cfg.ProposalTimeout <= 0 {
		cfg.ProposalTimeout = 3 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(io.Discard, "", 0)
	}
	n := &Node{
		cfg:     cfg,
		storage: raft.NewMemoryStorage(),
		recvc:   make(chan raftpb.Message, 4096),
		propc:   make(chan proposal, 4096),
		statusc: make(chan chan Status),
		stopc:   make(chan struct{}),
		done:    make(chan struct{}),
		peers:   map[uint64]*peer{},
		pending: map[uint64]proposal{},
		clients: map[*clientConn]struct{}{},
	}
	rc := &raft.Config{
		ID:              cfg.ID,
		ElectionTick:    cfg.ElectionTicks,
		HeartbeatTick:   cfg.HeartbeatTicks,
		Storage:         n.storage,
		MaxSizePerMsg:   1 << 20, // etcd's default
		MaxInflightMsgs: 256,
		CheckQuorum:     true,
		PreVote:         true,
		Logger:          &raft.DefaultLogger{Logger: log.New(quietWriter{cfg.Logger}, "", 0)},
	}
	if cfg.RaftVerbose {
		rc.Logger = &raft.DefaultLogger{Logger: cfg.Logger}
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return nil, err
	}
	var ids []raft.Peer
	for id := range cfg.Peers {
		ids = append(ids, raft.Peer{ID: id})
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].ID < ids[j].ID })
	if err := rn.Bootstrap(ids); err != nil {
		return nil, err
	}
	n.rn = rn
	for id, addr := range cfg.Peers {
		if id != cfg.ID {
			n.peers[id] = newPeer(n, id, addr)
		}
	}
	return n, nil
}

// Run serves until Stop; it returns nil after Stop.
func (n *Node) Run() error {
	for _, p := range n.peers {
		go p.run()
	}
	go n.acceptPeers()
	go n.acceptClients()
	n.loop()
	return nil
}

// Stop ends the node: listeners, connections, the loop.
func (n *Node) Stop() {
	n.stopped.Do(func() {
		close(n.stopc)
		n.cfg.PeerListener.Close()
		n.cfg.ClientListener.Close()
		for _, p := range n.peers {
			p.close()
		}
		n.mu.Lock()
		for c := range n.clients {
			c.conn.Close()
		}
		n.mu.Unlock()
	})
	<-n.done
}

func (n *Node) loop() {
	defer close(n.done)
	ticker := time.NewTicker(n.cfg.Tick)
	defer ticker.Stop()
	if n.cfg.Campaign {
		n.handleReady() // apply the bootstrap configuration first
		if err := n.rn.Campaign(); err != nil {
			n.cfg.Logger.Printf("campaign: %v", err)
		}
	}
	sweep := time.Now()
	var batch []proposal
	for {
		n.handleReady()
		select {
		case <-n.stopc:
			return
		case <-ticker.C:
			n.rn.Tick()
			if now := time.Now(); now.Sub(sweep) > n.cfg.ProposalTimeout/4 {
				sweep = now
				n.expire(now)
			}
		case m := <-n.recvc:
			n.step(m)
		case p := <-n.propc:
			batch = append(batch, p)
		case c := <-n.statusc:
			c <- n.status()
		}
		// Take what else is queued before the next Ready, so that one
		// Ready (one round of sends) carries as much as is there.
		for i := 0; i < 1024; i++ {
			select {
			case m := <-n.recvc:
				n.step(m)
				continue
			case p := <-n.propc:
				batch = append(batch, p)
				continue
			default:
			}
			break
		}
		if len(batch) > 0 {
			n.propose(batch)
			clear(batch)
			batch = batch[:0]
		}
	}
}

func (n *Node) step(m raftpb.Message) {
	if err := n.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
		n.cfg.Logger.Printf("step %v from %d: %v", m.Type, m.From, err)
	}
}

// propose hands the clients' proposals that arrived together to raft, one
// entry each, in one MsgProp (what RawNode.Propose does for one entry), so
// that the leader appends them at once and replicates them in one MsgApp
// per follower instead of one each. An entry carries this node's id and a
// sequence number, so that the node answers its client when it applies the
// entry.
func (n *Node) propose(batch []proposal) {
	ents := make([]raftpb.Entry, len(batch))
	seq0 := n.seq
	for i, p := range batch {
		data := make([]byte, 16+len(p.data))
		binary.BigEndian.PutUint64(data, n.cfg.ID)
		binary.BigEndian.PutUint64(data[8:], seq0+uint64(i)+1)
		copy(data[16:], p.data)
		ents[i].Data = data
	}
	n.seq += uint64(len(batch))
	err := n.rn.Step(raftpb.Message{Type: raftpb.MsgProp, From: n.cfg.ID, Entries: ents})
	for i, p := range batch {
		if err != nil {
			p.c.reply(opDropped, p.reqID, []byte(err.Error()))
			continue
		}
		p.data = nil
		n.pending[seq0+uint64(i)+1] = p
	}
}

// expire answers "dropped" to the proposals not applied in time.
func (n *Node) expire(now time.Time) {
	for seq, p := range n.pending {
		if now.Sub(p.at) > n.cfg.ProposalTimeout {
			delete(n.pending, seq)
			p.c.reply(opDropped, p.reqID, []byte("not applied in time (lost with a leader change?)"))
		}
	}
}

func (n *Node) handleReady() {
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := n.storage.ApplySnapshot(rd.Snapshot); err != nil {
				n.cfg.Logger.Fatalf("apply snapshot: %v", err)
			}
		}
		if err := n.storage.Append(rd.Entries); err != nil {
			n.cfg.Logger.Fatalf("append: %v", err)
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			if err := n.storage.SetHardState(rd.HardState); err != nil {
				n.cfg.Logger.Fatalf("hard state: %v", err)
			}
		}
		for _, m := range rd.Messages {
			if p := n.peers[m.To]; p != nil {
				p.send(m)
			}
		}
		n.apply(rd.CommittedEntries)
		n.rn.Advance(rd)
	}
}

func (n *Node) apply(ents []raftpb.Entry) {
	for _, e := range ents {
		n.applied = e.Index
		switch e.Type {
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if err := cc.Unmarshal(e.Data); err != nil {
				n.cfg.Logger.Fatalf("conf change: %v", err)
			}
			n.rn.ApplyConfChange(cc)
		case raftpb.EntryNormal:
			if len(e.Data) < 16 {
				continue // a new leader's empty entry
			}
			n.msgs++
			h := sha256.New()
			h.Write(n.hash[:])
			h.Write(e.Data)
			h.Sum(n.hash[:0])
			if binary.BigEndian.Uint64(e.Data) != n.cfg.ID {
				continue
			}
			seq := binary.BigEndian.Uint64(e.Data[8:])
			if p, ok := n.pending[seq]; ok {
				delete(n.pending, seq)
				var idx [8]byte
				binary.BigEndian.PutUint64(idx[:], e.Index)
				p.c.reply(opCommitted, p.reqID, idx[:])
			}
		}
	}
}

func (n *Node) status() Status {
	st := n.rn.BasicStatus()
	s := Status{ID: n.cfg.ID, Leader: st.Lead, Term: st.Term, State: st.RaftState.String(), Commit: st.Commit,
		Applied: n.applied, Entries: n.msgs, Hash: fmt.Sprintf("%x", n.hash[:8]), Pending: len(n.pending)}
	for _, p := range n.peers {
		if p.connected.Load() {
			s.PeersConnected++
		}
	}
	return s
}

// finalStatus is the status of a node whose loop has ended.
func (n *Node) finalStatus() (Status, bool) {
	select {
	case <-n.done:
		return n.status(), true
	default:
		return Status{}, false
	}
}

// Status asks the loop for the node's status.
func (n *Node) Status() (Status, bool) {
	c := make(chan Status, 1)
	select {
	case n.statusc <- c:
		return <-c, true
	case <-n.done:
		return Status{}, false
	}
}

// The peer transport: one persistent TCP connection to each other node,
// dialled by the sender; a frame is a 4-byte big-endian length and a
// marshalled raftpb.Message. Raft tolerates lost messages, so a full queue
// or a broken connection drops them.

type peer struct {
	n         *Node
	id        uint64
	addr      string
	q         chan raftpb.Message
	connected atomic.Bool
	closing   chan struct{}
	once      sync.Once
	mu        sync.Mutex
	conn      net.Conn
}

func newPeer(n *Node, id uint64, addr string) *peer {
	return &peer{n: n, id: id, addr: addr, q: make(chan raftpb.Message, 8192), closing: make(chan struct{})}
}

func (p *peer) send(m raftpb.Message) {
	select {
	case p.q <- m:
	default: // raft resends what matters
	}
}

func (p *peer) close() {
	p.once.Do(func() {
		close(p.closing)
		p.mu.Lock()
		if p.conn != nil {
			p.conn.Close()
		}
		p.mu.Unlock()
	})
}

func (p *peer) run() {
	backoff := 5 * time.Millisecond
	for {
		select {
		case <-p.closing:
			return
		default:
		}
		conn, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err != nil {
			select {
			case <-p.closing:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 200*time.Millisecond)
			continue
		}
		backoff = 5 * time.Millisecond
		p.mu.Lock()
		p.conn = conn
		p.mu.Unlock()
		select {
		case <-p.closing:
			conn.Close()
			return
		default:
		}
		p.connected.Store(true)
		err = p.write(conn)
		p.connected.Store(false)
		conn.Close()
		if err != nil {
			p.n.cfg.Logger.Printf("peer %d (%s): %v", p.id, p.addr, err)
		}
	}
}

// write sends queued messages, flushing when the queue is empty.
func (p *peer) write(conn net.Conn) error {
	w := bufio.NewWriterSize(conn, 64<<10)
	var buf []byte
	for {
		var m raftpb.Message
		select {
		case <-p.closing:
			return nil
		case m = <-p.q:
		}
		for {
			size := m.Size()
			if cap(buf) < 4+size {
				buf = make([]byte, 4+size)
			}
			buf = buf[:4+size]
			binary.BigEndian.PutUint32(buf, uint32(size))
			if _, err := m.MarshalTo(buf[4:]); err != nil {
				return err
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
			select {
			case m = <-p.q:
				continue
			default:
			}
			break
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

func (n *Node) acceptPeers() {
	for {
		conn, err := n.cfg.PeerListener.Accept()
		if err != nil {
			return
		}
		go n.readPeer(conn)
	}
}

func (n *Node) readPeer(conn net.Conn) {
	defer conn.Close()
	go func() {
		<-n.stopc
		conn.Close()
	}()
	r := bufio.NewReaderSize(conn, 64<<10)
	var hdr [4]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size > 64<<20 {
			n.cfg.Logger.Printf("peer %s: message of %d bytes", conn.RemoteAddr(), size)
			return
		}
		if cap(buf) < int(size) {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		var m raftpb.Message
		if err := m.Unmarshal(buf); err != nil {
			n.cfg.Logger.Printf("peer %s: %v", conn.RemoteAddr(), err)
			return
		}
		select {
		case n.recvc <- m:
		case <-n.stopc:
			return
		}
	}
}

func (n *Node) acceptClients() {
	for {
		conn, err := n.cfg.ClientListener.Accept()
		if err != nil {
			return
		}
		c := &clientConn{conn: conn, out: make(chan []byte, 1<<16), closed: make(chan struct{})}
		n.mu.Lock()
		n.clients[c] = struct{}{}
		n.mu.Unlock()
		go c.writeLoop()
		go func() {
			n.serveClient(c)
			close(c.closed)
			conn.Close()
			n.mu.Lock()
			delete(n.clients, c)
			n.mu.Unlock()
		}()
	}
}

// serveClient reads a client's requests (see client.go for the format).
func (n *Node) serveClient(c *clientConn) {
	r := bufio.NewReaderSize(c.conn, 64<<10)
	for {
		op, id, body, err := readFrame(r)
		if err != nil {
			return
		}
		switch op {
		case opPropose:
			select {
			case n.propc <- proposal{c: c, reqID: id, data: body, at: time.Now()}:
			case <-n.stopc:
				return
			}
		case opStatus:
			st, ok := n.Status()
			if !ok {
				return
			}
			b, _ := json.Marshal(st)
			c.reply(opStatus, id, b)
		default:
			c.reply(opError, id, []byte(fmt.Sprintf("unknown op %q", op)))
		}
	}
}

type clientConn struct {
	conn   net.Conn
	out    chan []byte
	closed chan struct{}
}

// reply queues an answer; it never blocks the raft loop on a client that
// went away.
func (c *clientConn) reply(op byte, id uint64, body []byte) {
	select {
	case c.out <- appendFrame(nil, op, id, body):
	case <-c.closed:
	}
}

func (c *clientConn) writeLoop() {
	w := bufio.NewWriterSize(c.conn, 64<<10)
	for {
		var b []byte
		select {
		case b = <-c.out:
		case <-c.closed:
			return
		}
		for {
			if _, err := w.Write(b); err != nil {
				return
			}
			select {
			case b = <-c.out:
				continue
			default:
			}
			break
		}
		if err := w.Flush(); err != nil {
			return
		}
	}
}
