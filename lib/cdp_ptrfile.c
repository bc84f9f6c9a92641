/* cdp_ptrfile.c: writes and validates pointer files (cdp_ptrfile.h,
 * man/cdp-keys.5).
 *
 * The reader takes the whole file into one buffer, checks it line by line in
 * a single pass (so the first bad line is the one reported), and only then
 * allocates the key arrays: their size comes from the lines actually present,
 * never from the header's count alone. The newlines of the buffer become the
 * NULs that end the keys, so a list costs one copy of the file plus two
 * pointer-sized words per key. Duplicates are found last (unless the header
 * says repeats=1), with a hash set
 * of key indices that lives only during the read.
 *
 * Not done here: key syntax beyond "non-empty, no whitespace or control
 * bytes, shorter than CDP_KEY_MAX" (the pool is the authority on which keys
 * exist), and reading from stdin.
 */
#include "cdp_ptrfile.h"
#include "cdp_crc32.h"
#include "cdp_error.h"
#include "cdp_key.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A key byte must be printable and not a space: the file is split on '\n'
 * and users grep and cut it. */
static int key_ok(const char *k, size_t len)
{
	if (len == 0 || len >= CDP_KEY_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)k[i];
		if (c <= 0x20 || c == 0x7f)
			return 0;
	}
	return 1;
}

/* What key_ok refuses in k[len]. */
static const char *key_why(const char *k, size_t len)
{
	if (len == 0)
		return "empty key line";
	if (len >= CDP_KEY_MAX)
		return "key longer than 255 bytes";
	(void)k;
	return "key holds a space or a control byte";
}

static int is_lhex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int uuid_ok(const char *u)
{
	for (int i = 0; i < 32; i++)
		if (!is_lhex(u[i]))
			return 0;
	return u[32] == '\0';
}

int cdp_ptrfile_write(FILE *f, const char *uuid, uint64_t seed,
                      char *const *keys, const size_t *lens, size_t count)
{
	return cdp_ptrfile_write_flags(f, uuid, seed, 0, keys, lens, count);
}

int cdp_ptrfile_write_flags(FILE *f, const char *uuid, uint64_t seed, unsigned flags,
                            char *const *keys, const size_t *lens, size_t count)
{
	uint32_t crc = 0;

	if (!f || !uuid || !uuid_ok(uuid) || (count > 0 && (!keys || !lens)) ||
	    (flags & ~(unsigned)CDP_PTRFILE_REPEATS))
		return CDP_EINVAL;
	/* Validate and checksum everything before the first byte goes out, so
	 * a bad key never leaves a half-written file behind. */
	for (size_t i = 0; i < count; i++) {
		if (!keys[i] || !key_ok(keys[i], lens[i]))
			return CDP_EKEY;
		crc = cdp_crc32(crc, keys[i], lens[i]);
		crc = cdp_crc32(crc, "\n", 1);
	}
	errno = 0;
	/* version 1 unless repeats need saying, so older readers read it */
	if (fprintf(f, "%s %d uuid=%s seed=%llu count=%llu%s crc32=%08lx\n",
	            CDP_PTRFILE_MAGIC, flags ? 2 : 1, uuid,
	            (unsigned long long)seed, (unsigned long long)count,
	            flags ? " repeats=1" : "", (unsigned long)crc) < 0)
		goto fail;
	for (size_t i = 0; i < count; i++) {
		if (fwrite(keys[i], 1, lens[i], f) != lens[i] ||
		    putc('\n', f) == EOF)
			goto fail;
	}
	if (fflush(f) != 0 || ferror(f))
		goto fail;
	return CDP_OK;
fail:
	return errno > 0 ? errno : EIO;
}

