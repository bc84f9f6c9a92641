/* cdp_lmdb.c: environment opening and the batched writer (cdp_lmdb.h).
 *
 * A batch is retried as a whole after MDB_MAP_FULL: the aborted txn leaves
 * no trace, so redoing every put and hook from the buffered copies gives the
 * same result as if the map had been large enough in the first place.
 */
#include "cdp_lmdb.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cdp_error.h"
#include "cdp_file.h"

/* The data file must hold every page up to the newest meta page's last
 * one: LMDB maps the file and would fault on a page past its end. The meta
 * pages themselves are read by mdb_env_open with read(2), so an env that
 * opened has a last page number to compare with. */
static int check_size(MDB_env *env, uint64_t *have, uint64_t *need)
{
	MDB_envinfo info;
	MDB_stat ms;
	struct stat st;
	mdb_filehandle_t fd;
	uint64_t want;
	int rc;

	if ((rc = mdb_env_info(env, &info)) != 0 || (rc = mdb_env_stat(env, &ms)) != 0 ||
	    (rc = mdb_env_get_fd(env, &fd)) != 0)
		return rc;
	if (fstat(fd, &st) != 0)
		return errno;
	if (__builtin_mul_overflow((uint64_t)info.me_last_pgno + 1, (uint64_t)ms.ms_psize, &want))
		return CDP_EOVERFLOW;
	if ((uint64_t)st.st_size >= want)
		return CDP_OK;
	if (have)
		*have = (uint64_t)st.st_size;
	if (need)
		*need = want;
	return CDP_ETRUNC;
}

/* A read-only open of an empty data.mdb (a copy cut short) fails in LMDB
 * with EBADF, which names no problem of the pool: CDP_ETRUNC with its size
 * and that of LMDB's two meta pages. (A file cut inside them is
 * MDB_INVALID, LMDB's own word for it.) */
static int check_meta_pages(const char *path, uint64_t *have, uint64_t *need)
{
	char name[4200];
	struct stat st;
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t two = 2 * (uint64_t)(ps > 0 ? ps : 4096);

	if ((size_t)snprintf(name, sizeof name, "%s/data.mdb", path) >= sizeof name ||
	    stat(name, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 0)
		return CDP_OK;   /* a missing file is LMDB's to report */
	if (have)
		*have = (uint64_t)st.st_size;
	if (need)
		*need = two;
	return CDP_ETRUNC;
}

int cdp_lmdb_can_map(size_t bytes)
{
	void *m = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (m == MAP_FAILED)
		return errno ? errno : ENOMEM;
	munmap(m, bytes);
	return CDP_OK;
}

int cdp_lmdb_env_alone(const char *path, int *fd)
{
	struct flock fl;
	char name[4200];

	*fd = -1;
	if ((size_t)snprintf(name, sizeof name, "%s/lock.mdb", path) >= sizeof name)
		return 0;
	if ((*fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0666)) < 0)
		return errno == ENOENT && access(path, F_OK) != 0 && errno == ENOENT;
	memset(&fl, 0, sizeof fl);
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = 0;
	fl.l_len = 1;
	while (fcntl(*fd, F_SETLK, &fl) != 0) {
		/* *fd stays open: closing it would drop the shared lock of an
		 * environment this process holds open at path */
		if (errno != EINTR)
			return 0;
	}
	return 1;
}

/* The map a reader needs: data.mdb's size rounded up to 1 MiB (at least
 * 1 MiB), 0 when it cannot be found. */
static size_t file_map_size(const char *path)
{
	char name[4200];
	struct stat st;
	const uint64_t mib = (uint64_t)1 << 20;
	uint64_t n;

	if ((size_t)snprintf(name, sizeof name, "%s/data.mdb", path) >= sizeof name ||
	    stat(name, &st) != 0 || st.st_size < 0)
		return 0;
	n = ((uint64_t)st.st_size + mib - 1) / mib * mib;
	if (n == 0)
		n = mib;
	return n > SIZE_MAX ? 0 : (size_t)n;
}

static int env_try(const char *path, unsigned int flags, unsigned int maxdbs, size_t mapsize,
                   MDB_env **out)
{
	MDB_env *env = NULL;
	int rc;

	*out = NULL;
	if ((rc = mdb_env_create(&env)) != 0)
		return rc;
	if ((maxdbs && (rc = mdb_env_set_maxdbs(env, maxdbs)) != 0) ||
	    (mapsize && (rc = mdb_env_set_mapsize(env, mapsize)) != 0) ||
	    (rc = mdb_env_open(env, path, flags, 0666)) != 0) {
		mdb_env_close(env);
		return rc;
	}
	*out = env;
	return CDP_OK;
}

