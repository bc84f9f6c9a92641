/* cdp_file.h: would an output overwrite a file the run reads?
 *
 * A program about to write a file compares it with every file it reads, by
 * identity (st_dev and st_ino, following symbolic links, so a symlink or a
 * hard link to an input counts as the input), never by name alone. An
 * output that does not exist yet is none of the existing inputs; two paths
 * that neither exist are the same file when their directories are the same
 * directory and their last components are equal (so "out.tif" and
 * "./out.tif" collide before either is written).
 *
 * A file set holds the identities of the files a run reads, each with a
 * phrase naming it for the error message ("the input 'scene.tif'"), sorted
 * for lookups in O(log n): cdp-tile checks every tile it writes.
 */
#ifndef CDP_FILE_H
#define CDP_FILE_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* 1 when a and b are (or, not existing yet, would be) the same file, 0
 * when not. A path that cannot be examined (EACCES, ...) is taken as not
 * the other: the open that follows reports it. */
int cdp_same_file(const char *a, const char *b);

typedef struct cdp_file_entry {
	uint64_t dev, ino;
	size_t seq;             /* order of addition: the first phrase of a file wins */
	char *what;             /* owned: the phrase naming the file */
} cdp_file_entry;

typedef struct cdp_fileset {
	cdp_file_entry *e;      /* [n], sorted by (dev, ino) when sorted is set */
	size_t n, cap;
	int sorted;
} cdp_fileset;

/* Adds path with the phrase what (copied). A path that does not exist
 * (ENOENT, ENOTDIR) is skipped (CDP_OK: nothing there to overwrite); CDP_ENOMEM, or the errno
 * of stat(2) otherwise. */
int  cdp_fileset_add(cdp_fileset *s, const char *path, const char *what);
/* The phrase of the member that path is (the one added first where a file
 * was added more than once), or NULL (also when path does not
 * exist). */
const char *cdp_fileset_find(cdp_fileset *s, const char *path);
/* Same for an open descriptor (a redirected standard output). */
const char *cdp_fileset_find_fd(cdp_fileset *s, int fd);
void cdp_fileset_free(cdp_fileset *s);

/* Makes the folder path (mode 0777 under the umask) unless it is one
 * already: 0, with *made (may be NULL) 1 when this call created it and 0
 * when it was there, also when another process created it between a
 * check and this mkdir (two programs starting into one new folder);
 * EEXIST when path is something else than a folder (or a link to one),
 * or the errno of mkdir(2) or stat(2). */
int cdp_file_mkdir(const char *path, int *made);

/* Reads past a UTF-8 byte order mark (EF BB BF), which some editors write
 * before a text file, at the start of f just opened for reading: 1 when
 * one was skipped, 0 when f does not start with one (nothing consumed: the
 * bytes read are put back, so a pipe works too). Every reader of a list or
 * CSV calls it, so that the mark is never part of the first path. */
int cdp_file_skip_bom(FILE *f);

#endif
