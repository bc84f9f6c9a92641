/* test_out.c: the output-path policy (cdp_out.h): the temporary's name,
 * mode and removal, commit onto a new and an existing file, a symbolic link
 * followed and kept, FIFOs and character devices written in place as
 * streams and refused as seekable outputs, a directory refused, the checks
 * against inputs and other outputs, SIGTERM removing the live temporaries
 * (and a program's own handler left to run), and the sweep of a dead
 * process's leftovers.
 */
#include "tap.h"
#include "cdp_error.h"
#include "cdp_file.h"
#include "cdp_out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

static void put(const char *name, const char *text)
{
	FILE *f = fopen(tp(name), "w");
	CHECK(f != NULL, "cannot create %s", name);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
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

/* entries of dir other than . and .. whose name holds ".cdp-tmp." */
static int temporaries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strstr(e->d_name, ".cdp-tmp.") != NULL;
	if (d)
		closedir(d);
	return n;
}

static void wr(cdp_out *o, const char *text)
{
	CHECK(write(o->fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
}

static volatile sig_atomic_t stopped;
static void own_handler(int sig)
{
	(void)sig;
	stopped = 1;
}

int main(void)
{
	char err[512] = "", name[300];
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
	CHECK(o.tmp && cdp_out_is_tmp(strrchr(o.tmp, '/') + 1, &pid) && pid == (long)getpid(),
	      "the temporary follows the rule");
	CHECK(cdp_out_live() == 1, "one live temporary");
	CHECK(access(tp("new.txt"), F_OK) != 0, "nothing at the target before commit");
	wr(&o, "one");
	CHECK_RC(cdp_out_commit(&o, err, sizeof err), CDP_OK);
	CHECK(has("new.txt", "one"), "committed");
	CHECK(stat(tp("new.txt"), &st) == 0 && (st.st_mode & 0777) == 0644, "mode %o",
	      (unsigned)(st.st_mode & 0777));
	CHECK(temporaries() == 0 && cdp_out_live() == 0, "no temporary left");

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

	/* a missing folder */
	CHECK_RC(cdp_out_open(&o, tp("nodir/x"), CDP_OUT_SEEK, 0666, err, sizeof err), ENOENT);
	CHECK(strstr(err, "cannot create '") && strstr(err, "No such file"), "err '%s'", err);

	/* outputs against inputs and each other */
	put("in.txt", "input");
	CHECK_RC(cdp_fileset_add(&set, tp("in.txt"), "the input 'in.txt'"), CDP_OK);
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
	}
	cdp_fileset_free(&set);

	/* the name rule */
	CHECK(cdp_out_is_tmp(".x.tif.cdp-tmp.123.AbC9zz", &pid) && pid == 123, "rule");
	CHECK(cdp_out_is_tmp(".x.gpkg.cdp-tmp.123.AbC9zz-journal", &pid), "side file");
	CHECK(!cdp_out_is_tmp("x.tif.cdp-tmp.123.AbC9zz", &pid), "not hidden");
	CHECK(!cdp_out_is_tmp(".x.tif.cdp-tmp.123.AbC9z", &pid), "short suffix");
	CHECK(!cdp_out_is_tmp(".x.tif.cdp-tmp.123.AbC9zz.bak", &pid), "other suffix");
	CHECK(!cdp_out_is_tmp(".x.tif.tmp.123", &pid), "old names are not ours");

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
		CHECK_RC(cdp_out_open(&o2, tp("s5"), CDP_OUT_SEEK, 0666, err, sizeof err), CDP_OK);
		CHECK_RC(cdp_out_sweep(dir, &n), CDP_OK);
		CHECK(n == 1 && temporaries() == 1, "the dead one swept (%zu), a live one kept", n);
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