/* 1 when this user cannot open path's lock.mdb for writing: it exists
 * unwritable, or it is missing in a directory we cannot write. */
static int lock_unwritable(const char *path)
{
	char name[4200];

	if ((size_t)snprintf(name, sizeof name, "%s/lock.mdb", path) >= sizeof name)
		return 0;
	if (access(name, F_OK) == 0)
		return access(name, W_OK) != 0 && errno == EACCES;
	return errno == ENOENT && access(path, W_OK) != 0 && errno == EACCES;
}

int cdp_lmdb_env_open(const char *path, unsigned int flags, int create,
                      unsigned int maxdbs, size_t mapsize, MDB_env **out)
{
	return cdp_lmdb_env_open_sized(path, flags, create, maxdbs, mapsize, out, NULL, NULL);
}

/* 1 when the pool folder path has a lock.mdb */
static int lock_exists(const char *path)
{
	char lock[4096];

	return snprintf(lock, sizeof lock, "%s/lock.mdb", path) >= (int)sizeof lock ||
	       access(lock, F_OK) == 0;
}

int cdp_lmdb_env_open_sized(const char *path, unsigned int flags, int create,
                            unsigned int maxdbs, size_t mapsize, MDB_env **out,
                            uint64_t *have, uint64_t *need)
{
	MDB_env *env = NULL;
	struct stat st;
	int rc;

	*out = NULL;
	if (have)
		*have = 0;
	if (need)
		*need = 0;
	if (create && !(flags & MDB_RDONLY) && (rc = cdp_file_mkdir(path, NULL)) != 0)
		return rc == EEXIST ? ENOTDIR : rc;
	/* LMDB would create "path-lock" beside a plain file; a pool is a dir. */
	if (stat(path, &st) != 0)
		return errno;
	if (!S_ISDIR(st.st_mode))
		return ENOTDIR;
	if ((flags & MDB_RDONLY) && (rc = check_meta_pages(path, have, need)) != 0)
		return rc;
	/* LMDB makes a new lock.mdb by ftruncate and writes it through a
	 * shared map: on a file system with no block left that write is a
	 * SIGBUS, not an error. So a new one needs room first (64 KiB: its
	 * 8 KiB and data.mdb's first pages, with no pool worth the name
	 * below that) */
	if (!(flags & (MDB_RDONLY | MDB_NOLOCK)) && !lock_exists(path)) {
		struct statvfs vfs;

		if (statvfs(path, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < 65536)
			return ENOSPC;
	}
	rc = env_try(path, flags, maxdbs, mapsize, &env);
	if (rc == ENOMEM && mapsize == 0 && (mapsize = file_map_size(path)) != 0)
		rc = env_try(path, flags, maxdbs, mapsize, &env);
	if (rc == EACCES && (flags & MDB_RDONLY) && !(flags & MDB_NOLOCK) && lock_unwritable(path)) {
		/* LMDB reads read-only media (EROFS) without its lock file;
		 * a directory this user cannot write is the same case. */
		flags |= MDB_NOLOCK;
		rc = env_try(path, flags, maxdbs, mapsize, &env);
		if (rc == ENOMEM && mapsize == 0 && (mapsize = file_map_size(path)) != 0)
			rc = env_try(path, flags, maxdbs, mapsize, &env);
	}
	if (rc != 0)
		return rc;
	/* A reader that died inside a read transaction (a process killed, a
	 * PyTorch DataLoader worker ending by _exit) keeps its slot until
	 * someone reclaims it: 126 of them fill the table and no process
	 * can read the pool (MDB_READERS_FULL). Reclaimed here, before our
	 * first transaction needs a slot. */
	if (!(flags & MDB_NOLOCK)) {
		int dead;
		(void)mdb_reader_check(env, &dead);
	}
	if ((rc = check_size(env, have, need)) != 0) {
		mdb_env_close(env);
		return rc;
	}
	*out = env;
	return CDP_OK;
}

/* What the wrapper knows of each env this process uses: the long read
 * transactions it holds (cdp_lmdb_txn_hold) and a grow that failed. LMDB
 * forbids mdb_env_set_mapsize while the process has a transaction open, and
 * a failed one leaves the env unmapped; both are per env, so a small table
 * keyed by the handle keeps them (an env not in it has neither). */
#define ENV_SLOTS 64

static struct env_state {
	MDB_env *env;
	unsigned holds;         /* long transactions open */
	int broken;             /* errno of the failed grow, 0 if none */
	size_t want;            /* the size it tried */
} envs[ENV_SLOTS];
static pthread_mutex_t envs_lock = PTHREAD_MUTEX_INITIALIZER;

/* env's slot, or a free one when add (NULL when full or absent); call
 * with envs_lock held. */
static struct env_state *env_state(MDB_env *env, int add)
{
	struct env_state *free_slot = NULL;

	for (int i = 0; i < ENV_SLOTS; i++) {
		if (envs[i].env == env)
			return &envs[i];
		if (!envs[i].env && !free_slot)
			free_slot = &envs[i];
	}
	if (!add || !free_slot)
		return NULL;
	memset(free_slot, 0, sizeof *free_slot);
	free_slot->env = env;
	return free_slot;
}

/* The env's failed grow (errno, *want its size), or 0; and whether it
 * holds a long transaction (*held). */
static int env_flags(MDB_env *env, size_t *want, unsigned *held)
{
	struct env_state *e;
	int broken = 0;

	pthread_mutex_lock(&envs_lock);
	if ((e = env_state(env, 0)) != NULL) {
		broken = e->broken;
		if (want)
			*want = e->want;
		if (held)
			*held = e->holds;
	}
	pthread_mutex_unlock(&envs_lock);
	return broken;
}

int cdp_lmdb_txn_begin(MDB_env *env, unsigned int flags, MDB_txn **txn)
{
	unsigned held = 0;
	int rc, broken = env_flags(env, NULL, &held);

	*txn = NULL;
	if (broken)
		return broken;
	rc = mdb_txn_begin(env, NULL, flags, txn);
	/* Another process grew the map: take its size and try again, unless
	 * a long transaction of ours still reads the old map (its pointers
	 * would point into unmapped memory). */
	if (rc == MDB_MAP_RESIZED && held == 0 && (rc = mdb_env_set_mapsize(env, 0)) == 0)
		rc = mdb_txn_begin(env, NULL, flags, txn);
	return rc;
}

int cdp_lmdb_txn_hold(MDB_env *env, unsigned int flags, MDB_txn **txn)
{
	struct env_state *e;
	int rc = cdp_lmdb_txn_begin(env, flags, txn);

	if (rc != 0)
		return rc;
	pthread_mutex_lock(&envs_lock);
	if ((e = env_state(env, 1)) != NULL)
		e->holds++;
	pthread_mutex_unlock(&envs_lock);
	if (!e) {
		mdb_txn_abort(*txn);
		*txn = NULL;
		return CDP_ENOMEM;
	}
	return CDP_OK;
}

void cdp_lmdb_txn_release(MDB_env *env, MDB_txn *txn)
{
	struct env_state *e;

	if (!txn)
		return;
	mdb_txn_abort(txn);
	pthread_mutex_lock(&envs_lock);
	if ((e = env_state(env, 0)) != NULL && e->holds > 0 && --e->holds == 0 && !e->broken)
		e->env = NULL;
	pthread_mutex_unlock(&envs_lock);
}

int cdp_lmdb_broken(MDB_env *env, size_t *want)
{
	return env_flags(env, want, NULL);
}

void cdp_lmdb_forget(MDB_env *env)
{
	struct env_state *e;

	pthread_mutex_lock(&envs_lock);
	if ((e = env_state(env, 0)) != NULL)
		memset(e, 0, sizeof *e);
	pthread_mutex_unlock(&envs_lock);
}

int cdp_lmdb_grow(MDB_env *env)
{
	MDB_envinfo info;
	struct env_state *e;
	size_t want;
	int rc;

	if ((rc = env_flags(env, NULL, NULL)) != 0)
		return rc;
	if ((rc = mdb_env_info(env, &info)) != 0)
		return rc;
	if (info.me_mapsize > SIZE_MAX / 2)
		return MDB_MAP_FULL;
	want = info.me_mapsize * 2;
	/* EINVAL: a transaction is open, nothing was unmapped. Any other
	 * failure is the mmap of the new size, and LMDB has already unmapped
	 * the old one: the env can only be closed now. */
	if ((rc = mdb_env_set_mapsize(env, want)) == 0 || rc == EINVAL)
		return rc;
	pthread_mutex_lock(&envs_lock);
	if ((e = env_state(env, 1)) != NULL) {
		e->broken = rc;
		e->want = want;
	}
	pthread_mutex_unlock(&envs_lock);
	return rc;
}

void cdp_lmdb_writer_init(cdp_lmdb_writer *w, MDB_env *env, MDB_dbi dbi,
                          int dup, size_t max_items, size_t max_bytes,
                          cdp_lmdb_hook prepare, cdp_lmdb_hook finish, void *arg)
{
	memset(w, 0, sizeof *w);
	w->env = env;
	w->dbi = dbi;
	w->dup = dup;
	w->max_items = max_items ? max_items : CDP_LMDB_TXN_RECORDS;
	w->max_bytes = max_bytes ? max_bytes : CDP_LMDB_TXN_BYTES;
	w->prepare = prepare;
	w->finish = finish;
	w->arg = arg;
}

static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 16;
	void *np;

	if (need <= *cap)
		return CDP_OK;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2 / elem)
			return CDP_ENOMEM;
		ncap *= 2;
	}
	if (!(np = realloc(*p, ncap * elem)))
		return CDP_ENOMEM;
	*p = np;
	*cap = ncap;
	return CDP_OK;
}

