/* checkpoint.h: training checkpoints, defined here and in
 * man/cdp-checkpoint.5.
 *
 * A checkpoint holds everything needed to resume training bit for bit or to
 * predict: the model cfg text and overrides, the input shape, every
 * parameter and buffer tensor (by name and shape, in block order), the
 * optimizer state, the progress (step, epoch, position in the epoch's key
 * list, run seed), named RNG states, the input bands, their data type and
 * standardization statistics, the pool UUID and the names of the classes.
 *
 * Little-endian, all sizes explicit:
 *   0   8  magic "CDPCKPT\n"
 *   8   4  u32 version (8; versions 1 to 7 are still read)
 *   12  4  u32 number of chunks (7, and one for each optional chunk)
 *   16  8  u64 file size in bytes, CRC included
 *   24     chunks "META" "CFG " "PARM" "BUFS" "OPTM" "RNG " "DATA", in order,
 *          then the optional ones, each at most once and in this order:
 *          "RANK" (version 3), "SUMS" (version 7), "LIVE" (version 7),
 *          "NORM" (version 7), "FROM" (version 7), "TASK" (version 7),
 *          "PLAN" (version 7), "BEST" (version 8), "RUN " (version 8);
 *          each: 4-byte tag, u32 flags (0 before version 8), u64 payload
 *          length, payload
 *   end-4  u32 CRC-32 (zlib's crc32) of every byte before it
 *
 * Compatibility (version 8). A chunk's flags bit 0 (CDP_CKPT_CHUNK_SKIP)
 * says a reader that does not know its tag may skip it: its length is
 * still checked against the file and it counts among the chunks. Only
 * optional chunks carry it, and each known chunk has its own fixed flags
 * (BEST and RUN: skippable; every other: 0). An unknown chunk without it, or any
 * other flag bit, is refused as written by a newer cdpool (CDP_EVERSION).
 * Unknown skippable chunks may stand anywhere among the optional ones.
 * So a later cdpool adds what an older reader may ignore as a skippable
 * chunk without a new version, and anything an older reader must not
 * ignore with a new version.
 * The payloads are described in cdp-checkpoint(5). Version 2 added the data
 * type to DATA, version 3 the loss scaler to META and the optional RANK
 * chunk, version 4 the global batch to META, version 5 to DATA where the
 * standardization came from (the pool's statistics or the training
 * sources', which sources) and the training pool's CRS and pixel size,
 * version 6 to DATA the names of the classes (the training pool's
 * class_names meta, cdp-pool(5)), so cdp-predict can name them,
 * version 7 the optional SUMS, LIVE, NORM and FROM chunks and origin 3
 * (the initial weights' normalization) in DATA, version 8 the chunk flags
 * (above) and the optional BEST and RUN chunks.
 *
 * The validation that kept a best.cdpt (BEST, version 8, skippable):
 * cdp-train --keep-best writes it into RUNDIR/best.cdpt only:
 *   u32 metric (CDP_CKPT_BEST_*), u32 0, f64 the metric's value at that
 *   validation (finite), u64 the step of that validation (<= META's step).
 * A resume with --keep-best of another metric writes best.cdpt anew.
 *
 * The run's settings and state outside the model (RUN, version 8,
 * skippable): what a resume takes, or checks the run against, that no
 * other chunk holds. cdp-train writes it into every checkpoint.cdpt and
 * best.cdpt; a file without it resumes as before (taking nothing, warning
 * of nothing). 104 bytes:
 *   0   u32 layout (CDP_CKPT_RUN_LAYOUT, 1; a later layout keeps these
 *       104 bytes and adds after them, and this reader skips what it adds)
 *   4   u32 flags: bit 0 (CDP_CKPT_RUN_PAD_LAST) the run had --pad-last;
 *       the other bits 0 (in layout 1)
 *   8   u32 --nan-policy (CDP_CKPT_NAN_*)
 *   12  u32 the CPU compute threads (1 to CDP_CKPT_RUN_THREADS_MAX), 0 on a GPU
 *   16  u64 the steps in a row up to META's step that were not finite
 *       (skipped: 0 under stop), at most the next field
 *   24  u64 the steps skipped as not finite in the run so far, at most
 *       META's step
 *   32  16 bytes the kernels' name (cdp-train's device line: "avx2",
 *       "cuda", ...), 1 to 15 printable ASCII characters, then NULs
 *   48  32 bytes the --val-keys pointer file's uuid in lowercase hex (its
 *       header's, cdp-keys(5)), 32 zero bytes without --val-keys
 *   80  u64 its seed   88 u64 its key count (0 exactly without --val-keys)
 *   96  u32 its crc32  100 u32 0
 *
 * The input normalization (NORM). Pretrained weights expect inputs
 * normalized their own way (ImageNet's mean and std on values in 0..1);
 * an initial-weights checkpoint records it, and cdp-train --init-norm
 * trains with it, recording in DATA the mean and std in band values
 * (mean * scale, std * scale) with origin CDP_CKPT_STD_INIT, so
 * cdp-predict applies it as it applies any standardization:
 *   u32 kind (CDP_CKPT_NORM_*), u32 C (META's input channels),
 *   f64 scale (> 0, or 0: the largest value of the pool's data type),
 *   C f64 means, C f64 deviations (> 0),
 *   u32 number of band names (0 or C), each a u32-length string.
 *
 * Where the initial weights came from (FROM): u32 N (1 to
 * CDP_CKPT_FROM_MAX), then N entries: u32 kind (CDP_CKPT_FROM_*), u32 0,
 * the file's name (u32-length string, 1 to CDP_CKPT_FROM_NAME_MAX bytes),
 * its SHA-256 (32 bytes). A run started with --init records the file and
 * that file's own FROM after it; --resume keeps it.
 *
 * The task (TASK): u32 task (CDP_CKPT_TASK_REGRESSION), u32 T (1 to
 * CDP_CKPT_MAX_TARGETS), T f64 target means, T f64 target deviations
 * (> 0): a regression net's outputs are standardized targets, a
 * prediction is output * std + mean.
 *
 * The run's plan (PLAN): what a resume checks the run against. u64 the
 * run's last step (its --epochs or --steps, so a resume with another
 * length can say the schedule is planned anew), then the identity of the
 * training pointer file, its header's fields (cdp-keys(5)): 32 bytes of
 * the uuid in lowercase hex, u64 seed, u64 key count (>= 1), u32 crc32,
 * u32 0. A checkpoint without PLAN resumes unchecked.
 *
 * The trained weights (LIVE). A run with an exponential moving average of
 * its weights (cdp-model(5), [net] ema=) checkpoints the average in PARM,
 * so cdp-predict, cdp-evaluate, --init and Python use it as they use any
 * PARM, and in LIVE the weights the optimizer trains, which --resume
 * continues from: u64 P (PARM's total), then P f32 in PARM's order.
 *
 * The running sums (SUMS). metrics.jsonl's epoch line gives the mean loss
 * of the epoch's steps and a step line that of the steps since the one
 * before; a run stopped between two such lines and resumed would average
 * only the steps after the resume. SUMS carries the sums at the
 * checkpoint's step, so the resumed run's lines equal the uninterrupted
 * run's: f64 the loss summed over this epoch's counted steps, u64 their
 * number, f64 and u64 the same since the last step line. A later chunk of
 * the same kind takes the next place after SUMS.
 *
 * The per-rank state (RANK). With --sync average:K or admm:K:RHO each rank
 * trains its own copy of the model between averaging points, so PARM holds
 * the consensus (the average, or ADMM's z) and OPTM rank 0's optimizer, and
 * exactly resuming needs what each rank holds besides: its parameters, its
 * optimizer moments and step count, ADMM's dual u, its batchnorm running
 * statistics. With --sync allreduce on 2 or more ranks the ranks share one
 * model, but each moves its own batchnorm statistics (BUFS holds their
 * average): RANK then holds those alone (CDP_CKPT_RANK_BUFFERS, sync 0,
 * K 1). RANK records them for every rank r of the j that wrote it,
 * each a block of `stride` floats (cdp_ckpt_rank_stride):
 *   [P] parameters      CDP_CKPT_RANK_PARAMS   (P = PARM's total)
 *   [P] x nm moments    CDP_CKPT_RANK_OPTIM    (nm = OPTM's blocks: AdamW
 *                                               m then v, SGD's momentum)
 *   [P] dual u          CDP_CKPT_RANK_DUAL
 *   [B] buffers         CDP_CKPT_RANK_BUFFERS  (B = BUFS's total)
 * (those whose flag is set, in this order), with the sync mode, K and RHO it
 * was run with, and its own version and CRC, so a damaged section names
 * itself even inside a file whose CRC was recomputed.
 *
 * The reader needs no net: cdp_ckpt_read returns the cfg text, overrides and
 * input shape, from which a caller builds the net (cdp_net_build), then
 * cdp_ckpt_to_net copies the tensors in, checking names and shapes.
 * cdp_ckpt_write replaces the file atomically under the output policy
 * (cdp_out.h): a temporary file in the same directory, fsync, rename, fsync
 * of the directory; on failure the old file is untouched and the temporary
 * is removed; a FIFO, device or directory at the path is CDP_ESPECIAL, an
 * LMDB database file CDP_EKEEP (a checkpoint there it replaces, which other
 * writers may not: CDP_OUT_CKPT).
 *
 * Errors are lib/cdp_error.h codes (errno values for system failures):
 *   CDP_EMAGIC    not a checkpoint
 *   CDP_EVERSION  a version this build does not read
 *   CDP_ETRUNC    shorter than its header says (or than a header)
 *   CDP_ECRC      checksum mismatch: the bytes are damaged
 *   CDP_EFORMAT   a field out of range or inconsistent, or extra bytes
 *   CDP_EOVERFLOW a size that does not fit in memory arithmetic
 *   CDP_ENOMEM    allocation failed
 *   CDP_EMISMATCH (to_net, to_optim) tensors or state do not fit the target
 * Every size is checked against the bytes present before anything is
 * allocated, so a damaged or hostile file cannot make the reader read
 * outside it or allocate more than a small multiple of its size.
 *
 * Sources: checkpoint.c (writing, validation), checkpoint_read.c (reading),
 * checkpoint_net.c (filling from and restoring to nets and optimizers).
 */
