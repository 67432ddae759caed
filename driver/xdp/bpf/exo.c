//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Exo fast path as an XDP program: the C twin of exo.Frame.UnmarshalBinary
 * (the codec checks), exo.Pointers.ClassifyTagged (the group, the SipHash-2-4
 * frame tag, then exo.Pointers.Classify) and exo.Pointers.Accept.
 * docs/xdp.md describes it; driver/xdp/vectors_test.go replays every golden
 * vector of testdata/vectors through it with BPF_PROG_TEST_RUN.
 *
 * Order of the checks (the first failing one is the verdict):
 *   1. the codec (decode): MALFORMED, BAD_VERSION, BAD_TYPE, BAD_FLAGS (the
 *      KEY_PHASE bit aside), BAD_HISTLEN > 128, BAD_PAYLOAD, BAD_HISTORY_ID
 *      (repeated id);
 *   2. the group: BAD_GROUP (a frame of another group is never checked
 *      against this group's key);
 *   3. the tag: BAD_TAG unless the key slot that the frame's KEY_PHASE bit
 *      (flags & 0x4000) names holds a key in exo_auth_map and the tag field
 *      holds SipHash-2-4, under that key, of exo[0:24] || exo[32 : 32+
 *      hist_len+payload_len] (docs/wire.md; padding never covered; the
 *      flags word, phase bit included, is in exo[0:24]). Two slots let the
 *      rack rotate its key (docs/security.md section 5); one SipHash runs
 *      per frame, under the slot chosen before hashing;
 *   4. the roster, when one is loaded (exo_auth_map.roster_len > 0): a frame
 *      whose sender is a roster id, whose Ethernet source MAC is not that
 *      id's and whose epoch is not later than the state's is dropped and
 *      counted as EXO_COUNTER_FOREIGN_MAC (not a reason: its metadata says
 *      BAD_SENDER with EXO_META_FOREIGN_MAC set). A frame of a later epoch
 *      goes on to check 5 whatever its MAC (FUTURE_EPOCH, passed to the
 *      daemon, which takes it only from the MAC of a known member): after
 *      a membership change the positions shift, and a host that missed the
 *      switch must still hear the later epoch to catch up; the tag already
 *      proved a key holder. A sender beyond the roster is left to check 5
 *      (BAD_SENDER);
 *   5. the state (classify_accept): BAD_SENDER, BAD_HISTLEN, BAD_HISTORY_ID,
 *      the epochs, HALTED, the seq, the history, SENDER_IN_HISTORY.
 *
 * Verdict per frame (EtherType 0x88B5, no VLAN; other frames pass untouched):
 *   ACCEPT and the slow-path reasons (GAP, DIVERGENCE, FUTURE_EPOCH, HALTED)
 *     -> passed, with a struct exo_meta in the XDP metadata area: redirected
 *     to the AF_XDP socket of the frame's RX queue in exo_xsks if one is
 *     registered (XDP_REDIRECT), else XDP_PASS to the stack (AF_PACKET);
 *   every other reason, and a foreign MAC (check 4) -> XDP_DROP;
 *   every Exo frame counts once (per CPU): in exo_counters[reason], or in
 *   exo_counters[EXO_COUNTER_FOREIGN_MAC].
 *
 * Concurrency: the state (one struct exo_state in exo_state_map) is read,
 * classified against and updated under its bpf_spin_lock, so several RX
 * queues (CPUs) may run the program at once; user space reads and writes
 * the state with BPF_F_LOCK.
 *
 * Token mode (state.tx_on = 1, docs/token.md): a frame that passed the
 * codec, the group, the tag and the roster lookup goes on in a second
 * program, exo_tok, by a tail call through exo_progs (the decoded frame in
 * the per-CPU exo_tctx): it is the C twin of exo.Engine.Step. It records
 * ACCEPT and the slow-path verdicts in the ring buffer exo_ring (struct
 * exo_rec, then the received frame), halts itself on a slow-path verdict,
 * and on an ACCEPT from pred rewrites the received buffer into this
 * host's next frame (the head batch of the transmit queue exo_txq, or an
 * empty pass) and returns XDP_TX, or hands the token off (halted). A third
 * program, exo_ctl, run only with BPF_PROG_TEST_RUN, is the control plane's
 * HALT, ARM (a compare-and-set on kseq) and READ, under the state's lock.
 */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "exo_wire.h"

char __license[] SEC("license") = "Dual MIT/GPL";

/* Bytes after the Ethernet header the program handles: a linear XDP buffer
 * is at most one page, so no real frame is longer. Longer frames (only
 * possible with multi-buffer XDP, which this program does not declare) pass
 * to the stack unclassified and count as EXO_COUNTER_UNCLASSIFIED. */
#define EXO_XDP_MAX_FRAME 4096

/* Counter slots after the reasons. */
#define EXO_COUNTER_NOT_EXO (EXO_NUM_REASONS + 0)      /* other EtherType or runt: passed */
#define EXO_COUNTER_UNCLASSIFIED (EXO_NUM_REASONS + 1) /* longer than EXO_XDP_MAX_FRAME: passed */
#define EXO_COUNTER_NO_META (EXO_NUM_REASONS + 2)      /* bpf_xdp_adjust_meta failed */
#define EXO_COUNTER_FOREIGN_MAC (EXO_NUM_REASONS + 3)  /* source MAC is not roster[sender]: dropped */
/* Token mode (exo_tok): */
#define EXO_COUNTER_RING_FULL (EXO_NUM_REASONS + 4) /* less than EXO_RING_ROOM free in exo_ring: dropped untouched */
#define EXO_COUNTER_LOST (EXO_NUM_REASONS + 5)      /* bpf_ringbuf_output failed after the state moved: lost, halted */
#define EXO_COUNTER_TX (EXO_NUM_REASONS + 6)        /* frames sent (XDP_TX) */
#define EXO_COUNTER_TX_EMPTY (EXO_NUM_REASONS + 7)  /* empty passes among them */
#define EXO_COUNTER_HANDOFF (EXO_NUM_REASONS + 8)   /* hand-offs (halted: idle rack and empty queue, or no room) */
#define EXO_COUNTER_TX_NOROOM (EXO_NUM_REASONS + 9) /* hand-offs because the frame to send did not fit the buffer */
#define EXO_COUNTER_MODE (EXO_NUM_REASONS + 10)     /* tx_on changed between the hint and the lock: dropped untouched */
#define EXO_COUNTER_TX_ERR (EXO_NUM_REASONS + 11)   /* a sent frame could not be written into the buffer: dropped (unreachable) */
#define EXO_NUM_COUNTERS (EXO_NUM_REASONS + 12)

/* Not a reason: the state's tx_on was not the one the path expected (the
 * mode changed between the hint and the lock). */
#define EXO_REASON_MODE 0xff
/* exo_tok's verdict for a frame it would record while the ring lacks
 * EXO_RING_ROOM (counted as EXO_COUNTER_RING_FULL, never a reason). */
#define EXO_REASON_RING_FULL 0xfe

/* "EXOM": a struct exo_meta precedes the frame (data_meta .. data). */
#define EXO_META_MAGIC 0x45584f4d

/* exo_meta.flags: the frame was dropped for its source MAC (reason says
 * BAD_SENDER; counted as EXO_COUNTER_FOREIGN_MAC). */
#define EXO_META_FOREIGN_MAC 0x0001

/* The fast-path state: exo.Engine (exo.Pointers, then exo.Tx in the
 * padding and at the end; docs/token.md section 2). history[i] is the
 * sender of entry append-1-i; slots from h = hosts/2 on stay
 * EXO_HISTORY_NONE. */
