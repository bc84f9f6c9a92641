/* shuffle.c: cdp-keyshuffle's work (shuffle.h, man/cdp-keyshuffle.1).
 *
 * The pool is opened read-only and its tiles database walked with one
 * cursor whose data argument is NULL, so LMDB never touches a value page:
 * the cost is that of the B-tree's leaf pages, not of the tiles. Selected
 * keys are copied into one arena (LMDB's pointers die with the read txn).
 * The keys arrive in LMDB's byte order, which makes the input of the shuffle
 * independent of how the pool was loaded; the Fisher-Yates shuffle of
 * cdp_rng then makes the output a function of (keys, seed) alone.
 *
 * --stratify reads each record's header (cdp_record_peek) for its class, or
 * for a multi-label pool decodes it for its set of classes (add_classes),
 * which iterative stratification then splits (stratify_multi);
 * --oversample the classes each record holds (its class, or the classes of
 * its label raster's pixels other than the ignore value: cdp_classes) and
 * repeats the training keys by their repeat factor (oversample()); otherwise
 * no value is read. Not done here: printing (main.c does), or any
 * second pass over the pool.
 */
#include "shuffle.h"

#include "cdp_error.h"
#include "cdp_key.h"
#include "cdp_lmdb.h"
#include "cdp_num.h"
#include "cdp_pool.h"
#include "cdp_file.h"
#include "cdp_ptrfile.h"
#include "cdp_progress.h"
#include "cdp_record.h"
#include "cdp_rng.h"
#include "cdp_stats.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG "cdp-keyshuffle"