#ifndef CDP_CHECKPOINT_H
#define CDP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "cdp_rng.h"
#include "cdp_stats.h"
#include "net.h"
#include "optim.h"

#define CDP_CKPT_MAGIC      "CDPCKPT\n"
#define CDP_CKPT_VERSION    8
#define CDP_CKPT_VERSION_MIN 1         /* oldest version read */
#define CDP_CKPT_RANK_VERSION 1        /* of the RANK chunk's layout */
#define CDP_CKPT_MAX_RANKS  (1 << 20)
#define CDP_CKPT_NAME_MAX   95          /* tensor and RNG stream names */
#define CDP_CKPT_MAX_DIMS   4
#define CDP_CKPT_CFG_MAX    CDP_CFG_TEXT_MAX /* cfg text bytes (cfg.h) */
#define CDP_CKPT_MAX_OVERRIDES 256
#define CDP_CKPT_OVERRIDE_MAX  4096
#define CDP_CKPT_MAX_RNG    1024
#define CDP_CKPT_MAX_BANDS  65535
#define CDP_CKPT_MAX_TARGETS 65536   /* TASK's T at most (a record's label planes) */
enum { CDP_CKPT_TASK_REGRESSION = 1 };   /* TASK's task */
#define CDP_CKPT_CRS_MAX    65536       /* bytes of the CRS text */
#define CDP_CKPT_MAX_SOURCES (1 << 24)  /* standardization sources listed */
#define CDP_CKPT_MAX_CLASSES 65536      /* class names (a u16 label's ids) */
#define CDP_CKPT_CLASS_NAME_MAX CDP_CLASS_NAME_MAX  /* bytes of one class name */