struct exo_state {
	struct bpf_spin_lock lock;
	__u16 group;
	__u16 hosts;
	__u32 epoch;
	__u8 halted;
	__u8 tx_on; /* token mode: exo_tok sends */
	__u8 me;    /* this host's position: the sender of its frames */
	__u8 pred;  /* the position whose accepted frame hands it the token */
	__u64 window;
	__u64 append;
	__u64 agreed;
	__u64 epoch_start;
	__u8 history[EXO_MAX_HISTORY];
	__u8 phase;     /* key phase (slot) of the frames it sends */
	__u8 lost;      /* a record could not be written after the state moved */
	__u8 mac[6];    /* Ethernet source MAC of the frames it sends */
	__u32 empty_run; /* token passes at the end of the log */
	__u32 idle_run;  /* no empty pass once empty_run >= idle_run */
	__u64 kseq;     /* records handed to the control plane */
	__u64 qhead;    /* batches taken from exo_txq */
	__u16 tx_min;   /* the frames it sends are padded with zeros to this many bytes (Ethernet header
	                 * included; at least 60): every host of a token-mode rack pads its frames to the
	                 * longest it sends, so that the answer to any frame fits its buffer (generic XDP
	                 * grows a small buffer by a few hundred bytes at most) */
	__u8 reserved[6];
	__u64 payload_bits; /* bit i: entry append-1-i has records (1 when unknown): the records worth a wake-up */
};

/* Written in front of every Exo frame the program handles (metadata area,
 * read by AF_XDP and by the tests); native byte order. */
struct exo_meta {
	__u32 magic;  /* EXO_META_MAGIC */
	__u8 reason;  /* enum exo_reason */
	__u8 action;  /* XDP_PASS or XDP_DROP (a passed frame may leave as XDP_REDIRECT) */
	__u16 flags;  /* EXO_META_FOREIGN_MAC, else 0 */
};

/* A frame-tag key as SipHash's key words: user space writes k0 = the
 * little-endian uint64 of key[0:8], k1 = that of key[8:16]. */
struct exo_key {
	__u64 k0;
	__u64 k1;
};

/* The two key slots and the number of roster MACs loaded in exo_roster
 * (0: no MAC check). key[p] is the key of the frames whose KEY_PHASE bit is
 * p; bit p of key_valid says slot p holds a key: the frames naming an
 * empty slot are BAD_TAG. User space writes the whole value in one map
 * update, and the words of an empty slot are random, never a key that
 * was (or will be) in use: a frame classified during an update, which may
 * read a mix of the old and the new value (the update is a plain copy),
 * is then checked under the old key, the new key, or a key no one knows. */
struct exo_auth {
	struct exo_key key[2];
	__u32 key_valid;
	__u32 roster_len;
};

/* One roster entry: the source MAC of sender id i. */
struct exo_mac {
	__u8 addr[6];
	__u8 reserved[2];
};

/* Scratch of the tag's message, m = exo[0:24] || exo[32 : 32+hist_len+
 * payload_len], at most EXO_XDP_MAX_FRAME - 8 bytes, copied out of the
 * packet as 64-bit little-endian words; one word more for the last,
 * partial block. */
#define EXO_SCRATCH_WORDS (EXO_XDP_MAX_FRAME / 8)
struct exo_scratch {
	__u64 w[EXO_SCRATCH_WORDS + 1];
};

_Static_assert(sizeof(struct exo_meta) == 8, "exo_meta is 8 bytes");
_Static_assert(sizeof(struct exo_state) == 224, "exo_state layout");
_Static_assert(__builtin_offsetof(struct exo_state, tx_on) == 13, "exo_state layout");
_Static_assert(__builtin_offsetof(struct exo_state, pred) == 15, "exo_state layout");
_Static_assert(__builtin_offsetof(struct exo_state, window) == 16, "exo_state layout");
_Static_assert(__builtin_offsetof(struct exo_state, history) == 48, "exo_state layout");
_Static_assert(__builtin_offsetof(struct exo_state, phase) == 176, "exo_state layout");
_Static_assert(__builtin_offsetof(struct exo_state, mac) == 178, "exo_state layout");
_Static_assert(__builtin_offsetof(struct exo_state, empty_run) == 184, "exo_state layout");
_Static_assert(__builtin_offsetof(struct exo_state, kseq) == 192, "exo_state layout");
_Static_assert(__builtin_offsetof(struct exo_state, qhead) == 200, "exo_state layout");
_Static_assert(sizeof(struct exo_key) == 16, "exo_key layout");
_Static_assert(sizeof(struct exo_auth) == 40, "exo_auth layout");
_Static_assert(sizeof(struct exo_mac) == 8, "exo_mac layout");
_Static_assert((EXO_SCRATCH_WORDS & (EXO_SCRATCH_WORDS - 1)) == 0, "scratch words: a power of 2");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exo_state);
} exo_state_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EXO_NUM_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} exo_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exo_auth);
} exo_auth_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EXO_MAX_HOSTS);
	__type(key, __u32);
	__type(value, struct exo_mac);
} exo_roster SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exo_scratch);
} exo_scratch SEC(".maps");

/* AF_XDP delivery: the socket of each RX queue (key: queue index, value:
 * the socket's fd, written by user space: Program.RegisterXSK). A passed
 * frame goes to the socket of its queue; with none registered,
 * bpf_redirect_map returns its flags argument, XDP_PASS, and the frame
 * goes to the stack as without the map. */
#define EXO_MAX_XSKS 64
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, EXO_MAX_XSKS);
	__type(key, __u32);
	__type(value, __u32);
} exo_xsks SEC(".maps");

/* Benchmark only (set at load time by driver/xdp, never in production):
 * undo every ACCEPT so that BPF_PROG_TEST_RUN with repeat can run the
 * same in-order frame again and again. 0 in production, where the
 * verifier removes the undo code as dead. */
volatile const __u32 exo_bench_undo_accept = 0;

/* The decoded fixed header. */
struct exo_hdr {
	__u64 seq;
	__u64 tag;
	__u32 epoch;
	__u16 group;
	__u16 count;
	__u16 payload_len;
	__u16 flags;
	__u8 sender;
	__u8 hist_len;
};

/*
 * Token mode (docs/token.md).
 */

/* The transmit queue: batch i waits in slot i % EXO_TXQ_SLOTS while
 * qhead <= i < tail. User space (one writer) fills slot tail % 64 while
 * tail - qhead < 64, then stores tail + 1 (exo_txq_tail); the program
 * reads tail and the head slot's len and count under the state's lock and
 * copies its bytes after it. The 64 slots are one map value (one lookup
 * before the lock, the head indexed under it: no helper runs under a
 * bpf_spin_lock); user space maps it (BPF_F_MMAPABLE): slot i at byte
 * i * sizeof(struct exo_slot). */
#define EXO_TXQ_SLOTS 64
#define EXO_SLOT_DATA 4064
struct exo_slot {
	__u16 len;   /* payload bytes: count records, framed as on the wire */
	__u16 count; /* records */
	__u32 reserved;
	__u8 data[EXO_SLOT_DATA];
};
struct exo_txq {
	struct exo_slot slot[EXO_TXQ_SLOTS];
};

/* The ring buffer's default size (the loader may change it) and the room
 * the program wants free before it takes the lock: a frame meets a full
 * ring before the state moves, never after. */
#define EXO_RING_SIZE (16 << 20)
#define EXO_RING_ROOM (256 << 10)

/* idle_run when the idle back-off is off (exo.NoIdleRun): never hand off. */
#define EXO_NO_IDLE_RUN 0xffffffff

/* exo_rec.flags */
#define EXO_REC_ARMED 1   /* not halted when classified */
#define EXO_REC_SENT 2    /* this host's next frame was sent (tx_tag) */
#define EXO_REC_POPPED 4  /* it carried the queue's head batch */
#define EXO_REC_HANDOFF 8 /* the token was handed to the control plane */
#define EXO_REC_HALT 16   /* the program halted itself after this frame */

/* One record of exo_ring per frame recorded (ACCEPT, slow path), native
 * byte order, 40 bytes (the fields of docs/token.md take 36; the u64s
 * align it to 40), followed by the received frame (len bytes after the
 * Ethernet header, padding included). */
struct exo_rec {
	__u64 kseq;   /* state.kseq of this record (before it) */
	__u64 qhead;  /* state.qhead after it */
	__u64 tx_tag; /* the tag of the frame sent (EXO_REC_SENT), else 0 */
	__u8 reason;  /* the verdict on the received frame */
	__u8 flags;   /* EXO_REC_* */
	__u16 len;    /* bytes of the received frame that follow */
	__u8 src[6];  /* its Ethernet source MAC */
	__u8 reserved[6];
	__u64 ktime;  /* bpf_ktime_get_ns() when it was written (CLOCK_MONOTONIC): how long it waited to be read */
};

