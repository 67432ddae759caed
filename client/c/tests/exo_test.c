/* exo_test: the C client against real daemons on a lab rack, run by the
 * Go test TestCClient (cluster/c_test.go), which starts a 3-host rack and
 * passes in the environment EXO_SOCKETS (the hosts' sockets, ':'-separated;
 * host i's daemon has member id i), EXO_MAX_MESSAGE (max_message_bytes),
 * EXO_LAT_N, EXO_RATE_M, EXO_WINDOW, EXO_SIZE (the measurement). Prints
 * "ok: ..." per check, "measure c p50_us=.. msgs_per_s=..", asks the Go
 * test with "WAIT go-measure" / "WAIT kill 2" (one line "done" on stdin),
 * and ends with "PASS"; a failure prints "FAIL: ..." and exits 1.
 * The version mismatch is checked against a fake daemon (a forked child). */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exo.h"

#define NBLOCK 50
#define NPIPE 300
static char *socks[3];
static long max_message, lat_n, rate_m, window_, size_;
static exo_pos pos_a[NBLOCK], pos_b[NPIPE];
static exo_err e;

#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL: " __VA_ARGS__); printf(" (line %d; last error %d: %s)\n", __LINE__, e.code, e.text); exit(1); } } while (0)
#define OK(...) do { printf("ok: " __VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static void wait_for(const char *what)
{
	char line[64];
	printf("WAIT %s\n", what);
	fflush(stdout);
	CHECK(fgets(line, sizeof line, stdin) && strncmp(line, "done", 4) == 0, "the Go test did not answer WAIT %s", what);
}

