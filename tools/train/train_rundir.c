/* train_rundir.c: who may write RUNDIR, and over what (cdp-train(1), "THE
 * RUN DIRECTORY"). Rank 0 writes every file of the run there, so rank 0
 * alone applies both rules, before the first step:
 *
 *  - One job at a time. Rank 0 holds an fcntl(2) write lock on
 *    RUNDIR/.lock for the whole run. The kernel drops it when the process
 *    ends, however it ends, so a killed run leaves no stale lock, only the
 *    unlocked file, which the next run takes. fcntl rather than flock(2):
 *    NFS's lock manager serves fcntl locks, so a run directory on storage
 *    that several hosts share is guarded too. The file holds the owner's
 *    "host H, pid P" for the message of a job that finds it locked; a run that
 *    ends removes it while it still holds the lock.
 *  - An earlier run is neither continued nor replaced by accident: when
 *    RUNDIR holds a file cdp-train writes (rundir_files, and --trace FILE
 *    when FILE lies in RUNDIR), the run needs --resume to continue it or
 *    --overwrite to start over, which removes those files and nothing else
 *    (and is refused when --init names one of them).
 *    Only regular files count: cdp-train writes no other kind, and the
 *    output checks (train_log.c) judge a link or a device in their place.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdp_out.h"
#include "train_int.h"

/* every file a run writes in RUNDIR under a fixed name */
static const char *const rundir_files[] = {
	"checkpoint.cdpt", "best.cdpt", "metrics.jsonl", "train.log", "loss.png"
};
#define NFILES (sizeof rundir_files / sizeof rundir_files[0])

/* The --trace file when it lies in RUNDIR itself (by the directory's
 * inode, so "RUNDIR/./t.json" or a link to RUNDIR count), else NULL. */
static const char *trace_in_rundir(const trainer *t)
{
	const char *f = t->o->trace, *slash;
	char dir[4096];
	struct stat a, b;

	if (!f)
		return NULL;
	slash = strrchr(f, '/');
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - f + (slash == f)), f);
	if (stat(dir, &a) != 0 || stat(t->o->out, &b) != 0 || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino)
		return NULL;
	return slash ? slash + 1 : f;
}

/* The run's files present in RUNDIR, as "a, b, c" into list; how many. */
static int run_files(const trainer *t, char *list, size_t cap)
{
	const char *names[NFILES + 1], *tr = trace_in_rundir(t);
	char path[4200];
	struct stat st;
	size_t len = 0, n = 0;
	int found = 0;

	for (size_t i = 0; i < NFILES; i++)
		names[n++] = rundir_files[i];
	if (tr && *tr)
		names[n++] = tr;
	list[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/%s", t->o->out, names[i]);
		/* a link at a run file's name counts as one: writing would go
		 * through it into whatever it names (another run's checkpoint) */
		if (lstat(path, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
			continue;
		if (len < cap)
			len += (size_t)snprintf(list + len, cap - len, "%s%s", found ? ", " : "",
			                        names[i]);
		found++;
	}
	return found;
}

/* The lock of RUNDIR/.lock, or -1 with err (0 without the lock, after a
 * warning, where the file system has no locks). Locked, the file is checked
 * to still be the one at the path: a run that ended may have removed it
 * between this open and this lock, and a lock on a removed file guards
 * nothing. */
static int take_lock(trainer *t, char *err, size_t cap)
{
	char path[4200], holder[128] = "";
	struct flock fl;
	struct stat a, b;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "%s/.lock", t->o->out);
	for (int tries = 0; tries < 100; tries++) {
		if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644)) < 0)
			return tr_fail(err, cap, "cannot lock '%s': %s", path, strerror(errno));
		memset(&fl, 0, sizeof fl);
		fl.l_type = F_WRLCK;
		fl.l_whence = SEEK_SET;
		if (fcntl(fd, F_SETLK, &fl) != 0) {
			int e = errno;
			if (e == EACCES || e == EAGAIN) {
				n = pread(fd, holder, sizeof holder - 1, 0);
				holder[n > 0 ? n : 0] = '\0';
				holder[strcspn(holder, "\n")] = '\0';
				for (char *c = holder; *c; c++)
					if ((unsigned char)*c < 0x20 || *c == 0x7f)
						*c = '?';
			}
			close(fd);
			/* a file system without locks (NFS without its lock
			 * manager) must not keep every run out */
			if (e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS) {
				fprintf(stderr, "cdp-train: warning: cannot lock '%s': %s: nothing keeps "
				        "another job out of '%s'\n", path, strerror(e), t->o->out);
				return 0;
			}
			if (e != EACCES && e != EAGAIN)
				return tr_fail(err, cap, "cannot lock '%s': %s", path, strerror(e));
			return tr_fail(err, cap, "'%s' is in use by another cdp-train%s%s%s: one job a run "
			               "directory at a time", t->o->out, holder[0] ? " (" : "", holder,
			               holder[0] ? ")" : "");
		}
		if (fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			break;
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		return tr_fail(err, cap, "cannot lock '%s': it keeps being replaced", path);
	strcpy(holder, "host ");
	if (gethostname(holder + 5, 64) != 0)
		snprintf(holder + 5, 64, "?");
	holder[5 + 63] = '\0';
	snprintf(holder + strlen(holder), sizeof holder - strlen(holder), ", pid %ld\n",
	         (long)getpid());
	/* the holder is only a message's detail: a failed write keeps the lock */
	if (ftruncate(fd, 0) == 0 && pwrite(fd, holder, strlen(holder), 0) < 0)
		holder[0] = '\0';
	t->lock_fd = fd;
	t->have_lock = 1;
	return 0;
}

