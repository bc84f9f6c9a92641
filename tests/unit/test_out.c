/* test_out.c: the output-path policy (cdp_out.h): the temporary's name,
 * mode and removal, commit onto a new and an existing file, a symbolic link
 * followed and kept, FIFOs and character devices written in place as
 * streams and refused as seekable outputs, a directory refused, the checks
 * against inputs and other outputs, SIGTERM removing the live temporaries
 * (and a program's own handler left to run), SIGTERM held over a set of
 * commits (reaching another thread, and nested holds), GDAL's side file
 * beside a link's name (across file systems too), a checkpoint and an
 * LMDB database kept from other writers, a missing folder caught by the
 * up-front check, and the sweep of a dead process's leftovers.
 */
#include "tap.h"
#include "cdp_error.h"
#include "cdp_file.h"
#include "cdp_out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static const char *tp(const char *name)
{
	static char buf[8][256];
	static int k;
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
	return buf[k];
}

static void put_at(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL, "cannot create %s", path);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void put(const char *name, const char *text)
{
	put_at(tp(name), text);
}

static int has(const char *name, const char *text)
{
	char buf[256] = "";
	FILE *f = fopen(tp(name), "r");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return strcmp(buf, text) == 0;
}

/* entries of folder d whose name holds ".cdp-tmp." */
static int temporaries_in(const char *d)
{
	DIR *h = opendir(d);
	struct dirent *e;
	int n = 0;

	while (h && (e = readdir(h)))
		n += strstr(e->d_name, ".cdp-tmp.") != NULL;
	if (h)
		closedir(h);
	return n;
}

static int temporaries(void)
{
	return temporaries_in(dir);
}

