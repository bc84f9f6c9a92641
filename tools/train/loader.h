/* loader.h: the training data loader: batches of standardized float tiles,
 * or of raw tiles for the device to prepare ("The data path" below), from a
 * pool (cdp_pool.h) in the order of a pointer file (cdp_ptrfile.h), one
 * loader per rank, filled by a prefetch thread while compute runs.
 *
 * Opening. The pool is opened read-only (CDP_POOL_RDONLY: MDB_RDONLY |
 * MDB_NOTLS) once per rank, after MPI_Init and never across a fork, or an
 * open pool is borrowed (opts.pool; LMDB forbids opening one environment
 * twice in a process, so a train and a validation loader share one). Before
 * any batch: the pointer file is read and validated, its uuid must equal the
 * pool's, every key must exist (one mdb_get each, which touches only B-tree
 * pages), and a sample of up to 64 evenly spaced records (every record in
 * copy mode) must have the pool's dtype, bands, height, width and label kind.
 * Each failure is an error naming the file. In pool mode the loader then
 * keeps that read txn open for its life, and the value pointers resolved at
 * open (into the map) serve every epoch: no LMDB call while training.
 *
 * Order (training). N keys, per-rank batch b, j ranks, global batch B = j*b.
 * Epoch e permutes the key indices: order = Fisher-Yates (cdp_rng_shuffle_size)
 * of 0..N-1 with cdp_rng_seed(cdp_rng_derive(seed, e, 0)), the same on every
 * rank without communication. Global step s is positions [s*B, (s+1)*B) of
 * order; rank r takes [s*B + r*b, s*B + (r+1)*b), which is block r + j*s of b
 * keys. The sequence of global batches depends only on the pointer file, the
 * seed and B, never on j, so a run resumed with another j and the same B sees
 * the same data. Steps per epoch: floor(N / B), the tail being dropped; with
 * pad_last ceil(N / B), position p >= N taking order[p mod N] (the tail is
 * filled from the start of the order). With opts.accumulate A > 1 the
 * trainer's step is A of these batches, A*B positions, so the epoch is
 * whole steps of A*B: A * floor(N / (A*B)) batches, with pad_last
 * A * ceil(N / (A*B)), the last step's tail filled from the order's start
 * as any tail is.
 *
 * Order (validation, opts.val). No permutation, no padding: rank r takes the
 * keys i with i mod j == r in pointer-file order, so each key is served once
 * across ranks. Every rank gets ceil(ceil(N / j) / b) batches (the same count,
 * so per-step collectives stay matched); its last ones may hold fewer than b
 * samples, even none (batch.n says how many).
 *
 * A sample. The record is decoded (uncompressed payloads in place from the
 * map), converted to float32 and standardized per band with the pool's meta
 * statistics, always, even for records already written as standardized f32
 * (their meta mean/std are then about 0 and 1, so this is near the identity
 * and one rule holds for every pool): y = (x - mean) * (1 / std) in float32,
 * a band with std 0 only centred. Non-finite values become 0. Invalid pixels
 * (mask 0; for a record without a mask but with a nodata value, pixels whose
 * every band equals it, NaN matching NaN) become 0 in every band and get the
 * ignore label. Labels are int32: per-pixel records give (H, W) class ids,
 * scalar-class records one id. The ignore label is the pool's (meta
 * "ignore"), or opts.ignore with opts.remap_ignore (stored ignore values are
 * mapped too). Augmentation (opts.aug, augment.h) follows: training draws
 * the transform with seed cdp_rng_derive(cdp_rng_derive(seed, e, 1), k, 0)
 * for key index k, so a sample gets the same transform on any rank or
 * thread; validation takes the centred crop, no flips or turns.
 * A value pool (label kind f32, T targets a pixel) gives no labels but
 * batch.target (n, T, h, w) float32: (y - tmean) * tinv per target (the
 * identity until cdp_loader_set_target_standardization), NaN where the
 * record has no target and at invalid pixels; they go through the image's
 * crop, flips, turns and warp (bilinear as the bands, NaN where the warp
 * reads outside the tile, where the image is 0), never through the
 * photometric changes. The raw (device) path refuses such pools.
 *
 * Verification. Every read of a record checks its header and sizes first
 * (cdp_record_peek) and its CRC (cdp_crc32, zlib's CRC-32 by carry-less
 * multiplication where the CPU has it) before the sample is handed out; for
 * an uncompressed record the CRC is computed piecewise as the image is
 * converted, so the map is read once, and costs a few percent for uint8
 * tiles (bench/loader.sh). With verify_once the loader checks the CRC of an
 * uncompressed record the first time it serves it and afterwards only its
 * header: the map is read-only and the txn's snapshot cannot change, so
 * only a page re-read from a disk that went bad meanwhile would go
 * unnoticed.
 *
 * Bad records. A record that fails to decode (CRC, truncation, format) or
 * whose shape differs from the pool's stops the loader: cdp_loader_next
 * returns the error and cdp_loader_error / cdp_loader_errkey name the key.
 * With skip_bad the record is counted and replaced, in training, by the
 * next good record of the epoch order: for position p, order[(p+1) mod N],
 * order[(p+2) mod N], ... (the same on every rank and for every j); in
 * validation its slot keeps its key index but is all zeros with every label
 * ignored, so it counts for nothing and nothing is counted twice. A record
 * found bad is remembered and not decoded again. When every record is bad
 * the error stands.
 *
 * Readahead. Unless no_willneed, the prefetch thread issues MADV_WILLNEED on
 * the page-aligned ranges of the NEXT batch's values before decoding the
 * current one (and on the current one at an epoch's first step), so the
 * kernel reads exactly those pages while this batch is decoded. Read-around
 * on page faults is then only waste, and it thrashes the page cache when the
 * pool does not fit in it, so the loader advises its values' range of the
 * map MADV_RANDOM (what MDB_NORDAHEAD does) or MADV_NORMAL as
 * cdp_loader_readahead_auto chooses (CDP_RA_AUTO; the measurements are in
 * bench/loader.sh and loader.c), or as opts.readahead says. A pool the loader
 * opens itself is opened with MDB_NORDAHEAD, since the key lookups at open
 * are random B-tree reads.
 *
 * Load modes. CDP_LOAD_POOL serves from the map. CDP_LOAD_COPY is the
 * baseline the sources argue against: at open the rank copies every record
 * of the pointer file (the raw values, read in file order) into its own
 * malloc'd memory, then serves batches from it through the same decoding;
 * the batches are identical, the memory is per rank rather than one shared
 * page cache per node.
 *
 * Threads. One prefetch thread per loader fills two batch buffers (double
 * buffering): while the caller computes on batch s it fills s+1. With
 * opts.threads = T > 1 it splits each batch over itself and T-1 helper
 * threads (contiguous sample ranges); the results do not depend on T.
 *
 * The data path. By default (the host path, cdp-train on the CPU) a batch is
 * what "A sample" above describes: standardized, augmented float32, 4 bytes
 * a value. With opts.raw (the device path, cdp-train on a GPU) the loader
 * leaves conversion, standardization and augmentation to the device
 * (backend.h prep_batch) and hands out each sample's stored pixels as the
 * record holds them, (C, H, W) of the pool's type, uncropped: 1 byte a value
 * for uint8 tiles. Nothing changes in what is checked: the same header, size
 * and CRC checks run as the bytes are copied, before a sample is handed out,
 * and bad records are replaced as above. Labels are decoded on the host as
 * above but in the tile's geometry, (H, W) before the crop, invalid pixels
 * already ignored; each sample's transform is drawn from the same seed as on
 * the host path and comes as a cdp_prep_aug; and the caller standardizes with
 * cdp_loader_info's mean and inv, the very floats of the host path, so that
 * prep_batch yields its images bit for bit. Two things the host path does to
 * values are carried over: a float (f32, f64) value that is not finite as a
 * float32 is replaced in the copy by its band's mean, which prep_batch maps
 * to 0 as the host path does; and the invalid pixels, which the host path
 * sets to 0 in every band, come as batch.valid, already transformed ((n, h,
 * w) bytes, 0 where a pixel is invalid, 1 elsewhere; NULL when no pixel of
 * the batch is), which the caller applies to every band after prep_batch
 * (cdp-train: tools/train/train.c). A bad record in validation becomes a
 * zero copy with every pixel invalid and every label ignored.
 */
