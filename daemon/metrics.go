package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/exo-rack/exo/exo"
)

// metrics are the daemon's Prometheus metrics, on a private registry.
type metrics struct {
	reg *prometheus.Registry

	info                            *prometheus.GaugeVec
	appendPtr, agreedPtr, epoch     prometheus.Gauge
	queueDepth, halted              prometheus.Gauge
	framesIn, framesOut, oobOut     prometheus.Counter
	fetchedEntries, fetchedBytes    prometheus.Counter
	walFsyncs                       prometheus.Counter
	readErrors, writeErrors         prometheus.Counter
	foreignMAC, badFragments        prometheus.Counter
	published, delivered, queueFull prometheus.Counter
	viewChanges, takeovers          prometheus.Counter
	falseTakeovers                  prometheus.Counter
	lateFrames                      prometheus.Counter
	goneNotices                     prometheus.Counter
	pastFloor, floorJumps           prometheus.Counter
	archiveAnswers, archiveMisses   prometheus.Counter
	archiveSubscribed               prometheus.Counter
	retainedBase, logBytes          prometheus.Gauge
	memAnon, memHuge                prometheus.Gauge
	rackFloor                       prometheus.Gauge
	retainLagging                   prometheus.Counter
	viewChangeCauses                *prometheus.CounterVec
	walSegments                     *prometheus.CounterVec
	viewChangeTime, epochFirstFrame prometheus.Histogram
	tokenTimeout                    prometheus.Gauge
	rejects                         *prometheus.CounterVec
	tokenHold                       prometheus.Histogram
	offloadDrops                    *prometheus.CounterVec
	offloadPushes                   prometheus.Counter
	keyPhase                        prometheus.Gauge
	keyEvents                       *prometheus.CounterVec
	safetyEvents                    prometheus.Counter
	ticks, wakeups                  prometheus.Counter
	behindEntries, behindEpoch      prometheus.Gauge
	transferPace, transferRack      prometheus.Gauge
	fetchRepeats                    prometheus.Counter
	repeatsSeen                     uint64 // the core's FetchRepeats already counted
	tokenWait                       prometheus.Histogram
	walCommit                       prometheus.Histogram
}

