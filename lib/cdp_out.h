/* cdp_out.h: the one output-path policy of every cdpool program (cdpool(7),
 * OUTPUTS).
 *
 * Which paths a program may write and how:
 *
 * - A streamed output (a pointer file, a CSV, a log, a trace) is "-" for
 *   standard output, or an existing FIFO or character device, which is
 *   opened and written in place (no temporary, no rename); anything else is
 *   a regular file written as below.
 * - A seekable output (GeoTIFF, GeoPackage, PNG, checkpoint, a file of a
 *   pool) that exists and is not a regular file (a FIFO, a device, a socket,
 *   a directory) is refused before anything is written, naming what it is.
 * - A regular file is written to a temporary in the target's folder,
 *   ".NAME.cdp-tmp.PID-MARK.XXXXXX" (MARK: 8 hex digits of where the
 *   writer runs, its host and PID namespace; created with O_EXCL and the mode a plain
 *   open(2) would give under the umask; when it replaces a regular file,
 *   given that file's mode, and its owner and group where the process may
 *   give them), and renamed onto the target on commit. A symbolic link is followed to its final target: the temporary
 *   and the rename happen beside that target, so the link stays a link.
 *   GDAL's side file (CDP_OUT_AUX) goes beside the name given, a link's
 *   own, where GDAL opening that name looks for it (cdp_out_aux_name).
 * - A regular file that is a cdpool checkpoint (it starts with the magic
 *   of cdp-checkpoint(5)) or an LMDB database file (a pool's data.mdb or
 *   lock.mdb) is not replaced (CDP_EKEEP) unless the caller writes that
 *   kind of file (CDP_OUT_CKPT, CDP_OUT_POOL): a mistyped path must not
 *   turn a trained model or a pool into a PNG.
 * - Every temporary is removed on every failure path: cdp_out_abort(), and
 *   a handler for SIGTERM, SIGINT and SIGHUP installed with the first
 *   temporary that unlinks every live one and re-raises the signal. Where
 *   the program already handles the signal itself (cdp-train stops at the
 *   next step and writes its checkpoint), its handler runs instead and the
 *   temporaries are left to its own failure paths. A program that ends
 *   without unwinding calls cdp_out_unlink_all first. A temporary left by a
 *   process killed outright (SIGKILL) is removed by cdp_out_sweep() in a
 *   later run, once its PID is dead (and only one marked with the sweeper's
 *   own host and PID namespace, unless the sweeper holds a lock on that
 *   name). Between cdp_out_hold and
 *   cdp_out_release those signals are deferred (in every thread), so that
 *   a program renaming several outputs as one set ends either before the
 *   first rename or after the last.
 * - Every output of a run is compared with every input and every other
 *   output by identity (cdp_out_check_set, with cdp_fileset).
 *
 * Errors: CDP_OK, an errno, CDP_ESPECIAL (a seekable target, or a
 * streamed one, that is a file of a kind the policy refuses), CDP_EKEEP
 * (a checkpoint or an LMDB database the caller may not replace), CDP_EMISMATCH
 * (an output is an input or another output), CDP_ENOMEM, CDP_EINVAL (an
 * empty or NULL path, an o not open). Each function that takes err[cap]
 * fills it, on every error it returns, with one line for the tool to print
 * after "prog: " ("refusing to write 'x': it is a FIFO, not a regular
 * file", "cannot create 'x': Permission denied").
 */
#ifndef CDP_OUT_H
#define CDP_OUT_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "cdp_file.h"

enum {
	CDP_OUT_SEEK   = 0,  /* a seekable file: only a regular file (or none) may be there */
	CDP_OUT_STREAM = 1,  /* "-", a FIFO or a character device are written in place */
	CDP_OUT_SYNC   = 2,  /* commit fsyncs the file and its folder */
	CDP_OUT_NOFD   = 4,  /* the temporary is created and closed: a library (GDAL) writes it by name */
	CDP_OUT_AUX    = 8,  /* a file GDAL reads: commit also moves TMP's side files (TMP.aux.xml,
	                      * .ovr, .msk) onto PATH's and removes those of the file replaced */
	CDP_OUT_CKPT   = 16, /* the target may be a checkpoint: the checkpoint writer replaces one */
	CDP_OUT_POOL   = 32, /* the target may be an LMDB database file: the pool's own writer */
	CDP_OUT_NEWDIR = 64  /* cdp_out_check: the target's folder may not exist yet (the
	                      * program makes it later: a pool, a run directory) */
};