/* A chunk header's flags (version 8; 0 before) */
#define CDP_CKPT_CHUNK_SKIP 1u          /* a reader that does not know the tag skips it */

/* BEST's metric (version 8): cdp-train's --keep-best words, in order */
enum {
	CDP_CKPT_BEST_MIOU = 1, CDP_CKPT_BEST_LOSS = 2, CDP_CKPT_BEST_ACC = 3,
	CDP_CKPT_BEST_F1 = 4, CDP_CKPT_BEST_MAP = 5, CDP_CKPT_BEST_RMSE = 6,
	CDP_CKPT_BEST_R2 = 7
};
#define CDP_CKPT_BEST_MAX CDP_CKPT_BEST_R2

/* RUN (version 8, skippable): its layout, flags and --nan-policy words */
#define CDP_CKPT_RUN_LAYOUT 1
#define CDP_CKPT_RUN_PAD_LAST 1u
#define CDP_CKPT_RUN_THREADS_MAX 65536
#define CDP_CKPT_RUN_KERNELS_MAX 15     /* bytes of the kernels' name */
enum { CDP_CKPT_NAN_STOP = 1, CDP_CKPT_NAN_SKIP = 2 };

/* Where the standardization (mean, std) came from (DATA, version 5). */
enum {
	CDP_CKPT_STD_UNKNOWN = 0,   /* not recorded (versions 1 to 4) */
	CDP_CKPT_STD_POOL = 1,      /* the pool's statistics over every tile */
	CDP_CKPT_STD_SOURCES = 2,   /* the exact sums of the training keys' sources */
	CDP_CKPT_STD_INIT = 3       /* (version 7) the initial weights' own input
	                             * normalization (cdp-train --init-norm) */
};

