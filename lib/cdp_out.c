/* cdp_out.c: the output-path policy (cdp_out.h, cdpool(7) OUTPUTS).
 *
 * The registry of live temporaries is a table of slots that a signal
 * handler walks without locks: a slot holds a heap string published with an
 * atomic store once complete, and cleared before the string is freed.
 * Slots are taken under a mutex (cdp-tile's threads write tiles at once).
 *
 * Not done here: a race with another process renaming the target between
 * the check and the rename; the registry is per process (MPI ranks each
 * keep their own).
 */
#include "cdp_out.h"
#include "cdp_error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define TAG ".cdp-tmp."
/* a target's name is cut to this in its temporary's, so that the
 * temporary and its side files stay within NAME_MAX */
#define NAME_KEEP 180
#define CHUNK 1024
#define NCHUNK 4096             /* 4M live temporaries */

/* a temporary and the files GDAL and SQLite may put beside it */
static const char *const side[] = { "", ".aux.xml", ".ovr", ".ovr.aux.xml", ".msk",
                                    ".msk.aux.xml", ".aux", "-journal", "-wal", "-shm" };
/* The side files GDAL reads as part of a raster PATH ("PATH" + suffix;
 * GDALGetFileList's, less world files): a CDP_OUT_AUX commit moves the
 * temporary's onto PATH's and removes those of the file replaced, which
 * would otherwise describe the new one (old overviews served as its own,
 * an old mask hiding every pixel). Not the world files (BASE.tfw,
 * BASE.pgw): one may be another raster's (x.tfw is x.tiff's too), and the
 * GeoTIFFs written carry their georeferencing inside, which GDAL prefers. */
static const char *const gdal_side[] = { ".aux.xml", ".ovr", ".ovr.aux.xml", ".msk",
                                         ".msk.aux.xml", ".aux" };
#define NGSIDE (sizeof gdal_side / sizeof gdal_side[0])
#define NSIDE (sizeof side / sizeof side[0])

static char **chunks[NCHUNK];   /* [NCHUNK][CHUNK], chunks allocated on demand */
static long nslots;             /* slots allocated so far, a multiple of CHUNK */
static long hint;               /* lowest slot that may be free */
static size_t live;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
#define NSIG3 (sizeof sigs / sizeof sigs[0])
static struct sigaction saved[NSIG3];
static int installed;
/* cdp_out_hold: the holds in force and the signal they deferred (0 none).
 * A mask would not do: sigprocmask holds back only the calling thread's
 * signals, and a kill(1) reaches any thread that does not block it (an
 * OpenMP or BLAS worker), so the handler itself defers. */
static int held;
static int deferred;

static void unlink_all(void)
{
	char buf[PATH_MAX + 16];

	for (long c = 0; c < NCHUNK; c++) {
		char **ch = __atomic_load_n(&chunks[c], __ATOMIC_ACQUIRE);
		if (!ch)
			break;
		for (long i = 0; i < CHUNK; i++) {
			const char *p = __atomic_load_n(&ch[i], __ATOMIC_ACQUIRE);
			size_t n;
			if (!p)
				continue;
			n = strlen(p);
			if (n >= PATH_MAX)
				continue;
			memcpy(buf, p, n);
			for (size_t s = 0; s < NSIDE; s++) {
				size_t k = strlen(side[s]);
				memcpy(buf + n, side[s], k + 1);
				unlink(buf);
			}
		}
	}
}

void cdp_out_unlink_all(void)
{
	unlink_all();
}

/* Async-signal-safe: unlink, sigaction and raise only. A handler the
 * program installed before us runs instead (it stops the program the way
 * it chose, and its failure paths remove the temporaries). */
static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int e = errno;
	size_t k = 0;

	if (__atomic_load_n(&held, __ATOMIC_SEQ_CST) > 0) {
		__atomic_store_n(&deferred, sig, __ATOMIC_SEQ_CST);
		/* a release between the two loads may have missed the store:
		 * whichever of us takes the signal back acts on it, once */
		if (__atomic_load_n(&held, __ATOMIC_SEQ_CST) > 0 ||
		    __atomic_exchange_n(&deferred, 0, __ATOMIC_SEQ_CST) == 0) {
			errno = e;
			return;
		}
	}
	while (k < NSIG3 && sigs[k] != sig)
		k++;
	if (k < NSIG3 && (saved[k].sa_flags & SA_SIGINFO) && saved[k].sa_sigaction) {
		saved[k].sa_sigaction(sig, si, uc);
	} else if (k < NSIG3 && saved[k].sa_handler != SIG_DFL && saved[k].sa_handler != SIG_IGN) {
		saved[k].sa_handler(sig);
	} else {
		struct sigaction dfl;

		unlink_all();
		memset(&dfl, 0, sizeof dfl);
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		sigaction(sig, &dfl, NULL);
		/* blocked while we run: delivered, with the default action,
		 * when the handler returns */
		raise(sig);
	}
	errno = e;
}

/* Called under mu. A signal the program ignores (nohup) stays ignored. */
static void install(void)
{
	struct sigaction sa;

	if (installed)
		return;
	installed = 1;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t k = 0; k < NSIG3; k++)
		sigaddset(&sa.sa_mask, sigs[k]);
	for (size_t k = 0; k < NSIG3; k++) {
		if (sigaction(sigs[k], NULL, &saved[k]) != 0)
			continue;
		if (!(saved[k].sa_flags & SA_SIGINFO) && saved[k].sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[k], &sa, NULL);
	}
}