/* The first bytes of a cdpool checkpoint, cdp-checkpoint(5) (the
 * engine's CDP_CKPT_MAGIC, which lib/ cannot include). */
#define CDP_OUT_CKPT_MAGIC "CDPCKPT\n"

typedef struct cdp_out {
	char *path;     /* owned: the name as given, for messages */
	char *target;   /* owned: what commit replaces (path, or a link's final target) */
	char *tmp;      /* owned: the temporary, NULL when written in place */
	int fd;         /* the open temporary or stream, -1 once closed */
	int flags;
	int inplace;    /* standard output, a FIFO or a character device */
	long slot;      /* registry slot of tmp, -1 none */
} cdp_out;

/* What path is under the policy for kind (CDP_OUT_SEEK or CDP_OUT_STREAM,
 * or'ed with CDP_OUT_CKPT, CDP_OUT_POOL, CDP_OUT_NEWDIR), without creating
 * anything: CDP_OK when it may be written; CDP_ESPECIAL (with err naming
 * the kind of file); CDP_EKEEP ("refusing to replace 'x': it is a cdpool
 * checkpoint"); the errno of a folder that is not there to hold a new
 * file (ENOENT, ENOTDIR: "cannot create 'x': No such file or directory",
 * as cdp_out_open would say; not checked with CDP_OUT_NEWDIR) or of a
 * link that cannot be followed (ELOOP). For the up-front checks of a
 * program with several outputs, so that none is created when a later one
 * is refused. */
int  cdp_out_check(const char *path, int kind, char *err, size_t cap);

/* CDP_ESPECIAL, with err "refusing to write '/vsizip/z.zip/x.tif': GDAL
 * virtual file systems (/vsi...) are not supported for outputs", when
 * path names one (it starts with "/vsi" NAME "/", NAME of lowercase
 * letters, digits and '_': GDAL's /vsimem/, /vsizip/, ...,
 * which the output policy's temporaries and renames cannot be made in);
 * else CDP_OK. cdp_out_check and cdp_out_open call it; for an output
 * folder (cdp-tile -O) call it directly. */
int  cdp_out_vsi(const char *path, char *err, size_t cap);

/* 1 when path, as a streamed output, is written in place: "-", or an
 * existing FIFO or character device (a link to one included); else 0. */
int  cdp_out_inplace(const char *path);

/* 1 when path is a regular file that starts as a cdpool checkpoint
 * (CDP_OUT_CKPT_MAGIC); else 0. */
int  cdp_out_is_ckpt(const char *path);

/* The side file that commit writes for a CDP_OUT_AUX output at path:
 * "PATH.aux.xml", beside the name given even when it is a symbolic link,
 * since GDAL opening that name reads its side file there (GDAL's own
 * writers put it there too). CDP_OK, or ENAMETOOLONG when it does not fit
 * buf[cap]. */
int  cdp_out_aux_name(const char *path, char *buf, size_t cap);

/* Whether a file can be made where path's would go, for an output
 * written only at the end of a long run (a --preview, a drawing): its
 * temporary is created under the policy (kind as cdp_out_check's) and
 * removed at once, so that a read-only folder, or one without write
 * permission, fails before the work: "cannot create 'ro/p.png': Read-only
 * file system", as cdp_out_open would say. CDP_OK (also for a streamed
 * output written in place, which has no temporary) or cdp_out_open's
 * error. Call it after the other checks, so that no temporary is made for
 * a name they refuse. */
int  cdp_out_probe(const char *path, int kind, char *err, size_t cap);

/* Opens path for writing under the policy: flags is CDP_OUT_SEEK or
 * CDP_OUT_STREAM, or'ed with CDP_OUT_SYNC, CDP_OUT_NOFD, CDP_OUT_AUX,
 * CDP_OUT_CKPT, CDP_OUT_POOL.
 * mode is the create mode before the umask (0666, 0600 for a secret).
 * On CDP_OK, o->fd is the descriptor to write (1 for "-"; -1 with
 * CDP_OUT_NOFD, where o->tmp is the name to write), and o must be ended by
 * cdp_out_commit or cdp_out_abort. On failure o holds nothing. */
int  cdp_out_open(cdp_out *o, const char *path, int flags, mode_t mode, char *err, size_t cap);

