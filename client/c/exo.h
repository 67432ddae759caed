/*
 * exo.h: the C client of the exo daemon's local API (docs/api.md).
 *
 * C11 and POSIX sockets, no other dependency. A connection (exo_conn) is
 * either a publish/status connection (exo_connect) or a subscription
 * (exo_subscribe); one thread at a time may use it. Every call that can
 * fail returns 0 or an error code (enum exo_code) and, when err is not
 * NULL, fills *err with the code and a one-line message.
 *
 *   exo_conn *c; exo_err e; exo_pos p;
 *   if (exo_connect("/run/exo/exo.sock", &c, &e) != 0) { puts(e.text); ... }
 *   if (exo_publish(c, "hello", 5, &p, &e) == 0) printf("%llu.%u\n", ...);
 *   exo_buf m[2] = {{"a", 1}, {"b", 1}}; exo_result r[2];
 *   if (exo_publish_batch(c, m, 2, r, &e) == 0) ... r[0].pos, r[1].pos ...
 *   exo_close(c);
 *
 * Link with -lexo (pkg-config --cflags --libs exo).
 */
#ifndef EXO_H
#define EXO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* EXO_API_VERSION is the API version this client speaks (its Hello). */
#define EXO_API_VERSION 1

/* The error codes: 1..12 are the daemon's (docs/api.md "Errors"), the
 * codes from 100 are this library's. */
enum exo_code {
	EXO_OK = 0,
	EXO_QUEUE_FULL = 1,       /* the daemon's queue is full: back off, retry */
	EXO_TOO_LARGE = 2,        /* above the daemon's max_message_bytes */
	EXO_DROPPED = 3,          /* removed by a reconciliation: publish again */
	EXO_SHUTTING_DOWN = 4,    /* the daemon is stopping: use another one */
	EXO_BAD_REQUEST = 5,      /* the daemon could not parse a request */
	EXO_COMPACTED = 6,        /* subscribe from a seq the host no longer holds */
	EXO_TOO_SLOW = 7,         /* the subscriber fell too far behind */
	EXO_CHANGE_IN_FLIGHT = 8, /* a membership change is in flight */
	EXO_BAD_CHANGE = 9,       /* the membership change does not apply */
	EXO_FATE_UNKNOWN = 10,    /* the message may or may not be agreed */
	EXO_NOT_STALLED = 11,     /* AcceptLoss refused */
	EXO_VERSION = 12,         /* the client's and the daemon's API versions differ */
	EXO_CONNECT_FAILED = 100, /* no daemon answers at the socket path */
	EXO_CLOSED = 101,         /* the connection is closed (the daemon is gone) */
	EXO_MALFORMED = 102,      /* the daemon sent a frame this client cannot read */
	EXO_USAGE = 103,          /* a bad argument or a call out of order */
	EXO_NO_MEMORY = 104,      /* malloc failed */
	EXO_PARTIAL = 105         /* some messages of a batch failed, the others were agreed */
};

/* exo_err is a call's error: its code and a one-line message. */
typedef struct exo_err {
	int code;
	char text[512];
} exo_err;

/* exo_pos is where a message sits in the agreed order: the entry's
 * sequence number and the message's index inside it. */
typedef struct exo_pos {
	uint64_t seq;
	uint16_t index;
} exo_pos;

/* exo_msg is one agreed message of a subscription. payload points into
 * the connection's buffer: valid until the next call on the connection. */
typedef struct exo_msg {
	exo_pos pos;
	uint8_t sender; /* the sender's stable member id */
	const uint8_t *payload;
	size_t len;
} exo_msg;

/* exo_buf is one message of a batch to publish: len bytes at data. */
typedef struct exo_buf {
	const void *data;
	size_t len;
} exo_buf;

/* exo_result is one message's outcome in a batch: code 0 and the position
 * where it was agreed, or the daemon's code for that message (EXO_TOO_LARGE:
 * above max_message_bytes; EXO_DROPPED; EXO_SHUTTING_DOWN) and its text. */
typedef struct exo_result {
	int code;
	exo_pos pos;    /* code 0: where the message was agreed */
	char text[257]; /* code > 0: the daemon's text (at most 256 bytes), NUL-terminated; "" for code 0 */
} exo_result;

/* EXO_MAX_BATCH bounds the messages of one batch (its count is a u16). */
#define EXO_MAX_BATCH 65535

typedef struct exo_conn exo_conn;

/* exo_strerror names a code ("queue full", "closed", ...). */
const char *exo_strerror(int code);

/* exo_pos_cmp compares two positions: <0, 0, >0. */
int exo_pos_cmp(exo_pos a, exo_pos b);

/* exo_connect connects to the daemon's Unix socket and says Hello (API
 * version 1, name "exo-c"). A daemon older than this client, one that
 * refuses its version (Error 12) or one from before versions (Error 5 to
 * Hello) gives EXO_VERSION and a message naming both versions; no daemon
 * at the path gives EXO_CONNECT_FAILED. On success *out is the
 * connection (exo_close it). */