static void seterr(char *err, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;

	if (!err || cap == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
}

/* The selected keys while the pool is read: offsets into a growing arena. */
typedef struct keybuf {
	char *arena;
	size_t used, cap;
	size_t *off, *len;       /* [n] */
	unsigned char *held;     /* [n] 1: the key's scene is in --val-by */
	uint32_t *cls;           /* [n] --stratify: the record's class */
	int multi;               /* --stratify of multi-label records: cs holds the sets */
	size_t n, ncap;
	/* --oversample: key i holds the classes cs[cs_off[i] .. cs_off[i + 1]) */
	uint32_t *cs;
	size_t *cs_off;          /* [n + 1] */
	size_t ncs, cscap, offcap;
} keybuf;

static int keybuf_add(keybuf *b, const char *k, size_t len, int held, uint32_t cls)
{
	if (b->n == b->ncap) {
		size_t nc = b->ncap ? b->ncap * 2 : 4096;
		size_t *no, *nl;
		unsigned char *nh;
		if (nc > SIZE_MAX / sizeof *no)
			return CDP_EOVERFLOW;
		no = realloc(b->off, nc * sizeof *no);
		if (!no)
			return CDP_ENOMEM;
		b->off = no;
		nl = realloc(b->len, nc * sizeof *nl);
		if (!nl)
			return CDP_ENOMEM;
		b->len = nl;
		nh = realloc(b->held, nc);
		if (!nh)
			return CDP_ENOMEM;
		b->held = nh;
		uint32_t *ncl = realloc(b->cls, nc * sizeof *ncl);
		if (!ncl)
			return CDP_ENOMEM;
		b->cls = ncl;
		b->ncap = nc;
	}
	if (b->cap - b->used < len + 1) {
		size_t nc = b->cap ? b->cap : 1 << 16;
		char *na;
		while (nc - b->used < len + 1) {
			if (nc > SIZE_MAX / 2)
				return CDP_EOVERFLOW;
			nc *= 2;
		}
		na = realloc(b->arena, nc);
		if (!na)
			return CDP_ENOMEM;
		b->arena = na;
		b->cap = nc;
	}
	memcpy(b->arena + b->used, k, len);
	b->arena[b->used + len] = '\0';
	b->off[b->n] = b->used;
	b->len[b->n] = len;
	b->held[b->n] = (unsigned char)held;
	b->cls[b->n] = cls;
	b->used += len + 1;
	b->n++;
	return CDP_OK;
}

static void keybuf_free(keybuf *b)
{
	free(b->arena);
	free(b->off);
	free(b->len);
	free(b->held);
	free(b->cls);
	free(b->cs);
	free(b->cs_off);
	memset(b, 0, sizeof *b);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks the meta as cdp-train does (cdp_pool_info_load: format, uuid,
 * count, shape and stats): a pool every other reader refuses must not get
 * a pointer file that only fails later, at the start of a training run.
 * Stale statistics are refused too, as cdp-pool(5) promises of every
 * reader, though a shuffle reads none of them. An absent count counts 0,
 * and a count that differs from the records is damage. */
static int check_meta(cdp_pool *p, MDB_txn *txn, const char *db,
                      char uuid[33], uint64_t *count, char *err, size_t cap)
{
	cdp_pool_info info;
	char why[256];
	int rc = cdp_pool_info_load_txn(p, txn, &info, why, sizeof why);

	if (rc != CDP_OK) {
		seterr(err, cap, "'%s': %s", db, why);
		return rc;
	}
	memcpy(uuid, info.uuid, 33);
	*count = info.tiles;
	cdp_pool_info_free(&info);
	return CDP_OK;
}

/* Opens db as a pool, telling "no such file" apart from "not a pool". */
static int open_pool(const char *db, cdp_pool *p, char *err, size_t cap)
{
	struct stat st;
	char *data, why[128];
	size_t n = strlen(db);
	int rc;

	if (stat(db, &st) != 0) {
		rc = errno;
		seterr(err, cap, "cannot open '%s': %s", db, strerror(rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		seterr(err, cap, "'%s': not a cdpool pool: not a directory", db);
		return ENOTDIR;
	}
	data = malloc(n + sizeof "/data.mdb");
	if (!data) {
		seterr(err, cap, "%s", cdp_strerror(CDP_ENOMEM));
		return CDP_ENOMEM;
	}
	snprintf(data, n + sizeof "/data.mdb", "%s/data.mdb", db);
	rc = stat(data, &st) != 0 ? errno : 0;
	free(data);
	if (rc == ENOENT) {
		seterr(err, cap, "'%s': not a cdpool pool: no data.mdb", db);
		return CDP_EFORMAT;
	}
	rc = cdp_pool_open(db, CDP_POOL_RDONLY | CDP_POOL_NORDAHEAD, 0, p);
	if (rc > 0)
		seterr(err, cap, "cannot open '%s': %s", db, strerror(rc));
	else if (rc == CDP_ETRUNC || rc == MDB_READERS_FULL)   /* not the pool's fault */
		seterr(err, cap, "cannot open '%s': %s", db, cdp_pool_strerror(p, rc, why, sizeof why));
	else if (rc == CDP_EVERSION)
		seterr(err, cap, "'%s': pool version is newer than this program "
		       "reads (%d)", db, CDP_POOL_VERSION);
	else if (rc == CDP_ELMDB)
		seterr(err, cap, "'%s': not a cdpool pool: no tiles or meta "
		       "database", db);
	else if (rc == CDP_EFORMAT)
		seterr(err, cap, "'%s': not a cdpool pool: missing or wrong format "
		       "record", db);
	else if (rc != CDP_OK)
		seterr(err, cap, "'%s': not a cdpool pool: %s", db, cdp_strerror(rc));
	return rc;
}

/* --oversample: appends the classes record v holds to kb's sets, as key
 * kb->n's (called before keybuf_add). scratch and h are reused. */
static int add_classes(keybuf *b, const MDB_val *v, cdp_buf *scratch, cdp_classes *h,
                       const char **why)
{
	cdp_record r;
	size_t need;
	int rc;

	*why = NULL;
	if ((rc = cdp_record_peek(v->mv_data, v->mv_size, &r)) != CDP_OK)
		return rc;
	if (r.label_kind == CDP_LABEL_NONE) {
		*why = "no label";
		return CDP_EUNSUP;
	}
	if (r.label_kind != CDP_LABEL_CLASS &&
	    (rc = cdp_record_decode(v->mv_data, v->mv_size, &r, scratch)) != CDP_OK)
		return rc;
	cdp_classes_reset(h);
	if ((rc = cdp_classes_add_record(h, &r)) != CDP_OK)
		return rc;
	need = b->ncs + h->len;
	if (need > b->cscap) {
		size_t nc = b->cscap ? b->cscap : 4096;
		uint32_t *ncs;
		while (nc < need)
			nc *= 2;
		if (!(ncs = realloc(b->cs, nc * sizeof *ncs)))
			return CDP_ENOMEM;
		b->cs = ncs;
		b->cscap = nc;
	}
	for (size_t c = 0; c < h->len; c++)
		if (h->n[c] > 0)
			b->cs[b->ncs++] = (uint32_t)c;
	if (b->n + 2 > b->offcap) {
		size_t nc = b->offcap ? b->offcap * 2 : 4096, *no;
		if (!(no = realloc(b->cs_off, nc * sizeof *no)))
			return CDP_ENOMEM;
		b->cs_off = no;
		b->offcap = nc;
		b->cs_off[0] = 0;
	}
	b->cs_off[b->n + 1] = b->ncs;
	return CDP_OK;
}

/* Reads every key of the tiles database into kb, keeping those that match a
 * glob (all when there are none) and marking those of a --val-by scene.
 * names is sorted; nkeys[i] counts the kept keys of names[i]. */
static int read_keys(cdp_pool *p, MDB_txn *txn, const char *db,
                     const ks_options *o, const char **names, size_t nnames,
                     size_t *nkeys, uint64_t meta_count, size_t *scanned,
                     keybuf *kb, char *err, size_t cap)
{
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	cdp_progress pg;
	char key[CDP_KEY_MAX], name[CDP_KEY_MAX];
	uint64_t row, col;
	size_t seen = 0;
	cdp_buf scratch = { 0 };
	cdp_classes hist = { 0 };
	int want_v = o->stratify || o->noversample > 0;
	int rc, sets;

	rc = mdb_cursor_open(txn, p->tiles, &cur);
	if (rc != MDB_SUCCESS) {
		seterr(err, cap, "cannot read '%s': %s", db, cdp_strerror(rc));
		return rc;
	}
	cdp_progress_start(&pg, o->progress, PROG, "reading keys", meta_count);
	/* data = NULL: LMDB then skips reading the value (mdb_node_read). */
	while ((rc = mdb_cursor_get(cur, &k, want_v ? &v : NULL, MDB_NEXT)) == MDB_SUCCESS) {
		const char *const *hit = NULL;
		int keep = o->nglobs == 0;
		uint32_t cls = 0;

		seen++;
		if ((seen & 4095) == 0)
			cdp_progress_update(&pg, seen);
		rc = CDP_EKEY;
		if (k.mv_size < sizeof key) {
			memcpy(key, k.mv_data, k.mv_size);
			key[k.mv_size] = '\0';
			rc = cdp_key_scene(key, k.mv_size, name, sizeof name, &row, &col);
		}
		if (rc < 0) {
			seterr(err, cap, "'%s': invalid key '%.*s' in the pool", db,
			       (int)(k.mv_size > 80 ? 80 : k.mv_size), (const char *)k.mv_data);
			goto out;
		}
		for (size_t g = 0; g < o->nglobs && !keep; g++)
			keep = cdp_key_match(o->globs[g], key);
		if (!keep)
			continue;
		if (o->stratify) {
			cdp_record r;
			if ((rc = cdp_record_peek(v.mv_data, v.mv_size, &r)) != CDP_OK) {
				seterr(err, cap, "'%s': key '%s': %s", db, key, cdp_strerror(rc));
				goto out;
			}
			if (r.label_kind != CDP_LABEL_CLASS && r.label_kind != CDP_LABEL_MULTI) {
				rc = CDP_EUNSUP;
				seterr(err, cap, "'%s': --stratify needs one class or one set of classes "
				       "(multi-label) per record; key '%s' has %s", db, key,
				       r.label_kind == CDP_LABEL_NONE ? "no label" : "a label raster");
				goto out;
			}
			/* the pool's shape holds one label kind for all */
			kb->multi = r.label_kind == CDP_LABEL_MULTI;
			cls = r.class_id;
		}
		sets = o->noversample > 0 || kb->multi;
		if (sets) {
			const char *why;
			if ((rc = add_classes(kb, &v, &scratch, &hist, &why)) != CDP_OK) {
				if (why)
					seterr(err, cap, "'%s': --oversample needs labels; key '%s' has %s",
					       db, key, why);
				else
					seterr(err, cap, "'%s': key '%s': %s", db, key, cdp_strerror(rc));
				goto out;
			}
		}
		if (nnames > 0) {
			const char *np = name;
			hit = bsearch(&np, names, nnames, sizeof *names, cmp_str);
			if (hit)
				nkeys[hit - names]++;
		}
		rc = keybuf_add(kb, key, k.mv_size, hit != NULL, cls);
		if (rc != CDP_OK) {
			seterr(err, cap, "'%s': %s", db, cdp_strerror(rc));
			goto out;
		}
	}
	if (rc != MDB_NOTFOUND) {
		seterr(err, cap, "cannot read '%s': %s", db, cdp_strerror(rc));
		goto out;
	}
	rc = CDP_OK;
out:
	cdp_progress_update(&pg, seen);
	cdp_progress_finish(&pg, rc == CDP_OK);
	mdb_cursor_close(cur);
	cdp_buf_free(&scratch);
	cdp_classes_free(&hist);
	*scanned = seen;
	return rc;
}

/* Sorted, duplicate-free copy of the --val-by names. */
static int sort_names(const ks_options *o, const char ***out, size_t *n)
{
	const char **v;
	size_t m = 0;

	*out = NULL;
	*n = 0;
	if (o->nval_names == 0)
		return CDP_OK;
	v = malloc(o->nval_names * sizeof *v);
	if (!v)
		return CDP_ENOMEM;
	memcpy(v, o->val_names, o->nval_names * sizeof *v);
	qsort(v, o->nval_names, sizeof *v, cmp_str);
	for (size_t i = 0; i < o->nval_names; i++)
		if (m == 0 || strcmp(v[m - 1], v[i]) != 0)
			v[m++] = v[i];
	*out = v;
	*n = m;
	return CDP_OK;
}

/* The subset (0 training, 1 validation) of the larger want[j], a tie
 * drawn from r. */
static int larger(const double *want, size_t stride, cdp_rng *r)
{
	if (want[0] != want[stride])
		return want[stride] > want[0];
	return (int)cdp_rng_below(r, 2);
}

/* --stratify of a multi-label pool: iterative stratification (Sechidis,
 * Tsoumakas and Vlahavas 2011; scikit-multilearn's IterativeStratification
 * of order 1) into validation (share frac) and training. Each subset j
 * wants r_j N keys and r_j n_c keys of each class c (r = 1 - frac, frac).
 * While keys are left: the class with the fewest keys left (the rarest
 * first, so it is spread before the common ones use up the room; ties the
 * lower id) gives each of its keys, in permutation order, to the subset
 * that wants most of that class (ties: most keys; then a draw from the
 * seed), which then wants one key less and one less of each class the
 * key holds. Keys of no class go last, by the keys wanted. The held-out
 * keys are marked in b->held; out gets the per-class counts' size. */
static int stratify_multi(keybuf *b, const size_t *perm, const ks_options *o, ks_lists *out)
{
	size_t N = b->n, left = N, *rem = NULL;
	uint32_t K = 0;
	double want[2], *wc = NULL;     /* wc: (2, K) keys of class c subset j wants */
	unsigned char *done = NULL;
	cdp_rng r;

	for (size_t q = 0; q < b->ncs; q++)
		if (b->cs[q] >= K)
			K = b->cs[q] + 1;
	if (!(rem = calloc(K ? K : 1, sizeof *rem)) || !(wc = calloc(2 * (size_t)(K ? K : 1), sizeof *wc)) ||
	    !(done = calloc(N, 1)) ||
	    !(out->class_n = calloc(2 * (size_t)(K ? K : 1), sizeof *out->class_n))) {
		free(rem);
		free(wc);
		free(done);
		return CDP_ENOMEM;
	}
	out->nclasses = K;
	for (size_t q = 0; q < b->ncs; q++)
		rem[b->cs[q]]++;
	want[0] = (1 - o->val_frac) * (double)N;
	want[1] = o->val_frac * (double)N;
	for (uint32_t c = 0; c < K; c++) {
		wc[c] = (1 - o->val_frac) * (double)rem[c];
		wc[K + c] = o->val_frac * (double)rem[c];
	}
	cdp_rng_seed(&r, cdp_rng_derive(o->seed, 0x57A7, 0));
	out->nval_to = 0;
	while (left > 0) {
		uint32_t l = K;
		for (uint32_t c = 0; c < K; c++)
			if (rem[c] > 0 && (l == K || rem[c] < rem[l]))
				l = c;
		for (size_t i = 0; i < N; i++) {
			size_t k = perm[i], q0 = b->cs_off[k], q1 = b->cs_off[k + 1], q;
			int j;
			if (done[k])
				continue;
			for (q = q0; l < K && q < q1 && b->cs[q] != l; q++)
				;
			if (l < K && q == q1)
				continue;            /* not of class l */
			j = l == K ? larger(want, 1, &r)
			    : wc[l] != wc[K + l] ? wc[K + l] > wc[l] : larger(want, 1, &r);
			done[k] = 1;
			left--;
			want[j] -= 1;
			for (q = q0; q < q1; q++) {
				wc[(size_t)j * K + b->cs[q]] -= 1;
				rem[b->cs[q]]--;
			}
			b->held[k] = (unsigned char)j;
			out->nval_to += (size_t)j;
		}
	}
	free(rem);
	free(wc);
	free(done);
	return CDP_OK;
}

size_t ks_val_round(const ks_options *o, size_t n)
{
	unsigned __int128 p = (unsigned __int128)o->val_num * n;

	return (size_t)((p + o->val_den / 2) / o->val_den);
}

/* --stratify: marks (in b->held) the first take_c keys of each class c in
 * permutation order, take_c being frac * n_c rounded so that the total is
 * --val's, so that each class keeps its share in the validation list; and
 * sizes out's per-class counts. take_c is at most n_c - 1: a class whose
 * every key went to validation could not be learnt (and --class-weights
 * auto would weigh it 0); the key such a class cannot give goes to the
 * next largest remainder, so the total falls short of --val's only when
 * no class with a remainder has a key to spare. */
static int stratify(keybuf *b, const size_t *perm, const ks_options *o, ks_lists *out)
{
	size_t *n = NULL, *take = NULL;
	unsigned __int128 *rem = NULL;
	uint32_t k = 0;

	out->multi = b->multi;
	if (b->multi)
		return stratify_multi(b, perm, o, out);
	for (size_t i = 0; i < b->n; i++)
		if (b->cls[i] >= k)
			k = b->cls[i] + 1;
	if (!(n = calloc(k, sizeof *n)) || !(take = calloc(k, sizeof *take)) ||
	    !(rem = calloc(k, sizeof *rem)) ||
	    !(out->class_n = calloc(2 * (size_t)k, sizeof *out->class_n))) {
		free(n);
		free(take);
		free(rem);
		return CDP_ENOMEM;
	}
	out->nclasses = k;
	for (size_t i = 0; i < b->n; i++)
		n[b->cls[i]]++;
	/* Largest remainder: each class floor(frac * n_c), then one more for the
	 * classes with the largest remainders (ties: lower class first) until
	 * the total is --val's round(frac * N). frac is the exact num / den the
	 * user wrote, so the remainders (num * n_c mod den, in units of 1/den)
	 * compare exactly: a tie is a tie, not a draw of rounding noise. A
	 * class at n_c - 1 gives no more, and its key goes to the next
	 * remainder. */
	size_t want = ks_val_round(o, b->n), got = 0;
	for (uint32_t c = 0; c < k; c++) {
		unsigned __int128 p = (unsigned __int128)o->val_num * n[c];
		take[c] = (size_t)(p / o->val_den);       /* < n_c, as frac < 1 */
		rem[c] = p - (unsigned __int128)take[c] * o->val_den;
		got += take[c];
	}
	while (got < want) {
		uint32_t best = k;
		unsigned __int128 bestr = 0;   /* a class at its share gives no more */
		for (uint32_t c = 0; c < k; c++)
			if (take[c] + 1 < n[c] && rem[c] > bestr) {
				best = c;
				bestr = rem[c];
			}
		if (best == k)
			break;
		take[best]++;
		rem[best] = 0;
		got++;
	}
	out->nval_to = 0;
	for (size_t i = 0; i < b->n; i++) {
		size_t j = perm[i];
		b->held[j] = take[b->cls[j]] > 0;
		if (b->held[j]) {
			take[b->cls[j]]--;
			out->nval_to++;
		}
	}
	free(n);
	free(take);
	free(rem);
	return CDP_OK;
}

/* One --oversample item: "auto", "auto:T" (0 < T <= 1) or "CLASS:R", CLASS
 * a class name of the pool or an id, 1 <= R <= KS_FACTOR_MAX. Sets *is_auto
 * and *t, or *cls and *r. */
static int parse_item(const char *it, const ks_lists *l, int *is_auto, double *t,
                      uint32_t *cls, double *r)
{
	const char *colon = strrchr(it, ':');
	char name[CDP_KEY_MAX];
	uint64_t id;
	size_t n;

	*is_auto = 0;
	if (strcmp(it, "auto") == 0) {
		*is_auto = 1;
		*t = KS_AUTO_THRESHOLD;
		return CDP_OK;
	}
	if (!colon || colon == it || (n = (size_t)(colon - it)) >= sizeof name)
		return CDP_ESYNTAX;
	memcpy(name, it, n);
	name[n] = '\0';
	if (strcmp(name, "auto") == 0) {
		*is_auto = 1;
		return cdp_parse_double(colon + 1, 0.0, 1.0, t) == CDP_OK && *t > 0 ? CDP_OK
		                                                                   : CDP_ERANGE;
	}
	if (cdp_parse_double(colon + 1, 1.0, KS_FACTOR_MAX, r) != CDP_OK)
		return CDP_ERANGE;
	for (size_t c = 0; c < l->nclass_names; c++)
		if (strcmp(l->class_names[c], name) == 0) {
			*cls = (uint32_t)c;
			return CDP_OK;
		}
	if (cdp_parse_u64(name, 0, UINT32_MAX - 1, &id) != CDP_OK ||
	    (l->nclass_names > 0 && id >= l->nclass_names))
		return ENOENT;
	*cls = (uint32_t)id;
	return CDP_OK;
}

/* --oversample: repeat-factor sampling (LVIS, Gupta et al. 2019; detectron2's
 * RepeatFactorTrainingSampler) over out's training keys. With f_c the
 * fraction of training keys holding class c, auto gives
 * r_c = max(1, sqrt(t / f_c)), CLASS:R sets r_c = R (last given wins); a
 * key's factor is the largest r_c of its classes (1 with none), and it is
 * written floor(r) times, once more with probability r - floor(r) (the
 * seeded stream cdp_rng_derive(seed, 'o', 0), one draw per key in list
 * order), on consecutive lines. The validation list is never repeated. */
static int oversample(const keybuf *b, const ks_options *o, ks_lists *out,
                      const char *db, char *err, size_t cap)
{
	uint32_t k = 0;
	size_t *idx = NULL, m = 0;
	char **nk = NULL;
	size_t *nl = NULL;
	double *rk = NULL, t = 0;
	int is_auto = 0, rc = CDP_ENOMEM;
	cdp_rng rng;

	/* each training key's index in b, by its arena offset */
	if (!(idx = malloc((out->ntrain ? out->ntrain : 1) * sizeof *idx)))
		goto nomem;
	/* out->train[j] is b->arena + b->off[i], the offsets ascending in i */
	for (size_t j = 0; j < out->ntrain; j++) {
		size_t off = (size_t)(out->train[j] - out->arena), lo = 0, hi = b->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (b->off[mid] < off)
				lo = mid + 1;
			else
				hi = mid;
		}
		idx[j] = lo;
	}
	for (size_t j = 0; j < out->ntrain; j++)
		for (size_t q = b->cs_off[idx[j]]; q < b->cs_off[idx[j] + 1]; q++)
			if (b->cs[q] >= k)
				k = b->cs[q] + 1;
	for (size_t i = 0; i < o->noversample; i++) {
		uint32_t c;
		double r;
		if (parse_item(o->oversample[i], out, &is_auto, &t, &c, &r) == CDP_OK && !is_auto &&
		    c >= k)
			k = c + 1;
	}
	out->nos = k;
	if (!(out->os_tiles = calloc(k ? k : 1, sizeof *out->os_tiles)) ||
	    !(out->os_factor = malloc((k ? k : 1) * sizeof *out->os_factor)))
		goto nomem;
	for (size_t j = 0; j < out->ntrain; j++)
		for (size_t q = b->cs_off[idx[j]]; q < b->cs_off[idx[j] + 1]; q++)
			out->os_tiles[b->cs[q]]++;
	for (uint32_t c = 0; c < k; c++)
		out->os_factor[c] = 1.0;
	is_auto = 0;
	for (size_t i = 0; i < o->noversample; i++) {
		int a;
		uint32_t c = 0;
		double r = 1, ti = 0;
		rc = parse_item(o->oversample[i], out, &a, &ti, &c, &r);
		if (rc == ENOENT) {
			seterr(err, cap, "--oversample '%s': '%s' has no such class", o->oversample[i], db);
			goto out;
		}
		if (rc != CDP_OK) {
			seterr(err, cap, "--oversample '%s': want auto, auto:T (0 < T <= 1) or CLASS:R "
			       "(a class name or id, 1 <= R <= %g)", o->oversample[i], KS_FACTOR_MAX);
			goto out;
		}
		if (a) {
			is_auto = 1;
			t = ti;
		} else if (out->os_tiles[c] == 0) {
			rc = ENOENT;
			seterr(err, cap, "--oversample '%s': no training key of '%s' holds class %" PRIu32,
			       o->oversample[i], db, c);
			goto out;
		}
	}
	/* auto first, then the named classes over it, in the order given */
	for (uint32_t c = 0; is_auto && c < k; c++)
		if (out->os_tiles[c] > 0) {
			double f = (double)out->os_tiles[c] / (double)out->ntrain;
			out->os_factor[c] = fmax(1.0, sqrt(t / f));
			if (out->os_factor[c] > KS_FACTOR_MAX)
				out->os_factor[c] = KS_FACTOR_MAX;
		}
	for (size_t i = 0; i < o->noversample; i++) {
		int a;
		uint32_t c = 0;
		double r = 1, ti;
		parse_item(o->oversample[i], out, &a, &ti, &c, &r);
		if (!a)
			out->os_factor[c] = r;
	}
	/* each key's factor and copies; the list grows at most KS_FACTOR_MAX-fold */
	rc = CDP_ENOMEM;
	if (!(rk = malloc((out->ntrain ? out->ntrain : 1) * sizeof *rk)))
		goto nomem;
	cdp_rng_seed(&rng, cdp_rng_derive(o->seed, 'o', 0));
	for (size_t j = 0; j < out->ntrain; j++) {
		double r = 1.0, fl;
		for (size_t q = b->cs_off[idx[j]]; q < b->cs_off[idx[j] + 1]; q++)
			r = fmax(r, out->os_factor[b->cs[q]]);
		fl = floor(r);
		rk[j] = fl + (cdp_rng_double(&rng) < r - fl);
		m += (size_t)rk[j];
	}
	if (!(nk = malloc(m * sizeof *nk)) || !(nl = malloc(m * sizeof *nl)))
		goto nomem;
	m = 0;
	for (size_t j = 0; j < out->ntrain; j++)
		for (size_t c = 0; c < (size_t)rk[j]; c++) {
			nk[m] = out->train[j];
			nl[m++] = out->train_len[j];
		}
	free(out->train);
	free(out->train_len);
	out->train = nk;
	out->train_len = nl;
	nk = NULL;
	nl = NULL;
	out->ntrain_keys = out->ntrain;
	out->ntrain = m;
	out->repeats = 1;
	rc = CDP_OK;
	goto out;
nomem:
	rc = CDP_ENOMEM;
	seterr(err, cap, "%s", cdp_strerror(rc));
out:
	free(idx);
	free(rk);
	free(nk);
	free(nl);
	return rc;
}

int ks_build(const char *db, const ks_options *o, ks_lists *out,
             char *err, size_t cap)
{
	cdp_pool pool;
	int pool_open = 0;
	MDB_txn *txn = NULL;
	keybuf kb = { 0 };
	const char **names = NULL;
	size_t nnames = 0, *nkeys = NULL, *perm = NULL, scanned = 0, nval = 0;
	uint64_t meta_count = 0;
	int rc;

	memset(out, 0, sizeof *out);
	rc = sort_names(o, &names, &nnames);
	if (rc == CDP_OK && nnames > 0 && !(nkeys = calloc(nnames, sizeof *nkeys)))
		rc = CDP_ENOMEM;
	if (rc != CDP_OK) {
		seterr(err, cap, "%s", cdp_strerror(rc));
		goto out;
	}
	rc = open_pool(db, &pool, err, cap);
	if (rc != CDP_OK)
		goto out;
	pool_open = 1;
	rc = cdp_lmdb_txn_begin(pool.env, MDB_RDONLY, &txn);   /* adopts a map grown since the open */
	if (rc != MDB_SUCCESS) {
		seterr(err, cap, "cannot read '%s': %s", db, cdp_strerror(rc));
		goto out;
	}
	rc = check_meta(&pool, txn, db, out->uuid, &meta_count, err, cap);
	if (rc == CDP_OK && (o->stratify || o->noversample > 0) &&
	    (rc = cdp_pool_class_names(&pool, txn, &out->class_names, &out->nclass_names)) != CDP_OK)
		seterr(err, cap, "'%s': class_names record: %s", db, cdp_strerror(rc));
	if (rc != CDP_OK)
		goto out;
	rc = read_keys(&pool, txn, db, o, names, nnames, nkeys, meta_count,
	               &scanned, &kb, err, cap);
	if (rc != CDP_OK)
		goto out;
	/* Keys were copied; end the read txn before the slow part. */
	mdb_txn_abort(txn);
	txn = NULL;

	rc = CDP_EFORMAT;
	if (scanned == 0) {
		seterr(err, cap, "'%s': pool has no tiles", db);
		goto out;
	}
	/* Records and meta are committed together, so a mismatch is damage
	 * (the count was checked against the database's entries; this is
	 * against the keys a cursor finds). */
	if (meta_count != scanned) {
		rc = CDP_EMISMATCH;
		seterr(err, cap, "'%s': count record says %" PRIu64 " tiles but the "
		       "pool holds %zu", db, meta_count, scanned);
		goto out;
	}
	if (kb.n == 0) {
		seterr(err, cap, "'%s': no key matches --match", db);
		goto out;
	}
	for (size_t i = 0; i < nnames; i++) {
		if (nkeys[i] == 0) {
			const char *slash = strrchr(names[i], '/'), *base = slash ? slash + 1 : names[i];
			const char *dot = strrchr(base, '.');
			size_t ext = dot && dot > base ? strlen(dot + 1) : 0;
			/* "beta.tif": cdp-tile names a raster's tiles by its stem */
			for (size_t j = 1; ext > 0 && ext <= 5 && j <= ext; j++)
				if (!isalnum((unsigned char)dot[j]))
					ext = 0;
			if (ext > 0 && ext <= 5)
				seterr(err, cap, "'%s': --val-by '%s': no %skeys of that scene; a scene is "
				       "named without its file's extension: --val-by '%.*s'", db, names[i],
				       o->nglobs ? "selected " : "", (int)(dot - names[i]), names[i]);
			else
				seterr(err, cap, "'%s': --val-by '%s': no %skeys of that scene",
				       db, names[i], o->nglobs ? "selected " : "");
			goto out;
		}
		nval += nkeys[i];
	}

	perm = malloc(kb.n * sizeof *perm);
	if (!perm) {
		rc = CDP_ENOMEM;
		seterr(err, cap, "%s", cdp_strerror(rc));
		goto out;
	}
	for (size_t i = 0; i < kb.n; i++)
		perm[i] = i;
	if (!o->no_shuffle) {
		cdp_rng r;
		cdp_rng_seed(&r, o->seed);
		cdp_rng_shuffle_size(&r, perm, kb.n);
	}
	/* The permutation's head is the validation list for --val; with
	 * --stratify each class's first keys in it (stratify()). */
	if (o->have_val && !o->stratify)
		nval = ks_val_round(o, kb.n);
	if (o->stratify && (rc = stratify(&kb, perm, o, out)) != CDP_OK) {
		seterr(err, cap, "%s", cdp_strerror(rc));
		goto out;
	}
	if (o->stratify)
		nval = out->nval_to;
	rc = CDP_EFORMAT;
	if (nval >= kb.n) {
		seterr(err, cap, "'%s': no training keys left: all %zu selected keys "
		       "are held out for validation", db, kb.n);
		goto out;
	}

	out->train = malloc((kb.n - nval) * sizeof *out->train);
	out->train_len = malloc((kb.n - nval) * sizeof *out->train_len);
	out->val = malloc((nval ? nval : 1) * sizeof *out->val);
	out->val_len = malloc((nval ? nval : 1) * sizeof *out->val_len);
	if (!out->train || !out->train_len || !out->val || !out->val_len) {
		rc = CDP_ENOMEM;
		seterr(err, cap, "%s", cdp_strerror(rc));
		goto out;
	}
	for (size_t i = 0; i < kb.n; i++) {
		size_t k = perm[i];
		int to_val = o->stratify ? kb.held[k] : o->have_val ? i < nval : kb.held[k];
		if (o->stratify && kb.multi)
			for (size_t q = kb.cs_off[k]; q < kb.cs_off[k + 1]; q++)
				out->class_n[2 * kb.cs[q] + (to_val != 0)]++;
		else if (o->stratify)
			out->class_n[2 * kb.cls[k] + (to_val != 0)]++;
		if (to_val) {
			out->val[out->nval] = kb.arena + kb.off[k];
			out->val_len[out->nval++] = kb.len[k];
		} else {
			out->train[out->ntrain] = kb.arena + kb.off[k];
			out->train_len[out->ntrain++] = kb.len[k];
		}
	}
	out->arena = kb.arena;
	kb.arena = NULL;
	out->pool_keys = scanned;
	out->total = kb.n;
	out->ntrain_keys = out->ntrain;
	rc = o->noversample > 0 ? oversample(&kb, o, out, db, err, cap) : CDP_OK;
	if (rc != CDP_OK)
		goto out;
	/* An unshuffled list records seed 0 (cdp_ptrfile.h) unless the user
	 * named one, which then labels the list for the trainer. */
	out->seed = o->no_shuffle && !o->seed_given ? 0 : o->seed;
	rc = CDP_OK;
out:
	if (txn)
		mdb_txn_abort(txn);
	if (pool_open)
		cdp_pool_close(&pool);
	if (rc != CDP_OK)
		ks_lists_free(out);
	keybuf_free(&kb);
	free(perm);
	free(names);
	free(nkeys);
	return rc;
}

void ks_lists_free(ks_lists *l)
{
	cdp_pool_class_names_free(l->class_names, l->nclass_names);
	free(l->class_n);
	free(l->os_tiles);
	free(l->os_factor);
	free(l->train);
	free(l->train_len);
	free(l->val);
	free(l->val_len);
	free(l->arena);
	memset(l, 0, sizeof *l);
}

int ks_check_outputs(const char *db, const char *out, const char *val,
                     char *err, size_t cap)
{
	static const char *const files[] = { "data.mdb", "lock.mdb" };
	/* no -o is standard output, which --val-out - would share */
	const char *outs[2] = { out ? out : "-", val }, *opt[2] = { "-o", "--val-out" };
	cdp_fileset set = { 0 };
	char path[4200], what[4300];
	int rc = CDP_OK;

	for (int i = 0; i < 2 && rc == CDP_OK; i++) {
		snprintf(path, sizeof path, "%s/%s", db, files[i]);
		snprintf(what, sizeof what, "'%s' of the pool", path);
		rc = cdp_fileset_add(&set, path, what);
	}
	if (rc != CDP_OK) {
		seterr(err, cap, "cannot examine '%s': %s", db, cdp_strerror(rc));
		cdp_fileset_free(&set);
		return rc;
	}
	rc = cdp_out_check_set(&set, 2, outs, opt, err, cap);
	for (int i = 0; i < 2 && rc == CDP_OK; i++)
		if (outs[i])
			rc = cdp_out_check(outs[i], CDP_OUT_STREAM, err, cap);
	cdp_fileset_free(&set);
	return rc;
}

int ks_output_prepare(ks_output *o, const char *path, const char *uuid,
                      uint64_t seed, unsigned flags, char *const *keys, const size_t *lens,
                      size_t n, char *err, size_t cap)
{
	FILE *f = NULL;
	int fd, rc;

	/* a FIFO or a device is written in place, a file by rename on commit */
	if ((rc = cdp_out_open(&o->out, path, CDP_OUT_STREAM | CDP_OUT_SYNC, 0666, err, cap)))
		return rc;
	if ((fd = dup(o->out.fd)) < 0 || !(f = fdopen(fd, "w"))) {
		rc = errno;
		/* a closed standard output, reopened read-only at start
		 * (cdp_cli_std_fds): fdopen says EINVAL, a write would say EBADF */
		if (fd >= 0 && (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
			rc = EBADF;
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	rc = cdp_ptrfile_write_flags(f, uuid, seed, flags, keys, lens, n);
	/* Write errors can first appear at close. */
	if (fclose(f) != 0 && rc == CDP_OK)
		rc = errno > 0 ? errno : EIO;
	if (rc == CDP_OK)
		return CDP_OK;
fail:
	if (strcmp(path, "-") == 0)
		seterr(err, cap, "cannot write standard output: %s", cdp_strerror(rc));
	else
		seterr(err, cap, "cannot write '%s': %s", path, cdp_strerror(rc));
	ks_output_discard(o);
	return rc;
}

int ks_output_commit(ks_output *o, char *err, size_t cap)
{
	return cdp_out_commit(&o->out, err, cap);
}

void ks_output_discard(ks_output *o)
{
	/* nothing after a commit or on a zeroed o: cdp_out ended has no path */
	cdp_out_abort(&o->out);
}