/* A stdio stream (fdopen's mode) on a duplicate of fd, so that fclose
 * leaves fd open; NULL with errno set on failure, EBADF for a descriptor
 * that is not open for writing (a closed standard output: prog >&-), as
 * a write to it says, where fdopen says EINVAL. */
FILE *cdp_out_fdopen(int fd, const char *mode);

/* Closes o's descriptor and keeps the temporary for a later commit or
 * abort (a program holding many outputs open at once runs out of
 * descriptors). CDP_OK or the errno of close(2) (a write error). */
int  cdp_out_close(cdp_out *o);

/* Closes the descriptor (a close error is a write error), renames the
 * temporary onto the target (an in-place output is only closed; standard
 * output is left open) and ends o. On failure the temporary is removed and
 * the target is untouched; a full file system is reported as ENOSPC even
 * where the writer only said "write failed" (cdp_out_nospace). With
 * CDP_OUT_AUX, GDAL's side files of PATH (PATH.aux.xml, .ovr, .ovr.aux.xml,
 * .msk, .msk.aux.xml, .aux; not a world file, BASE.tfw, which may be
 * another raster's and which the GeoTIFF's own georeferencing overrides)
 * are one set with it: those of the file replaced (or left by a file gone)
 * are removed and the temporary's own take their names (beside the name
 * given: cdp_out_aux_name), so that an old mask, overviews or statistics
 * never describe the new file; the side files go first, so that one that
 * cannot take its name fails the commit, naming it, with the target and
 * its side files as they were; through a link, those beside the link's
 * target, which described the file replaced, are removed; all under
 * cdp_out_hold. */
int  cdp_out_commit(cdp_out *o, char *err, size_t cap);

/* Defers SIGTERM, SIGINT and SIGHUP, whichever thread they reach, until
 * the matching cdp_out_release, which then delivers the last one deferred
 * (the policy's handler removes the temporaries still live and the signal
 * ends the program, or the program's own handler runs). Calls nest and
 * may come from several threads. Hold around the commits of outputs that
 * are one set, so that a signal cannot leave new files beside old ones;
 * do no work that can block while holding. */
void cdp_out_hold(void);
void cdp_out_release(void);

/* Waits for an exclusive flock(2) on the folder that holds path and
 * returns its descriptor (closing it lets go), or -1 where the folder
 * cannot be locked (an NFS mount, whose flock emulation refuses a
 * folder): outputs that are one set and that two processes may write at
 * once (cdp-keyshuffle's -o and --val-out) are committed under it, so
 * that one process's set replaces the other's whole. A folder, not a lock
 * file: one left beside the outputs would be litter, and one removed
 * after use could be locked twice. Take it before cdp_out_hold. */
int cdp_out_lock_dir(const char *path);

/* Removes every live temporary and its side files, leaving the registry
 * as it is: for a program about to end without unwinding (an abort that
 * exits from another thread, MPI_Abort), so that a failed run leaves
 * nothing behind. Async-signal-safe (unlink only); a commit racing with it
 * in another thread either renamed its file first or finds it gone. */
void cdp_out_unlink_all(void);

/* Removes the temporary (and the side files GDAL and SQLite put beside it:
 * .aux.xml, -journal, -wal, -shm) and ends o. Safe on an ended or zeroed o. */
void cdp_out_abort(cdp_out *o);

/* ENOSPC (or EDQUOT) when a library noted a full file system
 * (cdp_out_note_nospace) in this process, or when the file system that
 * holds o's temporary (or path's folder) has no free block left; EFBIG
 * when one noted that, or when o's temporary (or path) has reached the
 * file-size limit (ulimit -f) within 64 KiB; else 0:
 * a writer (libtiff through GDAL, SQLite) that reports a full disk as
 * "TIFFAppendToStrip:Seek error" or "database or disk is full" gets the
 * real reason. Call it before cdp_out_abort. */
int  cdp_out_nospace(const cdp_out *o, const char *path);

/* Notes e when it is ENOSPC, EDQUOT or EFBIG (else nothing), for every later
 * cdp_out_nospace: for a library's error handler, which sees errno when
 * the write failed, before the library frees what it wrote.
 * Async-signal-safe (one atomic store). */
void cdp_out_note_nospace(int e);

