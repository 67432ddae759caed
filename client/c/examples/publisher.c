/* publisher: publishes each line of stdin, prints its agreed position.
 * Usage: publisher [socket] (default /run/exo/exo.sock) */
#include <stdio.h>
#include <string.h>

#include "exo.h"

int main(int argc, char **argv)
{
	const char *sock = argc > 1 ? argv[1] : "/run/exo/exo.sock";
	exo_conn *c;
	exo_err e;
	if (exo_connect(sock, &c, &e) != 0) {
		fprintf(stderr, "publisher: %s\n", e.text);
		return 1;
	}
	char line[4096];
	while (fgets(line, sizeof line, stdin)) {
		exo_pos p;
		if (exo_publish(c, line, strcspn(line, "\n"), &p, &e) != 0) {
			fprintf(stderr, "publisher: %s\n", e.text);
			exo_close(c);
			return 1;
		}
		printf("%llu.%u\n", (unsigned long long)p.seq, (unsigned)p.index);
	}
	exo_close(c);
	return 0;
}
