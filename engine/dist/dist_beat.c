/* dist_beat.c: heartbeats, so that a rank that dies, hangs or loses its
 * host's link is named - rank and host - within CDP_DIST_HEARTBEAT seconds,
 * whatever the launcher says (mpirun names a lost daemon's host at best,
 * never the rank, and says nothing of a rank that stops).
 *
 * Every rank r > 0 keeps one TCP connection to rank 0, which listens on an
 * ephemeral port of its host's address (dist_beat_listen; the address and
 * port go to every rank over MPI at start-up). A thread on each rank writes
 * one byte every period (timeout / 5, at most 1 s) and reads the other
 * side's:
 *  - a connection that closes without a 'Q' first: the process at the
 *    other end ended (killed, crashed), reported at once;
 *  - nothing read for `timeout` seconds: the process hangs (SIGSTOP) or
 *    its host is unreachable, reported then.
 * Rank 0 watches every rank, the others watch rank 0: j - 1 connections in
 * all. A report is one line, the first loss only. This thread never ends
 * the job: the launcher does (a lost host), or the watchdog (a blocking
 * call that cannot finish). MPI_Abort before mpirun has noticed that a
 * daemon is unreachable can leave mpirun waiting for that daemon
 * (tests/cluster/die.sh).
 * A normal end (dist_beat_stop) writes 'Q' before closing (rank 0 also to
 * connections its thread had not yet accepted), and so does a rank that
 * ends the job itself (dist_beat_quit, from cdp_dist_abort), so neither is
 * reported as lost. A rank that cannot connect (a firewall
 * between hosts) says so once and runs unwatched. Plain sockets, no MPI:
 * dist_mpi.c makes every MPI call.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "dist_int.h"
#include "dist/dist_watch.h"
#include "cdp_thread.h"

static struct {
	int on, rank, size;
	int wake[2];                /* a pipe: dist_beat_stop wakes the thread */
	int lfd;                    /* rank 0: listening */
	int *fd;                    /* rank 0: fd[r], r > 0; others: fd[0] */
	double *last;               /* when anything was last read from fd[r] */
	unsigned char *quit, *seen; /* 'Q' read; ever connected */
	const char *names;          /* size * DIST_HOST_NAME: each rank's host */
	double timeout, period, t0;
	int reported;               /* a loss was said: say no more */
	uint32_t addr;              /* rank 0's, network order */
	uint16_t port;
	pthread_t th;
} bt = { .lfd = -1, .wake = { -1, -1 } };

static const char *host_of(int r) { return bt.names + (size_t)r * DIST_HOST_NAME; }

/* An IPv4 address other ranks can reach rank 0 at: its host name's, else
 * its first interface that is up and not loopback; loopback when every
 * rank is on this host. 0 or -1. */
static int addr_pick(int all_local, uint32_t *addr)
{
	struct addrinfo hint = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai, *p;
	struct ifaddrs *ifs, *i;
	char name[256];

	if (all_local) {
		*addr = htonl(INADDR_LOOPBACK);
		return 0;
	}
	if (gethostname(name, sizeof name) == 0 && getaddrinfo(name, NULL, &hint, &ai) == 0) {
		for (p = ai; p; p = p->ai_next) {
			uint32_t a = ((struct sockaddr_in *)p->ai_addr)->sin_addr.s_addr;
			if ((ntohl(a) >> 24) != 127) {
				*addr = a;
				freeaddrinfo(ai);
				return 0;
			}
		}
		freeaddrinfo(ai);
	}
	/* Debian maps the host name to 127.0.1.1: ask the interfaces */
	if (getifaddrs(&ifs) != 0)
		return -1;
	for (i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
		    !(i->ifa_flags & IFF_LOOPBACK)) {
			*addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
			freeifaddrs(ifs);
			return 0;
		}
	freeifaddrs(ifs);
	return -1;
}

int dist_beat_listen(int all_local, uint32_t *addr, uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t len = sizeof sa;
	int fd;

	if (addr_pick(all_local, addr) != 0)
		return -1;
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, SOMAXCONN) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
		close(fd);
		return -1;
	}
	bt.lfd = fd;
	*port = ntohs(sa.sin_port);
	return 0;
}

/* One line, for the first loss only. */
static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (bt.reported)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	dist_say("%s", msg);
	bt.reported = 1;
}