/* Checks n outputs outs[i] (NULL entries skipped; "-" is standard output)
 * named by opts[i] ("-o", "--log"; NULL for none) against the inputs in set
 * and against each other: "refusing to write 'x': it is the input 'y'", or
 * "-o 'a' and --log 'b' are the same file" (", standard output" added when
 * one is "-": two "-", or "-" and the file standard output is, would mix two
 * outputs in one stream). CDP_OK or CDP_EMISMATCH. */
int  cdp_out_check_set(cdp_fileset *set, size_t n, const char *const *outs,
                       const char *const *opts, char *err, size_t cap);

/* The extension of path's file name, its last '.' on ("map.TIF" ".TIF",
 * "a.b/c" ""), or "" without one: for the programs' checks that a file's
 * name says the format written. */
const char *cdp_out_ext(const char *path);

/* 1 when path's extension (cdp_out_ext) is one of exts (NULL-ended,
 * each with its '.'), in any case; else 0. */
int  cdp_out_ext_is(const char *path, const char *const *exts);

/* Checks n outputs outs[i] (NULL entries skipped) against GDAL's side
 * files of the inputs in set: an output named INPUT.aux.xml, .ovr, .msk
 * (the side files cdp_out_commit moves, cdp_out.h CDP_OUT_AUX) of a file
 * in set, existing or not yet, is refused, "refusing to write 'in.tif.ovr':
 * GDAL would read it as part of the input 'in.tif'", since GDAL opening
 * the input takes it as its own (its overviews, mask, metadata); and an
 * output one of whose side files is an input, which the commit would
 * remove with the file replaced, "refusing to write 'x.tif': its side file
 * 'x.tif.ovr' goes with it, and that is the input 'x.tif.ovr'". CDP_OK or
 * CDP_EMISMATCH. */
int  cdp_out_check_sides(cdp_fileset *set, size_t n, const char *const *outs, char *err,
                         size_t cap);

/* The up-front checks of a program's n outputs outs[i] (NULL entries
 * skipped) named by opts[i] (as cdp_out_check_set's), against the inputs in
 * set, in this order: cdp_out_check_set, cdp_out_check of each (kind as
 * there), cdp_out_check_sides. CDP_OK or the first error, with err ("out
 * of memory" for CDP_ENOMEM). A program then checks the names' extensions
 * (cdp_out_check_ext) and, last, cdp_out_probe of each. */
int  cdp_out_check_outputs(cdp_fileset *set, size_t n, const char *const *outs,
                           const char *const *opts, int kind, char *err, size_t cap);

/* The check that an output's name says the format written (GDAL picks a
 * driver by it, a file manager an application): CDP_OK when path's
 * extension is one of exts (cdp_out_ext_is); else CDP_EINVAL, with err
 * "OPT 'PATH': WHAT, which '.EXT' does not name: give GIVE", or, for a
 * name without one, "OPT 'PATH': WHAT, which a name without an extension
 * does not say: give GIVE" ("-o 'm.jpg': the map is a GeoTIFF, which
 * '.jpg' does not name: give -o OUT.tif"). Needs only the name: run it
 * before any slow setup. */
int  cdp_out_check_ext(const char *opt, const char *path, const char *const *exts,
                       const char *what, const char *give, char *err, size_t cap);

/* 1 when name (a file name, no folder) is a temporary of this policy or a
 * side file of one, with *pid its writer's PID and *elsewhere (may be
 * NULL) 1 when the name's mark says it was made on another host or in
 * another PID namespace, 0 when here or when it has no mark (a name of a
 * version before marks, ".NAME.cdp-tmp.PID.XXXXXX"); 0 otherwise. */
int  cdp_out_is_tmp(const char *name, long *pid, int *elsewhere);

/* Removes from folder dir the temporaries (cdp_out_is_tmp) made on this
 * host in this PID namespace whose process is gone (kill(pid, 0) gives
 * ESRCH), counting them in *removed (may be NULL). A temporary marked
 * elsewhere is left alone: its PID means nothing here, and its writer may
 * be alive (a container, or another host on shared storage). One with no
 * mark is judged by its PID. locked (NULL-ended, or NULL) names the files
 * of dir that only the caller writes, under a lock it holds now (cdp-train
 * and its run directory): every temporary of one of them but this
 * process's own is removed, whatever its mark, since its writer cannot be
 * alive (a run killed on another node, or before a reboot). CDP_OK or the
 * errno of opendir. */
int  cdp_out_sweep(const char *dir, const char *const *locked, size_t *removed);

/* How many temporaries are live in this process (tests). */
size_t cdp_out_live(void);

#endif