/* The record being built (per CPU): the header, then the frame. */
struct exo_recbuf {
	struct exo_rec h;
	__u8 frame[EXO_XDP_MAX_FRAME];
};

/* The state fields the benchmark variant restores after each frame. */
struct exo_save {
	__u64 append;
	__u64 agreed;
	__u64 kseq;
	__u64 qhead;
	__u32 empty_run;
	__u8 halted;
	__u8 history[EXO_MAX_HISTORY];
};

/* The token program's context (per CPU): the frame exo_xdp decoded (its
 * header, its history and the roster lookup), handed over with the tail
 * call, and what the rule decided under the lock for the code after it
 * (read back from here, so that the verifier does not carry the values
 * the lock section refined into the code after it). */
struct exo_tctx {
	struct exo_hdr f;
	__u32 foreign;
	__u32 h;     /* hist_len of the frame to send */
	__u32 len;   /* its payload bytes */
	__u32 idx;   /* its queue slot */
	__u32 olen;  /* the packet to send: Ethernet header to the end of the padding */
	__u32 plen;  /* the received packet's length (before any growth) */
	__u8 mac[6]; /* Ethernet source MAC */
	__u8 full;   /* exo_tok: the ring lacked EXO_RING_ROOM (kept here, not in a
		      * register: one verifier state for both answers) */
	__u8 pad;
	__u8 hist[EXO_MAX_HISTORY];
	struct exo_save save;
};

/* exo_ctl: the command (after 14 bytes of Ethernet header, any) and its
 * answer, in place (data_out). */
#define EXO_CTL_HALT 1
#define EXO_CTL_ARM 2
#define EXO_CTL_READ 3
#define EXO_CTL_ARMED 0
#define EXO_CTL_KSEQ_MISMATCH 1
#define EXO_CTL_LOST 2
#define EXO_CTL_BAD_OP 0xffffffff
struct exo_cmd {
	__u32 op;
	__u32 result;      /* EXO_CTL_ARMED (or 0 for HALT, READ), _KSEQ_MISMATCH, _LOST, _BAD_OP */
	__u64 expect_kseq; /* ARM: arm only if state.kseq equals it */
	struct exo_state state; /* ARM: the fields to write (not lock, kseq, lost); out: the state after, under the lock (lock word 0) */
};

_Static_assert(sizeof(struct exo_slot) == 4072, "exo_slot layout");
_Static_assert(sizeof(struct exo_rec) == 48, "exo_rec layout");
_Static_assert(sizeof(struct exo_cmd) == 240, "exo_cmd layout");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct exo_txq);
} exo_txq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} exo_txq_tail SEC(".maps");

/* Zeros, the padding of the frames token mode sends (tx_min): never
 * written. */
struct exo_zero {
	__u8 b[EXO_XDP_MAX_FRAME];
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exo_zero);
} exo_zero SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, EXO_RING_SIZE);
} exo_ring SEC(".maps");

/* The ring's waiter (docs/token.md section 2): 1 while the control plane
 * is about to sleep or sleeps on exo_ring (it sets it, then looks at the
 * ring once more before it sleeps). A record worth a wake-up is written
 * without one, then the program takes the flag (an atomic exchange, a
 * full barrier: either it sees the 1, or the control plane's look sees
 * the record) and wakes the ring only if it was set. A busy control plane
 * is not woken for every record: each wake-up is an inter-processor
 * interrupt (irq_work), a VM exit on a virtual machine. Mmapped; not
 * pinned (it belongs to the control plane that waits). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} exo_waiter SEC(".maps");

/* Slot 0: exo_tok (written by the loader). */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} exo_progs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exo_tctx);
} exo_tctx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exo_recbuf);
} exo_recbuf SEC(".maps");

/* Context of the record-framing loop (bpf_loop callback). */
struct rec_ctx {
	struct xdp_md *xdp;
	__u32 off; /* next record, bytes after the Ethernet header */
	__u32 end; /* end of the payload */
	__u32 bad;
};

static long rec_step(__u64 index, void *arg)
{
	struct rec_ctx *c = arg;
	__u8 l[EXO_RECORD_LEN_SIZE];
	__u32 n;

	if (c->end - c->off < EXO_RECORD_LEN_SIZE)
		goto bad;
	if (bpf_xdp_load_bytes(c->xdp, EXO_ETH_HEADER_LEN + c->off, l, sizeof(l)) < 0)
		goto bad;
	n = ((__u32)l[0] << 8) | l[1];
	if (c->end - c->off - EXO_RECORD_LEN_SIZE < n)
		goto bad;
	c->off += EXO_RECORD_LEN_SIZE + n;
	return 0;
bad:
	c->bad = 1;
	return 1;
}

/* decode is exo.Frame.UnmarshalBinary: the codec checks in its order.
 * b is the first byte after the Ethernet header. */
static __always_inline __u32 decode(struct xdp_md *ctx, __u8 *b, void *data_end,
				    struct exo_hdr *f, __u8 *hist)
{
	__u64 len = (__u64)((long)data_end - (long)b);
	__u16 flags, g;
	__u32 hl, i, end;

	if ((void *)(b + 1) > data_end)
		return EXO_REASON_MALFORMED;
	if (b[EXO_OFF_VERSION] != EXO_VERSION)
		return EXO_REASON_BAD_VERSION;
	if ((void *)(b + EXO_HEADER_LEN) > data_end)
		return EXO_REASON_MALFORMED;
	if (b[EXO_OFF_TYPE] != EXO_TYPE_DATA)
		return EXO_REASON_BAD_TYPE;
	flags = ((__u16)b[EXO_OFF_FLAGS] << 8) | b[EXO_OFF_FLAGS + 1];
	/* exo.ValidFlags: the key phase bit either way; the rest 0, or
	 * READMIT | host id. */
	g = flags & ~EXO_FLAG_KEY_PHASE;
	if (g != 0 && (!(g & EXO_FLAG_READMIT) ||
		       (g & ~(EXO_FLAG_READMIT | EXO_FLAG_HOST_MASK)) != 0))
		return EXO_REASON_BAD_FLAGS;
	f->flags = flags;
	hl = b[EXO_OFF_HIST_LEN];
	if (hl > EXO_MAX_HISTORY)
		return EXO_REASON_BAD_HISTLEN;
	f->hist_len = hl;
	f->payload_len = ((__u16)b[EXO_OFF_PAYLOAD_LEN] << 8) | b[EXO_OFF_PAYLOAD_LEN + 1];
	if (len < EXO_HEADER_LEN + hl)
		return EXO_REASON_MALFORMED;
	end = EXO_HEADER_LEN + hl + f->payload_len;
	if (len < end)
		return EXO_REASON_BAD_PAYLOAD;

	f->group = ((__u16)b[EXO_OFF_GROUP] << 8) | b[EXO_OFF_GROUP + 1];
	f->sender = b[EXO_OFF_SENDER];
	f->epoch = ((__u32)b[EXO_OFF_EPOCH] << 24) | ((__u32)b[EXO_OFF_EPOCH + 1] << 16) |
		   ((__u32)b[EXO_OFF_EPOCH + 2] << 8) | b[EXO_OFF_EPOCH + 3];
	f->count = ((__u16)b[EXO_OFF_COUNT] << 8) | b[EXO_OFF_COUNT + 1];
	f->seq = 0;
	for (i = 0; i < EXO_SIZE_SEQ; i++)
		f->seq = (f->seq << 8) | b[EXO_OFF_SEQ + i];
	f->tag = 0;
	for (i = 0; i < EXO_SIZE_TAG; i++)
		f->tag = (f->tag << 8) | b[EXO_OFF_TAG + i];

	/* History: copy to the stack, reject a repeated id (0xFF excepted). */
	{
		__u64 seen[EXO_MAX_HOSTS / 64] = {};
		for (i = 0; i < EXO_MAX_HISTORY; i++) {
			__u8 *p = b + EXO_OFF_HISTORY + i;
			__u8 id;
			__u64 bit;

			if (i >= hl)
				break;
			if ((void *)(p + 1) > data_end)
				return EXO_REASON_MALFORMED; /* unreachable: len checked */
			id = *p;
			hist[i] = id;
			if (id == EXO_HISTORY_NONE)
				continue;
			bit = 1ULL << (id & 63);
			if (seen[(id >> 6) & 3] & bit)
				return EXO_REASON_BAD_HISTORY_ID;
			seen[(id >> 6) & 3] |= bit;
		}
	}

