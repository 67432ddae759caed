/* exo.c: the C client of the exo daemon's local API (exo.h, docs/api.md). */
#define _POSIX_C_SOURCE 200809L

#include "exo_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum {
	T_PUBLISH = 0x01, T_SUBSCRIBE = 0x02, T_STATUS = 0x03, T_PUBLISH_BATCH = 0x06, T_HELLO = 0x08,
	T_PUBLISHED = 0x81, T_MESSAGE = 0x82, T_STATUS_REPLY = 0x83,
	T_PUBLISHED_BATCH = 0x86, T_HELLO_REPLY = 0x88, T_ERROR = 0xFF
};

#define MAX_FRAME ((64u << 20) + 64u) /* a frame's length field at most */
#define OUT_FLUSH (64u << 10)         /* pipelined requests written from this size */

/* pbatch is a batch awaiting its reply: its request id, its count, where
 * its results go. */
struct pbatch {
	uint64_t req;
	size_t n;
	exo_result *res;
};

struct exo_conn {
	int fd;
	char path[108];
	unsigned version;
	char features[256];
	uint8_t *in;              /* received bytes: in[ipos:ilen] unread */
	size_t ipos, ilen, icap;
	uint8_t *out;             /* requests not yet written */
	size_t olen, ocap;
	uint64_t next_req;
	size_t pending;
	struct pbatch *batches;   /* the batches among the pending requests */
	size_t nbatch, bcap;
	int dead;                 /* the connection failed: its code */
	char dead_text[400];
};

const char *exo_strerror(int code)
{
	switch (code) {
	case EXO_OK: return "ok";
	case EXO_QUEUE_FULL: return "queue full";
	case EXO_TOO_LARGE: return "too large";
	case EXO_DROPPED: return "dropped";
	case EXO_SHUTTING_DOWN: return "shutting down";
	case EXO_BAD_REQUEST: return "bad request";
	case EXO_COMPACTED: return "compacted";
	case EXO_TOO_SLOW: return "too slow";
	case EXO_CHANGE_IN_FLIGHT: return "change in flight";
	case EXO_BAD_CHANGE: return "bad change";
	case EXO_FATE_UNKNOWN: return "fate unknown";
	case EXO_NOT_STALLED: return "not stalled";
	case EXO_VERSION: return "version";
	case EXO_CONNECT_FAILED: return "connect failed";
	case EXO_CLOSED: return "closed";
	case EXO_MALFORMED: return "malformed";
	case EXO_USAGE: return "usage";
	case EXO_NO_MEMORY: return "no memory";
	case EXO_PARTIAL: return "partial batch";
	}
	return "unknown error";
}

int exo_pos_cmp(exo_pos a, exo_pos b)
{
	if (a.seq != b.seq)
		return a.seq < b.seq ? -1 : 1;
	return a.index < b.index ? -1 : a.index > b.index;
}

static int fail(exo_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		err->code = code;
		vsnprintf(err->text, sizeof err->text, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* broken marks the connection failed: every later call gets the same. */
static int broken(exo_conn *c, exo_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->dead_text, sizeof c->dead_text, fmt, ap);
	va_end(ap);
	c->dead = code;
	c->pending = 0;
	c->nbatch = 0;
	return fail(err, code, "exo daemon at %s: %s", c->path, c->dead_text);
}

static int dead(exo_conn *c, exo_err *err)
{
	return fail(err, c->dead, "exo daemon at %s: %s", c->path, c->dead_text);
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)); put16(p + 2, (uint16_t)v); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)(v >> 32)); put32(p + 4, (uint32_t)v); }

/* reserve queues a request's header and room for its body (body bytes):
 * *at is where the body goes. */