int exo_connect(const char *socket_path, exo_conn **out, exo_err *err);

/* exo_daemon_version and exo_daemon_features: what the daemon said in
 * its HelloReply (features comma-separated, e.g. "publish,subscribe,..."). */
unsigned exo_daemon_version(const exo_conn *c);
const char *exo_daemon_features(const exo_conn *c);

/* exo_publish publishes one message and blocks until the rack agreed it:
 * *pos (if not NULL) is its position. It must not be called while
 * pipelined publishes await their replies (EXO_USAGE). */
int exo_publish(exo_conn *c, const void *payload, size_t len, exo_pos *pos, exo_err *err);

/* Pipelined publishes: exo_publish_send queues one publish (and
 * exo_publish_batch_send below one batch) and sets *req (if not NULL) to
 * its request id (ids increase from 1); the requests are written when the
 * library's buffer fills, at exo_flush, or at exo_publish_recv, which
 * flushes, then blocks for the next reply, whichever request it answers
 * (replies come in any order): *req is the request it answers, *pos its
 * position. The return value is the request's outcome: 0, or a daemon's
 * code for that request (*req set); or a connection's error (*req 0:
 * every request in flight is lost). exo_pending counts the requests sent
 * whose replies were not read (a batch is one). */
int exo_publish_send(exo_conn *c, const void *payload, size_t len, uint64_t *req, exo_err *err);
int exo_flush(exo_conn *c, exo_err *err);
int exo_publish_recv(exo_conn *c, uint64_t *req, exo_pos *pos, exo_err *err);
size_t exo_pending(const exo_conn *c);

/* exo_publish_batch publishes msgs[0..n) as one batch (one PublishBatch
 * request, docs/api.md "Batches") and blocks until every message is agreed
 * or has failed: results[i] (if results is not NULL) is message i's
 * outcome, the agreed ones at increasing positions. Returns:
 *  - 0: every message was agreed;
 *  - EXO_PARTIAL: some failed (a message above max_message_bytes fails
 *    alone, the others are queued and agreed): results say which and why,
 *    err names how many and the first;
 *  - a daemon's code for the batch as a whole, results not written: the
 *    daemon queues a batch whole or not at all, EXO_QUEUE_FULL (none of it
 *    was queued: back off and retry it), EXO_TOO_LARGE (it needs more
 *    records than the daemon's queue_len: send smaller batches),
 *    EXO_SHUTTING_DOWN;
 *  - checked here, nothing sent: EXO_USAGE for n 0 (an empty batch) or
 *    msgs NULL, EXO_TOO_LARGE for n above EXO_MAX_BATCH or a batch above
 *    the API's 64 MiB frame bound;
 *  - a connection's error (EXO_CLOSED, ...).
 * Not while pipelined publishes await their replies (EXO_USAGE). */
int exo_publish_batch(exo_conn *c, const exo_buf *msgs, size_t n, exo_result *results, exo_err *err);

/* exo_publish_batch_send queues a batch in the pipeline of
 * exo_publish_send (its checks, *req, the flushing): one request, one
 * reply. results (if not NULL, n of them) must stay valid until that reply
 * is read: exo_publish_recv, when it reads the reply of this *req, fills
 * them and returns what exo_publish_batch would (0, EXO_PARTIAL or the
 * batch's code); *pos is not written for a batch. The msgs are copied:
 * their memory may be reused at once. */
int exo_publish_batch_send(exo_conn *c, const exo_buf *msgs, size_t n, exo_result *results, uint64_t *req,
			   exo_err *err);

/* exo_status asks the daemon's status: *json is its JSON (exo status
 * --json), NUL-terminated, malloc'd: free() it. Not while pipelined
 * publishes await their replies (EXO_USAGE). */
int exo_status(exo_conn *c, char **json, exo_err *err);

/* exo_subscribe connects to the daemon (as exo_connect) and subscribes
 * from the first agreed message whose seq >= from_seq; the connection is
 * then a stream of messages, read by exo_next or exo_follow. */
int exo_subscribe(const char *socket_path, uint64_t from_seq, exo_conn **out, exo_err *err);

/* exo_next blocks for the next message of a subscription. Errors:
 * EXO_COMPACTED (from_seq too old, the message names the oldest one
 * held), EXO_TOO_SLOW (resubscribe from the last seq received),
 * EXO_CLOSED (the daemon is gone). */
int exo_next(exo_conn *c, exo_msg *m, exo_err *err);

/* exo_follow calls fn for every message of a subscription until fn
 * returns non-zero (exo_follow then returns 0) or an error (its code). */
typedef int (*exo_msg_fn)(const exo_msg *m, void *arg);
int exo_follow(exo_conn *c, exo_msg_fn fn, void *arg, exo_err *err);

/* exo_close closes the connection and frees it (NULL is fine). */
void exo_close(exo_conn *c);

#ifdef __cplusplus
}
#endif
#endif