/* The input normalization initial weights expect (NORM, version 7): a
 * channel is (band value / scale - mean) / std. */
enum {
	CDP_CKPT_NORM_NONE = 1,     /* mean 0, std 1: the scaled values as they are */
	CDP_CKPT_NORM_IMAGENET = 2, /* ImageNet's RGB mean and std */
	CDP_CKPT_NORM_GIVEN = 3     /* the means and deviations given */
};
#define CDP_CKPT_NORM_BAND_MAX 255  /* bytes of a band's name */

/* Where initial weights came from (FROM, version 7): what a file was. */
enum {
	CDP_CKPT_FROM_CKPT = 1,     /* a cdpool checkpoint (cdp-train --init) */
	CDP_CKPT_FROM_TORCH = 2     /* a PyTorch state dict (import-torch) */
};
#define CDP_CKPT_FROM_MAX 16        /* entries kept: the file, its own origin, ... */
#define CDP_CKPT_FROM_NAME_MAX 4096 /* bytes of a file's name */

typedef struct cdp_ckpt_from {
	int kind;                           /* CDP_CKPT_FROM_* */
	char *name;                         /* the file's name as it was given */
	unsigned char sha256[32];           /* the SHA-256 of its bytes */
} cdp_ckpt_from;

typedef struct cdp_ckpt_tensor {
	char name[CDP_CKPT_NAME_MAX + 1];   /* "enc0.w", "bn3.mean", ... */
	int ndim;
	int dims[CDP_CKPT_MAX_DIMS];
	size_t numel;
	float *data;                        /* host, numel floats */
} cdp_ckpt_tensor;

/* RANK: the run's --sync mode (as train.h numbers them) and which blocks
 * each rank's state holds. */
/* META's kind (version 7) */
#define CDP_CKPT_KIND_INITIAL 1

enum { CDP_CKPT_SYNC_ALLREDUCE = 0, CDP_CKPT_SYNC_AVERAGE = 1, CDP_CKPT_SYNC_ADMM = 2 };
enum {
	CDP_CKPT_RANK_PARAMS = 1, CDP_CKPT_RANK_OPTIM = 2, CDP_CKPT_RANK_DUAL = 4,
	CDP_CKPT_RANK_BUFFERS = 8
};

typedef struct cdp_ckpt_rng {
	char name[CDP_CKPT_NAME_MAX + 1];
	uint64_t s[4];                      /* cdp_rng state */
} cdp_ckpt_rng;

/* Every pointer is malloc'ed and owned by the struct; cdp_ckpt_free frees
 * them. Zero-initialise before filling one by hand. */