static int reserve(exo_conn *c, exo_err *err, uint8_t type, size_t body, uint8_t **at)
{
	if (body + 1 > MAX_FRAME)
		return fail(err, EXO_TOO_LARGE, "a request of %zu bytes is above the API's frame limit", body);
	size_t need = c->olen + 5 + body;
	if (need > c->ocap) {
		size_t cap = c->ocap ? c->ocap : 4096;
		while (cap < need)
			cap *= 2;
		uint8_t *o = realloc(c->out, cap);
		if (!o)
			return fail(err, EXO_NO_MEMORY, "no memory for a request of %zu bytes", body);
		c->out = o;
		c->ocap = cap;
	}
	uint8_t *p = c->out + c->olen;
	put32(p, (uint32_t)(body + 1));
	p[4] = type;
	*at = p + 5;
	c->olen = need;
	return 0;
}

/* frame queues a request: header, head (hlen bytes), tail (tlen bytes). */
static int frame(exo_conn *c, exo_err *err, uint8_t type, const uint8_t *head, size_t hlen,
		 const void *tail, size_t tlen)
{
	uint8_t *p;
	int rc = reserve(c, err, type, hlen + tlen, &p);
	if (rc)
		return rc;
	if (hlen)
		memcpy(p, head, hlen);
	if (tlen)
		memcpy(p + hlen, tail, tlen);
	return 0;
}

