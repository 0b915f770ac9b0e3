/*
 * prom_text.c - the growing buffer of a Prometheus text exposition.
 */
#include "lease/prom_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

bool lease_prom_init(lease_prom_text_t *t, size_t cap)
{
    t->buf = malloc(cap);
    t->len = 0;
    t->cap = t->buf ? cap : 0;
    t->failed = t->buf == NULL;
    return !t->failed;
}

void lease_prom_emit(lease_prom_text_t *t, const char *fmt, ...)
{
    while (!t->failed) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n;
        char *grown = realloc(t->buf, cap);
        if (!grown) {
            t->failed = true;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
}

void lease_prom_counter(lease_prom_text_t *t, const char *name, const char *help, uint64_t v)
{
    lease_prom_emit(t, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
                    (unsigned long long)v);
}

void lease_prom_gauge(lease_prom_text_t *t, const char *name, const char *help, double v)
{
    lease_prom_emit(t, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

char *lease_prom_finish(lease_prom_text_t *t)
{
    if (t->failed) {
        free(t->buf);
        t->buf = NULL;
        return NULL;
    }
    return t->buf;
}