	/* Records: exactly count records [len u16 BE][len bytes] fill the
	 * payload. Each takes at least 2 bytes, so more than payload_len/2
	 * records cannot fit; that bounds the loop by EXO_XDP_MAX_FRAME/2. */
	if ((__u32)f->count * EXO_RECORD_LEN_SIZE > f->payload_len)
		return EXO_REASON_BAD_PAYLOAD;
	{
		struct rec_ctx c = {
			.xdp = ctx,
			.off = EXO_HEADER_LEN + hl,
			.end = end,
		};
		if (f->count > 0) {
			if (bpf_loop(f->count, rec_step, &c, 0) < 0)
				return EXO_REASON_BAD_PAYLOAD;
			if (c.bad)
				return EXO_REASON_BAD_PAYLOAD;
		}
		if (c.off != end)
			return EXO_REASON_BAD_PAYLOAD;
	}
	return EXO_REASON_ACCEPT;
}

/* SipHash-2-4 (docs/security.md): one SipRound on v0..v3. */
#define ROTL64(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND(v0, v1, v2, v3)                                              \
	do {                                                                  \
		v0 += v1; v1 = ROTL64(v1, 13); v1 ^= v0; v0 = ROTL64(v0, 32); \
		v2 += v3; v3 = ROTL64(v3, 16); v3 ^= v2;                       \
		v0 += v3; v3 = ROTL64(v3, 21); v3 ^= v0;                       \
		v2 += v1; v1 = ROTL64(v1, 17); v1 ^= v2; v2 = ROTL64(v2, 32); \
	} while (0)

/* Context of the SipHash block loop (bpf_loop callback). */
struct sip_ctx {
	const __u64 *m; /* the message, in the per-CPU scratch */
	__u64 v0, v1, v2, v3;
};

/* sip_block absorbs message block i (c = 2 rounds). */
static long sip_block(__u64 i, void *arg)
{
	struct sip_ctx *c = arg;
	__u64 m = c->m[i & (EXO_SCRATCH_WORDS - 1)];
	__u64 v0 = c->v0, v1 = c->v1, v2 = c->v2, v3 = c->v3;

	v3 ^= m;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	v0 ^= m;
	c->v0 = v0; c->v1 = v1; c->v2 = v2; c->v3 = v3;
	return 0;
}

/* frame_tag computes the tag under the key k of the Exo frame in the
 * packet (its fixed header and tl = hist_len + payload_len bytes after
 * it) into *out; 0 if it cannot: the message is copied into the scratch
 * (two bpf_xdp_load_bytes: the header before the tag field, then the
 * history and the payload; never the padding), absorbed 8 bytes at a time
 * by bpf_loop, and finished with the last block (the remaining len(m) % 8
 * bytes and len(m) << 56). */
static __always_inline int frame_tag(struct xdp_md *ctx, __u32 tl, const struct exo_key *k, __u64 *out)
{
	__u32 zero = 0, n, nb, r;
	struct exo_scratch *sc = bpf_map_lookup_elem(&exo_scratch, &zero);
	struct sip_ctx c;
	__u64 last, v0, v1, v2, v3;

	if (!sc)
		return 0;
	if (tl > EXO_XDP_MAX_FRAME - EXO_HEADER_LEN)
		return 0; /* unreachable: the frame is at most EXO_XDP_MAX_FRAME */
	if (bpf_xdp_load_bytes(ctx, EXO_ETH_HEADER_LEN, sc->w, EXO_OFF_TAG) < 0)
		return 0;
	if (tl > 0 && bpf_xdp_load_bytes(ctx, EXO_ETH_HEADER_LEN + EXO_HEADER_LEN,
					 (__u8 *)sc->w + EXO_OFF_TAG, tl) < 0)
		return 0;
	n = EXO_OFF_TAG + tl;
	nb = n / 8;
	r = n % 8;
	c.m = sc->w;
	c.v0 = k->k0 ^ 0x736f6d6570736575ULL;
	c.v1 = k->k1 ^ 0x646f72616e646f6dULL;
	c.v2 = k->k0 ^ 0x6c7967656e657261ULL;
	c.v3 = k->k1 ^ 0x7465646279746573ULL;
	if (bpf_loop(nb, sip_block, &c, 0) < 0)
		return 0;
	last = sc->w[nb & (EXO_SCRATCH_WORDS - 1)] & ((1ULL << (8 * r)) - 1);
	last |= (__u64)n << 56;
	v0 = c.v0; v1 = c.v1; v2 = c.v2; v3 = c.v3;
	v3 ^= last;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	v0 ^= last;
	v2 ^= 0xff;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	*out = v0 ^ v1 ^ v2 ^ v3;
	return 1;
}

/* tag_ok reports whether f->tag is the frame's tag under the key k. */
static __always_inline int tag_ok(struct xdp_md *ctx, const struct exo_hdr *f, const struct exo_key *k)
{
	__u64 t;

	if (!frame_tag(ctx, (__u32)f->hist_len + f->payload_len, k, &t))
		return 0;
	return t == f->tag;
}

/* key_of returns the key slot the frame's KEY_PHASE bit names, or NULL if
 * that slot holds no key. */
static __always_inline const struct exo_key *key_of(const struct exo_auth *a, const struct exo_hdr *f)
{
	__u32 ph = (f->flags & EXO_FLAG_KEY_PHASE) ? 1 : 0;

	if (!((a->key_valid >> ph) & 1))
		return 0;
	return &a->key[ph];
}

/* foreign_mac reports whether a roster is loaded (roster_len > 0), the
 * sender is one of its ids, and the frame's Ethernet source MAC (src, 6
 * bytes) is not that id's. */
static __always_inline int foreign_mac(const __u8 *src, const struct exo_hdr *f, const struct exo_auth *a)
{
	__u32 id = f->sender, roster_len = a->roster_len;
	struct exo_mac *m;

	if (roster_len == 0 || id >= roster_len)
		return 0;
	m = bpf_map_lookup_elem(&exo_roster, &id);
	if (!m)
		return 0;
	return m->addr[0] != src[0] || m->addr[1] != src[1] || m->addr[2] != src[2] ||
	       m->addr[3] != src[3] || m->addr[4] != src[4] || m->addr[5] != src[5];
}

/* classify is exo.Pointers.Classify; on ACCEPT it also applies
 * exo.Pointers.Accept. The caller holds s->lock. foreign is foreign_mac's
 * answer, found before the lock (it calls a helper): a frame from a foreign
 * MAC whose epoch is not later than the state's is BAD_SENDER here, with
 * *meta_flags = EXO_META_FOREIGN_MAC (check 4; after the group, before the
 * pointer rules). The epoch is compared under the lock, with the same value
 * the pointer rules then use: read without the lock, an epoch that user
 * space moves at that moment could let a frame of the new epoch from a
 * foreign MAC pass check 4 as "later" against the old value and be
 * classified (even accepted) against the new one. */
static __always_inline __u32 classify(struct exo_state *s, const struct exo_hdr *f,
				      const __u8 *hist, int foreign, __u16 *meta_flags)
{
	__u32 n = s->hosts, h = n / 2, hl = f->hist_len, i;
	__u64 seq = f->seq;

	if (f->group != s->group)
		return EXO_REASON_BAD_GROUP;
	if (foreign && f->epoch <= s->epoch) {
		*meta_flags = EXO_META_FOREIGN_MAC;
		return EXO_REASON_BAD_SENDER;
	}
	if (f->sender >= n)
		return EXO_REASON_BAD_SENDER;
	if (hl != h)
		return EXO_REASON_BAD_HISTLEN;
	/* From here h == hl <= EXO_MAX_HISTORY. */
	for (i = 0; i < EXO_MAX_HISTORY; i++) {
		if (i >= hl)
			break;
		if (hist[i] != EXO_HISTORY_NONE && hist[i] >= n)
			return EXO_REASON_BAD_HISTORY_ID;
	}
	if (f->epoch < s->epoch)
		return EXO_REASON_STALE_EPOCH;
	if (f->epoch > s->epoch)
		return EXO_REASON_FUTURE_EPOCH;
	if (s->halted)
		return EXO_REASON_HALTED;
	if (seq < s->append) {
		__u64 back = s->append - 1 - seq; /* 0 for the newest entry */
		if (back < h && back < EXO_MAX_HISTORY && s->history[back] != f->sender)
			return EXO_REASON_DIVERGENCE;
		return EXO_REASON_DUPLICATE;
	}
	if (seq > s->append) {
		if (seq - s->append > s->window)
			return EXO_REASON_SEQ_TOO_FAR;
		return EXO_REASON_GAP;
	}
	for (i = 0; i < EXO_MAX_HISTORY; i++) {
		if (i >= h)
			break;
		if (s->history[i] != hist[i])
			return EXO_REASON_DIVERGENCE;
	}
	for (i = 0; i < EXO_MAX_HISTORY; i++) {
		if (i >= h)
			break;
		if (s->history[i] == f->sender)
			return EXO_REASON_SENDER_IN_HISTORY;
	}
	return EXO_REASON_ACCEPT;
}

