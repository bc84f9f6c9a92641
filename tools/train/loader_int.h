/* loader_int.h: the loader's internals, shared by loader.c (batches,
 * threads), loader_sample.c (one sample), loader_open.c (validation, open,
 * close) and loader_conv.c (conversion kernels). Not a contract: only those
 * files, the loader's tests and bench/loader_kernel.c include it.
 */
#ifndef CDP_LOADER_INT_H
#define CDP_LOADER_INT_H

#include <pthread.h>
#include <stdint.h>

#include "cdp_key.h"
#include "cdp_ptrfile.h"
#include "loader.h"

#define NSLOT 2             /* double buffering */
/* a sample's read from the map faulted (loader.c): the pool's file shrank */
#define LOADER_FAULT (-1999)

typedef struct slot {
	float *image;           /* (b, c, h, w); NULL with raw */
	int32_t *label;         /* (b, h, w), raw (b, H, W); or (b) */
	float *target;          /* value pools: (b, NT, h, w) standardized, NaN: none */
	uint8_t *raw;           /* raw: (b, C, H, W) stored samples */
	uint8_t *valid;         /* raw: (b, h, w) 1 valid, 0 invalid, transformed */
	cdp_prep_aug *aug;      /* raw: [b] transforms */
	unsigned char *invalid; /* raw: [b] 1 when the sample has an invalid pixel */
	size_t *index;          /* [b] key indices */
	size_t *pos;            /* [b] positions in the order (training) */
	int n;
	uint64_t step;
	uint32_t skipped;
	int rc;
	size_t errk;            /* key index of the bad record */
} slot;

typedef struct worker {
	struct cdp_loader *l;
	int id;
	pthread_t th;
	cdp_buf scratch;        /* inflated payloads */
	float *tmp_img;         /* (c, H, W) before augmentation */
	int32_t *tmp_lab;       /* (H, W); raw: the validity before augmentation */
	int32_t *tmp_valid;     /* raw: (h, w) the validity after it; value pools
	                         * with a warp: (h, w) 0 where it read outside */
	float *tmp_tgt;         /* value pools: (NT, H, W) before augmentation */
	const MDB_val *after;   /* the next sample's value, prefetched early */
	int rc, bad_i;          /* first failing sample of its range */
	size_t bad_k;
} worker;

/* Conversion kernels (loader_conv.c), by instruction set. */
enum { CDP_CONV_AUTO = 0, CDP_CONV_PLAIN = 1, CDP_CONV_SSE2 = 2, CDP_CONV_AVX2 = 3,
       CDP_CONV_AVX512 = 4 };

/* d[i] = ((float)s[i] - m) * k for i < n, bit for bit in every kernel.
 * stream: non-temporal stores, to be followed by cdp_loader_conv_fence()
 * before another thread reads d; then the n bytes at next (unless NULL)
 * are prefetched along the way. */
typedef void (*cdp_loader_u8_fn)(const uint8_t *restrict s, float *restrict d, size_t n,
                                 float m, float k, int stream, const uint8_t *next);

/* Kernel `which` (AUTO: the best this CPU runs) and its name, or NULL when
 * this CPU or build lacks it. */
cdp_loader_u8_fn cdp_loader_u8_kernel(int which, const char **name);
void cdp_loader_conv_fence(void);
/* d = (d - m) * k in place over n floats; check: non-finite values become 0 */
void cdp_loader_std_f32(float *d, size_t n, float m, float k, int check);

