/* test_beat.c: the heartbeat's goodbye (dist_beat.c), without MPI. Rank 0
 * is this process; rank 1 is a plain socket that connects, sends its rank
 * as dist_beat.c's ranks do, and reads what rank 0 sends until the
 * connection ends. Whatever the moment rank 0 stops, rank 1 must read 'Q'
 * before that end: otherwise its heartbeat reports rank 0 lost, a second
 * line after rank 0 said why the job ended (tests/cluster/resume.sh, "no
 * checkpoint on rank 0's host", failed that way in CI):
 *  - rank 0 stops at once after the connect, before its thread can have
 *    accepted it (ROUNDS times: the thread wins that race now and then);
 *  - rank 0 stops after its thread has surely accepted it;
 *  - a connection that names no rank of the job is closed and leaves the
 *    others alone.
 */
#include <config.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist_int.h"
#include "tap.h"

#define ROUNDS 100

static char names[2 * DIST_HOST_NAME] = "node1";

/* A connection to rank 0 that names itself rank r; -1 on failure. */
static int peer(uint32_t addr, uint16_t port, uint32_t r)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
	                          .sin_addr.s_addr = addr };
	uint32_t me = htonl(r);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    send(fd, &me, sizeof me, MSG_NOSIGNAL) != (ssize_t)sizeof me) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Reads fd until it ends (EOF or reset) or 3 s pass: 1 when 'Q' came. */
static int got_quit(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[64];
	int q = 0;
	ssize_t n;

	while (poll(&p, 1, 3000) == 1 && (n = recv(fd, buf, sizeof buf, 0)) > 0)
		if (memchr(buf, 'Q', (size_t)n))
			q = 1;
	close(fd);
	return q;
}

/* One job of 2 ranks: rank 0 here, rank 1 a peer; stops after wait_ms.
 * 1 when rank 1 read 'Q', 0 when not, -1 when the job could not start.
 * bogus: a connection naming rank 7 comes first. */
static int round_trip(int wait_ms, int bogus)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = wait_ms * 1000000L };
	uint32_t addr;
	uint16_t port;
	int fd, bad = -1;

	if (dist_beat_listen(1, &addr, &port) != 0 ||
	    dist_beat_start(0, 2, names, addr, port, 5.0) != 0)
		return -1;
	if ((bogus && (bad = peer(addr, port, 7)) < 0) || (fd = peer(addr, port, 1)) < 0) {
		dist_beat_stop();
		if (bad >= 0)
			close(bad);
		return -1;
	}
	if (wait_ms > 0)
		nanosleep(&ts, NULL);
	dist_beat_stop();
	if (bad >= 0)
		close(bad);
	return got_quit(fd);
}

int main(void)
{
	int lost = 0, fails = 0, r;

	for (int i = 0; i < ROUNDS; i++) {
		r = round_trip(0, 0);
		lost += r == 0;
		fails += r < 0;
	}
	CHECK(fails == 0, "%d of %d rounds could not start", fails, ROUNDS);
	CHECK(lost == 0, "rank 1 read no 'Q' in %d of %d rounds where rank 0 stopped at once "
	      "after the connect", lost, ROUNDS);
	CHECK_RC(round_trip(200, 0), 1);
	CHECK_RC(round_trip(0, 1), 1);
	CHECK_RC(round_trip(200, 1), 1);
	return tap_done();
}