/* pass is exo.Engine.pass: empty_run past an accepted entry of count
 * records (+1, saturating, for none; else 0). The caller holds s->lock. */
static __always_inline void pass(struct exo_state *s, __u16 count)
{
	if (count != 0)
		s->empty_run = 0;
	else if (s->empty_run < 0xffffffff)
		s->empty_run++;
}

/* classify_accept is classify, then on ACCEPT exo.Pointers.Accept and
 * empty_run (exo.Engine.Step with token mode off; the receive-only path).
 * The caller holds s->lock. */
static __always_inline __u32 classify_accept(struct exo_state *s, const struct exo_hdr *f,
					     const __u8 *hist, int foreign, __u16 *meta_flags)
{
	__u32 h = s->hosts / 2, i;
	__u64 seq = f->seq;
	__u32 r = classify(s, f, hist, foreign, meta_flags);

	if (r != EXO_REASON_ACCEPT)
		return r;

	/* Accept: the sender enters the history, append moves past seq, and
	 * appending seq agrees seq-h if seq >= epoch_start && seq-epoch_start >= h. */
	{
		__u64 old_append = s->append, old_agreed = s->agreed;
		__u32 old_empty_run = s->empty_run;
		__u8 oldest = 0;

		if (h > 0) {
			oldest = s->history[(h - 1) & (EXO_MAX_HISTORY - 1)];
			for (i = EXO_MAX_HISTORY - 1; i > 0; i--) {
				if (i >= h)
					continue;
				s->history[i] = s->history[i - 1];
			}
			s->history[0] = f->sender;
		}
		s->append = seq + 1;
		if (seq >= s->epoch_start && seq - s->epoch_start >= h && seq - h + 1 > s->agreed)
			s->agreed = seq - h + 1;
		pass(s, f->count);

		if (exo_bench_undo_accept) {
			if (h > 0) {
				for (i = 0; i < EXO_MAX_HISTORY - 1; i++) {
					if (i + 1 >= h)
						break;
					s->history[i] = s->history[i + 1];
				}
				s->history[(h - 1) & (EXO_MAX_HISTORY - 1)] = oldest;
			}
			s->append = old_append;
			s->agreed = old_agreed;
			s->empty_run = old_empty_run;
		}
	}
	return EXO_REASON_ACCEPT;
}

/* exo_waiter values: what the control plane waiting on exo_ring wants to
 * be woken for. */
#define EXO_WAIT_NONE 0   /* not waiting */
#define EXO_WAIT_WORTH 1  /* records worth a wake-up */
#define EXO_WAIT_URGENT 2 /* only what needs the control plane: the slow path, a halt, a ring half full */

/* wake_waiter wakes a control plane that waits on exo_ring (exo_waiter)
 * for this record: called after the record is written, if it is worth a
 * wake-up (worth) or needs one (urgent). The flag is read with an atomic
 * add of zero (a full barrier after the record's commit) and taken with
 * an exchange. The wake-up is a discarded 8-byte record (the reader skips
 * it) committed with BPF_RB_FORCE_WAKEUP: the ring has no wake-up of its
 * own. */
static __always_inline void wake_waiter(int worth, int urgent)
{
	__u32 zero = 0;
	__u64 *w = bpf_map_lookup_elem(&exo_waiter, &zero);
	__u64 v;
	void *p;

	if (!w)
		return;
	v = __sync_fetch_and_add(w, 0);
	if (v == EXO_WAIT_NONE || (v == EXO_WAIT_URGENT && !urgent) || (v == EXO_WAIT_WORTH && !worth && !urgent))
		return;
	if (!__sync_lock_test_and_set(w, EXO_WAIT_NONE))
		return;
	p = bpf_ringbuf_reserve(&exo_ring, 8, 0);
	if (p)
		bpf_ringbuf_discard(p, BPF_RB_FORCE_WAKEUP);
}

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&exo_counters, &slot);
	if (c)
		*c += 1;
}

/* deliver returns the action for a classified Exo frame: a passed frame
 * goes to the AF_XDP socket of its RX queue if one is registered
 * (XDP_REDIRECT), else to the stack (XDP_PASS); a dropped frame is dropped. */
static __always_inline int deliver(struct xdp_md *ctx, __u32 action)
{
	if (action != XDP_PASS)
		return action;
	return bpf_redirect_map(&exo_xsks, ctx->rx_queue_index, XDP_PASS);
}

SEC("xdp")
int exo_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *eth = data;
	__u8 hist[EXO_MAX_HISTORY] __attribute__((aligned(8))) = {};
	struct exo_hdr f = {};
	struct exo_meta *m;
	__u32 reason, action, key = 0, counter;
	__u16 flags = 0;

	if ((void *)(eth + EXO_ETH_HEADER_LEN) > data_end ||
	    eth[12] != (EXO_ETHER_TYPE >> 8) || eth[13] != (EXO_ETHER_TYPE & 0xff)) {
		count(EXO_COUNTER_NOT_EXO);
		return XDP_PASS;
	}
	if ((long)data_end - (long)data - EXO_ETH_HEADER_LEN > EXO_XDP_MAX_FRAME) {
		count(EXO_COUNTER_UNCLASSIFIED);
		return XDP_PASS;
	}

	reason = decode(ctx, eth + EXO_ETH_HEADER_LEN, data_end, &f, hist);
	counter = reason;
	if (reason == EXO_REASON_ACCEPT) {
		struct exo_state *s = bpf_map_lookup_elem(&exo_state_map, &key);
		struct exo_auth *a = bpf_map_lookup_elem(&exo_auth_map, &key);
		const struct exo_key *k;

		if (!s || !a)
			return XDP_PASS; /* unreachable: array maps */
		/* The group is read without the lock: one aligned 16-bit load,
		 * and classify_accept checks it again under the lock. */
		if (f.group != s->group) {
			reason = EXO_REASON_BAD_GROUP;
		} else if (!(k = key_of(a, &f)) || !tag_ok(ctx, &f, k)) {
			reason = EXO_REASON_BAD_TAG;
		} else {
			/* The roster MAC (check 4) is looked up here, outside the
			 * lock (no helper may run under it); whether a foreign MAC
			 * drops the frame depends on its epoch, which
			 * classify_accept compares under the lock. */
			int foreign = foreign_mac(eth + 6, &f, a);

			/* Token mode: exo_tok goes on with the decoded frame.
			 * tx_on is read without the lock (a hint): both
			 * programs check it again under the lock and drop the
			 * frame untouched (EXO_COUNTER_MODE) if it changed. A
			 * failed tail call (exo_progs empty) goes on here. */
			if (s->tx_on) {
				struct exo_tctx *t = bpf_map_lookup_elem(&exo_tctx, &key);

				if (t) {
					t->f = f;
					t->foreign = foreign;
					__builtin_memcpy(t->hist, hist, sizeof(hist));
					bpf_tail_call(ctx, &exo_progs, 0);
				}
			}

			bpf_spin_lock(&s->lock);
			if (s->tx_on)
				reason = EXO_REASON_MODE;
			else
				reason = classify_accept(s, &f, hist, foreign, &flags);
			bpf_spin_unlock(&s->lock);
			if (reason == EXO_REASON_MODE) {
				count(EXO_COUNTER_MODE);
				return XDP_DROP;
			}
		}
		counter = flags ? EXO_COUNTER_FOREIGN_MAC : reason;
	}

	count(counter);
	action = (!flags && (reason == EXO_REASON_ACCEPT || exo_reason_slow_path(reason))) ? XDP_PASS : XDP_DROP;

	/* A frame without its metadata is delivered all the same: the AF_XDP
	 * reader finds no magic in front of it (it clears the metadata area of
	 * every frame it hands back to the fill ring) and says so. */
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct exo_meta)) < 0) {
		count(EXO_COUNTER_NO_META);
		return deliver(ctx, action);
	}
	m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return deliver(ctx, action);
	m->magic = EXO_META_MAGIC;
	m->reason = reason;
	m->action = action;
	m->flags = flags;
	return deliver(ctx, action);
}