/* A rank's connection to rank 0, and its rank number as the first 4
 * bytes; -1 with errno. */
static int beat_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(bt.port),
	                          .sin_addr.s_addr = bt.addr };
	struct pollfd p;
	uint32_t me = htonl((uint32_t)bt.rank);
	int fd, err = 0;
	socklen_t len = sizeof err;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS)
		goto fail;
	p.fd = fd, p.events = POLLOUT;
	if (poll(&p, 1, (int)(bt.timeout * 1000)) != 1) {
		errno = ETIMEDOUT;
		goto fail;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
		errno = err ? err : errno;
		goto fail;
	}
	if (send(fd, &me, sizeof me, MSG_NOSIGNAL) != (ssize_t)sizeof me)
		goto fail;
	return fd;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

/* Rank 0: a new connection, named by its first 4 bytes. 1 when one was
 * taken off the queue (kept, or closed as not one of ours), 0 when none
 * was waiting. */
static int beat_accept(double now)
{
	struct pollfd p;
	uint32_t who;
	int fd = accept(bt.lfd, NULL, NULL), r;

	if (fd < 0)
		return 0;
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	p.fd = fd, p.events = POLLIN;
	if (poll(&p, 1, 1000) != 1 || recv(fd, &who, sizeof who, MSG_WAITALL) != (ssize_t)sizeof who ||
	    (r = (int)ntohl(who)) < 1 || r >= bt.size || bt.fd[r] >= 0) {
		close(fd);          /* not one of ours */
		return 1;
	}
	bt.fd[r] = fd;
	bt.seen[r] = 1;
	bt.last[r] = now;
	return 1;
}