int cdp_lmdb_writer_add(cdp_lmdb_writer *w, const void *key, size_t klen,
                        const void *val, size_t vlen)
{
	cdp_lmdb_item *it;
	int rc;

	if (w->flushed)
		cdp_lmdb_writer_discard(w);
	if (klen == 0 || klen > CDP_LMDB_KEYMAX)
		return MDB_BAD_VALSIZE;
	if (vlen > SIZE_MAX - klen || w->len > SIZE_MAX - klen - vlen)
		return CDP_ENOMEM;
	if ((rc = reserve((void **)&w->items, &w->cap, w->n + 1, sizeof *w->items)) ||
	    (rc = reserve((void **)&w->buf, &w->bufcap, w->len + klen + vlen, 1)))
		return rc;
	it = &w->items[w->n++];
	memset(it, 0, sizeof *it);
	it->koff = w->len;
	memcpy(w->buf + w->len, key, klen);
	it->key.mv_size = klen;
	w->len += klen;
	it->voff = w->len;
	if (vlen)
		memcpy(w->buf + w->len, val, vlen);
	it->val.mv_size = vlen;
	w->len += vlen;
	return CDP_OK;
}

int cdp_lmdb_writer_full(const cdp_lmdb_writer *w)
{
	return !w->flushed && (w->n >= w->max_items || w->len >= w->max_bytes);
}