/* Publishes a copy of tmp; its slot, or -1 when out of memory. */
static long reg_add(const char *tmp)
{
	char *p = strdup(tmp);
	long s = -1;

	if (!p)
		return -1;
	pthread_mutex_lock(&mu);
	install();
	for (long i = hint; i < nslots; i++)
		if (!chunks[i / CHUNK][i % CHUNK]) {
			s = i;
			break;
		}
	if (s < 0 && nslots / CHUNK < NCHUNK) {
		char **ch = calloc(CHUNK, sizeof *ch);
		if (ch) {
			s = nslots;
			__atomic_store_n(&chunks[nslots / CHUNK], ch, __ATOMIC_RELEASE);
			nslots += CHUNK;
		}
	}
	if (s >= 0) {
		__atomic_store_n(&chunks[s / CHUNK][s % CHUNK], p, __ATOMIC_RELEASE);
		hint = s + 1;
		live++;
	}
	pthread_mutex_unlock(&mu);
	if (s < 0)
		free(p);
	return s;
}

static void reg_del(long s)
{
	char *p;

	if (s < 0)
		return;
	pthread_mutex_lock(&mu);
	p = __atomic_exchange_n(&chunks[s / CHUNK][s % CHUNK], NULL, __ATOMIC_ACQ_REL);
	if (s < hint)
		hint = s;
	live--;
	pthread_mutex_unlock(&mu);
	free(p);
}

void cdp_out_hold(void)
{
	__atomic_add_fetch(&held, 1, __ATOMIC_SEQ_CST);
}

void cdp_out_release(void)
{
	int sig;

	if (__atomic_sub_fetch(&held, 1, __ATOMIC_SEQ_CST) > 0)
		return;
	/* delivered to this thread now: the handler runs as it would have */
	if ((sig = __atomic_exchange_n(&deferred, 0, __ATOMIC_SEQ_CST)) != 0)
		raise(sig);
}

