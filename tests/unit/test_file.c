/* test_file.c: file identities (cdp_file.h): the same file by name, by
 * "./" name, through a symlink and a hard link; different files with equal
 * contents; outputs that do not exist yet; a file set's lookups by path and
 * by descriptor, and its phrases; a UTF-8 byte order mark skipped, and
 * bytes that only begin like one (also from a pipe) kept.
 */
#include "tap.h"
#include "cdp_error.h"
#include "cdp_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static const char *tp(const char *name)
{
	static char buf[4][256];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
	return buf[k];
}

/* What f holds after cdp_file_skip_bom, whose result is *skipped. */
static void after_bom(FILE *f, int *skipped, char *rest, size_t cap)
{
	size_t n;

	*skipped = cdp_file_skip_bom(f);
	n = fread(rest, 1, cap - 1, f);
	rest[n] = '\0';
}

static void check_bom(const char *bytes, int want, const char *want_rest, const char *what)
{
	char rest[64], cmd[128];
	int skipped;
	FILE *f = fopen(tp("bom"), "w");

	if (f) {
		fputs(bytes, f);
		fclose(f);
	}
	CHECK((f = fopen(tp("bom"), "r")) != NULL, "open bom");
	if (f) {
		after_bom(f, &skipped, rest, sizeof rest);
		CHECK(skipped == want && strcmp(rest, want_rest) == 0, "%s: %d '%s'", what, skipped,
		      rest);
		fclose(f);
	}
	snprintf(cmd, sizeof cmd, "cat '%s'", tp("bom"));
	CHECK((f = popen(cmd, "r")) != NULL, "popen");
	if (f) {
		after_bom(f, &skipped, rest, sizeof rest);
		CHECK(skipped == want && strcmp(rest, want_rest) == 0, "%s, from a pipe: %d '%s'",
		      what, skipped, rest);
		pclose(f);
	}
	unlink(tp("bom"));
}

static void put(const char *name)
{
	FILE *f = fopen(tp(name), "w");
	CHECK(f != NULL, "cannot create %s", name);
	if (f) {
		fputs("same bytes\n", f);
		fclose(f);
	}
}