#ifndef CDP_LOADER_H
#define CDP_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"
#include "backend.h"
#include "cdp_pool.h"

enum { CDP_LOAD_POOL = 0, CDP_LOAD_COPY = 1 };
enum { CDP_RA_AUTO = 0, CDP_RA_ON = 1, CDP_RA_OFF = 2 };

typedef struct cdp_loader_opts {
	const char *pool_path;     /* the pool directory (also named in errors) */
	cdp_pool *pool;            /* an open pool to borrow, or NULL */
	MDB_txn *txn;              /* a read txn on pool to borrow (the loader
	                              reads meta and resolves keys in it and
	                              leaves it open; it must outlive the
	                              loader), or NULL: the loader holds its own
	                              (cdp_lmdb_txn_hold) */
	const char *keys_path;     /* the pointer file */
	int rank, nranks;          /* r of j; 0 of 1 by default */
	int batch;                 /* b, per rank */
	uint64_t seed;             /* run seed */
	int pad_last;              /* training: fill the tail from the order's start */
	int accumulate;            /* training: batches per optimizer step, A (0 or
	                              1: one); the epoch is whole steps (above) */
	int val;                   /* validation iteration */
	int mode;                  /* CDP_LOAD_* */
	int skip_bad;              /* count and replace bad records */
	int verify_once;           /* check each record's CRC on its first read only */
	int threads;               /* decode threads per loader, >= 1 */
	int readahead;             /* CDP_RA_* */
	int no_willneed;           /* no MADV_WILLNEED of the next batch */
	const cdp_aug_cfg *aug;    /* NULL: no augmentation (copied at open) */
	int raw;                   /* 1: raw batches for the device (see above) */
	int remap_ignore;          /* 1: ignored labels become `ignore` */
	int32_t ignore;
	/* Memory for the batch images and labels, with raw also the valid
	 * masks (NULL: the loader's own):
	 * zeroed, NULL on failure. cdp-train passes a GPU backend's pinned host
	 * memory (be->host_alloc) so that batches copy to the device
	 * asynchronously. alloc_ctx is passed back. */
	void *(*host_alloc)(void *alloc_ctx, size_t bytes);
	void (*host_free)(void *alloc_ctx, void *p);
	void *alloc_ctx;
} cdp_loader_opts;

