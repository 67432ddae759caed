//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Exo fast path as an XDP program: the C twin of exo.Frame.UnmarshalBinary
 * (the codec checks), exo.Pointers.Classify and exo.Pointers.Accept.
 * docs/xdp.md describes it; driver/xdp/xdp_test.go replays every golden
 * vector of testdata/vectors through it with BPF_PROG_TEST_RUN.
 *
 * Verdict per frame (EtherType 0x88B5, no VLAN; other frames pass untouched):
 *   ACCEPT and the slow-path reasons (GAP, DIVERGENCE, FUTURE_EPOCH, HALTED)
 *     -> XDP_PASS, with a struct exo_meta in the XDP metadata area;
 *   every other reason -> XDP_DROP;
 *   every Exo frame counts once in exo_counters[reason] (per CPU).
 *
 * Concurrency: the state (one struct exo_state in exo_state_map) is read,
 * classified against and updated under its bpf_spin_lock, so several RX
 * queues (CPUs) may run the program at once; user space reads and writes
 * the state with BPF_F_LOCK.
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
#define EXO_NUM_COUNTERS (EXO_NUM_REASONS + 3)

/* "EXOM": a struct exo_meta precedes the frame (data_meta .. data). */
#define EXO_META_MAGIC 0x45584f4d

/* The fast-path state: exo.Pointers. history[i] is the sender of entry
 * append-1-i; slots from h = hosts/2 on stay EXO_HISTORY_NONE. */
struct exo_state {
	struct bpf_spin_lock lock;
	__u16 group;
	__u16 hosts;
	__u32 epoch;
	__u8 halted;
	__u64 window;
	__u64 append;
	__u64 agreed;
	__u64 epoch_start;
	__u8 history[EXO_MAX_HISTORY];
};

/* Written in front of every Exo frame the program handles (metadata area,
 * read by AF_XDP and by the tests); native byte order. */
struct exo_meta {
	__u32 magic;  /* EXO_META_MAGIC */
	__u8 reason;  /* enum exo_reason */
	__u8 action;  /* XDP_PASS or XDP_DROP */
	__u16 reserved;
};

_Static_assert(sizeof(struct exo_meta) == 8, "exo_meta is 8 bytes");
_Static_assert(sizeof(struct exo_state) == 176, "exo_state layout");

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

/* Benchmark only (set at load time by driver/xdp, never in production):
 * undo every ACCEPT so that BPF_PROG_TEST_RUN with repeat can run the
 * same in-order frame again and again. 0 in production, where the
 * verifier removes the undo code as dead. */
volatile const __u32 exo_bench_undo_accept = 0;

/* The decoded fixed header. */
struct exo_hdr {
	__u64 seq;
	__u32 epoch;
	__u16 group;
	__u16 count;
	__u16 payload_len;
	__u8 sender;
	__u8 hist_len;
};

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
	__u16 flags;
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
	if (flags != 0 && (!(flags & EXO_FLAG_READMIT) ||
			   (flags & ~(EXO_FLAG_READMIT | EXO_FLAG_HOST_MASK)) != 0))
		return EXO_REASON_BAD_FLAGS;
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

/* classify is exo.Pointers.Classify; on ACCEPT it also applies
 * exo.Pointers.Accept. The caller holds s->lock. */
static __always_inline __u32 classify_accept(struct exo_state *s, const struct exo_hdr *f,
					     const __u8 *hist)
{
	__u32 n = s->hosts, h = n / 2, hl = f->hist_len, i;
	__u64 seq = f->seq;

	if (f->group != s->group)
		return EXO_REASON_BAD_GROUP;
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

	/* Accept: the sender enters the history, append moves past seq, and
	 * appending seq agrees seq-h if seq >= epoch_start && seq-epoch_start >= h. */
	{
		__u64 old_append = s->append, old_agreed = s->agreed;
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
		}
	}
	return EXO_REASON_ACCEPT;
}

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&exo_counters, &slot);
	if (c)
		*c += 1;
}

SEC("xdp")
int exo_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *eth = data;
	__u8 hist[EXO_MAX_HISTORY];
	struct exo_hdr f = {};
	struct exo_meta *m;
	__u32 reason, action, key = 0;

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
	if (reason == EXO_REASON_ACCEPT) {
		struct exo_state *s = bpf_map_lookup_elem(&exo_state_map, &key);
		if (!s)
			return XDP_PASS; /* unreachable: array map */
		bpf_spin_lock(&s->lock);
		reason = classify_accept(s, &f, hist);
		bpf_spin_unlock(&s->lock);
	}

	count(reason);
	action = (reason == EXO_REASON_ACCEPT || exo_reason_slow_path(reason)) ? XDP_PASS : XDP_DROP;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct exo_meta)) < 0) {
		count(EXO_COUNTER_NO_META);
		return action;
	}
	m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return action;
	m->magic = EXO_META_MAGIC;
	m->reason = reason;
	m->action = action;
	m->reserved = 0;
	return action;
}