func newMetrics() *metrics {
	const ns = "exo"
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help})
	}
	m := &metrics{
		reg:               prometheus.NewPedanticRegistry(),
		info:              prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "info", Help: "Static facts about this host."}, []string{"id", "hosts", "offload"}),
		appendPtr:         g("append_pointer", "Next sequence number this host expects."),
		agreedPtr:         g("agreement_pointer", "Every entry below it is agreed."),
		epoch:             g("epoch", "Epoch (view) of this host's log."),
		queueDepth:        g("queue_depth", "Payload records waiting for the token."),
		halted:            g("halted", "1 while a view change holds this host."),
		framesIn:          c("frames_received_total", "Exo frames read from the interface."),
		framesOut:         c("frames_sent_total", "Exo frames broadcast."),
		oobOut:            c("oob_messages_sent_total", "OOB messages handed to the transport."),
		fetchedEntries:    c("fetched_entries_total", "Entries received in answers to this host's fetches (gap repair, catch-up; duplicates included): its rate is a catch-up's speed."),
		fetchedBytes:      c("fetched_bytes_total", "Bytes of the entries counted by exo_fetched_entries_total (exo.Entry.BinarySize)."),
		walFsyncs:         c("wal_fsyncs_total", "fsyncs of the durable log's segments: one per Ready that sends something, changes the meta or follows 100 ms of entries received and not yet synced."),
		readErrors:        c("read_errors_total", "Errors reading the interface."),
		writeErrors:       c("write_errors_total", "Errors writing the interface."),
		foreignMAC:        c("foreign_mac_frames_total", "Frames whose source MAC is not the sender's roster MAC."),
		badFragments:      c("bad_fragments_total", "Payload records that break the fragment rules."),
		published:         c("messages_published_total", "Messages accepted for broadcast."),
		delivered:         c("messages_delivered_total", "Agreed messages delivered in order."),
		queueFull:         c("queue_full_total", "Publishes refused because the queue was full."),
		viewChanges:       c("view_changes_total", "View changes started by this host."),
		takeovers:         c("token_takeovers_total", "Token takeovers by this host."),
		pastFloor:         c("past_floor_total", "Times this host fell behind every member's retained log (keep_entries) and became amnesiac, to rejoin by state transfer."),
		floorJumps:        c("floor_jumps_total", "State transfers that started at a member's log base past this host's log: the entries between were not delivered here."),
		archiveAnswers:    c("archive_answers_total", "Fetch answers read from the retained durable log below the in-memory log (retain)."),
		archiveSubscribed: c("archive_subscribed_entries_total", "Entries read from the retained durable log for subscriptions that start below the subscriber history (retain)."),
		archiveMisses:     c("archive_misses_total", "Fetch answers dropped because the retained log no longer held (or could not read) their start; the requester asks again."),
		memAnon:           g("memory_anon_bytes", "The daemon process's resident anonymous memory (its Go heap, mostly), at the last huge-page pass (huge_pages)."),
		memHuge:           g("memory_huge_bytes", "The part of exo_memory_anon_bytes in transparent huge pages: the larger it is, the sooner a killed daemon's peers learn of its death (docs/operator.md, huge_pages)."),
		retainedBase:      g("retained_base", "The first seq this host still holds and serves: the retained durable log's start (retain), or the in-memory log's base."),
		logBytes:          g("log_bytes", "Bytes of the durable log's segments (retain bounds them)."),
		rackFloor:         g("rack_floor", "The lowest seq a majority of the members serve to a fetch, from what they announced (a host that joins below it may find too few members to fetch from)."),
		retainLagging:     c("retention_lagging_cuts_total", "Times retention removed log that a member, by its last announcement, had not agreed yet."),
		viewChangeCauses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "view_change_causes_total",
			Help: "View changes started by this host, by cause (exo.Cause: divergence, retry, promise-timeout, ...; docs/recovery.md)."}, []string{"cause"}),
		walSegments: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "wal_segments_total",
			Help: "Durable log segments begun, by how: prepared (on a file of zeros written ahead, preallocate on) or empty (preallocate off, or the prepared file was not ready yet)."}, []string{"begun"}),
		goneNotices:    c("gone_notices_total", "Members this host learnt the process of was gone: their OOB connection ended and a dial to them was refused (a kill -9, a stop); the token is taken over from such a holder after gone_ticks."),
		falseTakeovers: c("false_takeovers_total", "Takeovers that passed this host over while it was running (false takeovers, seen by their victim; with no fault in force every one is false)."),
		lateFrames:     c("late_frames_total", "Frames of holders that a takeover had passed over, heard after the takeover's (false takeovers, seen by any host): the gap each ended raises the failure detector's timeout (docs/protocol.md section 3)."),
		tokenTimeout:   g("token_timeout_seconds", "The token timeout in force: the failure detector's, between token_timeout_min_ticks and token_timeout_ticks (docs/protocol.md section 5)."),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "frames_rejected_total",
			Help: "Frames not appended, by reason."}, []string{"reason"}),
		offloadDrops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "offload_inline_drops_total",
			Help: "Frames an inline fast path (fpga-sim) dropped before the core, by reason."}, []string{"reason"}),
		offloadPushes: c("offload_state_writes_total", "Times the control plane wrote the core's pointers to the fast path."),
		keyPhase:      g("key_phase", "Key phase (slot) of the frames this host sends (docs/security.md section 5)."),
		keyEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "key_events_total",
			Help: "Key rotation steps at this host: staged, switched, retired."}, []string{"event"}),
		ticks:         c("ticks_total", "Protocol ticks counted (of the tick setting's length; counted in batches when the daemon wakes)."),
		wakeups:       c("loop_wakeups_total", "Times the protocol loop woke: a batch of frames, or the core's next deadline (exo.Node.NextTick). On an idle rack far below ticks_total."),
		safetyEvents:  c("safety_events_total", "Times the core refused to change an agreed entry: a bug, never expected (docs/protocol.md section 8); the lab checkers fail on any."),
		behindEntries: g("behind_entries", "How far ahead of this host's append pointer, in its own epoch, the frames it hears show the rack (0: in step)."),
		behindEpoch:   g("behind_epoch", "1 while the frames this host hears are of a later epoch than its log's (it catches up)."),
		transferPace:  g("transfer_pace_bytes_per_second", "This host's state transfer's pace in force (transfer_rate, lowered by transfer_yield while the rack slows; 0: no transfer, or unpaced)."),
		fetchRepeats:  c("fetch_repeats_total", "Fetches this host did not answer because their requester had asked the same a moment before: an OOB connection held them behind a partition and delivered them at once (docs/protocol.md section 4)."),
		transferRack:  g("transfer_rack_percent", "How fast the rack's log grew while this host's state transfer fetched, in percent of its growth in the transfer's pauses, at the last pause (transfer_yield; 0: none)."),
		tokenHold: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "token_hold_seconds",
			Help: "Time from receiving the token to sending a frame.", Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12)}),
		viewChangeTime: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "view_change_seconds",
			Help: "View changes this host led, from their start to their install here.", Buckets: prometheus.ExponentialBuckets(1e-4, 2, 18)}),
		epochFirstFrame: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "epoch_first_frame_seconds",
			Help: "From this host's install of a new epoch to the first frame of that epoch in its log (the rest of a view change's hold).", Buckets: prometheus.ExponentialBuckets(1e-4, 2, 18)}),
		walCommit: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "wal_commit_seconds",
			Help:    "Durable log commits (its fsync, and the meta's when an epoch or a promise changed) that the frames, promises and answers of a Ready waited for; fsync: none commits without a sync.",
			Buckets: prometheus.ExponentialBuckets(1e-4, 2, 16)}),
		tokenWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "token_record_wait_seconds",
			Help:    "Token mode: how long the newest record of each batch waited in the fast path's ring before the daemon read it (the wake-up, as a rule).",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2, 22)}),
	}
	m.reg.MustRegister(m.info, m.appendPtr, m.agreedPtr, m.epoch, m.queueDepth, m.halted, m.framesIn, m.framesOut,
		m.oobOut, m.fetchedEntries, m.fetchedBytes, m.walFsyncs, m.walSegments, m.readErrors, m.writeErrors, m.foreignMAC, m.badFragments, m.published, m.delivered, m.queueFull,
		m.viewChanges, m.viewChangeCauses, m.viewChangeTime, m.pastFloor, m.floorJumps, m.archiveAnswers, m.archiveMisses, m.archiveSubscribed, m.retainedBase, m.logBytes, m.memAnon, m.memHuge, m.rackFloor, m.retainLagging, m.epochFirstFrame, m.takeovers, m.falseTakeovers, m.lateFrames, m.goneNotices, m.tokenTimeout, m.rejects, m.tokenHold, m.offloadDrops, m.offloadPushes,
		m.keyPhase, m.keyEvents, m.safetyEvents, m.behindEntries, m.behindEpoch, m.transferPace, m.transferRack, m.fetchRepeats, m.ticks, m.wakeups, m.tokenWait, m.walCommit, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for r := exo.Reason(1); r < exo.NumReasons; r++ {
		m.rejects.WithLabelValues(r.String())
	}
	for _, c := range exo.Causes() {
		m.viewChangeCauses.WithLabelValues(c.String())
	}
	for _, b := range []string{"prepared", "empty"} {
		m.walSegments.WithLabelValues(b)
	}
	for _, e := range []string{"staged", "switched", "retired"} {
		m.keyEvents.WithLabelValues(e)
	}
	return m
}