typedef struct cdp_ckpt {
	/* the model */
	char *cfg_text;
	char **overrides;
	int noverrides;
	int in_c, in_h, in_w;
	cdp_ckpt_tensor *params;            /* in parameter-block order */
	int nparams;
	cdp_ckpt_tensor *buffers;           /* in buffer-block order */
	int nbuffers;
	/* the optimizer; optim.type 0: none saved (an inference export) */
	cdp_optim_cfg optim;
	long optim_step;
	size_t optim_n;                     /* floats per moment block */
	float *optim_m, *optim_v;           /* as in cdp_optim: NULL when unused */
	/* progress */
	uint64_t step, epoch;
	uint64_t data_pos;                  /* samples of this epoch consumed */
	uint64_t seed;                      /* the run seed */
	cdp_ckpt_rng *rng;
	int nrng;
	/* the data */
	int *bands;                         /* 1-based band indices */
	int nbands;
	double *mean, *std;                 /* per band, NULL when not standardized */
	int dtype;                          /* the pool's cdp_dtype (cdp_dtype.h), 0 unknown;
	                                     * set by hand, 0 after reading a version 1 file */
	char pool_uuid[33];                 /* 32 lowercase hex, or "" */
	/* DATA, version 5 (all 0 / NULL when older): std_from a
	 * CDP_CKPT_STD_*; std_sources[nstd_sources] the pool's source indices
	 * whose sums made mean and std (CDP_CKPT_STD_SOURCES, at least one,
	 * ascending, distinct); crs the training sources' CRS as WKT, NULL or
	 * "" when unknown; res_x, res_y their pixel width and height in CRS
	 * units (> 0), 0 when unknown */
	int std_from;
	uint32_t *std_sources;
	int nstd_sources;
	char *crs;
	double res_x, res_y;
	/* DATA, version 6 (NULL, 0 when older or unnamed): class k's name for
	 * k = 0..nclass_names-1, each cdp_ckpt_class_name_ok; at most the
	 * net's classes (max(classes, 2): a sigmoid head has two), which
	 * cdp_ckpt_to_net checks */
	char **class_names;
	int nclass_names;
	/* dynamic loss scaling (META, version 3): the scale, 0 when the run
	 * did not scale; finite steps since it last changed; steps skipped */
	double loss_scale;
	uint64_t scale_good, scale_skipped;
	/* the global batch (META, version 4): samples per rank and
	 * micro-batch, ranks, micro-batches accumulated per step; all 0 when
	 * unknown (older versions), else all >= 1, their product the global
	 * batch (cdp_ckpt_global_batch) that the data position counts in */
	int batch, batch_ranks, batch_accumulate;
	/* the kind (META, version 7): 0 a run's checkpoint, CDP_CKPT_KIND_INITIAL
	 * initial weights (python3 -m cdpool import-torch): no optimizer (type
	 * 0), no progress, RNG streams, per-rank state or sums, and PARM/BUFS
	 * possibly only part of the net's tensors, for cdp-train --init
	 * (cdp_ckpt_take) */
	int initial;
	/* the input normalization the weights expect (NORM, version 7; an
	 * import's, python3 -m cdpool import-torch --input-norm): norm_kind a
	 * CDP_CKPT_NORM_*, 0 none recorded; channel c is (band value /
	 * norm_scale - norm_mean[c]) / norm_std[c], norm_scale > 0, or 0: the
	 * largest value of the pool's data type (1 for floats); in_c means and
	 * deviations (finite, deviations > 0); norm_bands[nnorm_bands] the
	 * names or 1-based indices of the bands the channels expect, in order
	 * (0 or in_c of them, each 1 to CDP_CKPT_NORM_BAND_MAX printable ASCII
	 * characters without space or comma) */
	int norm_kind;
	double norm_scale;
	double *norm_mean, *norm_std;
	char **norm_bands;
	int nnorm_bands;
	/* where the initial weights came from (FROM, version 7; nfrom 0:
	 * nothing recorded, a run from random weights): from[0] the file they
	 * were read from (cdp-train --init's, or the state dict of an import),
	 * from[i + 1] where from[i]'s came from, at most CDP_CKPT_FROM_MAX */
	cdp_ckpt_from *from;
	int nfrom;
	/* the task (TASK, version 7; task 0: none recorded, a class map or
	 * chip classes): CDP_CKPT_TASK_REGRESSION for a net trained on value
	 * labels, with ntargets (1 to CDP_CKPT_MAX_TARGETS, the head's
	 * channels) targets standardized as (y - target_mean[t]) /
	 * target_std[t] (finite, std > 0), so a prediction is
	 * output * std + mean */
	int task;
	int ntargets;
	double *target_mean, *target_std;
	/* the running sums of metrics.jsonl's means (SUMS, version 7);
	 * has_sums 0: none (older versions, or not a training run's). Each
	 * loss sum finite, each count at most step. */
	int has_sums;
	double sum_epoch_loss, sum_log_loss;
	uint64_t sum_epoch_steps, sum_log_steps;
	/* the run's plan (PLAN, version 7); has_plan 0: none recorded (an
	 * older file, or not a training run's). plan_total >= step, >= 1;
	 * keys_uuid 32 lowercase hex digits, keys_count >= 1. */
	int has_plan;
	uint64_t plan_total;
	char keys_uuid[33];
	uint64_t keys_seed, keys_count;
	uint32_t keys_crc;
	/* the validation that kept this file (BEST, version 8; has_best 0:
	 * none, every file but a --keep-best best.cdpt): the metric (a
	 * CDP_CKPT_BEST_*), its value there (finite), the step of that
	 * validation (at most step) */
	int has_best;
	int best_metric;
	double best_value;
	uint64_t best_step;
	/* the run's settings and state outside the model (RUN, version 8;
	 * has_run 0: none, an older file or not a run's): run_pad_last 0 or
	 * 1; run_nan_policy a CDP_CKPT_NAN_*; run_nan_row the non-finite
	 * steps in a row up to step (0 under CDP_CKPT_NAN_STOP), at most
	 * run_nan_skipped, at most step; run_threads 0 (a GPU) to
	 * CDP_CKPT_RUN_THREADS_MAX; run_kernels 1 to CDP_CKPT_RUN_KERNELS_MAX
	 * printable ASCII characters; the --val-keys pointer file's identity,
	 * val_count 0 and val_uuid "" (and seed, crc 0) without one, else
	 * val_uuid 32 lowercase hex digits */
	int has_run;
	int run_pad_last, run_nan_policy, run_threads;
	uint64_t run_nan_row, run_nan_skipped;
	char run_kernels[CDP_CKPT_RUN_KERNELS_MAX + 1];
	char val_uuid[33];
	uint64_t val_seed, val_count;
	uint32_t val_crc;
	/* the trained weights when PARM holds their moving average (LIVE,
	 * version 7): nlive (PARM's total) floats in PARM's order; NULL none */
	float *live;
	size_t nlive;
	/* the per-rank state (RANK); nranks 0: none */
	int nranks;                         /* j of the run that wrote it */
	int rank_sync;                      /* CDP_CKPT_SYNC_* */
	long rank_k;                        /* K of average:K / admm:K:RHO, >= 1 */
	double rank_rho;                    /* RHO (admm), else 0 */
	unsigned rank_what;                 /* CDP_CKPT_RANK_* blocks held */
	long *rank_optim_step;              /* [nranks] each rank's optimizer steps */
	float *rank_data;                   /* stride floats per rank held, in rank order */
	int rank_bad;                       /* r + 1: rank r's state, not held, holds */
	size_t rank_bad_at;                 /* a value that is not finite at this */
	float rank_bad_value;               /* element (refused as a held one is); 0 none */
	int rank_loaded;                    /* -1: every rank's data is held; r: only
	                                     * rank r's (cdp_ckpt_read_rank), none
	                                     * when r >= nranks */
} cdp_ckpt;

