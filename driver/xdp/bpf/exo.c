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
#define EXO_NUM_COUNTERS (EXO_NUM_REASONS + 4)

/* "EXOM": a struct exo_meta precedes the frame (data_meta .. data). */
#define EXO_META_MAGIC 0x45584f4d

/* exo_meta.flags: the frame was dropped for its source MAC (reason says
 * BAD_SENDER; counted as EXO_COUNTER_FOREIGN_MAC). */
#define EXO_META_FOREIGN_MAC 0x0001

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
_Static_assert(sizeof(struct exo_state) == 176, "exo_state layout");
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

/* tag_ok reports whether f->tag is the frame's tag under the key k: the
 * message is copied into the scratch (two bpf_xdp_load_bytes: the header
 * before the tag field, then the history and the payload; never the
 * padding), absorbed 8 bytes at a time by bpf_loop, and finished with the
 * last block (the remaining len(m) % 8 bytes and len(m) << 56). */
static __always_inline int tag_ok(struct xdp_md *ctx, const struct exo_hdr *f, const struct exo_key *k)
{
	__u32 zero = 0, tl = (__u32)f->hist_len + f->payload_len, n, nb, r;
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
	return (v0 ^ v1 ^ v2 ^ v3) == f->tag;
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
static __always_inline __u32 classify_accept(struct exo_state *s, const struct exo_hdr *f,
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
	__u8 hist[EXO_MAX_HISTORY];
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

			bpf_spin_lock(&s->lock);
			reason = classify_accept(s, &f, hist, foreign, &flags);
			bpf_spin_unlock(&s->lock);
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