/*
 * Token mode: exo_tok, the C twin of exo.Engine.Step (docs/token.md).
 */

/* agree is the agreement rule of exo.Pointers.Accept for the entry
 * appended at seq: it agrees seq-h+1 if seq >= epoch_start and
 * seq-epoch_start >= h. The caller holds s->lock. */
static __always_inline void agree(struct exo_state *s, __u64 seq, __u32 h)
{
	if (seq >= s->epoch_start && seq - s->epoch_start >= h && seq - h + 1 > s->agreed)
		s->agreed = seq - h + 1;
}

/* bench_save and bench_restore: the benchmark variant undoes every
 * recorded frame (see exo_bench_undo_accept). */
static __always_inline void bench_save(struct exo_save *v, const struct exo_state *s)
{
	v->append = s->append;
	v->agreed = s->agreed;
	v->kseq = s->kseq;
	v->qhead = s->qhead;
	v->empty_run = s->empty_run;
	v->halted = s->halted;
	__builtin_memcpy(v->history, s->history, sizeof(v->history));
}

static __always_inline void bench_restore(struct exo_state *s, const struct exo_save *v)
{
	s->append = v->append;
	s->agreed = v->agreed;
	s->kseq = v->kseq;
	s->qhead = v->qhead;
	s->empty_run = v->empty_run;
	s->halted = v->halted;
	__builtin_memcpy(s->history, v->history, sizeof(v->history));
}

/* The fields of the frame to send that the lock section fixes. */
struct exo_out {
	__u64 seq;
	__u32 epoch;
	__u16 group;
	__u16 count;
	__u16 flags;
	__u8 me;
	__u8 phase;
};

/* build rewrites the packet into the frame to send: the length t->olen
 * (bpf_xdp_adjust_tail; the buffer was grown before the lock if it had
 * to), the Ethernet source MAC t->mac (destination and EtherType as
 * received), the header (version 1, type DATA, o's fields, hist_len t->h,
 * payload_len t->len), the history (the sender of the frame just
 * accepted, then its history but the oldest: the state's history after
 * it), the payload from queue slot t->idx, zeros up to the Ethernet
 * minimum, then the tag under k over exo[0:24] || history || payload, as
 * the receive check computes it. Returns 1, with the tag in *tag, or 0 if
 * a helper failed (unreachable: the length was checked under the lock). */
static __always_inline int build(struct xdp_md *ctx, const struct exo_tctx *t, const struct exo_txq *q,
				 const struct exo_key *k, const struct exo_out *o, __u64 *tag)
{
	__u32 h = t->h, len = t->len, idx = t->idx & (EXO_TXQ_SLOTS - 1), olen = t->olen, plen, end, pad, zk = 0;
	const struct exo_zero *zero = bpf_map_lookup_elem(&exo_zero, &zk);
	void *data, *data_end;
	__u8 *b, *e;
	__u64 v;
	int i;

	if (!zero || h > EXO_MAX_HISTORY || len > EXO_SLOT_DATA || olen < EXO_MIN_ETH_FRAME ||
	    olen > EXO_ETH_HEADER_LEN + EXO_XDP_MAX_FRAME)
		return 0;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	plen = (__u32)((long)data_end - (long)data);
	if (olen != plen && bpf_xdp_adjust_tail(ctx, (int)olen - (int)plen) < 0)
		return 0;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	b = data;
	if ((void *)(b + EXO_ETH_HEADER_LEN + EXO_HEADER_LEN + 1) > data_end)
		return 0;
	for (i = 0; i < 6; i++)
		b[6 + i] = t->mac[i];
	e = b + EXO_ETH_HEADER_LEN;
	e[EXO_OFF_VERSION] = EXO_VERSION;
	e[EXO_OFF_TYPE] = EXO_TYPE_DATA;
	e[EXO_OFF_GROUP] = o->group >> 8;
	e[EXO_OFF_GROUP + 1] = o->group;
	e[EXO_OFF_SENDER] = o->me;
	e[EXO_OFF_HIST_LEN] = h;
	e[EXO_OFF_PAYLOAD_LEN] = len >> 8;
	e[EXO_OFF_PAYLOAD_LEN + 1] = len;
	e[EXO_OFF_EPOCH] = o->epoch >> 24;
	e[EXO_OFF_EPOCH + 1] = o->epoch >> 16;
	e[EXO_OFF_EPOCH + 2] = o->epoch >> 8;
	e[EXO_OFF_EPOCH + 3] = o->epoch;
	e[EXO_OFF_COUNT] = o->count >> 8;
	e[EXO_OFF_COUNT + 1] = o->count;
	e[EXO_OFF_FLAGS] = o->flags >> 8;
	e[EXO_OFF_FLAGS + 1] = o->flags;
	v = o->seq;
	for (i = EXO_SIZE_SEQ - 1; i >= 0; i--) {
		e[EXO_OFF_SEQ + i] = v;
		v >>= 8;
	}
	for (i = 0; i < EXO_SIZE_TAG; i++)
		e[EXO_OFF_TAG + i] = 0;
	/* The history: hist[0] is the sender of the frame just accepted
	 * (the byte after the header, in bounds: olen >= 60), then the
	 * frame's own history but its oldest id. */
	if (h > 0)
		e[EXO_OFF_HISTORY] = t->f.sender;
	if (h > 1 && bpf_xdp_store_bytes(ctx, EXO_ETH_HEADER_LEN + EXO_OFF_HISTORY + 1, (void *)t->hist, h - 1) < 0)
		return 0;
	if (len > 0 && bpf_xdp_store_bytes(ctx, EXO_ETH_HEADER_LEN + EXO_HEADER_LEN + h,
					   (void *)q->slot[idx].data, len) < 0)
		return 0;
	end = EXO_ETH_HEADER_LEN + EXO_HEADER_LEN + h + len;
	if (end < olen) {
		pad = olen - end;
		if (pad < 1 || pad > sizeof(zero->b) || bpf_xdp_store_bytes(ctx, end, (void *)zero->b, pad) < 0)
			return 0;
	}
	if (!frame_tag(ctx, h + len, k, &v))
		return 0;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	b = data;
	if ((void *)(b + EXO_ETH_HEADER_LEN + EXO_HEADER_LEN) > data_end)
		return 0;
	e = b + EXO_ETH_HEADER_LEN;
	*tag = v;
	for (i = EXO_SIZE_TAG - 1; i >= 0; i--) {
		e[EXO_OFF_TAG + i] = v;
		v >>= 8;
	}
	return 1;
}

