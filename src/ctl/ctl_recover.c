/*
 * ctl_recover.c - `leasectl recover` and `leasectl verify`: the disaster
 * recovery path of docs/operators.md from the command line.
 *
 *   leasectl recover --reason TEXT [--floor N] [--database-url URL]
 *       raises every fencing counter by the epoch stride (or to the floor),
 *       revokes every live lease, unseals; prints the SQL function's answer.
 *   leasectl verify [--database-url URL]
 *       prints {"consistent":bool,"problems":[...]}; exit 0 when consistent,
 *       1 when not.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#include "ctl/ctl.h"
#include "store/pg_admin.h"

static int run_call(const char *url, const char *sql, int n, const char *const *params,
                    char **out)
{
    char err[1024] = "";
    char state[6];
    if (lease_pg_admin_call(url, sql, n, params, out, state, err, sizeof err) != 0) {
        fprintf(stderr, "leasectl: %s\n", err);
        /* 22023 and LS005: the request itself was refused */
        if (strcmp(state, "22023") == 0 || strcmp(state, "LS005") == 0)
            return CTL_EXIT_INVALID;
        if (strcmp(state, "42501") == 0)
            return CTL_EXIT_DENIED;
        return CTL_EXIT_UNAVAILABLE;
    }
    return CTL_EXIT_OK;
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
                   "revokes every live lease and unseals the namespace (lease.recover_epoch).\n");
            return CTL_EXIT_OK;
        default:
            return CTL_EXIT_USAGE;
        }
    }
    if (optind != argc || !reason || !*reason) {
        fprintf(stderr, "leasectl recover: --reason is required\n");
        return CTL_EXIT_USAGE;
    }
    if (floor_arg) {
        char *end;
        errno = 0;
        long long v = strtoll(floor_arg, &end, 10);
        if (errno || *end || v < 0) {
            fprintf(stderr, "leasectl recover: --floor must be a non-negative integer\n");
            return CTL_EXIT_USAGE;
        }
    }
    const char *url = ctl_database_url(url_flag);
    if (!url)
        return CTL_EXIT_USAGE;
    const char *params[2] = {reason, floor_arg};
    char *out = NULL;
    int rc = run_call(url, "SELECT lease.recover_epoch($1, $2::bigint)::text", 2, params, &out);
    if (rc == CTL_EXIT_OK)
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
            return CTL_EXIT_OK;
        default:
            return CTL_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "leasectl verify: unexpected argument '%s'\n", argv[optind]);
        return CTL_EXIT_USAGE;
    }
    const char *url = ctl_database_url(url_flag);
    if (!url)
        return CTL_EXIT_USAGE;
    char *out = NULL;
    int rc = run_call(url,
                      "SELECT jsonb_build_object('consistent', count(*) = 0, 'problems', "
                      "coalesce(jsonb_agg(to_jsonb(v)), '[]'))::text FROM lease.verify() v",
                      0, NULL, &out);
    if (rc != CTL_EXIT_OK)
        return rc;
    puts(out ? out : "null");
    json_t *report = out ? json_loads(out, 0, NULL) : NULL;
    bool consistent = json_is_true(json_object_get(report, "consistent"));
    json_decref(report);
    free(out);
    return consistent ? CTL_EXIT_OK : CTL_EXIT_OTHER;
}