int exo_flush(exo_conn *c, exo_err *err)
{
	if (c->dead)
		return dead(c, err);
	size_t off = 0;
	while (off < c->olen) {
		ssize_t n = send(c->fd, c->out + off, c->olen - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return broken(c, err, EXO_CLOSED, "write: %s (is the daemon running?)", strerror(errno));
		off += (size_t)n;
	}
	c->olen = 0;
	return 0;
}

/* exo__read_frame (exo_internal.h) reads the next frame: its type, body
 * and body length (the body points into c->in, valid until the next
 * read). */
int exo__read_frame(exo_conn *c, exo_err *err, uint8_t *type, const uint8_t **body, size_t *len)
{
	if (c->dead)
		return dead(c, err);
	size_t want = 5;
	for (;;) {
		size_t have = c->ilen - c->ipos;
		if (have >= 5) {
			uint32_t l = get32(c->in + c->ipos);
			if (l < 1 || l > MAX_FRAME)
				return broken(c, err, EXO_MALFORMED, "a frame of length %u", (unsigned)l);
			want = 4 + (size_t)l;
			if (have >= want) {
				*type = c->in[c->ipos + 4];
				*body = c->in + c->ipos + 5;
				*len = want - 5;
				c->ipos += want;
				return 0;
			}
		}
		if (c->ipos > 0 && (c->ipos == c->ilen || c->ipos + want > c->icap)) {
			memmove(c->in, c->in + c->ipos, have);
			c->ilen = have;
			c->ipos = 0;
		}
		if (want > c->icap || c->icap == 0) {
			size_t cap = want < (64u << 10) ? (64u << 10) : want;
			uint8_t *in = realloc(c->in, cap);
			if (!in)
				return broken(c, err, EXO_NO_MEMORY, "no memory for a frame of %zu bytes", want);
			c->in = in;
			c->icap = cap;
		}
		ssize_t n = read(c->fd, c->in + c->ilen, c->icap - c->ilen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return broken(c, err, EXO_CLOSED, "read: %s", strerror(errno));
		if (n == 0)
			return broken(c, err, EXO_CLOSED, "the daemon closed the connection%s",
				      have ? " in the middle of a frame" : "");
		c->ilen += (size_t)n;
	}
}

/* result_len is the length of the PublishedBatch result at b (left bytes
 * there), 0 when it is cut: [code u16 = 0][seq u64][index u16] or
 * [code u16 > 0][text_len u16][text]. */
static size_t result_len(const uint8_t *b, size_t left)
{
	size_t n = left < 2 ? 2 : get16(b) == 0 ? 12 : left < 4 ? 4 : 4 + (size_t)get16(b + 2);
	return n <= left ? n : 0;
}

/* batch_body decodes a PublishedBatch's body (len bytes at b): [req
 * u64][count u16], then count >= 1 results that fill it exactly. The
 * whole body is checked here, before any result is written. */
static int batch_body(const uint8_t *b, size_t len, exo_reply *r, exo_err *err)
{
	if (len < 10)
		return fail(err, EXO_MALFORMED, "a published batch of %zu bytes", len);
	r->req = get64(b);
	r->count = get16(b + 8);
	if (r->count == 0)
		return fail(err, EXO_MALFORMED, "a published batch of 0 results");
	size_t off = 10;
	for (size_t i = 0; i < r->count; i++) {
		size_t n = result_len(b + off, len - off);
		if (n == 0)
			return fail(err, EXO_MALFORMED, "published batch: result %zu of %zu cut (%zu bytes left)", i,
				    r->count, len - off);
		off += n;
	}
	if (off != len)
		return fail(err, EXO_MALFORMED, "published batch: %zu bytes after its %zu results", len - off, r->count);
	r->data = b + 10;
	r->len = len - 10;
	return 0;
}

/* short_body: a reply (name) of n bytes, below its fixed fields' min. */
static int short_body(exo_err *err, const char *name, size_t n, size_t min)
{
	return fail(err, EXO_MALFORMED, "a %s of %zu bytes, shorter than its %zu", name, n, min);
}

/* exo__reply (exo_internal.h): the one decoding of the replies, which
 * hello, exo_publish_recv, exo_status and exo_next call once they know
 * the frame's type is one they expect. */
int exo__reply(uint8_t type, const uint8_t *b, size_t n, exo_reply *r, exo_err *err)
{
	memset(r, 0, sizeof *r);
	r->type = type;
	switch (type) {
	case T_PUBLISHED: /* [req u64][seq u64][index u16] */
		if (n < 18)
			return short_body(err, "Published", n, 18);
		r->req = get64(b);
		r->pos = (exo_pos){get64(b + 8), get16(b + 16)};
		return 0;
	case T_MESSAGE: /* [seq u64][index u16][sender u8][payload] */
		if (n < 11)
			return short_body(err, "Message", n, 11);
		r->pos = (exo_pos){get64(b), get16(b + 8)};
		r->sender = b[10];
		r->data = b + 11;
		r->len = n - 11;
		return 0;
	case T_STATUS_REPLY: /* JSON */
		r->data = b;
		r->len = n;
		return 0;
	case T_HELLO_REPLY: /* [version u16][features] */
		if (n < 2)
			return short_body(err, "HelloReply", n, 2);
		r->version = get16(b);
		r->data = b + 2;
		r->len = n - 2;
		return 0;
	case T_ERROR: /* [req u64][code u16][text] */
		if (n < 10)
			return short_body(err, "Error", n, 10);
		r->req = get64(b);
		r->code = get16(b + 8);
		r->data = b + 10;
		r->len = n - 10;
		if (r->code == 0)
			return fail(err, EXO_MALFORMED, "an Error of code 0 (request %llu): 0 is no error",
				    (unsigned long long)r->req);
		return 0;
	case T_PUBLISHED_BATCH:
		return batch_body(b, n, r, err);
	}
	return fail(err, EXO_MALFORMED, "unexpected reply type %#x (%zu bytes)", type, n);
}

void exo__results(const exo_reply *r, exo_result *res)
{
	size_t off = 0;
	for (size_t i = 0; i < r->count; i++) {
		const uint8_t *p = r->data + off;
		size_t n = result_len(p, r->len - off);
		exo_result *x = &res[i];
		x->code = get16(p);
		x->pos = (exo_pos){0, 0};
		x->text[0] = 0;
		if (x->code == 0) {
			x->pos = (exo_pos){get64(p + 2), get16(p + 10)};
		} else {
			size_t t = n - 4 < sizeof x->text - 1 ? n - 4 : sizeof x->text - 1;
			memcpy(x->text, p + 4, t);
			x->text[t] = 0;
		}
		off += n;
	}
}

/* daemon_error reports an Error reply's code and text. */
static int daemon_error(exo_conn *c, exo_err *err, const exo_reply *r)
{
	return fail(err, r->code, "exo daemon at %s: %s (%d): %.*s", c->path, exo_strerror(r->code), r->code,
		    (int)r->len, (const char *)r->data);
}

static int hello(exo_conn *c, exo_err *err)
{
	uint8_t v[2];
	put16(v, EXO_API_VERSION);
	int rc = frame(c, err, T_HELLO, v, 2, "exo-c", 5);
	if (rc || (rc = exo_flush(c, err)))
		return rc;
	uint8_t t;
	const uint8_t *b;
	size_t n;
	if ((rc = exo__read_frame(c, err, &t, &b, &n)))
		return rc;
	exo_reply r;
	exo_err why;
	if (t != T_HELLO_REPLY && t != T_ERROR)
		return fail(err, EXO_MALFORMED, "hello to exo daemon at %s: reply type %#x", c->path, t);
	if (exo__reply(t, b, n, &r, &why))
		return fail(err, EXO_MALFORMED, "hello to exo daemon at %s: %s", c->path, why.text);
	if (t == T_HELLO_REPLY) {
		c->version = r.version;
		size_t f = r.len < sizeof c->features - 1 ? r.len : sizeof c->features - 1;
		memcpy(c->features, r.data, f);
		c->features[f] = 0;
		if (c->version < EXO_API_VERSION)
			return fail(err, EXO_VERSION,
				    "exo client speaks API version %d, the daemon at %s speaks API version %u: upgrade the daemon, or use a client of version %u",
				    EXO_API_VERSION, c->path, c->version, c->version);
		return 0;
	}
	const char *text = (const char *)r.data;
	int tl = (int)r.len;
	if (r.code == EXO_BAD_REQUEST)
		return fail(err, EXO_VERSION,
			    "exo client speaks API version %d, the daemon at %s predates API versions (it said: %.*s): upgrade the daemon",
			    EXO_API_VERSION, c->path, tl, text);
	if (r.code == EXO_VERSION)
		return fail(err, EXO_VERSION, "exo client speaks API version %d, the daemon at %s refuses it: %.*s",
			    EXO_API_VERSION, c->path, tl, text);
	return daemon_error(c, err, &r);
}

/* conn makes a connection of fd, its messages naming it name (at most
 * 107 bytes). */
static exo_conn *conn(int fd, const char *name)
{
	exo_conn *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	snprintf(c->path, sizeof c->path, "%s", name);
	c->fd = fd;
	c->next_req = 1;
	return c;
}

int exo__conn_fd(int fd, exo_conn **out, exo_err *err)
{
	char name[32];
	snprintf(name, sizeof name, "fd %d", fd);
	*out = conn(fd, name);
	return *out ? 0 : fail(err, EXO_NO_MEMORY, "no memory");
}

int exo_connect(const char *socket_path, exo_conn **out, exo_err *err)
{
	*out = NULL;
	struct sockaddr_un a;
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	size_t pl = socket_path ? strlen(socket_path) : 0;
	if (pl == 0 || pl >= sizeof a.sun_path)
		return fail(err, EXO_CONNECT_FAILED, "connect to exo daemon at %s: bad socket path (empty or longer than %zu bytes)",
			    socket_path ? socket_path : "(null)", sizeof a.sun_path - 1);
	memcpy(a.sun_path, socket_path, pl);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		return fail(err, EXO_CONNECT_FAILED, "socket: %s", strerror(errno));
	exo_conn *c = conn(fd, socket_path);
	if (!c) {
		close(fd);
		return fail(err, EXO_NO_MEMORY, "no memory");
	}
	int rc;
	while ((rc = connect(c->fd, (struct sockaddr *)&a, sizeof a)) < 0 && errno == EINTR)
		;
	if (rc < 0) {
		int e = errno;
		exo_close(c);
		return fail(err, EXO_CONNECT_FAILED, "connect to exo daemon at %s: %s (is the daemon running?)",
			    socket_path, strerror(e));
	}
	if ((rc = hello(c, err))) {
		exo_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

unsigned exo_daemon_version(const exo_conn *c) { return c->version; }
const char *exo_daemon_features(const exo_conn *c) { return c->features; }
size_t exo_pending(const exo_conn *c) { return c->pending; }

/* queued counts a request just queued as pending (its id next_req, set
 * in *req if not NULL) and writes the buffer once it is full. */
static int queued(exo_conn *c, uint64_t *req, exo_err *err)
{
	if (req)
		*req = c->next_req;
	c->next_req++;
	c->pending++;
	if (c->olen >= OUT_FLUSH)
		return exo_flush(c, err);
	return 0;
}

/* idle refuses a blocking call (fn) while pipelined requests await their
 * replies. */
static int idle(exo_conn *c, exo_err *err, const char *fn)
{
	if (c->pending)
		return fail(err, EXO_USAGE, "%s: %zu pipelined publishes await their replies", fn, c->pending);
	return 0;
}

int exo_publish_send(exo_conn *c, const void *payload, size_t len, uint64_t *req, exo_err *err)
{
	if (c->dead)
		return dead(c, err);
	uint8_t h[8];
	put64(h, c->next_req);
	int rc = frame(c, err, T_PUBLISH, h, 8, payload, len);
	if (rc)
		return rc;
	return queued(c, req, err);
}

int exo_publish_batch_send(exo_conn *c, const exo_buf *msgs, size_t n, exo_result *results, uint64_t *req,
			   exo_err *err)
{
	if (c->dead)
		return dead(c, err);
	if (n == 0)
		return fail(err, EXO_USAGE, "publish batch of 0 messages: a batch has 1 to %d", EXO_MAX_BATCH);
	if (!msgs)
		return fail(err, EXO_USAGE, "publish batch of %zu messages: msgs is NULL", n);
	if (n > EXO_MAX_BATCH)
		return fail(err, EXO_TOO_LARGE, "publish batch of %zu messages: a batch has 1 to %d", n, EXO_MAX_BATCH);
	uint64_t body = 10; /* req, count; then len and payload each */
	for (size_t i = 0; i < n; i++)
		body += 4 + (msgs[i].len < MAX_FRAME ? msgs[i].len : MAX_FRAME);
	if (body + 1 > MAX_FRAME)
		return fail(err, EXO_TOO_LARGE,
			    "publish batch of %zu messages, %llu bytes: above the frame bound %u, send smaller batches", n,
			    (unsigned long long)(body + 1), MAX_FRAME);
	if (c->nbatch == c->bcap) {
		size_t cap = c->bcap ? 2 * c->bcap : 8;
		struct pbatch *b = realloc(c->batches, cap * sizeof *b);
		if (!b)
			return fail(err, EXO_NO_MEMORY, "no memory for a batch awaiting its reply");
		c->batches = b;
		c->bcap = cap;
	}
	uint8_t *p;
	int rc = reserve(c, err, T_PUBLISH_BATCH, (size_t)body, &p);
	if (rc)
		return rc;
	put64(p, c->next_req);
	put16(p + 8, (uint16_t)n);
	p += 10;
	for (size_t i = 0; i < n; i++) {
		put32(p, (uint32_t)msgs[i].len);
		if (msgs[i].len)
			memcpy(p + 4, msgs[i].data, msgs[i].len);
		p += 4 + msgs[i].len;
	}
	c->batches[c->nbatch++] = (struct pbatch){.req = c->next_req, .n = n, .res = results};
	return queued(c, req, err);
}

/* batch_of is the index of request id's batch in c->batches, or c->nbatch
 * when it is none. */
static size_t batch_of(const exo_conn *c, uint64_t id)
{
	size_t k = 0;
	while (k < c->nbatch && c->batches[k].req != id)
		k++;
	return k;
}

/* answered: a reply came for a pending request (k: its batch's index, or
 * c->nbatch). */
static void answered(exo_conn *c, size_t k)
{
	c->pending--;
	if (k < c->nbatch)
		c->batches[k] = c->batches[--c->nbatch];
}

/* batch_reply takes a PublishedBatch (r, decoded) as the answer of its
 * batch: its results written, 0 or EXO_PARTIAL. */
static int batch_reply(exo_conn *c, exo_err *err, const exo_reply *r, uint64_t *req)
{
	size_t k = batch_of(c, r->req);
	if (k == c->nbatch)
		return broken(c, err, EXO_MALFORMED, "a batch answer to request %llu, which is no batch awaiting its reply",
			      (unsigned long long)r->req);
	if (r->count != c->batches[k].n)
		return broken(c, err, EXO_MALFORMED, "%zu results for a batch of %zu messages", r->count, c->batches[k].n);
	exo_result *res = c->batches[k].res;
	answered(c, k);
	*req = r->req;
	if (res)
		exo__results(r, res);
	size_t failed = 0, first = 0, off = 0;
	const uint8_t *f = NULL;
	for (size_t i = 0; i < r->count; i++) {
		const uint8_t *p = r->data + off;
		if (get16(p) != 0 && failed++ == 0) {
			first = i;
			f = p;
		}
		off += result_len(p, r->len - off);
	}
	if (failed == 0)
		return 0;
	int code = get16(f);
	return fail(err, EXO_PARTIAL,
		    "exo daemon at %s: %zu of %zu messages of the batch failed; the first, message %zu: %s (%d): %.*s",
		    c->path, failed, r->count, first, exo_strerror(code), code, (int)get16(f + 2), (const char *)f + 4);
}

int exo_publish_recv(exo_conn *c, uint64_t *req, exo_pos *pos, exo_err *err)
{
	uint64_t id = 0;
	if (!req)
		req = &id;
	*req = 0;
	if (c->dead)
		return dead(c, err);
	if (c->pending == 0)
		return fail(err, EXO_USAGE, "exo_publish_recv: no publish awaits its reply");
	int rc = exo_flush(c, err);
	if (rc)
		return rc;
	for (;;) {
		uint8_t t;
		const uint8_t *b;
		size_t n;
		exo_reply r;
		exo_err why;
		if ((rc = exo__read_frame(c, err, &t, &b, &n)))
			return rc;
		if (t == T_STATUS_REPLY)
			continue;
		if (t != T_PUBLISHED && t != T_PUBLISHED_BATCH && t != T_ERROR)
			return broken(c, err, EXO_MALFORMED, "unexpected reply type %#x (%zu bytes)", t, n);
		if (exo__reply(t, b, n, &r, &why))
			return broken(c, err, EXO_MALFORMED, "%s", why.text);
		if (t == T_PUBLISHED_BATCH)
			return batch_reply(c, err, &r, req);
		if (t == T_ERROR && r.req == 0) /* a request it could not parse: it closes the connection */
			return broken(c, err, r.code, "%s (%d): %.*s", exo_strerror(r.code), r.code, (int)r.len,
				      (const char *)r.data);
		size_t k = batch_of(c, r.req);
		if (t == T_PUBLISHED && k < c->nbatch)
			return broken(c, err, EXO_MALFORMED, "a single answer to the publish batch %llu",
				      (unsigned long long)r.req);
		answered(c, k);
		*req = r.req;
		if (t == T_ERROR)
			return daemon_error(c, err, &r);
		if (pos)
			*pos = r.pos;
		return 0;
	}
}

/* await blocks for the reply of request id, the only one pending. */
static int await(exo_conn *c, uint64_t id, exo_pos *pos, exo_err *err)
{
	uint64_t got;
	int rc = exo_publish_recv(c, &got, pos, err);
	if (got != 0 && got != id)
		return broken(c, err, EXO_MALFORMED, "a reply to request %llu, want %llu", (unsigned long long)got,
			      (unsigned long long)id);
	return rc;
}

int exo_publish(exo_conn *c, const void *payload, size_t len, exo_pos *pos, exo_err *err)
{
	uint64_t id;
	int rc = idle(c, err, "exo_publish");
	if (rc || (rc = exo_publish_send(c, payload, len, &id, err)))
		return rc;
	return await(c, id, pos, err);
}

int exo_publish_batch(exo_conn *c, const exo_buf *msgs, size_t n, exo_result *results, exo_err *err)
{
	uint64_t id;
	int rc = idle(c, err, "exo_publish_batch");
	if (rc || (rc = exo_publish_batch_send(c, msgs, n, results, &id, err)))
		return rc;
	return await(c, id, NULL, err);
}

int exo_status(exo_conn *c, char **json, exo_err *err)
{
	*json = NULL;
	if (c->dead)
		return dead(c, err);
	int rc = idle(c, err, "exo_status");
	if (rc || (rc = frame(c, err, T_STATUS, NULL, 0, NULL, 0)) || (rc = exo_flush(c, err)))
		return rc;
	uint8_t t;
	const uint8_t *b;
	size_t n;
	exo_reply r;
	exo_err why;
	if ((rc = exo__read_frame(c, err, &t, &b, &n)))
		return rc;
	if (t != T_STATUS_REPLY && t != T_ERROR)
		return broken(c, err, EXO_MALFORMED, "unexpected reply type %#x to Status", t);
	if (exo__reply(t, b, n, &r, &why))
		return broken(c, err, EXO_MALFORMED, "%s", why.text);
	if (t == T_ERROR)
		return daemon_error(c, err, &r);
	char *s = malloc(r.len + 1);
	if (!s)
		return fail(err, EXO_NO_MEMORY, "no memory for a status of %zu bytes", r.len);
	memcpy(s, r.data, r.len);
	s[r.len] = 0;
	*json = s;
	return 0;
}

int exo_subscribe(const char *socket_path, uint64_t from_seq, exo_conn **out, exo_err *err)
{
	exo_conn *c;
	*out = NULL;
	int rc = exo_connect(socket_path, &c, err);
	if (rc)
		return rc;
	uint8_t h[8];
	put64(h, from_seq);
	if ((rc = frame(c, err, T_SUBSCRIBE, h, 8, NULL, 0)) || (rc = exo_flush(c, err))) {
		exo_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

int exo_next(exo_conn *c, exo_msg *m, exo_err *err)
{
	uint8_t t;
	const uint8_t *b;
	size_t n;
	exo_reply r;
	exo_err why;
	int rc = exo__read_frame(c, err, &t, &b, &n);
	if (rc)
		return rc;
	if (t != T_MESSAGE && t != T_ERROR)
		return broken(c, err, EXO_MALFORMED, "unexpected frame type %#x (%zu bytes) in a subscription", t, n);
	if (exo__reply(t, b, n, &r, &why))
		return broken(c, err, EXO_MALFORMED, "%s", why.text);
	if (t == T_ERROR)
		return broken(c, err, r.code, "%s (%d): %.*s", exo_strerror(r.code), r.code, (int)r.len,
			      (const char *)r.data);
	m->pos = r.pos;
	m->sender = r.sender;
	m->payload = r.data;
	m->len = r.len;
	return 0;
}

int exo_follow(exo_conn *c, exo_msg_fn fn, void *arg, exo_err *err)
{
	exo_msg m;
	for (;;) {
		int rc = exo_next(c, &m, err);
		if (rc)
			return rc;
		if (fn(&m, arg))
			return 0;
	}
}

void exo_close(exo_conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->in);
	free(c->out);
	free(c->batches);
	free(c);
}