/* exo_tok is exo_xdp's token mode (tail call from exo_xdp, the frame
 * decoded, its group, tag and roster MAC looked up, all in exo_tctx):
 * exo.Engine.Step.
 *
 *   1. Less than EXO_RING_ROOM free in exo_ring: a frame that step 4
 *      would record is dropped untouched (EXO_COUNTER_RING_FULL; a record
 *      is never lost once the state moved); one it would not record
 *      (a foreign MAC, a stale epoch, a duplicate) keeps its verdict.
 *   2. Copy the received frame (after the Ethernet header) into the
 *      record (exo_recbuf).
 *   3. If the frame may be from pred (read without the lock), grow the
 *      buffer so that the frame to send fits: the head batch if the queue
 *      holds one (its tail and qhead read without the lock), else an
 *      empty pass; at least the Ethernet minimum.
 *   4. Under the lock: classify (and check the roster MAC's epoch);
 *      ACCEPT moves the pointers and empty_run; ACCEPT, the slow-path
 *      verdicts and a frame of a later epoch that does not fit the
 *      roster (BAD_SENDER, BAD_HISTLEN, BAD_HISTORY_ID) are recorded
 *      (kseq++); a recorded verdict other than ACCEPT and HALTED halts;
 *      an ACCEPT from pred with me not in the history after it sends (the
 *      head batch, or an empty pass while empty_run < idle_run or
 *      idle_run is EXO_NO_IDLE_RUN) and accepts the frame sent as its own
 *      entry (empty_run, qhead), or hands off (halted): idle rack and
 *      empty queue, or the frame to send does not fit the buffer
 *      (EXO_COUNTER_TX_NOROOM).
 *   5. After it: build the frame in the buffer, write the record
 *      (bpf_ringbuf_output); XDP_TX if sent, else XDP_DROP. A record that
 *      cannot be written marks the state lost and halted
 *      (EXO_COUNTER_LOST) and nothing is sent.
 */
SEC("xdp")
int exo_tok(struct xdp_md *ctx)
{
	__u32 zero = 0, reason, flen, room, len = 0, idx = 0, olen, i;
	struct exo_tctx *t = bpf_map_lookup_elem(&exo_tctx, &zero);
	struct exo_recbuf *rb = bpf_map_lookup_elem(&exo_recbuf, &zero);
	struct exo_state *s = bpf_map_lookup_elem(&exo_state_map, &zero);
	struct exo_auth *a = bpf_map_lookup_elem(&exo_auth_map, &zero);
	struct exo_txq *q = bpf_map_lookup_elem(&exo_txq, &zero);
	__u64 *tailp = bpf_map_lookup_elem(&exo_txq_tail, &zero);
	void *data, *data_end;
	__u8 *eth;
	__u64 avail, size, rec_kseq = 0, rec_qhead = 0, tag = 0;
	struct exo_out o = {};
	__u16 mflags = 0;
	__u8 rflags = 0;
	int record = 0, sent = 0, noroom = 0, txerr = 0, worth = 0;

	if (!t || !rb || !s || !a || !q || !tailp)
		return XDP_DROP; /* unreachable: array maps */

	/* 1. Room in the ring (a helper: asked here, acted on under the lock). */
	avail = bpf_ringbuf_query(&exo_ring, BPF_RB_AVAIL_DATA);
	size = bpf_ringbuf_query(&exo_ring, BPF_RB_RING_SIZE);
	t->full = avail > size || size - avail < EXO_RING_ROOM;

	/* 2. The received frame, into the record. */
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + EXO_ETH_HEADER_LEN) > data_end)
		return XDP_DROP; /* unreachable: exo_xdp checked it */
	flen = (__u32)((long)data_end - (long)data) - EXO_ETH_HEADER_LEN;
	if (flen < EXO_HEADER_LEN || flen > EXO_XDP_MAX_FRAME)
		return XDP_DROP; /* unreachable: exo_xdp checked it */
	for (i = 0; i < 6; i++)
		rb->h.src[i] = eth[6 + i];
	if (bpf_xdp_load_bytes(ctx, EXO_ETH_HEADER_LEN, rb->frame, flen) < 0)
		return XDP_DROP; /* unreachable */
	t->plen = flen + EXO_ETH_HEADER_LEN;

	/* 3. Room in the buffer for the frame to send. */
	if (t->f.sender == *(volatile __u8 *)&s->pred) {
		__u64 qh = *(volatile __u64 *)&s->qhead, tl = *(volatile __u64 *)tailp;
		__u32 need = EXO_ETH_HEADER_LEN + EXO_HEADER_LEN + t->f.hist_len;

		if (tl != qh)
			need += q->slot[qh & (EXO_TXQ_SLOTS - 1)].len;
		if (need < EXO_MIN_ETH_FRAME)
			need = EXO_MIN_ETH_FRAME;
		if (need < *(volatile __u16 *)&s->tx_min)
			need = *(volatile __u16 *)&s->tx_min;
		if (need > t->plen && need <= EXO_ETH_HEADER_LEN + EXO_XDP_MAX_FRAME)
			bpf_xdp_adjust_tail(ctx, (int)(need - t->plen)); /* on failure: no room, found below */
	}
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	room = (__u32)((long)data_end - (long)data);
	asm volatile("" : "+r"(room)); /* computed here: a packet pointer is never spilled as 32 bits */

	/* 4. The rule, under the lock. */
	bpf_spin_lock(&s->lock);
	if (!s->tx_on) {
		reason = EXO_REASON_MODE;
		goto unlock;
	}
	if (!s->halted)
		rflags |= EXO_REC_ARMED;
	reason = classify(s, &t->f, t->hist, t->foreign, &mflags);
	/* Recorded: ACCEPT, the slow path, and a frame of a later epoch that
	 * does not fit this roster (exo's laterRoster: a host that missed a
	 * membership change hears the rack only through such frames). */
	if (reason != EXO_REASON_ACCEPT && !exo_reason_slow_path(reason) &&
	    !(t->f.epoch > s->epoch && (reason == EXO_REASON_BAD_SENDER || reason == EXO_REASON_BAD_HISTLEN ||
					reason == EXO_REASON_BAD_HISTORY_ID)))
		goto unlock;
	if (*(volatile __u8 *)&t->full) {
		/* A frame to record, no room for its record: dropped with the
		 * state untouched (a record is never lost once the state
		 * moved). A frame not recorded kept its verdict above: a
		 * flood of foreign-MAC or stale frames is counted as such
		 * while the control plane is behind. */
		reason = EXO_REASON_RING_FULL;
		goto unlock;
	}
	if (exo_bench_undo_accept)
		bench_save(&t->save, s);
	record = 1;
	rec_kseq = s->kseq;
	s->kseq = rec_kseq + 1;
	if (reason != EXO_REASON_ACCEPT) {
		if (reason != EXO_REASON_HALTED) {
			s->halted = 1;
			rflags |= EXO_REC_HALT;
		}
		worth = 1;
		goto done;
	}
	{
		__u32 h = s->hosts / 2, k = 1;
		__u8 snd = t->f.sender, me = s->me;
		__u64 fseq = t->f.seq;
		int in = 0;

		pass(s, t->f.count);
		/* me in the history after f: f's sender, or f's history but
		 * its oldest id (which equals the state's: f was accepted). */
		if (h > 0 && me == snd)
			in = 1;
		for (i = 0; i < EXO_MAX_HISTORY - 1; i++) {
			if (in || i + 1 >= h)
				break;
			if (t->hist[i] == me)
				in = 1;
		}
		if (snd == s->pred && !in) {
			int head = *tailp != s->qhead;
			__u16 cnt = 0;

			if (head) {
				idx = s->qhead & (EXO_TXQ_SLOTS - 1);
				len = q->slot[idx].len;
				cnt = q->slot[idx].count;
			}
			olen = EXO_ETH_HEADER_LEN + EXO_HEADER_LEN + h + len;
			if (olen < EXO_MIN_ETH_FRAME)
				olen = EXO_MIN_ETH_FRAME;
			if (olen < s->tx_min && s->tx_min <= EXO_ETH_HEADER_LEN + EXO_XDP_MAX_FRAME)
				olen = s->tx_min;
			if (!head && s->idle_run != EXO_NO_IDLE_RUN && s->empty_run >= s->idle_run) {
				s->halted = 1;
				rflags |= EXO_REC_HANDOFF | EXO_REC_HALT;
			} else if (len > EXO_SLOT_DATA || EXO_HEADER_LEN + h + len > EXO_XDP_MAX_FRAME) {
				/* The rule (exo.MaxFastFrame): a frame longer than a
				 * fast path handles is not built; hand-off. */
				s->halted = 1;
				rflags |= EXO_REC_HANDOFF | EXO_REC_HALT;
			} else if (olen > room) {
				/* This buffer cannot grow that far (generic XDP's
				 * tailroom): hand-off, counted apart. */
				s->halted = 1;
				rflags |= EXO_REC_HANDOFF | EXO_REC_HALT;
				noroom = 1;
			} else {
				sent = 1;
				k = 2;
				rflags |= EXO_REC_SENT;
				t->h = h;
				t->len = len;
				t->idx = idx;
				t->olen = olen;
				for (i = 0; i < 6; i++)
					t->mac[i] = s->mac[i];
				o.seq = fseq + 1;
				o.epoch = s->epoch;
				o.group = s->group;
				o.count = cnt;
				o.flags = (s->phase & 1) ? EXO_FLAG_KEY_PHASE : 0;
				o.me = me;
				o.phase = s->phase & 1;
				pass(s, cnt);
				if (head) {
					s->qhead++;
					rflags |= EXO_REC_POPPED;
				}
			}
		}
		/* Accept f (and the frame sent, k = 2): the history gains
		 * f's sender (and me in front), f's history moves down by k. */
		if (h > 0) {
			for (i = 1; i < EXO_MAX_HISTORY; i++) {
				if (i >= h)
					break;
				s->history[i] = i >= k ? t->hist[(i - k) & (EXO_MAX_HISTORY - 1)] : snd;
			}
			s->history[0] = k == 2 ? me : snd;
		}
		{
			__u64 before = s->agreed;

			s->payload_bits = (s->payload_bits << 1) | (t->f.count != 0);
			s->append = fseq + 1;
			agree(s, fseq, h);
			if (k == 2) {
				s->payload_bits = (s->payload_bits << 1) | (o.count != 0);
				s->append = fseq + 2;
				agree(s, fseq + 1, h);
			}
			/* Worth a wake-up: an entry with records agreed (its
			 * publisher waits, its subscribers too). Empty passes
			 * agreeing empty passes are not: an idle stretch in the
			 * kernel does not wake every daemon for every hop. */
			if (s->agreed > before) {
				/* The newest entry agreed is append-agreed back
				 * from the end; with both accepts, the one before
				 * it may be new too. */
				__u64 back = s->append - s->agreed, bits = s->payload_bits;

				if (back >= 63 || ((bits >> (back & 63)) & 1) ||
				    (s->agreed - before > 1 && ((bits >> ((back + 1) & 63)) & 1)))
					worth = 1;
			}
		}
	}