/* A batch, valid until the next cdp_loader_next, start_epoch or close. */
typedef struct cdp_batch {
	int n;                     /* samples, b (fewer only in validation) */
	int c, h, w;               /* image shape per sample (after a crop) */
	float *image;              /* (n, c, h, w); NULL with opts.raw */
	/* per-pixel (n, h, w), raw (n, in_h, in_w); (n) class; NULL: none */
	int32_t *label;
	/* value pools (label kind f32): (n, targets, h, w) float32 targets,
	 * standardized as (y - tmean) * tinv, NaN where there is none; else NULL */
	float *target;
	int targets;
	/* opts.raw: raw (n, c, in_h, in_w) samples of type dtype (cdp_dtype.h),
	 * aug [n] each sample's transform to (h, w), valid (n, h, w) 1 or 0
	 * (invalid) after the transform, NULL when every pixel is valid */
	const void *raw;
	int dtype, in_h, in_w;
	const cdp_prep_aug *aug;
	const uint8_t *valid;
	const size_t *index;       /* [n] key indices into the pointer file */
	uint64_t epoch, step;
	uint32_t skipped;          /* bad records replaced in this batch */
	double wait_s;             /* how long cdp_loader_next blocked */
} cdp_batch;

typedef struct cdp_loader_info {
	size_t count;              /* keys in the pointer file, N */
	uint64_t keys_seed;        /* the pointer file's header: its seed= and */
	uint32_t keys_crc;         /* crc32= (of the key lines), its identity */
	uint64_t steps;            /* batches per epoch of this rank (a multiple of
	                              opts.accumulate) */
	int batch, c, h, w;        /* output shape (h, w after a crop) */
	int label_kind;            /* CDP_LABEL_* of the pool */
	int32_t ignore;            /* label of ignored pixels */
	size_t value_size;         /* bytes of the first record */
	int readahead;             /* CDP_RA_ON or CDP_RA_OFF, as resolved */
	const char *conv_isa;      /* uint8 conversion kernel: "avx512", "avx2", "sse2", "plain" */
	const cdp_pool_info *pool; /* the pool's meta (stats in pool->band) */
	const float *mean, *inv;   /* [c] the standardization (x - mean) * inv */
	int targets;               /* value pools: targets T, else 0 */
	const float *tmean, *tinv; /* [targets] the targets' (y - tmean) * tinv */
	int raw;                   /* opts.raw */
	int in_h, in_w;            /* tile shape (before a crop) */
	size_t raw_size;           /* bytes of one raw sample, c * in_h * in_w * type */
	uint64_t skipped;          /* bad records replaced since open */
	uint64_t batches;          /* batches returned since open */
	double wait_s;             /* total time cdp_loader_next blocked */
} cdp_loader_info;

typedef struct cdp_loader cdp_loader;