static long envl(const char *k, long d)
{
	const char *v = getenv(k);
	return v ? atol(v) : d;
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void publishes(void)
{
	exo_conn *a, *b;
	CHECK(exo_connect(socks[0], &a, &e) == 0, "connect A");
	CHECK(exo_connect(socks[1], &b, &e) == 0, "connect B");
	CHECK(exo_daemon_version(a) == 1 && strstr(exo_daemon_features(a), "publish"), "hello %u %s", exo_daemon_version(a), exo_daemon_features(a));
	OK("connect: Hello answered, daemon API version %u, features %s", exo_daemon_version(a), exo_daemon_features(a));
	char buf[64];
	for (int i = 0; i < NBLOCK; i++) {
		int n = snprintf(buf, sizeof buf, "A-blocking-%d", i);
		CHECK(exo_publish(a, buf, (size_t)n, &pos_a[i], &e) == 0, "publish %d at A", i);
		CHECK(i == 0 || exo_pos_cmp(pos_a[i - 1], pos_a[i]) < 0, "positions do not increase");
	}
	OK("%d blocking publishes at A: increasing positions, the last %llu.%u", NBLOCK, (unsigned long long)pos_a[NBLOCK - 1].seq, pos_a[NBLOCK - 1].index);
	uint64_t first = 0, req;
	for (int i = 0; i < NPIPE; i++) {
		int n = snprintf(buf, sizeof buf, "B-pipelined-%d", i);
		CHECK(exo_publish_send(b, buf, (size_t)n, &req, &e) == 0, "send %d at B", i);
		if (i == 0)
			first = req;
	}
	CHECK(exo_pending(b) == NPIPE, "pending %zu", exo_pending(b));
	static int seen[NPIPE];
	for (int i = 0; i < NPIPE; i++) {
		exo_pos p;
		CHECK(exo_publish_recv(b, &req, &p, &e) == 0, "reply %d at B", i);
		CHECK(req >= first && req < first + NPIPE && !seen[req - first], "reply to request %llu", (unsigned long long)req);
		seen[req - first] = 1;
		pos_b[req - first] = p;
	}
	CHECK(exo_pending(b) == 0, "pending after all replies");
	OK("%d pipelined publishes at B: every reply matched to its request id", NPIPE);
	exo_close(a);
	exo_close(b);
}

/* The subscription check: from seq mid, every message published from
 * there at the position its publish returned, none below. */
struct follow {
	uint64_t mid;
	exo_pos last, prev;
	int n, matched, bad;
};

static int on_msg(const exo_msg *m, void *arg)
{
	struct follow *f = arg;
	char p[64];
	int i;
	if (m->pos.seq < f->mid || (f->n && exo_pos_cmp(f->prev, m->pos) >= 0))
		f->bad++;
	f->prev = m->pos;
	f->n++;
	snprintf(p, sizeof p, "%.*s", (int)(m->len < 63 ? m->len : 63), (const char *)m->payload);
	if (sscanf(p, "A-blocking-%d", &i) == 1 && i >= 0 && i < NBLOCK) {
		if (exo_pos_cmp(pos_a[i], m->pos) != 0 || m->sender != 0)
			f->bad++;
		f->matched++;
	} else if (sscanf(p, "B-pipelined-%d", &i) == 1 && i >= 0 && i < NPIPE) {
		if (exo_pos_cmp(pos_b[i], m->pos) != 0 || m->sender != 1)
			f->bad++;
		f->matched++;
	}
	return exo_pos_cmp(m->pos, f->last) >= 0;
}

static void follow(void)
{
	exo_pos all[NBLOCK + NPIPE];
	memcpy(all, pos_a, sizeof pos_a);
	memcpy(all + NBLOCK, pos_b, sizeof pos_b);
	exo_pos last = all[0];
	int want = 0;
	for (int i = 1; i < NBLOCK + NPIPE; i++)
		if (exo_pos_cmp(all[i], last) > 0)
			last = all[i];
	/* the middle: the median seq */
	uint64_t lo = all[0].seq, mid;
	for (int i = 0; i < NBLOCK + NPIPE; i++)
		lo = all[i].seq < lo ? all[i].seq : lo;
	mid = lo + (last.seq - lo) / 2;
	for (int i = 0; i < NBLOCK + NPIPE; i++)
		want += all[i].seq >= mid;
	exo_conn *c;
	struct follow f = {.mid = mid, .last = last};
	CHECK(exo_subscribe(socks[2], mid, &c, &e) == 0, "subscribe at C");
	exo_msg m;
	while (exo_next(c, &m, &e) == 0)
		if (on_msg(&m, &f))
			break;
	CHECK(e.code == 0 || f.n > 0, "exo_next");
	CHECK(f.bad == 0 && f.matched == want, "C's subscription: %d bad, %d of %d matched", f.bad, f.matched, want);
	OK("subscription at C from seq %llu (the middle, exo_next): %d messages, the %d published from there at the positions and senders their publishes returned",
	   (unsigned long long)mid, f.n, want);
	exo_close(c);
	struct follow g = {.mid = mid, .last = last};
	CHECK(exo_subscribe(socks[0], mid, &c, &e) == 0, "subscribe at A");
	CHECK(exo_follow(c, on_msg, &g, &e) == 0, "exo_follow at A");
	CHECK(g.bad == 0 && g.matched == want && g.n == f.n, "A's subscription: %d bad, %d of %d matched, %d messages (C: %d)", g.bad, g.matched, want, g.n, f.n);
	OK("subscription at A from seq %llu (exo_follow, a callback): the same %d messages", (unsigned long long)mid, g.n);
	exo_close(c);
}

static unsigned long long field(const char *json, const char *name)
{
	char k[64];
	snprintf(k, sizeof k, "\"%s\"", name);
	const char *p = strstr(json, k);
	CHECK(p, "no %s in the status", name);
	p += strlen(k);
	while (*p == ' ' || *p == ':')
		p++;
	return strtoull(p, NULL, 10);
}

static void status(void)
{
	for (int i = 0; i < 3; i++) {
		exo_conn *c;
		char *js;
		CHECK(exo_connect(socks[i], &c, &e) == 0, "connect %d", i);
		CHECK(exo_status(c, &js, &e) == 0 && js[0] == '{', "status %d", i);
		CHECK(field(js, "id") == (unsigned long long)i, "host %d's status says id %llu", i, field(js, "id"));
		CHECK(field(js, "agreement_pointer") >= pos_b[NPIPE - 1].seq, "host %d agreed too little", i);
		free(js);
		exo_close(c);
	}
	OK("status at A, B, C: JSON, ids 0..2, each agreed past the publishes");
}

static void errors(void)
{
	exo_conn *a;
	CHECK(exo_connect(socks[0], &a, &e) == 0, "connect A");
	char *big = calloc(1, (size_t)max_message + 1);
	exo_pos p;
	CHECK(exo_publish(a, big, (size_t)max_message + 1, &p, &e) == EXO_TOO_LARGE && e.code == 2, "publish above max_message_bytes");
	OK("publish of %ld bytes (max_message_bytes %ld): code %d: %s", max_message + 1, max_message, e.code, e.text);
	CHECK(exo_publish(a, big, (size_t)max_message, &p, &e) == 0 && p.seq > 0, "publish of max_message_bytes");
	OK("publish of exactly max_message_bytes agreed at %llu.%u, on the same connection", (unsigned long long)p.seq, p.index);
	free(big);
	exo_close(a);
	char bad[600];
	snprintf(bad, sizeof bad, "%s.no-such-daemon", socks[0]);
	CHECK(exo_connect(bad, &a, &e) == EXO_CONNECT_FAILED && a == NULL && strstr(e.text, "is the daemon running?"), "connect to a bad path");
	OK("bad socket path: code %d: %s", e.code, e.text);
}

/* fake: a daemon stand-in at path answering Hello with reply (n bytes). */
static pid_t fake(const char *path, const unsigned char *reply, size_t n)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	unlink(path);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 1) == 0, "fake daemon at %s", path);
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		int c = accept(l, NULL, NULL);
		char buf[256];
		ssize_t r = read(c, buf, sizeof buf);
		if (r > 0 && write(c, reply, n) < 0)
			_exit(1);
		sleep(1);
		_exit(0);
	}
	close(l);
	return pid;
}