done:
	rec_qhead = s->qhead;
	/* The record's wake-up (docs/token.md section 2): one worth it (an
	 * agreement of records, the slow path, a hand-off) wakes a control
	 * plane that waits (exo_waiter), after the record is written. */
	if (rflags & EXO_REC_HALT)
		worth = 1;
	if (exo_bench_undo_accept)
		bench_restore(s, &t->save);
unlock:
	bpf_spin_unlock(&s->lock);

	/* 5. The frame sent and the record. */
	if (reason == EXO_REASON_MODE) {
		count(EXO_COUNTER_MODE);
		return XDP_DROP;
	}
	if (reason == EXO_REASON_RING_FULL) {
		count(EXO_COUNTER_RING_FULL);
		return XDP_DROP;
	}
	count(mflags ? EXO_COUNTER_FOREIGN_MAC : reason);
	if (!record)
		return XDP_DROP;
	if (rflags & EXO_REC_HANDOFF) {
		count(EXO_COUNTER_HANDOFF);
		if (noroom)
			count(EXO_COUNTER_TX_NOROOM);
	}
	if (sent && !build(ctx, t, q, &a->key[o.phase & 1], &o, &tag)) {
		txerr = 1;
		tag = 0;
	}
	rb->h.kseq = rec_kseq;
	rb->h.qhead = rec_qhead;
	rb->h.tx_tag = tag;
	rb->h.reason = reason;
	rb->h.flags = rflags;
	rb->h.len = flen;
	for (i = 0; i < sizeof(rb->h.reserved); i++)
		rb->h.reserved[i] = 0;
	rb->h.ktime = bpf_ktime_get_ns();
	if (bpf_ringbuf_output(&exo_ring, rb, sizeof(struct exo_rec) + flen, BPF_RB_NO_WAKEUP) < 0) {
		bpf_spin_lock(&s->lock);
		s->lost = 1;
		s->halted = 1;
		bpf_spin_unlock(&s->lock);
		count(EXO_COUNTER_LOST);
		return XDP_DROP;
	}
	/* Urgent: the control plane must act (the slow path, a halt), or
	 * read before the ring fills. */
	if (worth || avail > size / 2)
		wake_waiter(worth, reason != EXO_REASON_ACCEPT || (rflags & EXO_REC_HALT) || avail > size / 2);
	if (exo_bench_undo_accept) {
		/* The received frame again, for the next repeat. */
		__u32 cur;

		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		cur = (__u32)((long)data_end - (long)data);
		asm volatile("" : "+r"(cur));

		if (cur != t->plen)
			bpf_xdp_adjust_tail(ctx, (int)t->plen - (int)cur);
		bpf_xdp_store_bytes(ctx, EXO_ETH_HEADER_LEN, rb->frame, flen);
		bpf_xdp_store_bytes(ctx, 6, rb->h.src, 6);
	}
	if (txerr) {
		count(EXO_COUNTER_TX_ERR);
		return XDP_DROP;
	}
	if (sent) {
		count(EXO_COUNTER_TX);
		if (!(rflags & EXO_REC_POPPED))
			count(EXO_COUNTER_TX_EMPTY);
		return XDP_TX;
	}
	return XDP_DROP;
}

/* exo_ctl is the control plane's operations on the state, run only with
 * BPF_PROG_TEST_RUN: after 14 bytes of Ethernet header (any), a struct
 * exo_cmd; under the state's lock: HALT (halted = 1), ARM (if kseq ==
 * expect_kseq and lost == 0: every field but the lock, kseq and lost from
 * the command; result EXO_CTL_ARMED, else EXO_CTL_KSEQ_MISMATCH or
 * EXO_CTL_LOST), READ; then the state, read under the same lock, is
 * written back into the command (data_out). */
SEC("xdp")
int exo_ctl(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct exo_cmd *c = data + EXO_ETH_HEADER_LEN;
	__u32 zero = 0;
	struct exo_state *s = bpf_map_lookup_elem(&exo_state_map, &zero);
	struct exo_state *in;

	if ((void *)(c + 1) > data_end || !s)
		return XDP_ABORTED;
	in = &c->state;
	bpf_spin_lock(&s->lock);
	switch (c->op) {
	case EXO_CTL_HALT:
		s->halted = 1;
		c->result = 0;
		break;
	case EXO_CTL_ARM:
		if (s->lost) {
			c->result = EXO_CTL_LOST;
		} else if (s->kseq != c->expect_kseq) {
			c->result = EXO_CTL_KSEQ_MISMATCH;
		} else {
			s->group = in->group;
			s->hosts = in->hosts;
			s->epoch = in->epoch;
			s->halted = in->halted;
			s->tx_on = in->tx_on;
			s->me = in->me;
			s->pred = in->pred;
			s->window = in->window;
			s->append = in->append;
			s->agreed = in->agreed;
			s->epoch_start = in->epoch_start;
			__builtin_memcpy(s->history, in->history, sizeof(s->history));
			s->phase = in->phase;
			__builtin_memcpy(s->mac, in->mac, sizeof(s->mac));
			s->empty_run = in->empty_run;
			s->idle_run = in->idle_run;
			s->qhead = in->qhead;
			s->tx_min = in->tx_min;
			s->payload_bits = ~0ULL; /* unknown: every agreement worth a wake-up */
			c->result = EXO_CTL_ARMED;
		}
		break;
	case EXO_CTL_READ:
		c->result = 0;
		break;
	default:
		c->result = EXO_CTL_BAD_OP;
	}
	in->group = s->group;
	in->hosts = s->hosts;
	in->epoch = s->epoch;
	in->halted = s->halted;
	in->tx_on = s->tx_on;
	in->me = s->me;
	in->pred = s->pred;
	in->window = s->window;
	in->append = s->append;
	in->agreed = s->agreed;
	in->epoch_start = s->epoch_start;
	__builtin_memcpy(in->history, s->history, sizeof(s->history));
	in->phase = s->phase;
	in->lost = s->lost;
	__builtin_memcpy(in->mac, s->mac, sizeof(s->mac));
	in->empty_run = s->empty_run;
	in->idle_run = s->idle_run;
	in->kseq = s->kseq;
	in->qhead = s->qhead;
	in->tx_min = s->tx_min;
	bpf_spin_unlock(&s->lock);
	return XDP_PASS;
}
