/* loader_int.h: the loader's internals, shared by loader.c (batches,
 * threads), loader_open.c (validation, open, close) and loader_conv.c
 * (conversion kernels). Not a contract: only those files and the loader's
 * tests include it.
 */
#ifndef CDP_LOADER_INT_H
#define CDP_LOADER_INT_H

#include <pthread.h>
#include <stdint.h>

#include "cdp_key.h"
#include "cdp_ptrfile.h"
#include "loader.h"

#define NSLOT 2             /* double buffering */

typedef struct slot {
	float *image;           /* (b, c, h, w) */
	int32_t *label;         /* (b, h, w) or (b) */
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
	int32_t *tmp_lab;       /* (H, W) */
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
	float *mean, *inv;      /* [C] */
	size_t N, B, steps;      /* keys, global batch j*b, steps per epoch */
	size_t val_count;        /* validation: keys of this rank */
	int C, H, W, oh, ow;     /* record shape; output h, w after a crop */
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

/* Floats per output image and int32s per output label of one sample. */
static inline size_t loader_img_size(const cdp_loader *l)
{
	return (size_t)l->C * l->oh * l->ow;
}

static inline size_t loader_lab_size(const cdp_loader *l)
{
	return l->label_px ? (size_t)l->oh * l->ow : 1;
}

/* Decodes and augments key k into sample i of s (loader_sample.c): 0 or
 * the record's error code (cdp_record_peek/decode codes, CDP_ECRC,
 * CDP_ESHAPE), CDP_EINVAL when augmentation fails. */
int cdp_loader_load_sample(cdp_loader *l, worker *w, size_t k, slot *s, int i);

/* Thread bodies (loader.c), started by cdp_loader_open. */
void *cdp_loader_prefetch_main(void *arg);
void *cdp_loader_helper_main(void *arg);

#endif