/* --overwrite with an --init file that is one of the files it removes
 * (by device and inode: RUNDIR/checkpoint.cdpt, best.cdpt, a link to one
 * of them or another name of one): refused with err, before anything is
 * removed. The weights would be read, then deleted with the run they came
 * from, and no input is ever overwritten. A link at a run file's name is
 * removed, not what it names, so it takes nothing from --init. */
static int init_removed(const trainer *t, char *err, size_t cap)
{
	const char *names[NFILES + 1], *tr = trace_in_rundir(t);
	char path[4200];
	struct stat in, st;
	size_t n = 0;

	if (!t->o->overwrite || !t->o->init || stat(t->o->init, &in) != 0)
		return 0;
	for (size_t i = 0; i < NFILES; i++)
		names[n++] = rundir_files[i];
	if (tr && *tr)
		names[n++] = tr;
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/%s", t->o->out, names[i]);
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == in.st_dev &&
		    st.st_ino == in.st_ino)
			return tr_fail(err, cap, "--init '%s': it is the run's '%s', which --overwrite "
			               "removes: copy it out of '%s' first, or continue the run with "
			               "--resume", t->o->init, path, t->o->out);
	}
	return 0;
}

int tr_rundir_open(trainer *t, char *err, size_t cap)
{
	const cdp_train_opts *o = t->o;
	char list[1024], path[4200];
	struct stat st;
	int nock, found;

	if (t->rank != 0)
		return 0;
	if (take_lock(t, err, cap) < 0)
		return -1;
	/* temporaries of a run killed outright (SIGKILL), whatever this run
	 * then does: refused, resumed or trained. Under the lock no live
	 * writer of the run's own files is left, so theirs go whatever host
	 * or boot made them (a job requeued on another node); without it
	 * (a file system with no locks) only those whose PID is dead here. */
	{
		const char *locked[NFILES + 1] = { 0 };

		for (size_t i = 0; t->have_lock && i < NFILES; i++)
			locked[i] = rundir_files[i];
		cdp_out_sweep(o->out, locked, NULL);
	}
	snprintf(path, sizeof path, "%s/checkpoint.cdpt", o->out);
	/* a run killed before its first checkpoint has nothing to resume:
	 * said before fetch_ckpt's "No such file or directory" */
	nock = lstat(path, &st) != 0 && errno == ENOENT;
	found = run_files(t, list, sizeof list);
	if (o->resume && nock)
		return found ? tr_fail(err, cap, "cannot resume: '%s' holds no checkpoint.cdpt (%s of "
		                       "a run stopped before its first checkpoint): nothing to resume; "
		                       "--overwrite starts over and removes those files", o->out, list)
		             : tr_fail(err, cap, "cannot resume: '%s' holds no checkpoint.cdpt, no run "
		                       "to resume (leave --resume out to start one)", o->out);
	if (init_removed(t, err, cap) < 0)
		return -1;
	if (o->resume || o->overwrite)
		return 0;
	if (found == 0) {
		t->fresh = 1;
		return 0;
	}
	if (nock)
		return tr_fail(err, cap, "'%s' holds a run without a checkpoint (%s), stopped before "
		               "its first one: nothing to resume; --overwrite starts over and removes "
		               "those files", o->out, list);
	return tr_fail(err, cap, "'%s' holds a run (%s): --resume continues it, --overwrite starts "
	               "over and removes those files", o->out, list);
}

int tr_rundir_clear(trainer *t, char *err, size_t cap)
{
	const char *tr = trace_in_rundir(t);
	char path[4200];
	struct stat st;

	if (t->rank != 0 || !t->o->overwrite)
		return 0;
	for (size_t i = 0; i < NFILES + 1; i++) {
		const char *name = i < NFILES ? rundir_files[i] : tr;
		if (!name || !*name)
			continue;
		snprintf(path, sizeof path, "%s/%s", t->o->out, name);
		/* a link goes, not what it names */
		if (lstat(path, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
			continue;
		if (unlink(path) != 0)
			return tr_fail(err, cap, "--overwrite: cannot remove '%s': %s", path,
			               strerror(errno));
	}
	t->fresh = 1;
	return 0;
}

void tr_rundir_abandon(trainer *t)
{
	char path[4200];

	if (!t->fresh)
		return;
	/* the two files opened before the first step, this run's own (fresh) */
	snprintf(path, sizeof path, "%s/metrics.jsonl", t->o->out);
	unlink(path);
	if (!t->o->log_path) {
		snprintf(path, sizeof path, "%s/train.log", t->o->out);
		unlink(path);
	}
}

void tr_rundir_close(trainer *t)
{
	char path[4200];

	if (!t->have_lock)
		return;
	/* removed while still held, so no other job can hold a lock on a file
	 * that is already gone (take_lock checks for that) */
	snprintf(path, sizeof path, "%s/.lock", t->o->out);
	unlink(path);
	close(t->lock_fd);
	t->have_lock = 0;
}