/* batch x ranks x accumulate, 0 when not recorded */
uint64_t cdp_ckpt_global_batch(const cdp_ckpt *ck);

/* Reads and validates path. On error *ck is left zeroed. */
int  cdp_ckpt_read(const char *path, cdp_ckpt *ck);
/* The same, but of the per-rank state keeps only rank `rank`'s data (every
 * rank's is still validated), so each of j ranks resuming holds its own
 * share and not j of them: rank_loaded becomes `rank` (when the file has
 * fewer ranks, no rank's data is held). rank -1 keeps all, as read does.
 * On an error inside a chunk, tag gets the chunk's tag ("RANK"), else "",
 * so a message can say which part of an intact file is damaged. */
int  cdp_ckpt_read_rank(const char *path, int rank, cdp_ckpt *ck, char tag[5]);
/* The two halves of read_rank, for a file that one process reads and
 * others get by message (cdp-train --resume: rank 0 reads and broadcasts
 * the bytes, so only its host needs the file). load: the file's bytes in
 * *buf (malloc'ed; *len of them) after its header's size was checked
 * against the file's, so a damaged header allocates nothing; errno values,
 * CDP_EMAGIC, CDP_EVERSION, CDP_ETRUNC, CDP_EFORMAT, CDP_EOVERFLOW,
 * CDP_ENOMEM. decode_rank: validates and parses buf[0..len) exactly as
 * read_rank parses a file (rank and tag as there). */