int cdp_out_lock_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd;

	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else if ((size_t)snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= sizeof dir)
		return -1;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	while (flock(fd, LOCK_EX) != 0) {
		if (errno != EINTR) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

size_t cdp_out_live(void)
{
	size_t n;

	pthread_mutex_lock(&mu);
	n = live;
	pthread_mutex_unlock(&mu);
	return n;
}

static void seterr(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;

	if (!err || !cap)
		return;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
}

/* The length of path's folder part including its '/', 0 for none. */
static size_t dirlen(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? (size_t)(slash - path + 1) : 0;
}

/* path with every symbolic link of its last component followed, into a
 * new string (the final target may not exist: a dangling link creates
 * its target). CDP_OK, ELOOP, ENOMEM or the errno of readlink. */
static int resolve(const char *path, char **out)
{
	char *cur = strdup(path);
	struct stat st;

	if (!cur)
		return CDP_ENOMEM;
	for (int hops = 0; lstat(cur, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
		char link[PATH_MAX], *next;
		ssize_t n;
		size_t dl;

		if (hops == 40 || (n = readlink(cur, link, sizeof link - 1)) < 0) {
			int e = hops == 40 ? ELOOP : errno;
			free(cur);
			return e;
		}
		link[n] = '\0';
		dl = link[0] == '/' ? 0 : dirlen(cur);
		if (!(next = malloc(dl + (size_t)n + 1))) {
			free(cur);
			return CDP_ENOMEM;
		}
		memcpy(next, cur, dl);
		memcpy(next + dl, link, (size_t)n + 1);
		free(cur);
		cur = next;
	}
	*out = cur;
	return CDP_OK;
}

static const char *kind_name(mode_t m)
{
	return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" :
	       S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" :
	       S_ISDIR(m) ? "a directory" : "not a regular file";
}

/* LMDB's magic (mdb.c's MDB_MAGIC, which lmdb.h does not export): at the
 * start of lock.mdb, and in data.mdb's first meta page after its 16-byte
 * page header, whose flags (offset 10) have P_META (0x08). Native byte
 * order, as LMDB writes it. */
#define LMDB_MAGIC 0xBEEFC0DEu

/* The kinds of regular file the policy keeps, with the flag that lets a
 * caller replace one and its name in messages. */
enum { KEEP_NONE, KEEP_CKPT, KEEP_LMDB };
static const struct { int flag; const char *name; } keep[] = {
	[KEEP_CKPT] = { CDP_OUT_CKPT, "a cdpool checkpoint" },
	[KEEP_LMDB] = { CDP_OUT_POOL, "an LMDB database file" },
};

/* Which kind regular file path is; KEEP_NONE for any other, and for one
 * that cannot be read (its kind is unknown). */
static int kept_kind(const char *path)
{
	unsigned char head[20];
	uint32_t m0, m16;
	uint16_t pflags;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return KEEP_NONE;
	n = read(fd, head, sizeof head);
	close(fd);
	if (n >= (ssize_t)sizeof CDP_OUT_CKPT_MAGIC - 1 &&
	    memcmp(head, CDP_OUT_CKPT_MAGIC, sizeof CDP_OUT_CKPT_MAGIC - 1) == 0)
		return KEEP_CKPT;
	if (n < (ssize_t)sizeof head)
		return KEEP_NONE;
	memcpy(&m0, head, 4);
	memcpy(&pflags, head + 10, 2);
	memcpy(&m16, head + 16, 4);
	return m0 == LMDB_MAGIC || (m16 == LMDB_MAGIC && (pflags & 0x08)) ? KEEP_LMDB : KEEP_NONE;
}

int cdp_out_is_ckpt(const char *path)
{
	struct stat st;

	return path && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       kept_kind(path) == KEEP_CKPT;
}

int cdp_out_vsi(const char *path, char *err, size_t cap)
{
	size_t n;

	/* GDAL's prefixes are "/vsi" NAME "/" (vsimem, vsizip, vsi7z,
	 * vsicurl_streaming): "/vsi" alone is a plain name ("/vsi-data/x.tif",
	 * "/vsidata.tif") */
	if (!path || strncmp(path, "/vsi", 4) != 0)
		return CDP_OK;
	n = strspn(path + 4, "abcdefghijklmnopqrstuvwxyz0123456789_");
	if (n == 0 || path[4 + n] != '/')
		return CDP_OK;
	seterr(err, cap, "refusing to write '%s': GDAL virtual file systems (/vsi...) are not "
	       "supported for outputs", path);
	return CDP_ESPECIAL;
}

/* CDP_OK and *inplace for path under flags (see cdp_out_check). */
static int classify(const char *path, int flags, int *inplace, char *err, size_t cap)
{
	int kind = flags & CDP_OUT_STREAM, kept;
	struct stat st;

	*inplace = 0;
	if (kind == CDP_OUT_STREAM && strcmp(path, "-") == 0) {
		*inplace = 1;
		return CDP_OK;
	}
	/* else "cannot create '/vsizip/z.zip/x.tif': No such file or
	 * directory", as if a folder were missing */
	if (cdp_out_vsi(path, err, cap) != CDP_OK)
		return CDP_ESPECIAL;
	if (stat(path, &st) != 0) {
		int e = errno;

		if (e == ENOENT)
			return CDP_OK;          /* a new file, or a dangling link's target */
		seterr(err, cap, "cannot write '%s': %s", path, strerror(e));
		return e;
	}
	if (S_ISREG(st.st_mode)) {
		if ((kept = kept_kind(path)) != KEEP_NONE && !(flags & keep[kept].flag)) {
			seterr(err, cap, "refusing to replace '%s': it is %s", path, keep[kept].name);
			return CDP_EKEEP;
		}
		return CDP_OK;
	}
	if (kind == CDP_OUT_STREAM && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
		*inplace = 1;
		return CDP_OK;
	}
	seterr(err, cap, "refusing to write '%s': it is %s, not a regular file", path,
	       kind_name(st.st_mode));
	return CDP_ESPECIAL;
}

/* dir = the folder that holds path ("." for a bare name); 0, or
 * ENAMETOOLONG */
static int dir_of(const char *path, char dir[PATH_MAX])
{
	size_t dl = dirlen(path);

	if (dl >= PATH_MAX)
		return ENAMETOOLONG;
	if (dl)
		memcpy(dir, path, dl);
	else
		dir[dl++] = '.';
	dir[dl] = '\0';
	return 0;
}

/* A new file at path (nothing there, or a dangling link): its temporary
 * goes in the final target's folder, which must be a folder now. */
static int check_folder(const char *path, char *err, size_t cap)
{
	char dir[PATH_MAX], *target = NULL;
	struct stat st;
	int rc;

	if ((rc = resolve(path, &target)) == CDP_OK && (rc = dir_of(target, dir)) == 0 &&
	    stat(dir, &st) != 0)
		rc = errno;
	else if (rc == CDP_OK && !S_ISDIR(st.st_mode))
		rc = ENOTDIR;
	free(target);
	if (rc != CDP_OK)
		seterr(err, cap, "cannot create '%s': %s", path, cdp_strerror(rc));
	return rc;
}

/* The one message of a call without a path to write. */
static int no_path(const char *path, char *err, size_t cap)
{
	seterr(err, cap, "%s", path ? "an empty file name" : "no file name (an internal error)");
	return CDP_EINVAL;
}

int cdp_out_check(const char *path, int kind, char *err, size_t cap)
{
	struct stat st;
	int inplace, rc;

	if (!path || !*path)
		return no_path(path, err, cap);
	if ((rc = classify(path, kind, &inplace, err, cap)) != CDP_OK || inplace ||
	    (kind & CDP_OUT_NEWDIR) || stat(path, &st) == 0)
		return rc;
	return check_folder(path, err, cap);
}

int cdp_out_inplace(const char *path)
{
	struct stat st;

	if (!path)
		return 0;
	if (strcmp(path, "-") == 0)
		return 1;
	return stat(path, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode));
}

int cdp_out_aux_name(const char *path, char *buf, size_t cap)
{
	if (!path || !buf)
		return CDP_EINVAL;
	if (snprintf(buf, cap, "%s.aux.xml", path) >= (int)cap)
		return ENAMETOOLONG;
	return CDP_OK;
}

/* The mark of where this process writes, 8 lowercase hex digits: FNV-1a
 * (64 bits, folded to 32) of "HOST\nBOOT_ID\nDEV:INO", the host name, the
 * kernel's boot id and the identity of this process's PID namespace
 * (/proc/self/ns/pid), with what cannot be read left empty. A sweep
 * judges a temporary's PID only where the mark is its own: the same PID
 * is another process in another PID namespace (a container) or on another
 * host sharing the folder. Cached per PID (each temporary and each name a
 * sweep judges would otherwise read /proc three times): a child forked
 * after unshare(CLONE_NEWPID) is in another namespace than its parent, and
 * has another PID. python/cdpool/out.py computes the same. */
static void where_mark(char out[9])
{
	/* (PID << 32) | mark, 0 before the first: one word, so that threads
	 * creating temporaries at once read it whole without a lock */
	static uint64_t cache;
	char host[256] = "", boot[64] = "", buf[256 + 64 + 48];
	uint64_t h = 14695981039346656037ULL, c = __atomic_load_n(&cache, __ATOMIC_RELAXED);
	uint32_t pid = (uint32_t)getpid(), m;
	struct stat st;
	FILE *f;
	int n;

	if (c && (uint32_t)(c >> 32) == pid) {
		snprintf(out, 9, "%08lx", (unsigned long)(uint32_t)c);
		return;
	}
	if (gethostname(host, sizeof host - 1) != 0)
		host[0] = '\0';
	host[sizeof host - 1] = '\0';
	if ((f = fopen("/proc/sys/kernel/random/boot_id", "re"))) {
		if (!fgets(boot, sizeof boot, f))
			boot[0] = '\0';
		boot[strcspn(boot, "\n")] = '\0';
		fclose(f);
	}
	if (stat("/proc/self/ns/pid", &st) != 0)
		st.st_dev = st.st_ino = 0;
	n = snprintf(buf, sizeof buf, "%s\n%s\n%llu:%llu", host, boot,
	             (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	for (int i = 0; i < n && i < (int)sizeof buf - 1; i++)
		h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
	m = (uint32_t)((h ^ (h >> 32)) & 0xffffffffUL);
	__atomic_store_n(&cache, ((uint64_t)pid << 32) | m, __ATOMIC_RELAXED);
	snprintf(out, 9, "%08lx", (unsigned long)m);
}

/* Creates the temporary for target with O_EXCL; fd or -errno, *tmp and
 * *slot set. Each name is registered before it is created, so that a
 * signal arriving right after the file appears (before the registration,
 * it was left behind) finds it: a name registered but not yet created is
 * unlinked in vain, and one that existed already holds our PID, so it is
 * a dead process's leftover. With slot NULL the name is not registered
 * (commit_aux's asides, which hold the user's files). */
static int create_tmp(const char *target, mode_t mode, char **tmp, long *slot)
{
	static const char alnum[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	size_t dl = dirlen(target), bl = strlen(target + dl), cap;
	struct timespec ts;
	char mark[9];
	uint64_t x;
	char *t;

	if (bl > NAME_KEEP)
		bl = NAME_KEEP;
	where_mark(mark);
	cap = dl + 1 + bl + sizeof TAG + 24 + sizeof mark + 8;
	if (!(t = malloc(cap)))
		return -ENOMEM;
	clock_gettime(CLOCK_REALTIME, &ts);
	x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40) ^
	    (uint64_t)(uintptr_t)t;
	for (int tries = 0; tries < 100; tries++) {
		size_t n = (size_t)snprintf(t, cap, "%.*s.%.*s" TAG "%ld-%s.", (int)dl, target,
		                            (int)bl, target + dl, (long)getpid(), mark);
		int fd;

		for (int i = 0; i < 6; i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			t[n + i] = alnum[(x >> 33) % (sizeof alnum - 1)];
		}
		t[n + 6] = '\0';
		if (slot && (*slot = reg_add(t)) < 0) {
			free(t);
			return -ENOMEM;
		}
		fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
		if (fd >= 0) {
			*tmp = t;
			return fd;
		}
		if (slot) {
			reg_del(*slot);
			*slot = -1;
		}
		if (errno != EEXIST) {
			int e = errno;
			free(t);
			return -e;
		}
	}
	free(t);
	return -EEXIST;
}

/* A regular file that the temporary replaces keeps its mode, and its
 * owner and group where this process may give them (root; a group of the
 * caller's), as sed -i does: a private 0600 file stays private. Best
 * effort: the file written is the same either way. A set-user or
 * set-group bit is kept only with the owner and group it was for. */
static void keep_owner_mode(int fd, const char *target)
{
	struct stat st;
	mode_t m;

	if (stat(target, &st) != 0 || !S_ISREG(st.st_mode))
		return;
	m = st.st_mode & 07777;
	if ((st.st_uid != geteuid() || st.st_gid != getegid()) &&
	    fchown(fd, st.st_uid, st.st_gid) != 0) {
		int grp = fchown(fd, (uid_t)-1, st.st_gid);   /* else the caller's group */

		(void)grp;
		m &= ~(mode_t)(S_ISUID | S_ISGID);
	}
	if (fchmod(fd, m) != 0)
		return;     /* the umask's mode it stays */
}

static void end(cdp_out *o)
{
	reg_del(o->slot);
	free(o->path);
	free(o->target);
	free(o->tmp);
	memset(o, 0, sizeof *o);
	o->fd = -1;
	o->slot = -1;
}

int cdp_out_open(cdp_out *o, const char *path, int flags, mode_t mode, char *err, size_t cap)
{
	int rc, fd;

	if (!o)
		return no_path(NULL, err, cap);
	memset(o, 0, sizeof *o);
	o->fd = -1;
	o->slot = -1;
	if (!path || !*path)
		return no_path(path, err, cap);
	o->flags = flags;
	if ((rc = classify(path, flags, &o->inplace, err, cap)) != CDP_OK)
		return rc;
	if (!(o->path = strdup(path))) {
		rc = CDP_ENOMEM;
		goto fail;
	}
	if (o->inplace) {
		if (strcmp(path, "-") == 0 && (flags & CDP_OUT_STREAM)) {
			o->fd = STDOUT_FILENO;
			return CDP_OK;
		}
		/* a FIFO blocks here until it has a reader, as a shell's > does */
		if ((o->fd = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
			rc = errno;
			goto fail;
		}
		return CDP_OK;
	}
	if ((rc = resolve(path, &o->target)) != CDP_OK)
		goto fail;
	if ((fd = create_tmp(o->target, mode, &o->tmp, &o->slot)) < 0) {
		rc = fd == -ENOMEM ? CDP_ENOMEM : -fd;
		goto fail;
	}
	keep_owner_mode(fd, o->target);
	if (flags & CDP_OUT_NOFD)
		close(fd);
	else
		o->fd = fd;
	return CDP_OK;
fail:
	seterr(err, cap, "cannot create '%s': %s", path, cdp_strerror(rc));
	end(o);
	return rc;
}

int cdp_out_probe(const char *path, int kind, char *err, size_t cap)
{
	cdp_out t;
	int rc;

	if (kind & CDP_OUT_STREAM && cdp_out_inplace(path))
		return CDP_OK;
	if ((rc = cdp_out_open(&t, path, (kind & (CDP_OUT_STREAM | CDP_OUT_CKPT | CDP_OUT_POOL)) |
	                       CDP_OUT_NOFD, 0600, err, cap)) == CDP_OK)
		cdp_out_abort(&t);
	return rc;
}

FILE *cdp_out_fdopen(int fd, const char *mode)
{
	FILE *f;
	int k, e;

	if ((k = dup(fd)) < 0)
		return NULL;
	if (!(f = fdopen(k, mode))) {
		e = errno;
		close(k);
		/* glibc's word for a descriptor not open for writing (standard
		 * output closed, held on /dev/null read-only: cdp_cli_std_fds)
		 * is EINVAL; a write to it would say EBADF */
		errno = e == EINVAL && (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY ? EBADF : e;
	}
	return f;
}

static void unlink_sides(const char *tmp)
{
	char buf[PATH_MAX + 16];
	size_t n = strlen(tmp);

	if (n >= PATH_MAX)
		return;
	memcpy(buf, tmp, n);
	for (size_t s = 0; s < NSIDE; s++) {
		memcpy(buf + n, side[s], strlen(side[s]) + 1);
		unlink(buf);
	}
}

void cdp_out_abort(cdp_out *o)
{
	if (!o)
		return;
	/* an open o always has its path: a zeroed one's fd 0 and slot 0
	 * are nobody's to close or free */
	if (!o->path) {
		o->fd = -1;
		o->slot = -1;
		return;
	}
	if (o->fd >= 0 && o->fd != STDOUT_FILENO)
		close(o->fd);
	if (o->tmp)
		unlink_sides(o->tmp);
	end(o);
}

/* the full file system a library met, as cdp_out_note_nospace saw it
 * (0 none): the space it then freed on its way out (SQLite's journal,
 * GDAL's intermediates) hides it from statvfs later */
static int noted;

void cdp_out_note_nospace(int e)
{
	if (e == ENOSPC || e == EDQUOT || e == EFBIG)
		__atomic_store_n(&noted, e, __ATOMIC_RELAXED);
}

int cdp_out_nospace(const cdp_out *o, const char *path)
{
	char dir[PATH_MAX];
	const char *p = o && o->tmp ? o->tmp : path;
	struct statvfs sv;
	struct rlimit rl;
	struct stat st;
	int e = __atomic_load_n(&noted, __ATOMIC_RELAXED);

	if (e)
		return e;
	if (!p)
		return 0;
	/* a file that reached the file-size limit (ulimit -f: the programs
	 * ignore SIGXFSZ, so the write failed with EFBIG, which libtiff too
	 * reports in words of its own); within a strip of it, since a
	 * library may write its last one short or trim the file after */
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    stat(p, &st) == 0 && S_ISREG(st.st_mode) &&
	    (rlim_t)st.st_size + 65536 >= rl.rlim_cur)
		return EFBIG;
	if (dir_of(p, dir) != 0 || statvfs(dir, &sv) != 0)
		return 0;
	return sv.f_bavail == 0 || sv.f_bfree == 0 ? ENOSPC : 0;
}

/* fsync of the folder that holds path: a rename is durable only then */
static int sync_dir(const char *path)
{
	char dir[PATH_MAX];
	int fd, rc = CDP_OK;

	if (dir_of(path, dir) != 0)
		return ENAMETOOLONG;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return errno;
	if (fsync(fd) != 0 && errno != EINVAL)
		rc = errno;
	close(fd);
	return rc;
}

int cdp_out_close(cdp_out *o)
{
	int rc = CDP_OK;

	if (!o || !o->path)
		return CDP_EINVAL;
	if (o->fd >= 0 && o->fd != STDOUT_FILENO) {
		if ((o->flags & CDP_OUT_SYNC) && !o->inplace && fsync(o->fd) != 0)
			rc = errno;
		if (close(o->fd) != 0 && rc == CDP_OK)
			rc = errno;
	}
	o->fd = -1;
	return rc;
}

/* 1 when the folders holding a and b are on one file system (a rename
 * between them works); 0 when not or unknown. */
static int same_fs(const char *a, const char *b)
{
	char da[PATH_MAX], db[PATH_MAX];
	struct stat sa, sb;

	return dir_of(a, da) == 0 && dir_of(b, db) == 0 && stat(da, &sa) == 0 &&
	       stat(db, &sb) == 0 && sa.st_dev == sb.st_dev;
}

/* Copies file src into a new temporary for dst (beside dst, registered
 * as every temporary is): *tmp and *slot, or an errno. */
static int stage_copy(const char *src, const char *dst, int sync, char **tmp, long *slot)
{
	char buf[65536];
	ssize_t n = 0;
	int in, out, rc = CDP_OK;

	if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0)
		return errno;
	if ((out = create_tmp(dst, 0666, tmp, slot)) < 0) {
		close(in);
		return out == -ENOMEM ? CDP_ENOMEM : -out;
	}
	while (rc == CDP_OK && (n = read(in, buf, sizeof buf)) > 0)
		for (ssize_t w = 0, k; rc == CDP_OK && w < n; w += k)
			if ((k = write(out, buf + w, (size_t)(n - w))) < 0)
				rc = errno;
	if (rc == CDP_OK && n < 0)
		rc = errno;
	if (rc == CDP_OK && sync && fsync(out) != 0)
		rc = errno;
	if (close(out) != 0 && rc == CDP_OK)
		rc = errno;
	close(in);
	if (rc != CDP_OK) {
		unlink(*tmp);
		reg_del(*slot);
		free(*tmp);
		*tmp = NULL;
		*slot = -1;
	}
	return rc;
}

/* The renames of a CDP_OUT_AUX commit, one all-or-nothing step: every
 * side file of PATH there now (old[NGSIDE]) is moved aside, the
 * temporary's side files (TMP.aux.xml, TMP.ovr, ...; staged[s] is a copy
 * beside PATH when that is on another file system) take PATH's names,
 * the file replaces the target, and only then are the old side files
 * removed; through a link, TARGET's too, which described the file just
 * replaced. A step that fails puts back what went before it: the earlier
 * file and its side files are as they were. The side files go first: no
 * earlier check covers their names (a folder of that name, a name longer
 * than the file system allows). *failed: the name that failed.
 * The names moved aside are the user's files, not temporaries: they are
 * not registered, so that cdp_out_unlink_all (another thread's abort)
 * cannot delete them mid-way (the policy's own signal handler is held off
 * by the caller's cdp_out_hold), and one that cannot be put back is left
 * under its hidden name rather than removed. */
static int commit_aux(cdp_out *o, char old[][PATH_MAX + 16], char *const *staged,
                      const char **failed)
{
	char a[PATH_MAX + 16], b[PATH_MAX + 16];
	char *aside[NGSIDE] = { 0 };
	int placed[NGSIDE] = { 0 }, rc = CDP_OK;
	struct stat st;
	size_t i;

	for (i = 0; i < NGSIDE && rc == CDP_OK; i++) {
		int fd;

		if (lstat(old[i], &st) != 0)
			continue;
		*failed = old[i];
		if (S_ISDIR(st.st_mode)) {
			rc = EISDIR;
		} else if ((fd = create_tmp(old[i], 0600, &aside[i], NULL)) < 0) {
			rc = fd == -ENOMEM ? CDP_ENOMEM : -fd;
		} else {
			close(fd);
			if (rename(old[i], aside[i]) != 0) {
				rc = errno;
				unlink(aside[i]);
				free(aside[i]);
				aside[i] = NULL;
			}
		}
	}
	for (size_t s = 0; s < NGSIDE && rc == CDP_OK; s++) {
		snprintf(a, sizeof a, "%s%s", o->tmp, gdal_side[s]);
		if (!staged[s] && access(a, F_OK) != 0)
			continue;
		*failed = old[s];
		if (rename(staged[s] ? staged[s] : a, old[s]) != 0)
			rc = errno;
		else
			placed[s] = 1;
		if (staged[s])
			unlink(a);
	}
	if (rc == CDP_OK) {
		*failed = o->path;
		if (rename(o->tmp, o->target) != 0)
			rc = errno;
	}
	if (rc != CDP_OK)
		for (size_t s = 0; s < NGSIDE; s++)
			if (placed[s])
				unlink(old[s]);
	for (i = 0; i < NGSIDE; i++) {
		if (!aside[i])
			continue;
		/* replaced: the old one goes; else it goes back, and where that
		 * fails it stays aside, the user's file under a hidden name */
		if (rc == CDP_OK)
			unlink(aside[i]);
		else
			(void)rename(aside[i], old[i]);
		free(aside[i]);
	}
	if (rc == CDP_OK && strcmp(o->path, o->target) != 0) {
		for (size_t s = 0; s < NGSIDE; s++) {
			if (snprintf(b, sizeof b, "%s%s", o->target, gdal_side[s]) >= (int)sizeof b)
				continue;
			if (unlink(b) != 0 && errno != ENOENT && rc == CDP_OK)
				rc = errno;
		}
	}
	return rc;
}

int cdp_out_commit(cdp_out *o, char *err, size_t cap)
{
	char old[NGSIDE][PATH_MAX + 16], a[PATH_MAX + 16];
	char *staged[NGSIDE] = { 0 };
	long sslot[NGSIDE];
	const char *failed;
	int rc = CDP_OK, aux;

	if (!o || !o->path) {
		seterr(err, cap, "cannot write: the output was not opened (an internal error)");
		return CDP_EINVAL;
	}
	aux = o->tmp && (o->flags & CDP_OUT_AUX);
	failed = o->path;
	/* write errors can first appear at close (NFS, quotas) */
	rc = cdp_out_close(o);
	if (rc == CDP_OK && aux) {
		for (size_t s = 0; s < NGSIDE && rc == CDP_OK; s++)
			if (snprintf(old[s], sizeof old[s], "%s%s", o->path, gdal_side[s]) >=
			    (int)sizeof old[s] - 16)
				rc = ENAMETOOLONG;
	}
	for (size_t s = 0; rc == CDP_OK && aux && s < NGSIDE; s++) {
		sslot[s] = -1;
		if (snprintf(a, sizeof a, "%s%s", o->tmp, gdal_side[s]) < (int)sizeof a &&
		    access(a, F_OK) == 0 && !same_fs(a, old[s]))
			rc = stage_copy(a, old[s], o->flags & CDP_OUT_SYNC, &staged[s], &sslot[s]);
	}
	if (rc == CDP_OK && aux) {
		/* several renames, one file to a reader: no signal among them */
		cdp_out_hold();
		rc = commit_aux(o, old, staged, &failed);
		cdp_out_release();
	} else if (rc == CDP_OK && o->tmp && rename(o->tmp, o->target) != 0) {
		rc = errno;
	}
	for (size_t s = 0; s < NGSIDE; s++)
		if (staged[s]) {
			unlink(staged[s]);     /* renamed already, unless it failed */
			reg_del(sslot[s]);
			free(staged[s]);
		}
	if (rc == CDP_OK && o->tmp && (o->flags & CDP_OUT_SYNC))
		rc = sync_dir(o->target);
	if (rc == CDP_OK && aux && (o->flags & CDP_OUT_SYNC) && strcmp(o->path, o->target) != 0)
		rc = sync_dir(o->path);
	if (rc != CDP_OK) {
		if ((rc == EIO || rc == CDP_EGDAL) && cdp_out_nospace(o, NULL))
			rc = cdp_out_nospace(o, NULL);
		seterr(err, cap, "cannot write '%s': %s", failed, cdp_strerror(rc));
		cdp_out_abort(o);
		return rc;
	}
	/* renamed: the name no longer exists, nothing to remove on a signal */
	end(o);
	return CDP_OK;
}

/* 1 when a and b are one file to write: both "-", or "-" and the file
 * standard output is (--log /dev/stdout), or one file by identity */
static int same_out(const char *a, const char *b)
{
	struct stat sa, sb;

	if (strcmp(a, "-") == 0 && strcmp(b, "-") == 0)
		return 1;
	if (strcmp(a, "-") == 0 || strcmp(b, "-") == 0)
		return fstat(STDOUT_FILENO, &sa) == 0 && stat(strcmp(a, "-") ? a : b, &sb) == 0 &&
		       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	return cdp_same_file(a, b);
}

int cdp_out_check_set(cdp_fileset *set, size_t n, const char *const *outs,
                      const char *const *opts, char *err, size_t cap)
{
	const char *hit;

	for (size_t i = 0; i < n; i++) {
		if (!outs[i])
			continue;
		hit = strcmp(outs[i], "-") == 0 ? cdp_fileset_find_fd(set, STDOUT_FILENO) :
		      cdp_fileset_find(set, outs[i]);
		if (hit) {
			seterr(err, cap, "refusing to write '%s': it is %s", outs[i], hit);
			return CDP_EMISMATCH;
		}
		for (size_t j = 0; j < i; j++) {
			if (!outs[j] || !same_out(outs[i], outs[j]))
				continue;
			seterr(err, cap, "%s%s'%s' and %s%s'%s' are the same file%s",
			       opts && opts[j] ? opts[j] : "", opts && opts[j] ? " " : "", outs[j],
			       opts && opts[i] ? opts[i] : "", opts && opts[i] ? " " : "", outs[i],
			       strcmp(outs[i], "-") == 0 || strcmp(outs[j], "-") == 0 ?
			       ", standard output" : "");
			return CDP_EMISMATCH;
		}
	}
	return CDP_OK;
}

const char *cdp_out_ext(const char *path)
{
	const char *base = path + dirlen(path), *dot = strrchr(base, '.');

	return dot && dot != base ? dot : path + strlen(path);
}

int cdp_out_ext_is(const char *path, const char *const *exts)
{
	const char *e = cdp_out_ext(path);

	for (; *exts; exts++)
		if (strcasecmp(e, *exts) == 0)
			return 1;
	return 0;
}

int cdp_out_check_sides(cdp_fileset *set, size_t n, const char *const *outs, char *err,
                        size_t cap)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = outs[i] ? strlen(outs[i]) : 0;

		for (size_t s = 0; s < NGSIDE; s++) {
			size_t k = strlen(gdal_side[s]);
			const char *hit;
			char *owner;

			if (len <= k || strcmp(outs[i] + len - k, gdal_side[s]) != 0)
				continue;
			if (!(owner = strndup(outs[i], len - k)))
				return CDP_ENOMEM;
			hit = cdp_fileset_find(set, owner);
			free(owner);
			if (hit) {
				seterr(err, cap, "refusing to write '%s': GDAL would read it as part of %s",
				       outs[i], hit);
				return CDP_EMISMATCH;
			}
		}
		/* and the other way: the commit removes the side files of the
		 * file it replaces, which must not be an input (x.tif.ovr) */
		for (size_t s = 0; outs[i] && s < NGSIDE; s++) {
			char side_name[PATH_MAX + 16];
			const char *hit;

			if (snprintf(side_name, sizeof side_name, "%s%s", outs[i], gdal_side[s]) >=
			    (int)sizeof side_name)
				continue;
			if ((hit = cdp_fileset_find(set, side_name))) {
				seterr(err, cap, "refusing to write '%s': its side file '%s' goes with it, "
				       "and that is %s", outs[i], side_name, hit);
				return CDP_EMISMATCH;
			}
		}
	}
	return CDP_OK;
}

int cdp_out_check_outputs(cdp_fileset *set, size_t n, const char *const *outs,
                          const char *const *opts, int kind, char *err, size_t cap)
{
	int rc = cdp_out_check_set(set, n, outs, opts, err, cap);

	for (size_t i = 0; i < n && rc == CDP_OK; i++)
		if (outs[i])
			rc = cdp_out_check(outs[i], kind, err, cap);
	if (rc == CDP_OK && (rc = cdp_out_check_sides(set, n, outs, err, cap)) == CDP_ENOMEM)
		seterr(err, cap, "out of memory");
	return rc;
}

int cdp_out_check_ext(const char *opt, const char *path, const char *const *exts,
                      const char *what, const char *give, char *err, size_t cap)
{
	const char *e = cdp_out_ext(path);

	if (cdp_out_ext_is(path, exts))
		return CDP_OK;
	if (!*e)
		seterr(err, cap, "%s '%s': %s, which a name without an extension does not say: "
		       "give %s", opt, path, what, give);
	else
		seterr(err, cap, "%s '%s': %s, which '%s' does not name: give %s", opt, path, what, e,
		       give);
	return CDP_EINVAL;
}

int cdp_out_is_tmp(const char *name, long *pid, int *elsewhere)
{
	char mark[9], here[9] = "";
	const char *t, *p, *q;
	char *endp;
	long v;

	if (!name || name[0] != '.')
		return 0;
	/* the last tag: a user's NAME may hold the text itself */
	for (t = NULL, p = name; (p = strstr(p, TAG)); p++)
		t = p;
	if (!t || t == name)
		return 0;
	q = t + sizeof TAG - 1;
	if (*q < '0' || *q > '9')
		return 0;
	errno = 0;
	v = strtol(q, &endp, 10);
	if (errno || v <= 0)
		return 0;
	/* "PID-MARK." (where_mark), or "PID." as before marks were written */
	mark[0] = '\0';
	if (*endp == '-') {
		for (int i = 0; i < 8; i++)
			if (!((endp[1 + i] >= '0' && endp[1 + i] <= '9') ||
			      (endp[1 + i] >= 'a' && endp[1 + i] <= 'f')))
				return 0;
		memcpy(mark, endp + 1, 8);
		mark[8] = '\0';
		endp += 9;
	}
	if (*endp != '.')
		return 0;
	q = endp + 1;
	for (int i = 0; i < 6; i++, q++)
		if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9')))
			return 0;
	for (size_t s = 0; s < NSIDE; s++)
		if (strcmp(q, side[s]) == 0) {
			if (pid)
				*pid = v;
			if (elsewhere) {
				if (mark[0])
					where_mark(here);
				*elsewhere = mark[0] && strcmp(mark, here) != 0;
			}
			return 1;
		}
	return 0;
}

/* 1 when name, a temporary or a side file of one (cdp_out_is_tmp), is
 * that of one of the NULL-ended names (the temporary of a name longer
 * than NAME_KEEP holds its first NAME_KEEP characters): its tag is the
 * one right after ".NAME", and the last. */
static int tmp_of(const char *name, const char *const *names)
{
	for (; names && *names; names++) {
		size_t k = strlen(*names);

		if (k > NAME_KEEP)
			k = NAME_KEEP;
		if (strncmp(name + 1, *names, k) == 0 &&
		    strncmp(name + 1 + k, TAG, sizeof TAG - 1) == 0 &&
		    !strstr(name + 1 + k + 1, TAG))
			return 1;
	}
	return 0;
}

int cdp_out_sweep(const char *dir, const char *const *locked, size_t *removed)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;
	long pid;
	int elsewhere;

	if (removed)
		*removed = 0;
	if (!d)
		return errno;
	while ((e = readdir(d))) {
		char path[PATH_MAX];

		if (!cdp_out_is_tmp(e->d_name, &pid, &elsewhere))
			continue;
		/* a name only the caller writes, under its lock: every temporary
		 * of it is dead but this process's own, wherever it was made */
		if (tmp_of(e->d_name, locked)) {
			if (pid == (long)getpid() && !elsewhere)
				continue;
		/* a PID of another host or PID namespace means nothing here: its
		 * writer may be alive (an old name, with no mark, is judged by
		 * its PID as ever) */
		} else if (elsewhere || pid == (long)getpid() || pid > INT_MAX ||
		           kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
			continue;
		}
		if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
			continue;
		if (unlink(path) == 0)
			n++;
	}
	closedir(d);
	if (removed)
		*removed = n;
	return CDP_OK;
}