func (m *metrics) setInfo(c *Config) {
	m.info.WithLabelValues(strconv.Itoa(c.ID), strconv.Itoa(len(c.Roster)), c.Offload).Set(1)
}

func (m *metrics) observe(p exo.Pointers, pending int, r exo.Recovery, tick time.Duration) {
	m.transferPace.Set(float64(r.TransferPace) / tick.Seconds())
	m.transferRack.Set(float64(r.TransferRackPercent))
	if r.FetchRepeats > m.repeatsSeen {
		m.fetchRepeats.Add(float64(r.FetchRepeats - m.repeatsSeen))
		m.repeatsSeen = r.FetchRepeats
	}
	behind, later := r.Behind(p)
	m.behindEntries.Set(float64(behind))
	if later {
		m.behindEpoch.Set(1)
	} else {
		m.behindEpoch.Set(0)
	}
	m.appendPtr.Set(float64(p.Append))
	m.agreedPtr.Set(float64(p.Agreed))
	m.epoch.Set(float64(p.Epoch))
	m.queueDepth.Set(float64(pending))
	if p.Halted {
		m.halted.Set(1)
	} else {
		m.halted.Set(0)
	}
}

// counters returns the counters for the status reply.
func (m *metrics) counters() map[string]uint64 {
	out := map[string]uint64{}
	read := func(name string, c prometheus.Collector) {
		ch := make(chan prometheus.Metric, 64)
		go func() { c.Collect(ch); close(ch) }()
		for mt := range ch {
			var pb dto.Metric
			if mt.Write(&pb) != nil || pb.Counter == nil {
				continue
			}
			key := name
			for _, l := range pb.Label {
				key += "." + l.GetValue()
			}
			if v := uint64(pb.Counter.GetValue()); v > 0 || len(pb.Label) == 0 {
				out[key] = v
			}
		}
	}
	read("frames_in", m.framesIn)
	read("frames_out", m.framesOut)
	read("fetched_entries", m.fetchedEntries)
	read("fetched_bytes", m.fetchedBytes)
	read("wal_fsyncs", m.walFsyncs)
	read("wal_segments", m.walSegments)
	read("foreign_mac", m.foreignMAC)
	read("published", m.published)
	read("delivered", m.delivered)
	read("queue_full", m.queueFull)
	read("view_changes", m.viewChanges)
	read("view_change_causes", m.viewChangeCauses)
	read("takeovers", m.takeovers)
	read("past_floor", m.pastFloor)
	read("floor_jumps", m.floorJumps)
	read("archive_answers", m.archiveAnswers)
	read("archive_subscribed_entries", m.archiveSubscribed)
	read("archive_misses", m.archiveMisses)
	read("rejects", m.rejects)
	read("key_events", m.keyEvents)
	read("safety_events", m.safetyEvents)
	read("ticks", m.ticks)
	read("loop_wakeups", m.wakeups)
	read("write_errors", m.writeErrors)
	return out
}

// metricsHandler serves /metrics and, with enable_pprof, Go's profiles
// under /debug/pprof/ (the execution trace too: /debug/pprof/trace).
func (d *Daemon) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{}))
	if d.cfg.EnablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func (d *Daemon) serveMetrics(ctx context.Context) error {
	if d.cfg.MetricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", d.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	srv := &http.Server{Handler: d.metricsHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// offloadCollector exports a fast path's own counters (read from the
// kernel map or the engine's registers at scrape time).
type offloadCollector struct {
	off  Offload
	desc *prometheus.Desc
}

func newOffloadCollector(o Offload) *offloadCollector {
	return &offloadCollector{off: o, desc: prometheus.NewDesc("exo_offload_frames_total",
		"Frames the fast path (XDP program or FPGA engine) classified, by reason; non-ACCEPT, non-slow-path reasons were dropped there.",
		[]string{"offload", "reason"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *offloadCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *offloadCollector) Collect(ch chan<- prometheus.Metric) {
	v, err := c.off.Counters()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for r, n := range v {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), c.off.Name(), exo.Reason(r).String())
	}
}