int  cdp_ckpt_load(const char *path, unsigned char **buf, size_t *len);
/* cdp_ckpt_load, and on error why (cap bytes) says what is wrong: by how
 * many bytes the file and its size field differ, or cdp_strerror's text. */
int  cdp_ckpt_load_why(const char *path, unsigned char **buf, size_t *len, char *why,
                       size_t cap);
int  cdp_ckpt_decode_rank(const unsigned char *buf, size_t len, int rank, cdp_ckpt *ck,
                          char tag[5]);
/* The same as cdp_ckpt_read_rank, but on error why (cap bytes) says what is
 * wrong, for a message after the file's name: the first non-finite float
 * ("parameter tensor 'conv0.w' holds NaN at element 3"), a band's
 * standardization, or else the chunk at fault and cdp_strerror's text. */
int  cdp_ckpt_read_why(const char *path, int rank, cdp_ckpt *ck, char *why, size_t cap);
/* The same in memory (a checkpoint rank 0 read and broadcast). */
int  cdp_ckpt_decode_why(const unsigned char *buf, size_t len, int rank, cdp_ckpt *ck,
                         char *why, size_t cap);
/* What every reader and writer checks of the values: 0, or -1 with why
 * saying what is wrong. Besides the ranges, every float must be finite:
 * parameters, buffers, optimizer moments and per-rank state (a NaN weight,
 * even under a valid CRC, is refused). cdp_ckpt_write's CDP_EINVAL is this
 * check failing (or a per-rank state not wholly held): call it for the
 * reason. */
int  cdp_ckpt_validate(const cdp_ckpt *ck, char *why, size_t cap);
/* Writes ck to path atomically (see above). */
int  cdp_ckpt_write(const char *path, const cdp_ckpt *ck);
/* The same in memory: encode mallocs *buf; decode validates as read does. */
int  cdp_ckpt_encode(const cdp_ckpt *ck, unsigned char **buf, size_t *len);
int  cdp_ckpt_decode(const unsigned char *buf, size_t len, cdp_ckpt *ck);
void cdp_ckpt_free(cdp_ckpt *ck);

/* Fillers; each copies what it is given. */
int  cdp_ckpt_set_cfg(cdp_ckpt *ck, const char *text, const char *const *overrides, int n);
/* Copies the net's parameters and buffers (device to host), its cfg text is
 * NOT taken (set it with the overrides by cdp_ckpt_set_cfg) but its input
 * shape is. Tensors are named "<layer>.w", "<layer>.b" and, for bn,
 * "<layer>.mean" and "<layer>.var" (other buffers "<layer>.buf"). */
int  cdp_ckpt_from_net(cdp_ckpt *ck, const cdp_net *net);
/* Copies the optimizer's settings, step and moment blocks (to host). */
int  cdp_ckpt_set_optim(cdp_ckpt *ck, const cdp_optim *o);
/* Adds or replaces the named RNG state. */
int  cdp_ckpt_set_rng(cdp_ckpt *ck, const char *name, const cdp_rng *r);
/* bands[n] 1-based; mean/std (n each) or NULL */
int  cdp_ckpt_set_data(cdp_ckpt *ck, const int *bands, int n, const double *mean,
                       const double *std);
/* Where mean/std came from: from a CDP_CKPT_STD_*, src[nsrc] the sources
 * (copied; NULL, 0 unless CDP_CKPT_STD_SOURCES); and the georeference of
 * the training data: crs (copied; NULL unknown), pixel size res_x, res_y
 * (0 unknown). */
int  cdp_ckpt_set_origin(cdp_ckpt *ck, int from, const uint32_t *src, int nsrc,
                         const char *crs, double res_x, double res_y);
/* names[n] the classes' names (copied; NULL, 0: none). CDP_EINVAL when n
 * is out of 0..CDP_CKPT_MAX_CLASSES or a name is not
 * cdp_ckpt_class_name_ok (ck unchanged), CDP_ENOMEM. */
int  cdp_ckpt_set_class_names(cdp_ckpt *ck, const char *const *names, int n);
/* The input normalization (NORM): kind a CDP_CKPT_NORM_*, scale, mean
 * and std [n] (n the input channels), bands[nb] (NULL, 0: none), all
 * copied, replacing any. CDP_EINVAL for values a reader would refuse,
 * CDP_ENOMEM. */
