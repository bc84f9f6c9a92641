/* arc4random.c: glibc 2.36's arc4random and arc4random_buf for older C
 * libraries (2.34, 2.35), from getrandom(2). Debian 12's libevent, which
 * the Open MPI carried in .devdeps needs, calls them; scripts/device-deps.sh
 * makes its references to them unversioned (tests/gpu/elf_weak_version.py)
 * and tests/gpu/run-device.sh builds this into a library it preloads for
 * the MPI programs when the machine's glibc is older than 2.36. Not a
 * cryptographic RNG of our own: it only forwards to the kernel's. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>

void arc4random_buf(void *buf, size_t n)
{
	unsigned char *p = buf;

	while (n > 0) {
		ssize_t got = getrandom(p, n, 0);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			abort();   /* as glibc's: no failure return exists */
		}
		p += got;
		n -= (size_t)got;
	}
}

uint32_t arc4random(void)
{
	uint32_t v;

	arc4random_buf(&v, sizeof v);
	return v;
}