int main(void)
{
	cdp_fileset s = { 0 };
	char dotted[300];
	int fd;

	snprintf(dir, sizeof dir, "%s/cdptest.XXXXXX",
	         getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 40 ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	put("a");
	put("b");
	CHECK(symlink("a", tp("sym")) == 0, "symlink");
	CHECK(link(tp("a"), tp("hard")) == 0, "link");
	snprintf(dotted, sizeof dotted, "%s/./a", dir);

	CHECK(cdp_same_file(tp("a"), tp("a")) == 1, "a is a");
	CHECK(cdp_same_file(tp("a"), dotted) == 1, "a is ./a");
	CHECK(cdp_same_file(tp("sym"), tp("a")) == 1, "a symlink is its target");
	CHECK(cdp_same_file(tp("a"), tp("hard")) == 1, "a hard link is the file");
	CHECK(cdp_same_file(tp("a"), tp("b")) == 0, "equal contents are not the same file");
	CHECK(cdp_same_file(tp("a"), tp("new")) == 0, "a new file is no existing one");
	CHECK(cdp_same_file(tp("new"), tp("new")) == 1, "a new name is itself");
	snprintf(dotted, sizeof dotted, "%s/./new", dir);
	CHECK(cdp_same_file(tp("new"), dotted) == 1, "new is ./new before either exists");
	CHECK(cdp_same_file(tp("new"), tp("new2")) == 0, "two new names differ");
	CHECK(cdp_same_file(tp("new"), "/nonexistent-dir/new") == 0, "a new name elsewhere");
	CHECK(cdp_same_file(NULL, tp("a")) == 0, "NULL is no file");
	/* in folders not made yet (cdp-train --out run --trace run/x) */
	CHECK(cdp_same_file(tp("nd/sub/new"), tp("nd/sub/new")) == 1, "a name in new folders");
	snprintf(dotted, sizeof dotted, "%s/./nd//sub/./new", dir);
	CHECK(cdp_same_file(tp("nd/sub/new"), dotted) == 1, "the same, spelt with ./ and //");
	snprintf(dotted, sizeof dotted, "%s/nd/sub/", dir);
	CHECK(cdp_same_file(tp("nd/sub"), dotted) == 1, "a new folder with a trailing slash");
	CHECK(cdp_same_file(tp("nd/sub/new"), tp("nd/other/new")) == 0, "other new folders");
	CHECK(cdp_same_file(tp("nd/sub/new"), tp("nd2/sub/new")) == 0, "other new parents");
	CHECK(cdp_same_file(tp("nd/new"), tp("new")) == 0, "a new folder is not its parent");

	CHECK_RC(cdp_fileset_add(&s, tp("a"), "the input 'a'"), CDP_OK);
	CHECK_RC(cdp_fileset_add(&s, tp("missing"), "the model"), CDP_OK);
	CHECK(s.n == 1, "a missing file is not added (%zu members)", s.n);
	for (int i = 0; i < 50; i++) {
		char name[16], what[32];
		snprintf(name, sizeof name, "f%d", i);
		snprintf(what, sizeof what, "file %d", i);
		put(name);
		CHECK_RC(cdp_fileset_add(&s, tp(name), what), CDP_OK);
	}
	CHECK(cdp_fileset_find(&s, tp("hard")) && strcmp(cdp_fileset_find(&s, tp("hard")),
	      "the input 'a'") == 0, "a hard link is found with its phrase");
	CHECK(cdp_fileset_find(&s, tp("sym")) != NULL, "a symlink is found");
	CHECK(cdp_fileset_find(&s, tp("f37")) && strcmp(cdp_fileset_find(&s, tp("f37")),
	      "file 37") == 0, "f37 among 51");
	CHECK(cdp_fileset_find(&s, tp("b")) == NULL, "b is no member");
	CHECK(cdp_fileset_find(&s, tp("new")) == NULL, "a new file is no member");
	fd = open(tp("hard"), O_RDONLY);
	CHECK(cdp_fileset_find_fd(&s, fd) != NULL, "found by descriptor");
	close(fd);
	fd = open(tp("b"), O_RDONLY);
	CHECK(cdp_fileset_find_fd(&s, fd) == NULL, "b by descriptor");
	close(fd);
	/* A file added again under other phrases (GDAL lists the dataset
	 * itself among the files it reads) is named by its first phrase,
	 * wherever bsearch lands among its entries. */
	for (int i = 0; i < 7; i++)
		CHECK_RC(cdp_fileset_add(&s, tp("f37"), "read for something"), CDP_OK);
	CHECK(cdp_fileset_find(&s, tp("f37")) && strcmp(cdp_fileset_find(&s, tp("f37")),
	      "file 37") == 0, "a file added 8 times is named by its first phrase");
	cdp_fileset_free(&s);
	CHECK(s.n == 0 && s.e == NULL, "free clears the set");

	check_bom("\xef\xbb\xbf" "a.tif 1\n", 1, "a.tif 1\n", "a byte order mark is skipped");
	check_bom("a.tif 1\n", 0, "a.tif 1\n", "no mark: nothing consumed");
	check_bom("\xef\xbb\xbe.tif\n", 0, "\xef\xbb\xbe.tif\n", "two bytes of a mark are kept");
	check_bom("\xef.tif\n", 0, "\xef.tif\n", "one byte of a mark is kept");
	check_bom("\xef\xbb", 0, "\xef\xbb", "a file of two bytes of a mark is kept");
	check_bom("\xef\xbb\xbf", 1, "", "a file that is only a mark is empty");
	check_bom("", 0, "", "an empty file");

	/* two programs making one new folder at once: the second's mkdir
	 * finds it made, which is no failure (cdp-tile -O said "File exists") */
	{
		int made = -1;
		CHECK(cdp_file_mkdir(tp("md"), &made) == 0 && made == 1, "a new folder is made");
		CHECK(cdp_file_mkdir(tp("md"), &made) == 0 && made == 0, "one made meanwhile is taken");
		CHECK(symlink("md", tp("mdlink")) == 0, "symlink to a folder");
		CHECK(cdp_file_mkdir(tp("mdlink"), &made) == 0 && made == 0, "a link to a folder");
		CHECK(cdp_file_mkdir(tp("a"), &made) == EEXIST && made == 0, "a file is no folder");
		CHECK(cdp_file_mkdir(tp("nope/md"), NULL) == ENOENT, "no parent: ENOENT");
		unlink(tp("mdlink"));
		rmdir(tp("md"));
	}

	for (int i = 0; i < 50; i++) {
		char name[16];
		snprintf(name, sizeof name, "f%d", i);
		unlink(tp(name));
	}
	unlink(tp("a"));
	unlink(tp("b"));
	unlink(tp("sym"));
	unlink(tp("hard"));
	rmdir(dir);
	return tap_done();
}