/* Reads what fd[i] (rank r's connection) holds. */
static void beat_read(int i, int r, double now)
{
	char buf[64];
	ssize_t n = recv(bt.fd[i], buf, sizeof buf, MSG_DONTWAIT);
	int err, fd;

	if (n > 0) {
		bt.last[i] = now;
		if (memchr(buf, 'Q', (size_t)n))
			bt.quit[i] = 1;
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	err = n < 0 ? errno : 0;
	fd = bt.fd[i];
	bt.fd[i] = -1;          /* first: dist_beat_quit may run on another thread */
	close(fd);
	if (!bt.quit[i])
		report("rank %d on host '%s' is gone: its heartbeat connection closed (%s)", r,
		       host_of(r), err ? strerror(err) : "the process ended");
}

static void *beat_main(void *arg)
{
	int n = bt.rank == 0 ? bt.size : 1, np, warned = 0;
	struct pollfd *p = calloc((size_t)n + 2, sizeof *p);
	int *who = calloc((size_t)n + 2, sizeof *who);
	double now, next = 0, prev = dist_now(), lost;

	(void)arg;
	cdp_thread_name("cdp-heartbeat", -1);
	if (!p || !who)
		goto out;
	for (;;) {
		np = 0;
		p[np].fd = bt.wake[0], p[np++].events = POLLIN;
		if (bt.rank == 0)
			p[np].fd = bt.lfd, p[np++].events = POLLIN;
		for (int i = 0; i < n; i++)
			if (bt.fd[i] >= 0)
				who[np] = i, p[np].fd = bt.fd[i], p[np++].events = POLLIN;
		if (poll(p, (nfds_t)np, (int)(bt.period * 1000)) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;          /* dist_beat_stop */
		now = dist_now();
		/* this process did not run (SIGSTOP): the others' beats wait
		 * unread, so silence meanwhile is not theirs */
		if ((lost = cdp_watch_stalled(&prev, bt.period)) > 0) {
			for (int i = 0; i < n; i++)
				bt.last[i] += lost;
			bt.t0 += lost;
		}
		for (int k = 1; k < np; k++) {
			if (!p[k].revents)
				continue;
			if (bt.rank == 0 && k == 1)
				beat_accept(now);
			else
				beat_read(who[k], bt.rank == 0 ? who[k] : 0, now);
		}
		if (now >= next) {
			for (int i = 0; i < n; i++)
				if (bt.fd[i] >= 0)
					(void)send(bt.fd[i], "B", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			next = now + bt.period;
		}
		for (int i = 0; i < n; i++) {
			if (bt.rank == 0 && i == 0)
				continue;
			if (bt.fd[i] >= 0 && !bt.quit[i] && now - bt.last[i] > bt.timeout)
				report("rank %d on host '%s' is lost: no heartbeat for %g s (it hangs, or "
				       "its host is unreachable)", i, host_of(i), bt.timeout);
			if (!bt.seen[i] && !warned && now - bt.t0 > bt.timeout) {
				warned = 1;
				dist_say("rank %d on host '%s' has not connected to the heartbeat within "
				         "%g s; a lost rank there is named only by the watchdog", i,
				         host_of(i), bt.timeout);
			}
		}
	}
out:
	free(p);
	free(who);
	return NULL;
}

int dist_beat_start(int rank, int size, const char *names, uint32_t addr, uint16_t port,
                    double timeout)
{
	int n = rank == 0 ? size : 1;

	if (timeout <= 0 || size < 2 || port == 0)
		return 0;
	bt.rank = rank, bt.size = size, bt.names = names;
	bt.addr = addr, bt.port = port;
	bt.timeout = timeout;
	bt.period = timeout / 5 < 1 ? timeout / 5 : 1;
	bt.t0 = dist_now();
	bt.reported = 0;
	if (!(bt.fd = malloc((size_t)n * sizeof *bt.fd)) ||
	    !(bt.last = calloc((size_t)n, sizeof *bt.last)) ||
	    !(bt.quit = calloc((size_t)n, 1)) || !(bt.seen = calloc((size_t)n, 1)))
		return ENOMEM;
	for (int i = 0; i < n; i++)
		bt.fd[i] = -1;
	/* here, not on the thread: the caller's barrier keeps rank 0 alive
	 * until every rank is connected (or has said why not) */
	if (rank != 0) {
		if ((bt.fd[0] = beat_connect()) < 0) {
			char a[INET_ADDRSTRLEN] = "?";
			inet_ntop(AF_INET, &bt.addr, a, sizeof a);
			dist_say("cannot reach rank 0's heartbeat at %s:%u on host '%s': %s; a lost "
			         "rank is named only by the watchdog", a, (unsigned)bt.port, host_of(0),
			         strerror(errno));
			return 0;
		}
		bt.seen[0] = 1, bt.last[0] = dist_now();
	}
	if (pipe(bt.wake) != 0)
		return errno;
	(void)fcntl(bt.wake[0], F_SETFD, FD_CLOEXEC);
	(void)fcntl(bt.wake[1], F_SETFD, FD_CLOEXEC);
	if (pthread_create(&bt.th, NULL, beat_main, NULL) != 0)
		return EAGAIN;
	bt.on = 1;
	return 0;
}

void dist_beat_quit(void)
{
	int n = bt.rank == 0 ? bt.size : 1;

	if (!bt.fd)
		return;
	for (int i = 0; i < n; i++)
		if (bt.fd[i] >= 0)
			(void)send(bt.fd[i], "Q", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void dist_beat_stop(void)
{
	int n = bt.rank == 0 ? bt.size : 1;

	if (bt.on) {
		(void)write(bt.wake[1], "x", 1);
		pthread_join(bt.th, NULL);
		bt.on = 0;
	}
	/* Rank 0 may end before its thread took every connection off the
	 * listen queue: the barrier after dist_beat_start waits for the
	 * connects, not for the accepts, and a job that fails at its first
	 * collective (a missing checkpoint) ends within milliseconds. Closing
	 * the listener would reset those connections with no 'Q', and their
	 * ranks would report rank 0 lost after it said why it ended
	 * (tests/dist/test_beat). So they are taken now (the listener does not
	 * block), and told. */
	if (bt.rank == 0 && bt.lfd >= 0 && bt.fd)
		while (beat_accept(dist_now()))
			;
	dist_beat_quit();
	for (int i = 0; bt.fd && i < n; i++)
		if (bt.fd[i] >= 0)
			close(bt.fd[i]);
	for (int i = 0; i < 2; i++)
		if (bt.wake[i] >= 0)
			close(bt.wake[i]), bt.wake[i] = -1;
	if (bt.lfd >= 0)
		close(bt.lfd), bt.lfd = -1;
	free(bt.fd), free(bt.last), free(bt.quit), free(bt.seen);
	bt.fd = NULL, bt.last = NULL, bt.quit = bt.seen = NULL;
}
