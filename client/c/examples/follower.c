/* follower: prints the agreed messages from a seq on, one a line.
 * Usage: follower [socket] [from_seq] */
#include <stdio.h>
#include <stdlib.h>

#include "exo.h"

static int print(const exo_msg *m, void *arg)
{
	(void)arg;
	printf("%llu.%u from %u: %.*s\n", (unsigned long long)m->pos.seq, (unsigned)m->pos.index,
	       (unsigned)m->sender, (int)m->len, (const char *)m->payload);
	fflush(stdout);
	return 0; /* non-zero would stop exo_follow */
}

int main(int argc, char **argv)
{
	const char *sock = argc > 1 ? argv[1] : "/run/exo/exo.sock";
	unsigned long long from = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
	exo_conn *c;
	exo_err e;
	if (exo_subscribe(sock, from, &c, &e) != 0 || exo_follow(c, print, NULL, &e) != 0) {
		fprintf(stderr, "follower: %s\n", e.text);
		exo_close(c);
		return 1;
	}
	exo_close(c);
	return 0;
}