static void wr(cdp_out *o, const char *text)
{
	CHECK(write(o->fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
}

/* a thread that only waits, so that a signal can be sent to it */
static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* A child that opens a and b, holds, has SIGTERM delivered (to another
 * thread with other_thread, else to itself) and nested holds when nest,
 * commits both and releases: the signal must end it only then, with both
 * committed. */
static void held_commit(const char *a, const char *b, int other_thread, int nest)
{
	int status;
	pid_t r = fork();

	if (r == 0) {
		cdp_out x, y;
		pthread_t th;
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		if (pthread_create(&th, NULL, idle, NULL) != 0 ||
		    cdp_out_open(&x, tp(a), CDP_OUT_SEEK, 0666, NULL, 0) ||
		    cdp_out_open(&y, tp(b), CDP_OUT_SEEK | CDP_OUT_AUX, 0666, NULL, 0))
			_exit(3);
		cdp_out_hold();
		if (nest)
			cdp_out_hold();
		if (other_thread)
			pthread_kill(th, SIGTERM);
		else
			raise(SIGTERM);
		nanosleep(&ts, NULL);          /* the other thread's handler has run */
		wr(&x, "x");
		wr(&y, "y");
		if (cdp_out_commit(&x, NULL, 0) || cdp_out_commit(&y, NULL, 0))
			_exit(5);
		cdp_out_release();
		if (nest) {
			if (access(tp(b), F_OK) != 0)
				_exit(6);
			cdp_out_release();
		}
		_exit(4);                      /* not reached: the release ends it */
	}
	CHECK(waitpid(r, &status, 0) == r && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM,
	      "held SIGTERM (%s%s): status %d, want killed by it on release",
	      other_thread ? "another thread" : "this thread", nest ? ", nested" : "", status);
	CHECK(has(a, "x") && has(b, "y"), "held SIGTERM: both outputs committed");
	CHECK(temporaries() == 0, "held SIGTERM left %d temporaries", temporaries());
}

static volatile sig_atomic_t stopped;
static void own_handler(int sig)
{
	(void)sig;
	stopped = 1;
}

int main(void)
{
	char err[512] = "", name[300], mark[9] = "", foreign[PATH_MAX];
	cdp_out o, o2;
	cdp_fileset set = { 0 };
	struct stat st;
	mode_t um;
	long pid;
	size_t n;
	int status;

	snprintf(dir, sizeof dir, "%s/cdptest.XXXXXX",
	         getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 40 ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	um = umask(022);

	/* a new file: a hidden temporary beside it, the umask's mode, renamed */
	CHECK_RC(cdp_out_open(&o, tp("new.txt"), CDP_OUT_SEEK, 0666, err, sizeof err), CDP_OK);
	CHECK(o.tmp && strncmp(o.tmp, tp(".new.txt.cdp-tmp."), strlen(tp(".new.txt.cdp-tmp."))) == 0,
	      "temporary '%s'", o.tmp ? o.tmp : "(none)");
	{
		int elsewhere = -1;
		CHECK(o.tmp && cdp_out_is_tmp(strrchr(o.tmp, '/') + 1, &pid, &elsewhere) &&
		      pid == (long)getpid() && elsewhere == 0, "the temporary follows the rule");
		/* ".PID-MARK.": this host's and PID namespace's mark */
		if (o.tmp) {
			const char *t = strstr(o.tmp, ".cdp-tmp.") + 9;
			snprintf(mark, sizeof mark, "%.8s", t + strcspn(t, "-") + 1);
		}
	}
	CHECK(cdp_out_live() == 1, "one live temporary");
	CHECK(access(tp("new.txt"), F_OK) != 0, "nothing at the target before commit");
	wr(&o, "one");
	CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
	CHECK(has("new.txt", "one"), "committed");
	CHECK(stat(tp("new.txt"), &st) == 0 && (st.st_mode & 0777) == 0644, "mode %o",
	      (unsigned)(st.st_mode & 0777));
	CHECK(temporaries() == 0 && cdp_out_live() == 0, "no temporary left");

	/* a replaced file keeps its mode (a private 0600 file stayed 0644 under
	 * umask 022), also one GDAL writes by name (NOFD); as root its owner
	 * and group too */
	CHECK(chmod(tp("new.txt"), 0600) == 0, "chmod");
	CHECK_RC(cdp_out_open(&o, tp("new.txt"), CDP_OUT_SEEK, 0666, err, sizeof err), CDP_OK);
	wr(&o, "two");
	CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
	CHECK(has("new.txt", "two") && stat(tp("new.txt"), &st) == 0 && (st.st_mode & 07777) == 0600,
	      "replaced 0600 file: mode %o", (unsigned)(st.st_mode & 07777));
	CHECK(chmod(tp("new.txt"), 0751) == 0, "chmod");
	if (geteuid() == 0)
		CHECK(chown(tp("new.txt"), 4321, 4322) == 0, "chown");
	CHECK_RC(cdp_out_open(&o, tp("new.txt"), CDP_OUT_SEEK | CDP_OUT_NOFD, 0666, err, sizeof err),
	         CDP_OK);
	put_at(o.tmp, "three");
	CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
	CHECK(has("new.txt", "three") && stat(tp("new.txt"), &st) == 0 && (st.st_mode & 07777) == 0751,
	      "replaced 0751 file (NOFD): mode %o", (unsigned)(st.st_mode & 07777));
	if (geteuid() == 0)
		CHECK(st.st_uid == 4321 && st.st_gid == 4322, "owner %u:%u kept", (unsigned)st.st_uid,
		      (unsigned)st.st_gid);
	CHECK(chmod(tp("new.txt"), 0644) == 0 && (geteuid() != 0 || chown(tp("new.txt"), 0, 0) == 0),
	      "mode back");
	put("new.txt", "one");

	/* abort leaves an existing file and removes the temporary and side files */
	CHECK_RC(cdp_out_open(&o, tp("new.txt"), CDP_OUT_SEEK | CDP_OUT_NOFD, 0666, err, sizeof err),
	         CDP_OK);
	CHECK(o.fd == -1, "NOFD closes the temporary");
	snprintf(name, sizeof name, "%s.aux.xml", o.tmp);
	close(open(name, O_WRONLY | O_CREAT, 0666));
	snprintf(name, sizeof name, "%s-journal", o.tmp);
	close(open(name, O_WRONLY | O_CREAT, 0666));
	cdp_out_abort(&o);
	CHECK(has("new.txt", "one") && temporaries() == 0, "abort touched only its temporaries");
	cdp_out_abort(&o);      /* twice is harmless */
	/* a zeroed one too: its fd 0 is standard input (made open here,
	 * whatever the harness gave) */
	{
		int k = open(tp("new.txt"), O_RDONLY);
		CHECK(k >= 0 && (k == 0 || dup2(k, 0) == 0), "standard input");
		if (k > 0)
			close(k);
	}
	memset(&o2, 0, sizeof o2);
	cdp_out_abort(&o2);
	CHECK(fcntl(0, F_GETFD) >= 0, "aborting a zeroed output closed standard input");

	/* a symbolic link is followed and stays a link */
	put("real.txt", "old");
	CHECK(symlink("real.txt", tp("link.txt")) == 0, "symlink");
	CHECK_RC(cdp_out_open(&o, tp("link.txt"), CDP_OUT_SEEK, 0666, err, sizeof err), CDP_OK);
	wr(&o, "new");
	CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
	CHECK(lstat(tp("link.txt"), &st) == 0 && S_ISLNK(st.st_mode), "the link stays a link");
	CHECK(has("real.txt", "new"), "its target holds the output");

	/* a FIFO: refused as seekable, written in place as a stream */
	CHECK(mkfifo(tp("fifo"), 0600) == 0, "mkfifo");
	CHECK_RC(cdp_out_open(&o, tp("fifo"), CDP_OUT_SEEK, 0666, err, sizeof err), CDP_ESPECIAL);
	CHECK(strstr(err, "fifo'") && strstr(err, "a FIFO, not a regular file"), "err '%s'", err);
	CHECK_RC(cdp_out_check(tp("fifo"), CDP_OUT_STREAM, err, sizeof err), CDP_OK);
	{
		pid_t r = fork();
		if (r == 0) {
			char buf[16] = "";
			int fd = open(tp("fifo"), O_RDONLY);
			ssize_t k = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
			_exit(k == 6 && strcmp(buf, "stream") == 0 ? 0 : 1);
		}
		CHECK_RC(cdp_out_open(&o, tp("fifo"), CDP_OUT_STREAM, 0666, err, sizeof err), CDP_OK);
		CHECK(o.inplace && !o.tmp, "a FIFO is written in place");
		wr(&o, "stream");
		CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
		CHECK(waitpid(r, &status, 0) == r && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the reader got the stream");
	}
	CHECK(lstat(tp("fifo"), &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO is still a FIFO");

	/* a character device (1,3: a null device) */
	if (mknod(tp("null"), S_IFCHR | 0666, makedev(1, 3)) == 0) {
		CHECK_RC(cdp_out_check(tp("null"), CDP_OUT_SEEK, err, sizeof err), CDP_ESPECIAL);
		CHECK(strstr(err, "a character device"), "err '%s'", err);
		CHECK_RC(cdp_out_open(&o, tp("null"), CDP_OUT_STREAM, 0666, err, sizeof err), CDP_OK);
		wr(&o, "gone");
		CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
		CHECK(lstat(tp("null"), &st) == 0 && S_ISCHR(st.st_mode), "the device stays");
	} else {
		printf("# mknod: %s (not root?): device case skipped\n", strerror(errno));
	}

	/* a directory, and "-" */
	CHECK(mkdir(tp("sub"), 0755) == 0, "mkdir");
	CHECK_RC(cdp_out_open(&o, tp("sub"), CDP_OUT_STREAM, 0666, err, sizeof err), CDP_ESPECIAL);
	CHECK(strstr(err, "a directory"), "err '%s'", err);
	CHECK_RC(cdp_out_open(&o, "-", CDP_OUT_STREAM, 0666, err, sizeof err), CDP_OK);
	CHECK(o.fd == 1 && o.inplace, "- is standard output");
	CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
	CHECK(fcntl(1, F_GETFD) >= 0, "standard output stays open");

	/* a missing folder, caught by the up-front check as open would */
	CHECK_RC(cdp_out_open(&o, tp("nodir/x"), CDP_OUT_SEEK, 0666, err, sizeof err), ENOENT);
	CHECK(strstr(err, "cannot create '") && strstr(err, "No such file"), "err '%s'", err);
	err[0] = '\0';
	CHECK_RC(cdp_out_check(tp("nodir/x"), CDP_OUT_SEEK, err, sizeof err), ENOENT);
	CHECK(strstr(err, "cannot create '") && strstr(err, "nodir/x': No such file"), "err '%s'", err);
	CHECK_RC(cdp_out_check(tp("nodir/x"), CDP_OUT_STREAM, err, sizeof err), ENOENT);
	CHECK_RC(cdp_out_check(tp("new.txt/x"), CDP_OUT_SEEK, err, sizeof err), ENOTDIR);
	CHECK_RC(cdp_out_check(tp("nodir/x"), CDP_OUT_SEEK | CDP_OUT_NEWDIR, err, sizeof err),
	         CDP_OK);
	CHECK(symlink("nodir/x", tp("dangling")) == 0, "symlink");
	CHECK_RC(cdp_out_check(tp("dangling"), CDP_OUT_SEEK, err, sizeof err), ENOENT);
	CHECK_RC(cdp_out_check(tp("fresh"), CDP_OUT_SEEK, err, sizeof err), CDP_OK);
	CHECK_RC(cdp_out_check("-", CDP_OUT_STREAM, err, sizeof err), CDP_OK);
	CHECK(cdp_out_inplace("-") && cdp_out_inplace(tp("fifo")) && !cdp_out_inplace(tp("new.txt")) &&
	      !cdp_out_inplace(tp("fresh")), "what is written in place");

	/* a checkpoint is kept from every writer but the checkpoint's */
	put("model.cdpt", CDP_OUT_CKPT_MAGIC "rest");
	CHECK(cdp_out_is_ckpt(tp("model.cdpt")) && !cdp_out_is_ckpt(tp("new.txt")) &&
	      !cdp_out_is_ckpt(tp("fifo")), "checkpoints told apart");
	CHECK_RC(cdp_out_check(tp("model.cdpt"), CDP_OUT_SEEK, err, sizeof err), CDP_EKEEP);
	CHECK(strstr(err, "refusing to replace '") &&
	      strstr(err, "model.cdpt': it is a cdpool checkpoint"), "err '%s'", err);
	CHECK_RC(cdp_out_open(&o, tp("model.cdpt"), CDP_OUT_STREAM, 0666, err, sizeof err),
	         CDP_EKEEP);
	CHECK(symlink("model.cdpt", tp("ckpt-link")) == 0, "symlink");
	CHECK_RC(cdp_out_open(&o, tp("ckpt-link"), CDP_OUT_SEEK | CDP_OUT_NOFD, 0666, err,
	                      sizeof err), CDP_EKEEP);
	CHECK(has("model.cdpt", CDP_OUT_CKPT_MAGIC "rest") && temporaries() == 0,
	      "a refused checkpoint is untouched");
	CHECK_RC(cdp_out_open(&o, tp("model.cdpt"), CDP_OUT_SEEK | CDP_OUT_CKPT, 0666, err,
	                      sizeof err), CDP_OK);
	wr(&o, CDP_OUT_CKPT_MAGIC "next");
	CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
	CHECK(has("model.cdpt", CDP_OUT_CKPT_MAGIC "next"), "the checkpoint writer replaced it");
	put("short", "CDPCK");
	CHECK_RC(cdp_out_check(tp("short"), CDP_OUT_SEEK, err, sizeof err), CDP_OK);

	/* an LMDB database's files (a pool's data.mdb and lock.mdb), kept
	 * from every writer but the pool's */
	{
		MDB_env *env;
		MDB_txn *txn;
		CHECK(mkdir(tp("pool"), 0755) == 0, "mkdir pool");
		CHECK(mdb_env_create(&env) == 0 && mdb_env_open(env, tp("pool"), 0, 0644) == 0 &&
		      mdb_txn_begin(env, NULL, 0, &txn) == 0 && mdb_txn_commit(txn) == 0, "lmdb");
		mdb_env_close(env);
		CHECK_RC(cdp_out_check(tp("pool/data.mdb"), CDP_OUT_SEEK, err, sizeof err), CDP_EKEEP);
		CHECK(strstr(err, "data.mdb': it is an LMDB database file"), "err '%s'", err);
		CHECK_RC(cdp_out_check(tp("pool/lock.mdb"), CDP_OUT_STREAM, err, sizeof err), CDP_EKEEP);
		CHECK_RC(cdp_out_check(tp("pool/data.mdb"), CDP_OUT_SEEK | CDP_OUT_CKPT, err,
		                       sizeof err), CDP_EKEEP);
		CHECK_RC(cdp_out_check(tp("pool/data.mdb"), CDP_OUT_SEEK | CDP_OUT_POOL, err,
		                       sizeof err), CDP_OK);
		CHECK(!cdp_out_is_ckpt(tp("pool/data.mdb")), "data.mdb is no checkpoint");
	}

	/* GDAL's side file goes beside the name given, a link's: GDAL opening
	 * the link reads LINK.aux.xml; the target's own described the file
	 * replaced, and goes */
	{
		char aux[PATH_MAX];
		CHECK_RC(cdp_out_aux_name("a/m.tif", aux, sizeof aux), CDP_OK);
		CHECK(strcmp(aux, "a/m.tif.aux.xml") == 0, "aux name '%s'", aux);
		CHECK_RC(cdp_out_aux_name("m.tif", aux, 8), ENAMETOOLONG);
		/* GDAL's virtual file systems are "/vsi" NAME "/"; "/vsi" alone
		 * is a plain name */
		CHECK_RC(cdp_out_vsi("/vsimem/x.tif", err, sizeof err), CDP_ESPECIAL);
		CHECK_RC(cdp_out_vsi("/vsi7z/a.7z/x.tif", NULL, 0), CDP_ESPECIAL);
		CHECK_RC(cdp_out_vsi("/vsicurl_streaming/x", NULL, 0), CDP_ESPECIAL);
		CHECK_RC(cdp_out_vsi("/vsi-data/x.tif", NULL, 0), CDP_OK);
		CHECK_RC(cdp_out_vsi("/vsidata.tif", NULL, 0), CDP_OK);
		CHECK_RC(cdp_out_vsi("/vsi/x.tif", NULL, 0), CDP_OK);
		CHECK_RC(cdp_out_vsi("/vsiMem/x.tif", NULL, 0), CDP_OK);
		/* the extension that says an output's format */
		{
			static const char *const tif[] = { ".tif", ".tiff", NULL };
			CHECK(strcmp(cdp_out_ext("a/map.TIF"), ".TIF") == 0, "ext of map.TIF");
			CHECK(*cdp_out_ext("a.b/map") == '\0' && *cdp_out_ext("d/.hidden") == '\0',
			      "an extension in a folder's name or a hidden name's dot");
			CHECK(cdp_out_ext_is("x.TiFF", tif) && !cdp_out_ext_is("x.tif.png", tif),
			      "cdp_out_ext_is");
			CHECK_RC(cdp_out_check_ext("-o", "m.TIFF", tif, "the map is a GeoTIFF", "-o OUT.tif",
			                           err, sizeof err), CDP_OK);
			CHECK_RC(cdp_out_check_ext("-o", "m.jpg", tif, "the map is a GeoTIFF", "-o OUT.tif",
			                           err, sizeof err), CDP_EINVAL);
			CHECK(strcmp(err, "-o 'm.jpg': the map is a GeoTIFF, which '.jpg' does not name: "
			             "give -o OUT.tif") == 0, "message '%s'", err);
			CHECK_RC(cdp_out_check_ext("-o", "a.b/m", tif, "the map is a GeoTIFF", "-o OUT.tif",
			                           err, sizeof err), CDP_EINVAL);
			CHECK(strcmp(err, "-o 'a.b/m': the map is a GeoTIFF, which a name without an "
			             "extension does not say: give -o OUT.tif") == 0, "message '%s'", err);
		}
		/* a file can be made there: a temporary made and removed; a
		 * folder that is a regular file cannot hold one */
		put("plain", "x");
		CHECK_RC(cdp_out_probe(tp("probe.png"), CDP_OUT_SEEK, err, sizeof err), CDP_OK);
		CHECK(temporaries() == 0 && cdp_out_live() == 0 && access(tp("probe.png"), F_OK) != 0,
		      "the probe left a file");
		CHECK_RC(cdp_out_probe(tp("plain/p.png"), CDP_OUT_SEEK, err, sizeof err), ENOTDIR);
		CHECK(strstr(err, "plain/p.png': Not a directory") != NULL,
		      "message '%s'", err);
		CHECK_RC(cdp_out_probe("-", CDP_OUT_STREAM, err, sizeof err), CDP_OK);
		unlink(tp("plain"));
		CHECK(mkdir(tp("tgt"), 0755) == 0, "mkdir");
		put("tgt/real.tif", "old");
		put("tgt/real.tif.aux.xml", "old side");
		CHECK(symlink("tgt/real.tif", tp("map.tif")) == 0, "symlink");
		CHECK_RC(cdp_out_open(&o, tp("map.tif"), CDP_OUT_SEEK | CDP_OUT_NOFD | CDP_OUT_AUX,
		                      0666, err, sizeof err), CDP_OK);
		snprintf(name, sizeof name, "%s.aux.xml", o.tmp);
		put_at(o.tmp, "new");
		put_at(name, "new side");
		CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
		CHECK(lstat(tp("map.tif"), &st) == 0 && S_ISLNK(st.st_mode), "the link stays a link");
		CHECK(has("tgt/real.tif", "new") && has("map.tif.aux.xml", "new side"),
		      "the side file beside the link");
		CHECK(access(tp("tgt/real.tif.aux.xml"), F_OK) != 0, "the target's stale side file left");
		CHECK(temporaries() == 0 && temporaries_in(tp("tgt")) == 0, "temporaries left");
		/* a file without a side file: a stale one goes */
		CHECK_RC(cdp_out_open(&o, tp("map.tif"), CDP_OUT_SEEK | CDP_OUT_AUX, 0666, err,
		                      sizeof err), CDP_OK);
		wr(&o, "plain");
		CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
		CHECK(has("tgt/real.tif", "plain") && access(tp("map.tif.aux.xml"), F_OK) != 0,
		      "a stale side file kept");
		/* a side file that cannot take its name (a folder of that name;
		 * alike a name too long) fails the commit before the file is
		 * replaced, naming the side file; with or without a new one */
		put("box.tif", "old");
		CHECK(mkdir(tp("box.tif.aux.xml"), 0755) == 0, "mkdir");
		for (int with = 0; with < 2; with++) {
			CHECK_RC(cdp_out_open(&o, tp("box.tif"), CDP_OUT_SEEK | CDP_OUT_NOFD | CDP_OUT_AUX,
			                      0666, err, sizeof err), CDP_OK);
			put_at(o.tmp, "new");
			snprintf(name, sizeof name, "%s.aux.xml", o.tmp);
			if (with)
				put_at(name, "new side");
			CHECK(cdp_out_commit(&o, err, sizeof err) != CDP_OK, "a folder took the side file");
			CHECK(strstr(err, "box.tif.aux.xml': ") != NULL, "message '%s'", err);
			CHECK(has("box.tif", "old") && temporaries() == 0, "the file was replaced (%d)", with);
		}
		rmdir(tp("box.tif.aux.xml"));
		/* every GDAL side file of the file replaced goes (an old .msk
		 * would mask the new map, an old .ovr serve as its overviews),
		 * the temporary's own take their names */
		put("s.tif", "old");
		put("s.tif.ovr", "old overviews");
		put("s.tif.msk", "old mask");
		put("s.tif.aux.xml", "old stats");
		put("s.tfw", "old world");
		put("s.TIFW", "old world");
		put("s.wld", "another raster's");
		CHECK_RC(cdp_out_open(&o, tp("s.tif"), CDP_OUT_SEEK | CDP_OUT_NOFD | CDP_OUT_AUX,
		                      0666, err, sizeof err), CDP_OK);
		put_at(o.tmp, "new");
		snprintf(name, sizeof name, "%s.ovr", o.tmp);
		put_at(name, "new overviews");
		CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
		CHECK(has("s.tif", "new") && has("s.tif.ovr", "new overviews"), "the new side file");
		CHECK(access(tp("s.tif.msk"), F_OK) != 0 && access(tp("s.tif.aux.xml"), F_OK) != 0,
		      "a stale side file kept");
		/* a world file may be another raster's (s.tfw is s.tiff's too):
		 * left alone (before: s.tiff lost its georeferencing) */
		CHECK(has("s.tfw", "old world") && has("s.TIFW", "old world") &&
		      has("s.wld", "another raster's"), "a world file removed");
		CHECK(temporaries() == 0, "temporaries left");
		/* all or nothing: a side file that cannot take its name puts
		 * back those moved before it */
		put("s.tif.ovr", "old overviews");
		put("s.tif.aux.xml", "old stats");
		CHECK(mkdir(tp("s.tif.msk"), 0755) == 0, "mkdir");
		CHECK_RC(cdp_out_open(&o, tp("s.tif"), CDP_OUT_SEEK | CDP_OUT_NOFD | CDP_OUT_AUX,
		                      0666, err, sizeof err), CDP_OK);
		put_at(o.tmp, "newer");
		CHECK(cdp_out_commit(&o, err, sizeof err) != CDP_OK, "a folder took the mask's name");
		CHECK(strstr(err, "s.tif.msk': ") != NULL, "message '%s'", err);
		CHECK(has("s.tif", "new") && has("s.tif.ovr", "old overviews") &&
		      has("s.tif.aux.xml", "old stats") && temporaries() == 0,
		      "a failed commit changed the old set");
		rmdir(tp("s.tif.msk"));
	}
	/* the link's folder on another file system than its target's: the
	 * side file cannot be renamed across, it is copied beside the link */
	{
		const char *shm = "/dev/shm";
		char far[128], link2[300], side2[320];
		struct stat a, b;
		snprintf(far, sizeof far, "%s/cdptest-out.%ld", shm, (long)getpid());
		if (stat(shm, &a) == 0 && stat(dir, &b) == 0 && a.st_dev != b.st_dev &&
		    mkdir(far, 0755) == 0) {
			snprintf(link2, sizeof link2, "%s/real.tif", far);
			CHECK(symlink(link2, tp("far.tif")) == 0, "symlink");
			CHECK_RC(cdp_out_open(&o, tp("far.tif"), CDP_OUT_SEEK | CDP_OUT_AUX, 0666, err,
			                      sizeof err), CDP_OK);
			wr(&o, "far");
			snprintf(side2, sizeof side2, "%s.aux.xml", o.tmp);
			put_at(side2, "far side");
			CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
			CHECK(has("far.tif", "far") && has("far.tif.aux.xml", "far side"),
			      "across file systems: '%s'", err);
			CHECK(temporaries() == 0 && temporaries_in(far) == 0 && cdp_out_live() == 0,
			      "across file systems: temporaries left");
			unlink(link2);
			rmdir(far);
		} else {
			printf("# %s is not another file system here: the copied side file is not tested\n",
			       shm);
		}
	}

	/* outputs against inputs and each other */
	put("in.txt", "input");
	CHECK_RC(cdp_fileset_add(&set, tp("in.txt"), "the input 'in.txt'"), CDP_OK);
	/* an input's GDAL side files, there or not yet, are no outputs */
	{
		const char *outs[2] = { tp("in.txt.ovr"), tp("in.txtx.msk") };
		CHECK_RC(cdp_out_check_sides(&set, 1, outs, err, sizeof err), CDP_EMISMATCH);
		CHECK(strstr(err, "in.txt.ovr': GDAL would read it as part of the input 'in.txt'") != NULL,
		      "message '%s'", err);
		CHECK_RC(cdp_out_check_sides(&set, 1, outs + 1, err, sizeof err), CDP_OK);
		/* an output whose side file (which its commit removes) is an
		 * input */
		put("in.txt.msk", "input");
		CHECK_RC(cdp_fileset_add(&set, tp("in.txt.msk"), "the input 'in.txt.msk'"), CDP_OK);
		outs[0] = tp("in.txt");
		CHECK_RC(cdp_out_check_sides(&set, 1, outs, err, sizeof err), CDP_EMISMATCH);
		CHECK(strstr(err, "in.txt.msk' goes with it, and that is the input 'in.txt.msk'") != NULL,
		      "message '%s'", err);
		/* a world file, which the commit leaves alone, is no reason to
		 * refuse: w.tfw is read for w.tiff */
		put("w.tfw", "input");
		CHECK_RC(cdp_fileset_add(&set, tp("w.tfw"), "'w.tfw', read for 'w.tiff'"), CDP_OK);
		outs[0] = tp("w.tif");
		CHECK_RC(cdp_out_check_sides(&set, 1, outs, err, sizeof err), CDP_OK);
	}
	{
		const char *outs[3] = { tp("a.out"), NULL, tp("in.txt") };
		const char *opts[3] = { "-o", "--log", "--trace" };
		CHECK_RC(cdp_out_check_set(&set, 3, outs, opts, err, sizeof err), CDP_EMISMATCH);
		CHECK(strstr(err, "refusing to write '") && strstr(err, "it is the input 'in.txt'"),
		      "err '%s'", err);
		outs[1] = tp("./a.out");
		outs[2] = NULL;
		CHECK_RC(cdp_out_check_set(&set, 3, outs, opts, err, sizeof err), CDP_EMISMATCH);
		CHECK(strstr(err, "-o '") && strstr(err, "--log '") && strstr(err, "are the same file"),
		      "err '%s'", err);
		outs[1] = tp("b.out");
		CHECK_RC(cdp_out_check_set(&set, 3, outs, opts, err, sizeof err), CDP_OK);
		/* two outputs on standard output: one stream of both, refused */
		outs[0] = "-";
		CHECK_RC(cdp_out_check_set(&set, 3, outs, opts, err, sizeof err), CDP_OK);
		outs[2] = "-";
		CHECK_RC(cdp_out_check_set(&set, 3, outs, opts, err, sizeof err), CDP_EMISMATCH);
		CHECK(strcmp(err, "-o '-' and --trace '-' are the same file, standard output") == 0,
		      "err '%s'", err);
	}
	cdp_fileset_free(&set);

	/* every error return fills err: an empty name, an o never opened */
	{
		cdp_out z;
		memset(&z, 0, sizeof z);
		strcpy(err, "stale");
		CHECK_RC(cdp_out_check("", CDP_OUT_STREAM, err, sizeof err), CDP_EINVAL);
		CHECK(strcmp(err, "an empty file name") == 0, "check '': err '%s'", err);
		strcpy(err, "stale");
		CHECK_RC(cdp_out_open(&o, "", CDP_OUT_SEEK, 0666, err, sizeof err), CDP_EINVAL);
		CHECK(strcmp(err, "an empty file name") == 0, "open '': err '%s'", err);
		strcpy(err, "stale");
		CHECK_RC(cdp_out_commit(&z, err, sizeof err), CDP_EINVAL);
		CHECK(strstr(err, "not opened") != NULL, "commit of nothing: err '%s'", err);
	}

	/* the name rule */
	{
		int el = -1;
		char nm[64], other[9];
		CHECK(cdp_out_is_tmp(".x.tif.cdp-tmp.123.AbC9zz", &pid, &el) && pid == 123 && el == 0,
		      "rule (no mark: judged by its PID, as before marks)");
		CHECK(cdp_out_is_tmp(".x.gpkg.cdp-tmp.123.AbC9zz-journal", &pid, NULL), "side file");
		CHECK(!cdp_out_is_tmp("x.tif.cdp-tmp.123.AbC9zz", &pid, NULL), "not hidden");
		CHECK(!cdp_out_is_tmp(".x.tif.cdp-tmp.123.AbC9z", &pid, NULL), "short suffix");
		CHECK(!cdp_out_is_tmp(".x.tif.cdp-tmp.123.AbC9zz.bak", &pid, NULL), "other suffix");
		CHECK(!cdp_out_is_tmp(".x.tif.tmp.123", &pid, NULL), "old names are not ours");
		CHECK(!cdp_out_is_tmp(".x.tif.cdp-tmp.123-0a1b2c.AbC9zz", &pid, NULL), "short mark");
		CHECK(!cdp_out_is_tmp(".x.tif.cdp-tmp.123-0A1B2C3D.AbC9zz", &pid, NULL), "mark case");
		snprintf(nm, sizeof nm, ".x.tif.cdp-tmp.123-%s.AbC9zz", mark);
		CHECK(cdp_out_is_tmp(nm, &pid, &el) && pid == 123 && el == 0, "our mark: '%s'", nm);
		snprintf(other, sizeof other, "%08lx", strtoul(mark, NULL, 16) ^ 1UL);
		snprintf(nm, sizeof nm, ".x.tif.cdp-tmp.123-%s.AbC9zz.aux.xml", other);
		CHECK(cdp_out_is_tmp(nm, &pid, &el) && pid == 123 && el == 1, "another mark: '%s'", nm);
	}

	/* SIGTERM with the default action: the live temporaries go */
	{
		pid_t r = fork();
		if (r == 0) {
			cdp_out a, b;
			if (cdp_out_open(&a, tp("s1"), CDP_OUT_SEEK, 0666, NULL, 0) ||
			    cdp_out_open(&b, tp("s2"), CDP_OUT_SEEK | CDP_OUT_NOFD, 0666, NULL, 0))
				_exit(3);
			raise(SIGTERM);
			_exit(4);
		}
		CHECK(waitpid(r, &status, 0) == r && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM,
		      "killed by SIGTERM (status %d)", status);
		CHECK(temporaries() == 0, "SIGTERM left %d temporaries", temporaries());
	}
	/* a program's own handler runs instead, and the temporary stays for it */
	{
		pid_t r = fork();
		if (r == 0) {
			struct sigaction sa;
			cdp_out a;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = own_handler;
			sigemptyset(&sa.sa_mask);
			sigaction(SIGTERM, &sa, NULL);
			if (cdp_out_open(&a, tp("s3"), CDP_OUT_SEEK, 0666, NULL, 0))
				_exit(3);
			raise(SIGTERM);
			if (!stopped || access(a.tmp, F_OK) != 0)
				_exit(5);
			wr(&a, "saved");
			_exit(cdp_out_commit(&a, NULL, 0) == 0 ? 0 : 6);
		}
		CHECK(waitpid(r, &status, 0) == r && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the program's handler ran and it committed (status %d)", status);
		CHECK(has("s3", "saved"), "committed after its own handler");
	}
	/* held over a set of commits: delivered after the last rename, whichever
	 * thread it reaches, and only when the outermost hold ends */
	held_commit("h1", "h2", 1, 0);
	held_commit("h3", "h4", 0, 1);
	/* SIGKILL leaves a temporary; the sweep removes it once its PID is gone */
	{
		pid_t r = fork();
		if (r == 0) {
			cdp_out a;
			if (cdp_out_open(&a, tp("s4"), CDP_OUT_SEEK, 0666, NULL, 0))
				_exit(3);
			raise(SIGKILL);
			_exit(4);
		}
		CHECK(waitpid(r, &status, 0) == r && WIFSIGNALED(status), "killed");
		CHECK(temporaries() == 1, "SIGKILL leaves its temporary");
		snprintf(foreign, sizeof foreign, "%s/.s6.cdp-tmp.%ld-%08lx.AbCdEf", dir, (long)r,
		         strtoul(mark, NULL, 16) ^ 1UL);
		CHECK_RC(cdp_out_open(&o2, tp("s5"), CDP_OUT_SEEK, 0666, err, sizeof err), CDP_OK);
		/* the dead one's name with another host's or PID namespace's
		 * mark: a live writer there, whose PID means nothing here (the
		 * sweep deleted a container's live temporary) */
		{
			const char *t = strstr(o2.tmp, ".cdp-tmp.") + 9;
			CHECK(strncmp(t + strcspn(t, "-") + 1, mark, 8) == 0, "one mark per process");
			close(open(foreign, O_WRONLY | O_CREAT | O_EXCL, 0600));
		}
		CHECK_RC(cdp_out_sweep(dir, NULL, &n), CDP_OK);
		CHECK(n == 1 && temporaries() == 2,
		      "the dead one swept (%zu), a live one and one from elsewhere kept", n);
		/* names the caller writes under its lock: their temporaries go
		 * whatever their mark and PID (a job killed on another node),
		 * but for this process's own; others' stay */
		{
			static const char *const others[] = { "s6.x", "s", "s5", NULL };
			static const char *const locked[] = { "s5", "s6", NULL };
			char mine[PATH_MAX + 16], lk[PATH_MAX], lkside[PATH_MAX + 16], user[PATH_MAX];
			snprintf(lk, sizeof lk, "%s/.s6.cdp-tmp.%ld-%08lx.AbCdEg", dir, (long)getpid(),
			         strtoul(mark, NULL, 16) ^ 1UL);
			snprintf(lkside, sizeof lkside, "%s.aux.xml", lk);
			/* the temporary of a user's file "s6.cdp-tmp.1-....AbCdEf" */
			snprintf(user, sizeof user, "%s/.s6.cdp-tmp.1-0badf00d.AbCdEf.cdp-tmp.1-0badf00d."
			         "AbCdEf", dir);
			close(open(lk, O_WRONLY | O_CREAT | O_EXCL, 0600));
			close(open(lkside, O_WRONLY | O_CREAT | O_EXCL, 0600));
			close(open(user, O_WRONLY | O_CREAT | O_EXCL, 0600));
			snprintf(mine, sizeof mine, "%s", o2.tmp);
			CHECK_RC(cdp_out_sweep(dir, others, &n), CDP_OK);
			CHECK(n == 0 && temporaries() == 5, "names not locked: kept (%zu)", n);
			CHECK_RC(cdp_out_sweep(dir, locked, &n), CDP_OK);
			CHECK(n == 3 && access(foreign, F_OK) != 0 && access(lk, F_OK) != 0 &&
			      access(lkside, F_OK) != 0,
			      "a locked name's temporaries from elsewhere swept (%zu)", n);
			CHECK(access(mine, F_OK) == 0, "this process's own kept under the lock");
			CHECK(access(user, F_OK) == 0, "another name's kept under the lock");
			unlink(user);
		}
		cdp_out_abort(&o2);
		CHECK(temporaries() == 0, "none left");
	}

	umask(um);
	{
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		CHECK(system(cmd) == 0, "cleanup");
	}
	return tap_done();
}