/* Reads all of f into a NUL-terminated buffer (*len excludes the NUL). */
static int slurp(FILE *f, char **out, size_t *len)
{
	struct stat st;
	size_t cap = 1 << 16, n = 0;
	char *buf, *nb;

	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    (uint64_t)st.st_size < SIZE_MAX - 1)
		cap = (size_t)st.st_size + 1;
	buf = malloc(cap);
	if (!buf)
		return CDP_ENOMEM;
	for (;;) {
		size_t got;
		if (n + 1 >= cap) {
			if (cap > SIZE_MAX / 2) {
				free(buf);
				return CDP_EOVERFLOW;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return CDP_ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		got = fread(buf + n, 1, cap - 1 - n, f);
		n += got;
		if (got == 0) {
			if (ferror(f)) {
				int e = errno > 0 ? errno : EIO;
				free(buf);
				return e;
			}
			break;
		}
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return CDP_OK;
}

/* Parses a decimal u64 at *p (1..20 digits, no sign); advances *p. The
 * header is one exact form (cdp-keys(5)): a leading zero ("01",
 * "count=009") would give two spellings of one number, so it is refused. */
static int parse_dec(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (s >= end || *s < '0' || *s > '9')
		return CDP_ESYNTAX;
	if (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9')
		return CDP_ESYNTAX;
	while (s < end && *s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return CDP_ESYNTAX;
		v = v * 10 + d;
		s++;
	}
	*p = s;
	*out = v;
	return CDP_OK;
}

/* Matches the literal lit at *p; advances *p. */
static int expect(const char **p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0)
		return 0;
	*p += n;
	return 1;
}

/* Header line h[0..end): fills kl->uuid, kl->seed, kl->repeats, *count
 * and *crc. Version 2 adds repeats= between count and crc32. */
static int parse_header(const char *h, const char *end, cdp_keylist *kl,
                        uint64_t *count, uint32_t *crc)
{
	size_t mlen = strlen(CDP_PTRFILE_MAGIC);
	const char *p = h;
	uint64_t version, v;

	if ((size_t)(end - h) < mlen || memcmp(h, CDP_PTRFILE_MAGIC, mlen) != 0)
		return CDP_EMAGIC;
	p += mlen;
	if (p == end)
		return CDP_ESYNTAX;
	if (*p != ' ')
		return CDP_EMAGIC;      /* e.g. "#cdpool-keysX": another format */
	p++;
	if (parse_dec(&p, end, &version) != CDP_OK)
		return CDP_ESYNTAX;
	/* The version decides the layout of the rest, so check it first. */
	if (version < 1 || version > CDP_PTRFILE_VERSION)
		return CDP_EVERSION;
	if (!expect(&p, end, " uuid=") || end - p < 32)
		return CDP_ESYNTAX;
	for (int i = 0; i < 32; i++)
		if (!is_lhex(p[i]))
			return CDP_ESYNTAX;
	memcpy(kl->uuid, p, 32);
	kl->uuid[32] = '\0';
	p += 32;
	if (!expect(&p, end, " seed=") || parse_dec(&p, end, &kl->seed) != CDP_OK)
		return CDP_ESYNTAX;
	if (!expect(&p, end, " count=") || parse_dec(&p, end, count) != CDP_OK)
		return CDP_ESYNTAX;
	kl->repeats = 0;
	if (version >= 2) {
		if (!expect(&p, end, " repeats=") || end - p < 1 || (*p != '0' && *p != '1'))
			return CDP_ESYNTAX;
		kl->repeats = *p++ == '1';
	}
	if (!expect(&p, end, " crc32=") || end - p != 8)
		return CDP_ESYNTAX;
	v = 0;
	for (int i = 0; i < 8; i++) {
		if (!is_lhex(p[i]))
			return CDP_ESYNTAX;
		v = v * 16 + (uint64_t)(p[i] <= '9' ? p[i] - '0' : p[i] - 'a' + 10);
	}
	*crc = (uint32_t)v;
	return CDP_OK;
}

/* FNV-1a, 64 bits: keys share long prefixes (the scene name), which it
 * mixes well enough for an open-addressing table at load 1/2 or less. */
static uint64_t key_hash(const char *k, size_t len)
{
	uint64_t h = 14695981039346656037ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)k[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* Finds the first key (in file order) equal to an earlier one: a hash set
 * of key indices, linear probing over 2^k >= 2n slots, so O(n) expected
 * time and 16n bytes at most. Returns CDP_EDUPKEY with *a < *b the two
 * indices, CDP_OK, or CDP_ENOMEM. */
static int find_dup(char *const *keys, const size_t *lens, size_t n, size_t *a, size_t *b)
{
	size_t cap = 16, mask, *slot;      /* slot holds index + 1, 0 = empty */

	while (cap / 2 < n) {
		if (cap > SIZE_MAX / 2 / sizeof *slot)
			return CDP_ENOMEM;
		cap *= 2;
	}
	if (!(slot = calloc(cap, sizeof *slot)))
		return CDP_ENOMEM;
	mask = cap - 1;
	for (size_t i = 0; i < n; i++) {
		size_t s = (size_t)key_hash(keys[i], lens[i]) & mask;
		for (; slot[s]; s = (s + 1) & mask) {
			size_t j = slot[s] - 1;
			if (lens[j] == lens[i] && memcmp(keys[j], keys[i], lens[i]) == 0) {
				*a = j;
				*b = i;
				free(slot);
				return CDP_EDUPKEY;
			}
		}
		slot[s] = i + 1;
	}
	free(slot);
	return CDP_OK;
}

static int parse(char *data, size_t len, cdp_keylist *kl, cdp_ptrfile_where *w);

int cdp_ptrfile_read(const char *path, cdp_keylist *kl, size_t *line)
{
	cdp_ptrfile_where w;
	int rc = cdp_ptrfile_read_where(path, kl, &w);

	if (line)
		*line = w.line;
	return rc;
}

int cdp_ptrfile_read_where(const char *path, cdp_keylist *kl, cdp_ptrfile_where *w)
{
	FILE *f = NULL;
	char *data = NULL;
	size_t len;
	int rc;

	if (w)
		memset(w, 0, sizeof *w);
	if (!path || !kl)
		return CDP_EINVAL;
	memset(kl, 0, sizeof *kl);
	f = fopen(path, "rb");
	if (!f)
		return errno > 0 ? errno : EIO;
	rc = slurp(f, &data, &len);
	fclose(f);
	if (rc != CDP_OK)
		return rc;
	return parse(data, len, kl, w);
}

int cdp_ptrfile_parse_where(const void *buf, size_t len, cdp_keylist *kl,
                            cdp_ptrfile_where *w)
{
	char *data;

	if (w)
		memset(w, 0, sizeof *w);
	if ((!buf && len) || !kl || len == SIZE_MAX)
		return CDP_EINVAL;
	memset(kl, 0, sizeof *kl);
	if (!(data = malloc(len + 1)))
		return CDP_ENOMEM;
	if (len)
		memcpy(data, buf, len);
	data[len] = '\0';
	return parse(data, len, kl, w);
}

/* Validates data[len] (NUL-terminated, malloc'ed; taken over: kept in kl on
 * success, freed on error) as cdp_ptrfile_read_where describes. */
static int parse(char *data, size_t len, cdp_keylist *kl, cdp_ptrfile_where *w)
{
	char *body, *end, *p;
	size_t hl, n;
	uint64_t count = 0;
	uint32_t want_crc = 0;
	size_t bad = 0;
	size_t first = 0;
	int rc;

	end = data + len;

	p = memchr(data, '\n', len);
	hl = p ? (size_t)(p - data) : len;
	bad = 1;
	rc = parse_header(data, data + hl, kl, &count, &want_crc);
	if (rc != CDP_OK)
		goto out;
	if (hl == len) {
		/* The header itself is unterminated: keys are missing if any
		 * were promised, else only the final newline is. */
		if (count > 0) {
			bad = 2;
			rc = CDP_ETRUNC;
		} else {
			rc = CDP_EFORMAT;
		}
		goto out;
	}

	/* One pass over the key lines: the first bad line wins. */
	body = data + hl + 1;
	n = 0;
	for (p = body; p < end; n++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		bad = n + 2;
		if (n >= count) {
			rc = CDP_EFORMAT;           /* more lines than count */
			goto out;
		}
		if (!nl) {
			/* A last line cut short: truncated if more were due. */
			rc = n + 1 < count ? CDP_ETRUNC : CDP_EFORMAT;
			goto out;
		}
		if (!key_ok(p, (size_t)(nl - p))) {
			rc = CDP_ESYNTAX;
			if (w)
				w->why = key_why(p, (size_t)(nl - p));
			goto out;
		}
		p = nl + 1;
	}
	if (n < count) {
		bad = n + 2;
		rc = CDP_ETRUNC;
		goto out;
	}
	bad = 0;
	if (cdp_crc32(0, body, (size_t)(end - body)) != want_crc) {
		rc = CDP_ECRC;
		goto out;
	}

	/* count now equals the number of lines present, so it bounds the
	 * allocations by the file's own size. */
	kl->keys = malloc((n ? n : 1) * sizeof *kl->keys);
	kl->lens = malloc((n ? n : 1) * sizeof *kl->lens);
	if (!kl->keys || !kl->lens) {
		rc = CDP_ENOMEM;
		goto out;
	}
	p = body;
	for (size_t i = 0; i < n; i++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		*nl = '\0';
		kl->keys[i] = p;
		kl->lens[i] = (size_t)(nl - p);
		p = nl + 1;
	}
	if (!kl->repeats && (rc = find_dup(kl->keys, kl->lens, n, &first, &bad)) != CDP_OK) {
		if (rc == CDP_EDUPKEY) {
			if (w)
				memcpy(w->key, kl->keys[bad], kl->lens[bad] + 1);
			first += 2;
			bad += 2;
		} else {
			bad = 0;
		}
		goto out;
	}
	kl->count = n;
	kl->data = data;
	return CDP_OK;
out:
	free(kl->keys);
	free(kl->lens);
	free(data);
	memset(kl, 0, sizeof *kl);
	if (w) {
		w->line = bad;
		w->first = first;
	}
	return rc;
}

void cdp_keylist_free(cdp_keylist *kl)
{
	if (!kl)
		return;
	free(kl->keys);
	free(kl->lens);
	free(kl->data);
	memset(kl, 0, sizeof *kl);
}
