/*
 * probe.c - one #include, compiled by probe.cmake with a module's own
 * include directories, definitions and options, as if it were a file in
 * that module's folder (-iquote src/<module>). PROBE_HEADER names the
 * header, e.g. <libpq-fe.h> or "lease/store.h".
 */
#include PROBE_HEADER

int lease_layer_probe(void);
int lease_layer_probe(void)
{
    return 0;
}
