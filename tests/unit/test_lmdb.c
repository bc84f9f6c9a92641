/* test_lmdb.c: the batched LMDB writer.
 *
 * A 64 KiB map forces several MAP_FULL growths in the middle of batches; the
 * finish hook keeps a count and a checksum of the batch in a second database
 * from what it reads in the txn, so any double counting across the redone
 * attempts would show; a large value written by the hook makes some of the
 * growths happen inside it. Duplicate modes, hook failures and the MDB_APPEND
 * decision under a concurrent writer are checked too, and so are a map
 * grown by another process under a held read txn and a grow that fails,
 * and cdp_lmdb_env_alone against processes that hold the env open.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdp_error.h"
#include "cdp_lmdb.h"
#include "tap.h"

typedef struct hookstate {
	MDB_dbi meta;
	unsigned calls, prepares;
	int fail_with;           /* returned by finish when non-zero */
	int rewrite;             /* prepare upper-cases value byte 0 */
	int pad;                 /* finish also writes padbuf */
	unsigned hook_full;      /* MDB_MAP_FULL seen inside finish */
	char padbuf[40000];
} hookstate;

static char dir[64];

static void rmdb(const char *d)
{
	char p[128];

	snprintf(p, sizeof p, "%s/data.mdb", d);
	unlink(p);
	snprintf(p, sizeof p, "%s/lock.mdb", d);
	unlink(p);
	rmdir(d);
}

static uint64_t get_u64(MDB_txn *txn, MDB_dbi dbi, const char *name)
{
	MDB_val k = { strlen(name), (void *)name }, v;
	uint64_t x = 0;

	if (mdb_get(txn, dbi, &k, &v) == 0 && v.mv_size == sizeof x)
		memcpy(&x, v.mv_data, sizeof x);
	return x;
}

static int put_u64(MDB_txn *txn, MDB_dbi dbi, const char *name, uint64_t x)
{
	MDB_val k = { strlen(name), (void *)name }, v = { sizeof x, &x };

	return mdb_put(txn, dbi, &k, &v, 0);
}

/* Meta "n" += new items, "sum" += their first value bytes; from the txn. */
static int finish(MDB_txn *txn, cdp_lmdb_item *it, size_t n, void *arg)
{
	hookstate *h = arg;
	uint64_t cnt = get_u64(txn, h->meta, "n"), sum = get_u64(txn, h->meta, "sum");
	int rc;

	h->calls++;
	for (size_t i = 0; i < n; i++) {
		if (it[i].status == CDP_PUT_NEW) {
			cnt++;
			sum += ((unsigned char *)it[i].val.mv_data)[0];
		}
	}
	if ((rc = put_u64(txn, h->meta, "n", cnt)) || (rc = put_u64(txn, h->meta, "sum", sum)))
		return rc;
	if (h->pad) {
		MDB_val k = { 3, "pad" }, v = { sizeof h->padbuf, h->padbuf };
		if ((rc = mdb_put(txn, h->meta, &k, &v, 0)) == MDB_MAP_FULL)
			h->hook_full++;
		if (rc)
			return rc;
	}
	return h->fail_with;
}

static int prepare(MDB_txn *txn, cdp_lmdb_item *it, size_t n, void *arg)
{
	hookstate *h = arg;

	h->prepares++;
	for (size_t i = 0; h->rewrite && i < n; i++) {
		unsigned char *b = it[i].val.mv_data;
		if (b[0] >= 'a' && b[0] <= 'z')
			b[0] = (unsigned char)(b[0] - 'a' + 'A');
	}
	return CDP_OK;
}

static void fill(char *val, size_t len, unsigned i)
{
	for (size_t j = 0; j < len; j++)
		val[j] = (char)('a' + (i * 7 + j) % 26);
}

