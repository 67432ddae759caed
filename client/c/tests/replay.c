/* replay: the library's decoding of daemon->client byte streams, without a
 * daemon. TestCDecoderReplay (client/c_replay_test.go) runs it on the Go
 * client's fuzz corpus (FuzzAPIFrame's seeds and testdata) and compares
 * its verdicts with the Go client's decoding of the same bytes.
 *
 * Usage: replay FILE...; each file is one raw stream. A forked child writes
 * it into a pipe CHUNK bytes at a time, and the library reads its frames
 * from the pipe with exo__read_frame (exo_internal.h), its reading path
 * (buffer, refills, frames straddling reads), then decodes each with
 * exo__reply from a copy of its body of the body's size (a read past it
 * is then one the address sanitizer sees). Prints, per file:
 *
 *   input FILE
 *   frame 0xTT VERDICT     one per frame read, in order (below)
 *   end eof                the stream ended after a whole frame
 *   end cut                the stream ended inside a frame
 *   end malformed: WHY     a length field of 0 or above 64 MiB + 64
 *
 * VERDICT is the reply decoded, its bytes in hex:
 *   published req=R seq=S index=I
 *   message seq=S index=I sender=N payload=HEX
 *   status json=HEX
 *   hello-reply version=V features=HEX
 *   error req=R code=C text=HEX
 *   published-batch req=R count=N, then per result " ok=S.I" or
 *     " err=C:HEX" (the text as exo_result holds it)
 *   malformed: WHY         the body does not decode (exo__reply)
 * Exits 1 on a failure of the driver itself (a file unreadable, ...). */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exo_internal.h"

#define CHUNK 7 /* bytes per write: frames straddle the library's reads */

static void die(const char *what, const char *file)
{
	fprintf(stderr, "replay: %s: %s\n", file, what);
	exit(1);
}

static void hex(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
}

/* slurp reads file whole: *n bytes, malloc'd. */
static uint8_t *slurp(const char *file, size_t *n)
{
	FILE *f = fopen(file, "rb");
	if (!f)
		die("cannot open", file);
	size_t cap = 4096;
	uint8_t *b = malloc(cap);
	*n = 0;
	for (;;) {
		if (!b)
			die("no memory", file);
		*n += fread(b + *n, 1, cap - *n, f);
		if (*n < cap)
			break;
		cap *= 2;
		b = realloc(b, cap);
	}
	if (ferror(f))
		die("read error", file);
	fclose(f);
	return b;
}

/* feed forks a child that writes b (n bytes) into a pipe, CHUNK bytes at
 * a time with a pause between writes; returns the read end. */
static int feed(const uint8_t *b, size_t n, pid_t *pid, const char *file)
{
	int p[2];
	if (pipe(p) != 0)
		die("pipe", file);
	fflush(stdout);
	*pid = fork();
	if (*pid < 0)
		die("fork", file);
	if (*pid == 0) {
		signal(SIGPIPE, SIG_IGN); /* the reader stops at a malformed length */
		close(p[0]);
		struct timespec pause = {0, 20000};
		for (size_t off = 0; off < n;) {
			size_t k = n - off < CHUNK ? n - off : CHUNK;
			ssize_t w = write(p[1], b + off, k);
			if (w <= 0)
				_exit(0);
			off += (size_t)w;
			nanosleep(&pause, NULL);
		}
		_exit(0);
	}
	close(p[1]);
	return p[0];
}

/* verdict decodes a frame: type t, body (n bytes at body) copied first
 * into a buffer of its size, so that a read past it is one the address
 * sanitizer reports (in the library's 64 KiB read buffer it would not). */
static void verdict(uint8_t t, const uint8_t *body, size_t n)
{
	exo_reply r;
	exo_err e;
	uint8_t *b = malloc(n);
	if (!b && n)
		die("no memory", "a frame's body");
	if (n)
		memcpy(b, body, n);
	printf("frame 0x%02x ", t);
	if (exo__reply(t, b, n, &r, &e)) {
		printf("malformed: %s\n", e.text);
		free(b);
		return;
	}
	switch (t) {
	case 0x81:
		printf("published req=%llu seq=%llu index=%u", (unsigned long long)r.req, (unsigned long long)r.pos.seq,
		       r.pos.index);
		break;
	case 0x82:
		printf("message seq=%llu index=%u sender=%u payload=", (unsigned long long)r.pos.seq, r.pos.index,
		       r.sender);
		hex(r.data, r.len);
		break;
	case 0x83:
		printf("status json=");
		hex(r.data, r.len);
		break;
	case 0x88:
		printf("hello-reply version=%u features=", r.version);
		hex(r.data, r.len);
		break;
	case 0xff:
		printf("error req=%llu code=%d text=", (unsigned long long)r.req, r.code);
		hex(r.data, r.len);
		break;
	case 0x86: {
		exo_result *res = malloc(r.count * sizeof *res);
		if (!res)
			die("no memory", "results");
		exo__results(&r, res);
		printf("published-batch req=%llu count=%zu", (unsigned long long)r.req, r.count);
		for (size_t i = 0; i < r.count; i++) {
			if (res[i].code == 0) {
				printf(" ok=%llu.%u", (unsigned long long)res[i].pos.seq, res[i].pos.index);
				continue;
			}
			printf(" err=%d:", res[i].code);
			hex((const uint8_t *)res[i].text, strlen(res[i].text));
		}
		free(res);
		break;
	}
	default:
		printf("decoded, but the driver knows no such type");
	}
	printf("\n");
	free(b);
}

static void replay(const char *file)
{
	size_t n;
	uint8_t *in = slurp(file, &n);
	printf("input %s\n", file);
	pid_t pid;
	exo_conn *c;
	exo_err e;
	if (exo__conn_fd(feed(in, n, &pid, file), &c, &e))
		die(e.text, file);
	size_t used = 0; /* the bytes of the frames read */
	for (;;) {
		uint8_t t;
		const uint8_t *b;
		size_t len;
		int rc = exo__read_frame(c, &e, &t, &b, &len);
		if (rc == EXO_CLOSED) {
			int cut = used < n;
			/* the library's message must say so too */
			if (cut != (strstr(e.text, "in the middle of a frame") != NULL))
				printf("end inconsistent: %zu of %zu bytes in frames, library: %s\n", used, n, e.text);
			else
				printf("end %s\n", cut ? "cut" : "eof");
			break;
		}
		if (rc) {
			printf("end %s: %s\n", rc == EXO_MALFORMED ? "malformed" : exo_strerror(rc), e.text);
			break;
		}
		used += 5 + len;
		verdict(t, b, len);
	}
	exo_close(c);
	waitpid(pid, NULL, 0);
	free(in);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		replay(argv[i]);
	fflush(stdout);
	return 0;
}
