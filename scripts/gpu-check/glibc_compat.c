/* arc4random for a glibc older than 2.36, bundled as lib/libbrt_glibc_compat.so.1 by
 * scripts/gpu-check.sh bundle. Debian 12's libevent (Open MPI's event loop) calls
 * arc4random/arc4random_buf, which glibc has only since 2.36; the bundle marks that version
 * need weak in its copy of libevent and makes it load this library. On a glibc >= 2.36 the
 * loader binds libevent to glibc's own functions (libc comes first in the search order) and
 * these are never called. */
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>

void arc4random_buf(void* buf, size_t n) {
  unsigned char* p = buf;
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got > 0) {
      p += got;
      n -= (size_t)got;
    }
  }
}

uint32_t arc4random(void) {
  uint32_t x;
  arc4random_buf(&x, sizeof x);
  return x;
}

uint32_t arc4random_uniform(uint32_t bound) {
  if (bound < 2) return 0;
  const uint32_t min = -bound % bound; /* rejects the low values that would bias the modulus */
  for (;;) {
    const uint32_t r = arc4random();
    if (r >= min) return r % bound;
  }
}