static void versions(void)
{
	char path[100];
	snprintf(path, sizeof path, "/tmp/exo-c-test-%d.sock", (int)getpid());
	static const unsigned char older[] = {0, 0, 0, 10, 0x88, 0, 0, 'p', 'u', 'b', 'l', 'i', 's', 'h'};
	static const unsigned char refuse[] = {0, 0, 0, 20, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 'v', 'e', 'r', 's', 'i', 'o', 'n', ' ', '9'};
	static const unsigned char predates[] = {0, 0, 0, 20, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 'u', 'n', 'k', 'n', 'o', 'w', 'n', ' ', '8'};
	const unsigned char *r[] = {older, refuse, predates};
	size_t n[] = {sizeof older, sizeof refuse, sizeof predates};
	const char *want[] = {"API version 0", "version 9", "predates API versions"};
	for (int i = 0; i < 3; i++) {
		pid_t pid = fake(path, r[i], n[i]);
		exo_conn *c;
		CHECK(exo_connect(path, &c, &e) == EXO_VERSION && strstr(e.text, "API version 1") && strstr(e.text, want[i]) && !strchr(e.text, '\n'),
		      "version mismatch %d", i);
		OK("fake daemon (%s): code 12: %s", want[i], e.text);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	unlink(path);
}

static double pipelined(exo_conn *c, long n, const char *payload)
{
	double t0 = now_us();
	long sent = 0, got = 0;
	exo_pos p;
	uint64_t req;
	while (got < n) {
		while (sent < n && sent - got < window_) {
			CHECK(exo_publish_send(c, payload, (size_t)size_, &req, &e) == 0, "send");
			sent++;
		}
		CHECK(exo_publish_recv(c, &req, &p, &e) == 0, "recv");
		got++;
	}
	return n / ((now_us() - t0) / 1e6);
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void measure(void)
{
	exo_conn *c;
	CHECK(exo_connect(socks[0], &c, &e) == 0, "connect A");
	char *payload = malloc((size_t)size_);
	memset(payload, 'x', (size_t)size_);
	pipelined(c, 500, payload);
	double *lat = malloc(sizeof *lat * (size_t)lat_n);
	for (long i = 0; i < lat_n; i++) {
		double t0 = now_us();
		CHECK(exo_publish(c, payload, (size_t)size_, NULL, &e) == 0, "publish");
		lat[i] = now_us() - t0;
	}
	qsort(lat, (size_t)lat_n, sizeof *lat, cmpd);
	double rate = pipelined(c, rate_m, payload);
	printf("measure c p50_us=%.0f msgs_per_s=%.0f\n", lat[lat_n / 2], rate);
	free(lat);
	free(payload);
	exo_close(c);
	wait_for("go-measure");
}

static void compacted(void)
{
	exo_conn *c;
	exo_msg m;
	CHECK(exo_subscribe(socks[1], 0, &c, &e) == 0, "subscribe at B from 0");
	CHECK(exo_next(c, &m, &e) == EXO_COMPACTED && strstr(e.text, "oldest"), "a subscription from 0 after the load");
	OK("subscription from seq 0 after the load (keep_entries small): code %d: %s", e.code, e.text);
	exo_close(c);
}

static void daemon_gone(void)
{
	exo_conn *c, *sub;
	char *js;
	CHECK(exo_connect(socks[2], &c, &e) == 0 && exo_status(c, &js, &e) == 0, "status at C");
	CHECK(exo_subscribe(socks[2], field(js, "agreement_pointer") + 1, &sub, &e) == 0, "subscribe at C");
	free(js);
	wait_for("kill 2");
	CHECK(exo_publish(c, "to a dead daemon", 16, NULL, &e) == EXO_CLOSED, "publish at a killed daemon");
	OK("publish at C after its daemon was killed: code %d: %s", e.code, e.text);
	exo_msg m;
	int rc;
	while ((rc = exo_next(sub, &m, &e)) == 0)
		;
	CHECK(rc == EXO_CLOSED, "the subscription at a killed daemon ended with %d", rc);
	OK("subscription at C after its daemon was killed: code %d: %s", e.code, e.text);
	CHECK(exo_publish(c, "again", 5, NULL, &e) == EXO_CLOSED, "a closed connection stays closed");
	exo_close(sub);
	exo_close(c);
	CHECK(exo_connect(socks[2], &c, &e) == EXO_CONNECT_FAILED, "connect to the killed daemon");
	OK("connect to C's killed daemon: code %d: %s", e.code, e.text);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	char *s = getenv("EXO_SOCKETS");
	CHECK(s, "EXO_SOCKETS is not set");
	s = strdup(s);
	for (int i = 0; i < 3; i++) {
		socks[i] = strtok(i ? NULL : s, ":");
		CHECK(socks[i], "EXO_SOCKETS names fewer than 3 sockets");
	}
	max_message = envl("EXO_MAX_MESSAGE", 65536);
	lat_n = envl("EXO_LAT_N", 2000);
	rate_m = envl("EXO_RATE_M", 20000);
	window_ = envl("EXO_WINDOW", 128);
	size_ = envl("EXO_SIZE", 64);
	e.text[0] = 0;
	publishes();
	follow();
	status();
	errors();
	versions();
	measure();
	compacted();
	daemon_gone();
	printf("PASS\n");
	return 0;
}