static void open_env(MDB_env **env, MDB_dbi *data, MDB_dbi *meta, size_t mapsize)
{
	MDB_txn *txn;

	CHECK_RC(cdp_lmdb_env_open(dir, 0, 1, 4, mapsize, env), CDP_OK);
	CHECK_RC(mdb_txn_begin(*env, NULL, 0, &txn), 0);
	CHECK_RC(mdb_dbi_open(txn, "data", MDB_CREATE, data), 0);
	CHECK_RC(mdb_dbi_open(txn, "meta", MDB_CREATE, meta), 0);
	CHECK_RC(mdb_txn_commit(txn), 0);
}

static void test_growth(void)
{
	enum { N = 3000, VLEN = 300 };
	MDB_env *env;
	MDB_dbi data, meta;
	MDB_txn *txn;
	MDB_stat st;
	cdp_lmdb_writer w;
	static hookstate h;
	char key[32], val[VLEN];
	uint64_t want_sum = 0;
	unsigned bad = 0;

	open_env(&env, &data, &meta, 64 << 10);
	h.meta = meta;
	h.pad = 1;
	cdp_lmdb_writer_init(&w, env, data, CDP_DUP_ERROR, 250, 0, prepare, finish, &h);
	for (unsigned i = 0; i < N; i++) {
		/* Keys out of order half of the time: APPEND and plain puts mix. */
		unsigned k = i % 2 ? i : N + (N - i);
		snprintf(key, sizeof key, "k%06u", k);
		fill(val, sizeof val, k);
		want_sum += (unsigned char)val[0];
		CHECK_RC(cdp_lmdb_writer_add(&w, key, strlen(key), val, sizeof val), CDP_OK);
		if (cdp_lmdb_writer_full(&w))
			CHECK_RC(cdp_lmdb_writer_flush(&w), CDP_OK);
	}
	CHECK_RC(cdp_lmdb_writer_flush(&w), CDP_OK);
	CHECK(w.grows >= 3, "only %" PRIu64 " map growths from 64 KiB", w.grows);
	CHECK(h.prepares > w.commits, "prepares %u, commits %" PRIu64 ": no batch was redone",
	      h.prepares, w.commits);
	CHECK(h.hook_full >= 1, "no map growth happened inside the finish hook");
	CHECK(w.written == N && w.skipped == 0 && w.commits == (N + 249) / 250,
	      "written %" PRIu64 " commits %" PRIu64, w.written, w.commits);

	CHECK_RC(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	CHECK_RC(mdb_stat(txn, data, &st), 0);
	CHECK(st.ms_entries == N, "entries %zu", (size_t)st.ms_entries);
	CHECK(get_u64(txn, meta, "n") == N, "meta count %" PRIu64 " after redone batches",
	      get_u64(txn, meta, "n"));
	CHECK(get_u64(txn, meta, "sum") == want_sum, "meta checksum differs");
	for (unsigned i = 0; i < N; i++) {
		unsigned k = i % 2 ? i : N + (N - i);
		MDB_val kv, vv;
		snprintf(key, sizeof key, "k%06u", k);
		fill(val, sizeof val, k);
		kv.mv_size = strlen(key);
		kv.mv_data = key;
		if (mdb_get(txn, data, &kv, &vv) != 0 || vv.mv_size != sizeof val ||
		    memcmp(vv.mv_data, val, sizeof val) != 0)
			bad++;
	}
	CHECK(bad == 0, "%u records missing or wrong", bad);
	mdb_txn_abort(txn);
	cdp_lmdb_writer_free(&w);
	mdb_env_close(env);
	rmdb(dir);
}

static void add(cdp_lmdb_writer *w, const char *k, const char *v)
{
	CHECK_RC(cdp_lmdb_writer_add(w, k, strlen(k), v, strlen(v)), CDP_OK);
}

/* The APPEND decision uses the last key as of the txn: another writer's
 * larger key in between must not make a put fail (MDB_APPEND of a smaller key
 * would return MDB_KEYEXIST). */
static void test_append_concurrent(void)
{
	MDB_env *env;
	MDB_dbi data, meta;
	MDB_txn *txn;
	MDB_val k = { 1, "z" }, v = { 5, "other" };
	MDB_stat st;
	cdp_lmdb_writer w;

	open_env(&env, &data, &meta, 0);
	cdp_lmdb_writer_init(&w, env, data, CDP_DUP_ERROR, 0, 0, NULL, NULL, NULL);
	add(&w, "a", "1");
	add(&w, "m", "2");
	CHECK_RC(cdp_lmdb_writer_flush(&w), CDP_OK);
	CHECK_RC(mdb_txn_begin(env, NULL, 0, &txn), 0);
	CHECK_RC(mdb_put(txn, data, &k, &v, 0), 0);
	CHECK_RC(mdb_txn_commit(txn), 0);
	add(&w, "n", "3");
	add(&w, "y", "4");
	add(&w, "zz", "5");
	CHECK_RC(cdp_lmdb_writer_flush(&w), CDP_OK);
	CHECK_RC(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	CHECK_RC(mdb_stat(txn, data, &st), 0);
	mdb_txn_abort(txn);
	CHECK(st.ms_entries == 6, "entries %zu", (size_t)st.ms_entries);
	cdp_lmdb_writer_free(&w);
	mdb_env_close(env);
	rmdb(dir);
}

static char *get(MDB_env *env, MDB_dbi dbi, const char *k, char *out, size_t cap)
{
	MDB_txn *txn;
	MDB_val kv = { strlen(k), (void *)k }, vv;

	out[0] = '\0';
	if (mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0)
		return out;
	if (mdb_get(txn, dbi, &kv, &vv) == 0 && vv.mv_size < cap) {
		memcpy(out, vv.mv_data, vv.mv_size);
		out[vv.mv_size] = '\0';
	}
	mdb_txn_abort(txn);
	return out;
}

static uint64_t meta_n(MDB_env *env, MDB_dbi meta)
{
	MDB_txn *txn;
	uint64_t n;

	if (mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0)
		return UINT64_MAX;
	n = get_u64(txn, meta, "n");
	mdb_txn_abort(txn);
	return n;
}

static void test_dups(void)
{
	MDB_env *env;
	MDB_dbi data, meta;
	cdp_lmdb_writer w;
	hookstate h = {0};
	char out[64];

	open_env(&env, &data, &meta, 0);
	h.meta = meta;
	cdp_lmdb_writer_init(&w, env, data, CDP_DUP_ERROR, 0, 0, prepare, finish, &h);
	add(&w, "b", "one");
	add(&w, "d", "two");
	CHECK_RC(cdp_lmdb_writer_flush(&w), CDP_OK);
	CHECK(w.items[0].status == CDP_PUT_NEW && w.items[1].status == CDP_PUT_NEW,
	      "statuses stay readable after the flush");

	/* Error mode: against the DB, and within one batch. */
	add(&w, "a", "x");
	add(&w, "d", "other");
	CHECK_RC(cdp_lmdb_writer_flush(&w), MDB_KEYEXIST);
	CHECK(strcmp(w.failkey, "d") == 0 && w.failkey_len == 1, "failkey '%s'", w.failkey);
	CHECK(strcmp(get(env, data, "a", out, sizeof out), "") == 0, "failed batch committed 'a'");
	CHECK(meta_n(env, meta) == 2, "meta changed by a failed batch");
	cdp_lmdb_writer_discard(&w);
	add(&w, "e", "x");
	add(&w, "c", "y");
	add(&w, "e", "z");
	CHECK_RC(cdp_lmdb_writer_flush(&w), MDB_KEYEXIST);
	CHECK(strcmp(w.failkey, "e") == 0, "in-batch duplicate: failkey '%s'", w.failkey);
	cdp_lmdb_writer_discard(&w);

	/* Skip mode: present keys keep their values and are counted. */
	w.dup = CDP_DUP_SKIP;
	add(&w, "b", "changed");
	add(&w, "d", "two");
	add(&w, "f", "new");
	CHECK_RC(cdp_lmdb_writer_flush(&w), CDP_OK);
	CHECK(w.items[0].status == CDP_PUT_SKIPPED && w.items[1].status == CDP_PUT_SAME &&
	      w.items[2].status == CDP_PUT_NEW, "skip statuses %d %d %d",
	      w.items[0].status, w.items[1].status, w.items[2].status);
	CHECK(w.skipped == 2 && w.written == 3, "skipped %" PRIu64 " written %" PRIu64,
	      w.skipped, w.written);
	CHECK(strcmp(get(env, data, "b", out, sizeof out), "one") == 0, "skip overwrote 'b': %s", out);
	CHECK(meta_n(env, meta) == 3, "meta n %" PRIu64, meta_n(env, meta));

	/* Replace mode, with a value rewritten by the prepare hook. */
	w.dup = CDP_DUP_REPLACE;
	h.rewrite = 1;
	add(&w, "b", "changed");
	add(&w, "d", "TWO");
	CHECK_RC(cdp_lmdb_writer_flush(&w), CDP_OK);
	CHECK(w.items[0].status == CDP_PUT_REPLACED && w.items[1].status == CDP_PUT_REPLACED,
	      "replace statuses %d %d", w.items[0].status, w.items[1].status);
	CHECK(strcmp(get(env, data, "b", out, sizeof out), "Changed") == 0, "replaced 'b': %s", out);
	add(&w, "b", "Changed");
	CHECK_RC(cdp_lmdb_writer_flush(&w), CDP_OK);
	CHECK(w.items[0].status == CDP_PUT_SAME && w.replaced == 2, "identical value not SAME");

	/* A failing hook: nothing of the batch lands. */
	h.fail_with = CDP_EFORMAT;
	add(&w, "g", "x");
	CHECK_RC(cdp_lmdb_writer_flush(&w), CDP_EFORMAT);
	CHECK(strcmp(get(env, data, "g", out, sizeof out), "") == 0, "hook failure committed 'g'");
	cdp_lmdb_writer_discard(&w);
	h.fail_with = 0;
	CHECK_RC(cdp_lmdb_writer_add(&w, "", 0, "x", 1), MDB_BAD_VALSIZE);
	cdp_lmdb_writer_free(&w);
	mdb_env_close(env);
	rmdb(dir);
}

static void test_env_open(void)
{
	MDB_env *env;
	char sub[96];

	snprintf(sub, sizeof sub, "%s/missing", dir);
	CHECK_RC(cdp_lmdb_env_open(sub, MDB_RDONLY, 0, 2, 0, &env), ENOENT);
	CHECK(env == NULL, "env set on failure");
	CHECK_RC(cdp_lmdb_env_open(sub, 0, 1, 2, 1 << 20, &env), CDP_OK);
	mdb_env_close(env);
	CHECK_RC(cdp_lmdb_env_open(sub, MDB_RDONLY | MDB_NOTLS, 0, 2, 0, &env), CDP_OK);
	mdb_env_close(env);
	rmdb(sub);
	rmdir(dir);
}

/* A process holding a long read txn (cdp_lmdb_txn_hold) while another
 * process grows the map: a second begin must not remap under the held txn
 * (LMDB forbids it; the held txn's pointers would point into the unmapped
 * old map) but say MDB_MAP_RESIZED; once released, a begin adopts the size. */
static void test_held_remap(void)
{
	enum { N = 400, VLEN = 4000 };
	MDB_env *env;
	MDB_dbi data, meta;
	MDB_txn *held, *txn;
	MDB_val k = { 1, "a" }, v;
	MDB_stat st;
	cdp_lmdb_writer w;
	char key[16], val[VLEN];
	pid_t pid;
	int status = -1;

	open_env(&env, &data, &meta, 1 << 20);
	cdp_lmdb_writer_init(&w, env, data, CDP_DUP_ERROR, 0, 0, NULL, NULL, NULL);
	add(&w, "a", "first");
	CHECK_RC(cdp_lmdb_writer_flush(&w), CDP_OK);
	cdp_lmdb_writer_free(&w);
	mdb_env_close(env);

	CHECK_RC(cdp_lmdb_env_open(dir, MDB_RDONLY | MDB_NOTLS, 0, 4, 0, &env), CDP_OK);
	CHECK_RC(cdp_lmdb_txn_begin(env, MDB_RDONLY, &txn), CDP_OK);
	CHECK_RC(mdb_dbi_open(txn, "data", 0, &data), 0);
	CHECK_RC(mdb_txn_commit(txn), 0);
	CHECK_RC(cdp_lmdb_txn_hold(env, MDB_RDONLY, &held), CDP_OK);
	CHECK_RC(mdb_get(held, data, &k, &v), 0);
	/* another process appends 1.6 MB: its map doubles past ours */
	if ((pid = fork()) == 0) {
		MDB_env *we;
		MDB_dbi wd, wm;
		int rc = 0;

		open_env(&we, &wd, &wm, 0);
		cdp_lmdb_writer_init(&w, we, wd, CDP_DUP_ERROR, 0, 0, NULL, NULL, NULL);
		for (unsigned i = 0; i < N && rc == 0; i++) {
			snprintf(key, sizeof key, "k%05u", i);
			fill(val, VLEN, i);
			rc = cdp_lmdb_writer_add(&w, key, strlen(key), val, VLEN);
		}
		if (rc == 0)
			rc = cdp_lmdb_writer_flush(&w);
		_exit(rc == 0 && w.grows > 0 ? 0 : 1);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "the writer grew the map (status %d)", status);
	CHECK_RC(cdp_lmdb_txn_begin(env, MDB_RDONLY, &txn), MDB_MAP_RESIZED);
	CHECK(txn == NULL, "txn set on failure");
	CHECK(v.mv_size == 5 && memcmp(v.mv_data, "first", 5) == 0, "the held value reads");
	cdp_lmdb_txn_release(env, held);
	CHECK_RC(cdp_lmdb_txn_begin(env, MDB_RDONLY, &txn), CDP_OK);
	CHECK_RC(mdb_stat(txn, data, &st), 0);
	CHECK(st.ms_entries == N + 1, "entries %zu after the remap", (size_t)st.ms_entries);
	mdb_txn_abort(txn);
	cdp_lmdb_forget(env);
	mdb_env_close(env);
	rmdb(dir);
}

/* This process's address space in bytes (VmSize), 0 if unknown. */
static uint64_t vm_size(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	uint64_t kb = 0;

	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmSize: %" SCNu64, &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* A grow whose new mmap fails (RLIMIT_AS: room for the 64 MiB map and 32 MiB
 * more, not for 128 MiB) leaves the env unmapped: it is marked broken and
 * nothing touches it again (a begin crashed on the unmapped meta pages). In
 * a child, so that the limit and a crash stay there. */
static void test_grow_fail(void)
{
	pid_t pid;
	int status = -1;

	if ((pid = fork()) == 0) {
		MDB_env *env;
		MDB_dbi data, meta;
		MDB_txn *txn = NULL;
		struct rlimit rl;
		size_t want = 0;
		uint64_t vm;

		open_env(&env, &data, &meta, (size_t)64 << 20);
		if ((vm = vm_size()) == 0)
			_exit(2);
		rl.rlim_cur = rl.rlim_max = vm + ((uint64_t)32 << 20);
		if (setrlimit(RLIMIT_AS, &rl) != 0)
			_exit(3);
		if (cdp_lmdb_grow(env) != ENOMEM)
			_exit(4);
		if (cdp_lmdb_broken(env, &want) != ENOMEM || want != (size_t)128 << 20)
			_exit(5);
		if (cdp_lmdb_txn_begin(env, MDB_RDONLY, &txn) != ENOMEM || txn != NULL)
			_exit(6);
		if (cdp_lmdb_grow(env) != ENOMEM)
			_exit(7);
		cdp_lmdb_forget(env);
		mdb_env_close(env);
		_exit(0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "failed grow: %s %d",
	      WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status)
	      : WEXITSTATUS(status));
	rmdb(dir);
}

/* cdp_lmdb_env_alone against LMDB's own locking: another process with
 * the env open makes it 0; held, it makes an opening process wait (the
 * removal of a failed first pack relies on both), and closing the env
 * lets that process in. */
static void test_env_alone(void)
{
	MDB_env *env;
	char sub[96], c;
	int fd, up[2], down[2];
	pid_t pid;

	snprintf(sub, sizeof sub, "%s/alone", dir);
	CHECK(cdp_lmdb_env_alone(sub, &fd) == 1 && fd == -1, "a missing pool is alone, fd %d", fd);
	CHECK_RC(cdp_lmdb_env_open(sub, 0, 1, 2, 1 << 20, &env), CDP_OK);
	CHECK(cdp_lmdb_env_alone(sub, &fd) == 1 && fd >= 0, "this process alone");
	mdb_env_close(env);
	close(fd);

	/* a child holds the env open until told */
	CHECK(pipe(up) == 0 && pipe(down) == 0, "pipe");
	if ((pid = fork()) == 0) {
		MDB_env *e;
		if (cdp_lmdb_env_open(sub, 0, 1, 2, 1 << 20, &e) != 0)
			_exit(1);
		if (write(up[1], "o", 1) != 1 || read(down[0], &c, 1) != 1)
			_exit(1);
		mdb_env_close(e);
		_exit(0);
	}
	CHECK(read(up[0], &c, 1) == 1, "child did not open");
	CHECK_RC(cdp_lmdb_env_open(sub, 0, 1, 2, 1 << 20, &env), CDP_OK);
	CHECK(cdp_lmdb_env_alone(sub, &fd) == 0, "another process has it open: not alone");
	mdb_env_close(env);
	if (fd >= 0)
		close(fd);
	CHECK(write(down[1], "x", 1) == 1, "tell child");
	CHECK(waitpid(pid, NULL, 0) == pid, "wait");

	/* held here, a child's open waits until the env is closed */
	CHECK_RC(cdp_lmdb_env_open(sub, 0, 1, 2, 1 << 20, &env), CDP_OK);
	CHECK(cdp_lmdb_env_alone(sub, &fd) == 1, "alone again once the child closed");
	if ((pid = fork()) == 0) {
		MDB_env *e;
		int rc = cdp_lmdb_env_open(sub, 0, 1, 2, 1 << 20, &e);
		if (write(up[1], rc == 0 ? "o" : "f", 1) != 1)
			_exit(1);
		if (rc == 0)
			mdb_env_close(e);
		_exit(0);
	}
	{
		struct timeval tv = { 0, 300000 };
		fd_set rs;
		FD_ZERO(&rs);
		FD_SET(up[0], &rs);
		CHECK(select(up[0] + 1, &rs, NULL, NULL, &tv) == 0,
		      "a child opened the env while it was held alone");
	}
	mdb_env_close(env);
	close(fd);
	CHECK(read(up[0], &c, 1) == 1 && c == 'o', "the child's open after the close: %c", c);
	CHECK(waitpid(pid, NULL, 0) == pid, "wait");
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	rmdb(sub);
	rmdir(dir);
}

int main(void)
{
	snprintf(dir, sizeof dir, "/tmp/cdp_test_lmdb.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	test_growth();
	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	test_append_concurrent();
	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	test_dups();
	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	test_held_remap();
	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	test_grow_fail();
	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	test_env_open();
	CHECK(mkdir(dir, 0700) == 0, "mkdir");
	test_env_alone();
	return tap_done();
}
