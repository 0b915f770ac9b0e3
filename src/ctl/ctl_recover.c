/*
 * ctl_recover.c - `leasectl recover` and `leasectl verify`: the disaster
 * recovery path of docs/operators.md from the command line.
 *
 *   leasectl recover --reason TEXT [--floor N] [--database-url URL]
 *       raises every fencing counter by the epoch stride (or to the floor),
 *       revokes every live lease, unseals; prints the SQL function's answer.
 *       On Valkey (a redis:// URL) the same is a rebind of the namespace
 *       (ctl_valkey_recover): a higher epoch, above N when given.
 *   leasectl verify [--database-url URL]
 *       prints {"consistent":bool,"problems":[...]}; exit 0 when consistent,
 *       1 when not.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl.h"
#include "ctl_valkey.h"
#include "lease/store_admin.h"

/* The exit status of a recovery call: the database refusing the input
 * (the reason, the floor, the token limit) is 65, a role that may not is
 * 77, anything else is 69. Prints err when the call failed. */
static int exit_for(lease_admin_status_t st, const char *err)
{
    if (st == LEASE_ADMIN_OK)
        return LEASE_EXIT_OK;
    fprintf(stderr, "leasectl: %s\n", err);
    if (st == LEASE_ADMIN_INVALID)
        return LEASE_EXIT_INVALID;
    if (st == LEASE_ADMIN_DENIED)
        return LEASE_EXIT_DENIED;
    return LEASE_EXIT_UNAVAILABLE;
}

int ctl_recover_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"reason", required_argument, NULL, 'r'},
        {"floor", required_argument, NULL, 'f'},
        {"database-url", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *reason = NULL, *floor_arg = NULL, *url_flag = NULL;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "r:f:d:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'r':
            reason = optarg;
            break;
        case 'f':
            floor_arg = optarg;
            break;
        case 'd':
            url_flag = optarg;
            break;
        case 'h':
            printf("usage: leasectl recover --reason TEXT [--floor N] [--database-url URL]\n"
                   "Raises every fencing counter by the policy's epoch stride (or to N),\n"
                   "revokes every live lease and unseals the namespace (lease.recover_epoch).\n"
                   "On Valkey/Redis (LEASE_STORE_URL=redis://...): rebinds the namespace to\n"
                   "the server it runs on now, in a higher epoch (above N when given).\n");
            return LEASE_EXIT_OK;
        default:
            return LEASE_EXIT_USAGE;
        }
    }
    if (optind != argc || !reason || !*reason) {
        fprintf(stderr, "leasectl recover: --reason is required\n");
        return LEASE_EXIT_USAGE;
    }
    if (floor_arg) {
        char *end;
        errno = 0;
        long long v = strtoll(floor_arg, &end, 10);
        if (errno || *end || v < 0) {
            fprintf(stderr, "leasectl recover: --floor must be a non-negative integer\n");
            return LEASE_EXIT_USAGE;
        }
    }
    const char *url = ctl_store_url(url_flag);
    if (!url)
        return LEASE_EXIT_USAGE;
    if (ctl_valkey_url(url))
        return ctl_valkey_recover(url, reason, floor_arg ? strtoll(floor_arg, NULL, 10) : 0);
    char err[1024] = "";
    char *out = NULL;
    int rc = exit_for(lease_admin_recover(url, reason, floor_arg, &out, err, sizeof err), err);
    if (rc == LEASE_EXIT_OK)
        puts(out ? out : "null");
    free(out);
    return rc;
}

int ctl_verify_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"database-url", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *url_flag = NULL;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "d:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'd':
            url_flag = optarg;
            break;
        case 'h':
            printf("usage: leasectl verify [--database-url URL]\n"
                   "Reports fencing and record inconsistencies (lease.verify); exit 1 if any.\n");
            return LEASE_EXIT_OK;
        default:
            return LEASE_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "leasectl verify: unexpected argument '%s'\n", argv[optind]);
        return LEASE_EXIT_USAGE;
    }
    const char *url = ctl_database_url(url_flag);
    if (!url)
        return LEASE_EXIT_USAGE;
    char err[1024] = "";
    char *report = NULL;
    bool consistent = false;
    int rc = exit_for(lease_admin_verify(url, &report, &consistent, err, sizeof err), err);
    if (rc != LEASE_EXIT_OK)
        return rc;
    puts(report);
    free(report);
    return consistent ? LEASE_EXIT_OK : LEASE_EXIT_FAILURE;
}
