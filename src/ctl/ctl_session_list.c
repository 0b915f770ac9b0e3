/*
 * ctl_session_list.c - `leasectl session list`: the open sessions, read
 * from the operator view lease.active_sessions (lease_admin_session_list).
 * Like `credential list` it is an operator's read of the database, not a
 * call of the HTTP API (which has no route listing sessions). PostgreSQL
 * only: the Valkey backend has no sessions (docs/backends.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl.h"
#include "lease/store_admin.h"

static const char usage_line[] =
    "usage: leasectl session list [--database-url URL] [--tenant TENANT]\n";

int ctl_session_list(int argc, char **argv)
{
    static const struct option opts[] = {
        {"database-url", required_argument, NULL, 'd'},
        {"tenant", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *url_flag = NULL, *tenant = NULL;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'd':
            url_flag = optarg;
            break;
        case 't':
            tenant = optarg;
            break;
        case 'h':
            fputs(usage_line, stdout);
            return LEASE_EXIT_OK;
        default:
            fputs(usage_line, stderr);
            return LEASE_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fputs(usage_line, stderr);
        return LEASE_EXIT_USAGE;
    }
    const char *url = ctl_database_url(url_flag);
    if (!url)
        return LEASE_EXIT_USAGE;
    char err[1024] = "";
    json_t *rows = NULL;
    lease_admin_status_t st = lease_admin_session_list(url, tenant, &rows, err, sizeof err);
    if (st != LEASE_ADMIN_OK) {
        fprintf(stderr, "leasectl session list: %s\n", err);
        return ctl_admin_exit(st);
    }
    /* One object on stdout, like every other command. */
    json_t *out = json_pack("{s:o}", "sessions", rows);
    char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    if (!text)
        return LEASE_EXIT_FAILURE;
    puts(text);
    free(text);
    return LEASE_EXIT_OK;
}
