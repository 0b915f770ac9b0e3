/*
 * hash.c - one-shot SHA-256 with a fetched algorithm (see
 * include/lease/hash.h).
 */
#include "lease/hash.h"

#include <openssl/evp.h>
#include <pthread.h>

static EVP_MD *fetched;
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT;

static void fetch(void)
{
    fetched = EVP_MD_fetch(NULL, "SHA256", NULL); /* kept for the process's life */
}

bool lease_sha256(const void *data, size_t n, unsigned char out[32])
{
    (void)pthread_once(&fetch_once, fetch);
    unsigned int len = 0;
    /* without a fetched algorithm, the implicit fetch of EVP_sha256() */
    const EVP_MD *md = fetched ? fetched : EVP_sha256();
    return EVP_Digest(data, n, out, &len, md, NULL) == 1 && len == 32;
}

uint64_t lease_fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
}
