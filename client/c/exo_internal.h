/*
 * exo_internal.h: the library's decoding of the daemon's frames, for its
 * tests (tests/replay.c, which TestCDecoderReplay in client/ runs on the
 * Go client's fuzz corpus): not installed, not part of the API (exo.h);
 * these may change at any release. The exo__ names are hidden from
 * libexo.so's dynamic symbols (gcc, clang); a program linked with
 * libexo.a reaches them.
 */
#ifndef EXO_INTERNAL_H
#define EXO_INTERNAL_H

#include "exo.h"

#if defined(__GNUC__)
#define EXO_INTERNAL __attribute__((visibility("hidden")))
#else
#define EXO_INTERNAL
#endif

/* exo_reply is a daemon->client frame decoded by exo__reply: the fields
 * of its type (docs/api.md), the others 0. */
typedef struct exo_reply {
	uint8_t type;
	uint64_t req;        /* Published, PublishedBatch, Error */
	exo_pos pos;         /* Published, Message */
	uint8_t sender;      /* Message */
	int code;            /* Error: 1..65535 */
	unsigned version;    /* HelloReply */
	size_t count;        /* PublishedBatch: its results, 1..65535 (exo__results) */
	const uint8_t *data; /* into the body: Message's payload, Error's text, StatusReply's
				JSON, HelloReply's features, PublishedBatch's results */
	size_t len;          /* data's bytes */
} exo_reply;

/* exo__reply decodes the body b (n bytes) of a frame of type type into
 * *r: 0, or EXO_MALFORMED (err says why) for a body shorter than its type's
 * fixed fields, a PublishedBatch that is not count >= 1 results filling
 * its body exactly, an Error of code 0 (0 is no error: the library's
 * callers would take it for success), or a type that is none of the
 * replies the library reads (Published, PublishedBatch, Message,
 * StatusReply, HelloReply, Error; it sends no Roster, Key or AcceptLoss,
 * so their replies are unexpected). Bytes after a fixed-size body are
 * ignored, as the Go client does. */
EXO_INTERNAL int exo__reply(uint8_t type, const uint8_t *b, size_t n, exo_reply *r, exo_err *err);

/* exo__results writes the results of a PublishedBatch that exo__reply
 * decoded into res[0..r->count): a failed one's text cut at 256 bytes
 * (the daemon sends no more). */
EXO_INTERNAL void exo__results(const exo_reply *r, exo_result *res);

/* exo__conn_fd makes a connection of fd, without a Hello, for
 * exo__read_frame (exo_close closes fd); its messages name it "fd N". */
EXO_INTERNAL int exo__conn_fd(int fd, exo_conn **out, exo_err *err);

/* exo__read_frame reads the connection's next frame: its type, and its
 * body (len bytes, valid until the next read). A length field of 0 or
 * above 64 MiB + 64 is EXO_MALFORMED; the end of the stream is EXO_CLOSED,
 * its message saying "in the middle of a frame" when it cut one. Either
 * leaves the connection failed. */
EXO_INTERNAL int exo__read_frame(exo_conn *c, exo_err *err, uint8_t *type, const uint8_t **body, size_t *len);

#endif