static void set_failkey(cdp_lmdb_writer *w, const MDB_val *k)
{
	w->failkey_len = k->mv_size;
	memcpy(w->failkey, k->mv_data, k->mv_size);
	w->failkey[k->mv_size] = '\0';
}

/* Puts one item that does not sort after the last key. */
static int put_existing(cdp_lmdb_writer *w, MDB_txn *txn, cdp_lmdb_item *it)
{
	MDB_val old = it->val;
	int rc = mdb_put(txn, w->dbi, &it->key, &old, MDB_NOOVERWRITE);
	int same;

	if (rc == 0) {
		it->status = CDP_PUT_NEW;
		return CDP_OK;
	}
	if (rc != MDB_KEYEXIST)
		return rc;
	/* On MDB_KEYEXIST, old holds the stored value. */
	same = old.mv_size == it->val.mv_size &&
	       memcmp(old.mv_data, it->val.mv_data, old.mv_size) == 0;
	switch (w->dup) {
	case CDP_DUP_SKIP:
		if (!same && w->same && !w->same(&old, &it->val, w->arg))
			return MDB_KEYEXIST;
		it->status = same ? CDP_PUT_SAME : CDP_PUT_SKIPPED;
		return CDP_OK;
	case CDP_DUP_REPLACE:
		if (same) {
			it->status = CDP_PUT_SAME;
			return CDP_OK;
		}
		if ((rc = mdb_put(txn, w->dbi, &it->key, &it->val, 0)) != 0)
			return rc;
		it->status = CDP_PUT_REPLACED;
		return CDP_OK;
	default:
		return MDB_KEYEXIST;
	}
}