int  cdp_ckpt_set_norm(cdp_ckpt *ck, int kind, double scale, const double *mean,
                       const double *std, int n, const char *const *bands, int nb);
/* TASK: task CDP_CKPT_TASK_REGRESSION, mean and std [n] copied, replacing
 * any. CDP_EINVAL for values a reader would refuse, CDP_ENOMEM. */
int  cdp_ckpt_set_task(cdp_ckpt *ck, int task, const double *mean, const double *std, int n);
/* Appends an entry to FROM (the name copied): CDP_EINVAL for a kind, name
 * or count a reader would refuse, CDP_ENOMEM. */
int  cdp_ckpt_add_from(cdp_ckpt *ck, int kind, const char *name,
                       const unsigned char sha256[32]);
/* The --keep-best word of a CDP_CKPT_BEST_* ("miou", "loss", "acc", "f1",
 * "map", "rmse", "r2"), NULL for another number. */
const char *cdp_ckpt_best_name(int metric);
/* What a band name of NORM must be: 1, or 0. */
int  cdp_ckpt_norm_band_ok(const char *s);
/* What a class name must be: cdp_class_name_ok (cdp_stats.h), 1 to
 * CDP_CKPT_CLASS_NAME_MAX bytes of valid UTF-8 without control characters
 * (C0, DEL, C1: no newline or tab). 1, or 0 with why (cap bytes) saying
 * what is wrong ("is empty", "has a control character at byte 3", ...). */
int  cdp_ckpt_class_name_ok(const char *s, char *why, size_t cap);

/* Copies the tensors into a built net; every tensor's name and shape must
 * match the net's, in order, and cover its blocks exactly, and the class
 * names be no more than the net's classes (max(classes, 2)). On
 * CDP_EMISMATCH err names the first difference and the net is unchanged. */
int  cdp_ckpt_to_net(const cdp_ckpt *ck, cdp_net *net, char *err, size_t cap);

/* Initial weights: copies into a built net each of its tensors that the
 * checkpoint holds under the same name and shape (in any order), leaving
 * the others as they are. each (when not NULL) is called once per net
 * tensor in block order with its name and why NULL when it was taken, else
 * why it was not ("missing", "(64,3,7,7) in the checkpoint, the net has
 * (64,4,7,7)"); *ntaken and *ntotal (when not NULL) count them. CDP_OK, or
 * CDP_EOVERFLOW when the net's tensors do not tile its blocks. */
int  cdp_ckpt_take(const cdp_ckpt *ck, cdp_net *net,
                   void (*each)(void *ctx, const char *name, const char *why), void *ctx,
                   int *ntaken, int *ntotal);
/* Restores the step and moment blocks into o, initialised (cdp_optim_init)
 * with the same optimizer type and parameter count; settings stay o's. */
int  cdp_ckpt_to_optim(const cdp_ckpt *ck, cdp_optim *o, char *err, size_t cap);
/* The named RNG state into *r: 0, or -1 when absent. */
int  cdp_ckpt_get_rng(const cdp_ckpt *ck, const char *name, cdp_rng *r);

/* Per-rank state. The floats one rank's state takes with these blocks, P
 * parameters, B buffers and nm moment blocks: SIZE_MAX on overflow. */
size_t cdp_ckpt_rank_floats(unsigned what, size_t P, size_t B, int nm);
/* ... for ck (its PARM and BUFS totals and OPTM's blocks). */
size_t cdp_ckpt_rank_stride(const cdp_ckpt *ck);
/* Allocates rank_data and rank_optim_step (zeroed) for nranks ranks with
 * the blocks `what`, after PARM, BUFS and OPTM are set; the caller fills
 * them, e.g. by gathering from the ranks. Replaces earlier per-rank state.
 * CDP_EINVAL for settings a reader would refuse, CDP_EOVERFLOW, CDP_ENOMEM. */
int  cdp_ckpt_set_ranks(cdp_ckpt *ck, int nranks, int sync, long k, double rho,
                        unsigned what);
/* Rank r's block `what` (one CDP_CKPT_RANK_* flag; for CDP_CKPT_RANK_OPTIM
 * the first moment block, the next follows P floats on), or NULL when the
 * block or the rank's data is not held. */
float *cdp_ckpt_rank_block(const cdp_ckpt *ck, int r, unsigned what);

#endif