struct cdp_loader {
	cdp_loader_opts o;
	cdp_loader_u8_fn std_u8; /* the uint8 kernel chosen at open */
	const char *std_u8_isa;
	char *pool_path, *keys_path;
	cdp_aug_cfg aug;
	int has_aug;
	cdp_pool own, *pool;
	MDB_txn *txn;
	cdp_pool_info info;
	cdp_keylist kl;
	MDB_val *val;           /* [N] the records */
	uint8_t *copy;          /* CDP_LOAD_COPY storage */
	unsigned char *bad;     /* [N] known bad (atomic bytes) */
	unsigned char *verified;/* [N] CRC checked (verify_once; atomic bytes) */
	size_t nsample;         /* records whose header open read (resolve) */
	size_t *sample_i;       /* [nsample] their key indices, ascending */
	uint32_t *sample_src;   /* [nsample] their source fields */
	float *mean, *inv;      /* [C] */
	int NT;                 /* value pools: targets T a pixel, else 0 */
	float *tmean, *tinv;    /* [NT] the targets' standardization */
	size_t N, B, steps;      /* keys, global batch j*b, steps per epoch */
	uint32_t keys_crc;       /* the pointer file's crc32= (cdp_loader_info) */
	size_t val_count;        /* validation: keys of this rank */
	int C, H, W, oh, ow;     /* record shape; output h, w after a crop */
	size_t raw_size;         /* bytes of a record's image, C*H*W*type size */
	int label_px;            /* per-pixel labels */
	int32_t ignore, stored_ignore;
	int readahead;
	size_t *order;          /* [N] */
	size_t *adv;            /* [b] the prefetch thread's advice keys */
	uint64_t epoch;

	pthread_t prod;
	int prod_started;
	pthread_mutex_t mu;
	pthread_cond_t cv_prod, cv_cons;
	slot slot[NSLOT];
	/* slots filled, handed to the caller, and given back by it */
	uint64_t gen, next_step, first_step, filled, consumed, released;
	int started, active, busy, quit, held, err;
	int fault;              /* err came from a fault reading the map */
	char errmsg[CDP_KEY_MAX + 512], errkey[CDP_KEY_MAX];
	uint64_t batches, skipped;
	double wait_total;

	int T;                  /* decode threads */
	worker *wk;             /* [T], wk[0] is the prefetch thread's */
	pthread_mutex_t gmu;
	pthread_cond_t gcv_go, gcv_done;
	uint64_t ggen;
	int gpending, gquit, gthreads;
	slot *gslot;
};

/* Makes a SIGBUS in a thread reading the map of a pool (pool mode) end that
 * read with LOADER_FAULT instead of the process (loader.c); once per
 * process, at open. 0 or an errno value. */
int cdp_loader_fault_init(void);

/* Floats per output image and int32s per label of one sample (raw: in the
 * tile's geometry), and bytes per raw sample (raw_size, set at open). */
static inline size_t loader_img_size(const cdp_loader *l)
{
	return (size_t)l->C * l->oh * l->ow;
}

static inline size_t loader_lab_size(const cdp_loader *l)
{
	if (l->NT)
		return 0;                   /* value targets: loader_tgt_size */
	if (l->info.label_kind == CDP_LABEL_MULTI)
		return l->info.label_len;   /* the multi-hot vector (K) */
	if (!l->label_px)
		return 1;
	return l->o.raw ? (size_t)l->H * l->W : (size_t)l->oh * l->ow;
}

/* Floats of one sample's targets (NT, h, w); 0 without value labels. */
static inline size_t loader_tgt_size(const cdp_loader *l)
{
	return (size_t)l->NT * l->oh * l->ow;
}

/* Decodes and augments key k into sample i of s (loader_sample.c), with
 * raw its stored pixels, labels, validity and transform: 0 or the record's
 * error code (cdp_record_peek/decode codes, CDP_ECRC, CDP_ESHAPE),
 * CDP_EINVAL when augmentation fails. */
int cdp_loader_load_sample(cdp_loader *l, worker *w, size_t k, slot *s, int i);
/* Sample i of s as a bad validation record: zeros, every label ignored,
 * (raw) every pixel invalid and the evaluation transform. */
void cdp_loader_blank_sample(cdp_loader *l, slot *s, int i);

/* Thread bodies (loader.c), started by cdp_loader_open. */
void *cdp_loader_prefetch_main(void *arg);
void *cdp_loader_helper_main(void *arg);

#endif