/* One try at the whole batch in one txn. */
static int attempt(cdp_lmdb_writer *w)
{
	unsigned char lastbuf[CDP_LMDB_KEYMAX];
	MDB_val last = { 0, lastbuf }, k, v;
	MDB_txn *txn = NULL;
	MDB_cursor *cur;
	int rc, have_last = 0;

	for (size_t i = 0; i < w->n; i++) {
		cdp_lmdb_item *it = &w->items[i];
		it->key.mv_data = w->buf + it->koff;
		it->val.mv_data = w->buf + it->voff;
		it->status = CDP_PUT_PENDING;
	}
	if ((rc = cdp_lmdb_txn_begin(w->env, 0, &txn)) != 0)
		return rc;
	if (w->prepare && (rc = w->prepare(txn, w->items, w->n, w->arg)) != 0)
		goto fail;
	/* The last key as of this txn: later writers may have appended. */
	if ((rc = mdb_cursor_open(txn, w->dbi, &cur)) != 0)
		goto fail;
	rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
	if (rc == 0 && k.mv_size <= sizeof lastbuf) {
		memcpy(lastbuf, k.mv_data, k.mv_size);
		last.mv_size = k.mv_size;
		have_last = 1;
	}
	mdb_cursor_close(cur);
	if (rc != 0 && rc != MDB_NOTFOUND)
		goto fail;
	for (size_t i = 0; i < w->n; i++) {
		cdp_lmdb_item *it = &w->items[i];

		if (!have_last || mdb_cmp(txn, w->dbi, &it->key, &last) > 0) {
			rc = mdb_put(txn, w->dbi, &it->key, &it->val, MDB_APPEND);
			if (rc == 0) {
				it->status = CDP_PUT_NEW;
				/* Our buffer is stable for the whole txn. */
				last = it->key;
				have_last = 1;
			}
		} else {
			rc = put_existing(w, txn, it);
		}
		if (rc != 0) {
			set_failkey(w, &it->key);
			goto fail;
		}
	}
	if (w->finish && (rc = w->finish(txn, w->items, w->n, w->arg)) != 0)
		goto fail;
	return mdb_txn_commit(txn);
fail:
	mdb_txn_abort(txn);
	return rc;
}

int cdp_lmdb_eio_cause(const char *dir, int rc, uint64_t need)
{
	char file[4096];
	struct statvfs vfs;
	struct rlimit rl;
	struct stat st;

	if (rc != EIO || !dir)
		return rc;
	/* data.mdb grown to the file-size limit (ulimit -f: the programs
	 * ignore SIGXFSZ, and LMDB's write came back short) */
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    snprintf(file, sizeof file, "%s/data.mdb", dir) < (int)sizeof file &&
	    stat(file, &st) == 0 && (uint64_t)st.st_size + need + 65536 >= (uint64_t)rl.rlim_cur)
		return EFBIG;
	if (statvfs(dir, &vfs) == 0 &&
	    (uint64_t)vfs.f_bavail * vfs.f_frsize < need + (1u << 20))
		return ENOSPC;
	return rc;
}

/* LMDB turns a short write into EIO; on a full file system that hides the
 * real cause, so tell it apart by the space left. */
static int full_disk(cdp_lmdb_writer *w, int rc)
{
	const char *path;

	if (rc != EIO || mdb_env_get_path(w->env, &path) != 0)
		return rc;
	return cdp_lmdb_eio_cause(path, rc, w->len);
}

int cdp_lmdb_writer_flush(cdp_lmdb_writer *w)
{
	int rc;

	if (w->flushed || w->n == 0)
		return CDP_OK;
	w->failkey_len = 0;
	w->failkey[0] = '\0';
	for (;;) {
		rc = attempt(w);
		if (rc != MDB_MAP_FULL)
			break;
		if ((rc = cdp_lmdb_grow(w->env)) != 0)
			return rc;
		w->grows++;
	}
	if (rc != 0)
		return full_disk(w, rc);
	for (size_t i = 0; i < w->n; i++) {
		switch (w->items[i].status) {
		case CDP_PUT_REPLACED:
			w->replaced++;
			/* fall through */
		case CDP_PUT_NEW:
			w->written++;
			w->bytes += w->items[i].val.mv_size;
			break;
		default:
			w->skipped++;
		}
	}
	w->commits++;
	w->flushed = 1;
	return CDP_OK;
}

void cdp_lmdb_writer_discard(cdp_lmdb_writer *w)
{
	w->n = 0;
	w->len = 0;
	w->flushed = 0;
}

void cdp_lmdb_writer_free(cdp_lmdb_writer *w)
{
	free(w->items);
	free(w->buf);
	w->items = NULL;
	w->buf = NULL;
	w->n = w->cap = w->len = w->bufcap = 0;
}

#define CDP_STR_(x) #x
#define CDP_STR(x) CDP_STR_(x)
const char *cdp_lmdb_version(void)
{
	return "LMDB: " CDP_STR(MDB_VERSION_MAJOR) "." CDP_STR(MDB_VERSION_MINOR) "."
	       CDP_STR(MDB_VERSION_PATCH);
}
