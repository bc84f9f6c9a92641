/* cdp_file.c: file identities for the output-is-an-input checks
 * (cdp_file.h).
 *
 * Not done here: renames between the check and the write (another process
 * racing the run) and files reached through a different mount of the same
 * file system (bind mounts give the same st_dev and st_ino, so those do
 * count; NFS exports seen twice may not).
 */
#include "cdp_file.h"
#include "cdp_error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* path without trailing slashes or "/." components ("/" stays) into
 * buf[cap]; the length kept, 0 when it does not fit. */
static size_t trim(const char *path, char *buf, size_t cap)
{
	size_t n = strlen(path);

	for (;;) {
		while (n > 1 && path[n - 1] == '/')
			n--;
		if (n >= 2 && path[n - 1] == '.' && path[n - 2] == '/')
			n = n == 2 ? 1 : n - 2;
		else
			break;
	}
	if (n >= cap)
		return 0;
	memcpy(buf, path, n);
	buf[n] = '\0';
	return n;
}

/* Splits buf (no trailing slash) in place into its directory ("." when it
 * has none, "/" for the root) and a pointer to its last component. */
static const char *split(char *buf, const char **dir)
{
	char *slash = strrchr(buf, '/');

	if (!slash) {
		*dir = ".";
		return buf;
	}
	if (slash == buf) {
		*dir = "/";
		return slash + 1;
	}
	*slash = '\0';
	*dir = buf;
	return slash + 1;
}

/* Neither a nor b exists: the same name in the same directory, where two
 * directories that do not exist yet either are compared the same way
 * (so "run/trace.json" and "./run/trace.json" collide before run/ is
 * made). depth bounds the descent over a long chain of missing folders. */
static int same_missing(const char *a, const char *b, int depth)
{
	char pa[4096], pb[4096];
	const char *da, *db, *ba, *bb;
	struct stat sa, sb;
	int ea, eb;

	if (depth > 64 || !trim(a, pa, sizeof pa) || !trim(b, pb, sizeof pb))
		return 0;
	ba = split(pa, &da);
	bb = split(pb, &db);
	if (strcmp(ba, bb) != 0 || !strcmp(ba, ".") || !strcmp(ba, "..") || !*ba)
		return 0;
	ea = stat(da, &sa) == 0 ? 0 : errno;
	eb = stat(db, &sb) == 0 ? 0 : errno;
	if (!ea && !eb)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	if (ea == ENOENT && eb == ENOENT)
		return same_missing(da, db, depth + 1);
	return 0;
}

int cdp_file_mkdir(const char *path, int *made)
{
	struct stat st;

	if (made)
		*made = 0;
	if (mkdir(path, 0777) == 0) {
		if (made)
			*made = 1;
		return 0;
	}
	if (errno != EEXIST)
		return errno;
	/* EEXIST: whoever made it, a folder is what the caller wants */
	if (stat(path, &st) != 0)
		return errno;
	return S_ISDIR(st.st_mode) ? 0 : EEXIST;
}

int cdp_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	int ea, eb;

	if (!a || !b)
		return 0;
	ea = stat(a, &sa) == 0 ? 0 : errno;
	eb = stat(b, &sb) == 0 ? 0 : errno;
	if (!ea && !eb)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	if (ea != ENOENT || eb != ENOENT)
		return 0;
	return same_missing(a, b, 0);
}

int cdp_fileset_add(cdp_fileset *s, const char *path, const char *what)
{
	struct stat st;
	cdp_file_entry *e;

	if (!s || !path || !what)
		return CDP_EINVAL;
	if (stat(path, &st) != 0)
		return errno == ENOENT || errno == ENOTDIR ? CDP_OK : errno;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		if (cap > SIZE_MAX / sizeof *e || !(e = realloc(s->e, cap * sizeof *e)))
			return CDP_ENOMEM;
		s->e = e;
		s->cap = cap;
	}
	e = &s->e[s->n];
	if (!(e->what = strdup(what)))
		return CDP_ENOMEM;
	e->dev = (uint64_t)st.st_dev;
	e->ino = (uint64_t)st.st_ino;
	e->seq = s->n;
	s->n++;
	s->sorted = 0;
	return CDP_OK;
}

static int cmp_entry(const void *pa, const void *pb)
{
	const cdp_file_entry *a = pa, *b = pb;

	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	return 0;
}

/* (dev, ino), then the order of addition, so that equal identities sit in
 * the order they were added. */
static int cmp_entry_seq(const void *pa, const void *pb)
{
	const cdp_file_entry *a = pa, *b = pb;
	int c = cmp_entry(pa, pb);

	return c ? c : a->seq < b->seq ? -1 : a->seq > b->seq;
}

static const char *find(cdp_fileset *s, const struct stat *st)
{
	cdp_file_entry key, *hit;

	if (!s || s->n == 0)
		return NULL;
	if (!s->sorted) {
		qsort(s->e, s->n, sizeof *s->e, cmp_entry_seq);
		s->sorted = 1;
	}
	key.dev = (uint64_t)st->st_dev;
	key.ino = (uint64_t)st->st_ino;
	hit = bsearch(&key, s->e, s->n, sizeof *s->e, cmp_entry);
	/* bsearch may land on any of a file's entries: the message names it
	 * by the phrase added first (the input itself, not "read for" it). */
	while (hit && hit > s->e && cmp_entry(hit - 1, &key) == 0)
		hit--;
	return hit ? hit->what : NULL;
}

const char *cdp_fileset_find(cdp_fileset *s, const char *path)
{
	struct stat st;

	return path && stat(path, &st) == 0 ? find(s, &st) : NULL;
}

const char *cdp_fileset_find_fd(cdp_fileset *s, int fd)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 ? find(s, &st) : NULL;
}

void cdp_fileset_free(cdp_fileset *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->e[i].what);
	free(s->e);
	memset(s, 0, sizeof *s);
}

int cdp_file_skip_bom(FILE *f)
{
	static const unsigned char bom[3] = { 0xef, 0xbb, 0xbf };
	int c = EOF, n;

	for (n = 0; n < 3; n++)
		if ((c = getc(f)) != bom[n])
			break;
	if (n == 3)
		return 1;
	/* Put back in reverse order. C promises one byte of ungetc; glibc and
	 * musl take more (musl 8), and a file position is not needed, so a list
	 * read from a pipe (--list <(...)) keeps its bytes. */
	if (c != EOF)
		ungetc(c, f);
	while (n-- > 0)
		ungetc(bom[n], f);
	return 0;
}