/* Defaults: rank 0 of 1, batch 1, threads 1, CDP_LOAD_POOL, CDP_RA_AUTO. */
void cdp_loader_opts_init(cdp_loader_opts *o);

/* Opens and validates (see above); on failure err gets a one-line reason
 * naming the file and the code is returned: errno values and LMDB codes
 * from opening, the cdp_ptrfile_read codes, CDP_EMISMATCH (uuid), CDP_EKEY
 * (a key not in the pool), CDP_ESHAPE (a record unlike the pool's meta),
 * CDP_ERANGE (training with fewer keys than one global batch and no
 * pad_last), CDP_EFORMAT (an empty pool, bad meta), record decoding codes,
 * CDP_EINVAL (bad options), CDP_ENOMEM. No thread runs until
 * cdp_loader_start_epoch. */
int  cdp_loader_open(const cdp_loader_opts *o, cdp_loader **out, char *err,
                     size_t cap);
/* Starts (or restarts: a batch in progress is discarded) epoch `epoch` at
 * step start_step (0..steps; resuming a run). CDP_EINVAL beyond steps. */
int  cdp_loader_start_epoch(cdp_loader *l, uint64_t epoch, uint64_t start_step);
/* Blocks until the next batch is ready and returns it: 0, CDP_EEOF after
 * the epoch's last batch, CDP_EINVAL before any start_epoch, or a bad
 * record's code (sticky until the next start_epoch). */
int  cdp_loader_next(cdp_loader *l, cdp_batch *b);
/* The last error as "'pool': record 'KEY': reason" ("" when none), and the
 * key alone. */
const char *cdp_loader_error(const cdp_loader *l);
/* 1 when that error is the pool's file changing under the loader: in pool
 * mode a read of a record the file no longer holds (it was truncated, or
 * replaced in place as cp(1) does) faults (SIGBUS), and the loader stops
 * with CDP_ETRUNC and "'pool': data.mdb shrank to N bytes while training
 * (record 'KEY' ends at byte M): the pool changed under the run" instead
 * of the process ending. */
int  cdp_loader_faulted(const cdp_loader *l);
const char *cdp_loader_errkey(const cdp_loader *l);
/* Key of key index k (NUL-terminated), or NULL when out of range. */
const char *cdp_loader_key(const cdp_loader *l, size_t k);
/* The current epoch's order [count] (identity in validation). */
const size_t *cdp_loader_order(const cdp_loader *l);
void cdp_loader_get_info(const cdp_loader *l, cdp_loader_info *info);
void cdp_loader_close(cdp_loader *l);
/* The pool source indices of the pointer file's records (each record
 * header's source field), ascending and distinct, into *src (malloc'ed,
 * *n of them; the caller frees it), without reading every record: a key
 * whose scene (cdp_key_scene) or, for a tile-form key, whole key (a chip
 * of cdp-lmdbpack --list or --folders) is the name of exactly one source
 * (cdp_pool_source_names) comes from that source, as cdp-tile and
 * cdp-lmdbpack write them; only the records of keys that name none or
 * several sources are read (their header's source field); in a pool of
 * one source none is (cdp-lmdbpack refuses a record of a source its input
 * does not describe). The headers open read (a sample of 64, every record
 * in copy mode) are used as read and check the names: when one is of
 * another source than its key names (a pool written by hand or by another
 * writer) every record's header is read. A record whose header is read
 * and does not decode is left out: serving it fails, or skips it with
 * skip_bad. *peeked (may be NULL) counts the headers read here (not those
 * open read). CDP_ENOMEM, CDP_ECRC (a source's meta), LMDB's codes. */
int  cdp_loader_sources(const cdp_loader *l, uint32_t **src, size_t *n, size_t *peeked);
/* Standardizes with mean[c], std[c] (std 0: centred only) instead of the
 * pool's meta statistics, before the first cdp_loader_start_epoch (the
 * info's mean and inv change in place). CDP_ERANGE, as at open, for
 * values that do not fit float32 or a negative std. */
int  cdp_loader_set_standardization(cdp_loader *l, const double *mean, const double *std);

/* The same for the T targets of a value pool (CDP_EINVAL without
 * value labels); at open they are the pool meta's target statistics. */
int  cdp_loader_set_target_standardization(cdp_loader *l, const double *mean, const double *std);

/* CDP_RA_ON or CDP_RA_OFF for records of value_size bytes read with (1) or
 * without (0) MADV_WILLNEED of the next batch: off with it, else on from
 * 128 KiB values (the rule behind CDP_RA_AUTO). */
int  cdp_loader_readahead_auto(size_t value_size, int willneed);

#endif
