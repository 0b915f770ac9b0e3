/*
 * ctl_recover.c - `leasectl recover` and `leasectl verify`: the disaster
 * recovery path of docs/operators.md from the command line.
 *
 *   leasectl recover --reason TEXT [--floor N] [--floor-from URL]...
 *                    [--database-url URL]
 *       raises every fencing counter by the epoch stride (or to the floor),
 *       revokes every live lease, unseals; prints the SQL function's answer.
 *       --floor-from reads leased_fencing_token_max from each leased's
 *       /metrics first: the floor is at least the highest of them + 1, so
 *       tokens a leased handed out from a database this one never heard of
 *       are not handed out again (docs/operators.md, "Recovery").
 *       On Valkey (a redis:// URL) the same is a rebind of the namespace
 *       (ctl_valkey_recover): a higher epoch, above N when given.
 *   leasectl verify [--database-url URL]
 *       prints {"consistent":bool,"problems":[...]}; exit 0 when consistent,
 *       1 when not.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* At most this many --floor-from URLs (more is a usage error, not a floor
 * that silently left some out). */
#define FLOOR_FROM_MAX 64

/* Reads leased_fencing_token_max from the /metrics of every leased in
 * urls and raises *floor to the highest + 1. Any URL that cannot be read,
 * or lacks the gauge, refuses the whole recovery before anything changed:
 * a floor that silently left an instance out could hand its tokens out
 * again. Returns LEASE_EXIT_OK or the exit status (after saying why). */
static int floor_from_instances(const char *const *urls, size_t n, int64_t *floor)
{
    for (size_t i = 0; i < n; i++) {
        lease_client_t *c = lease_client_new(urls[i], NULL);
        if (!c) {
            fprintf(stderr,
                    "leasectl recover: --floor-from %s: not an http:// or https:// URL; "
                    "nothing was changed\n",
                    urls[i]);
            return LEASE_EXIT_USAGE;
        }
        lease_client_call_t call = {0};
        int64_t seen = 0;
        lease_code_t code = lease_client_metric(c, "leased_fencing_token_max", &call, &seen);
        lease_client_free(c);
        if (code == LEASE_INSPECTED && seen >= 0 && seen < INT64_MAX) {
            if (seen + 1 > *floor)
                *floor = seen + 1;
            fprintf(stderr, "leasectl recover: %s: leased_fencing_token_max %lld\n", urls[i],
                    (long long)seen);
            continue;
        }
        if (code == LEASE_INSPECTED)
            fprintf(stderr,
                    "leasectl recover: --floor-from %s: leased_fencing_token_max %lld is out of "
                    "range; nothing was changed\n",
                    urls[i], (long long)seen);
        else if (code == LEASE_NOT_FOUND)
            fprintf(stderr,
                    "leasectl recover: --floor-from %s: its /metrics has no "
                    "leased_fencing_token_max (not a leased, or one too old); nothing was "
                    "changed\n",
                    urls[i]);
        else if (call.transport_error[0])
            fprintf(stderr,
                    "leasectl recover: --floor-from %s: /metrics could not be read (%s); "
                    "nothing was changed\n",
                    urls[i], call.transport_error);
        else
            fprintf(stderr,
                    "leasectl recover: --floor-from %s: /metrics answered HTTP %d; nothing was "
                    "changed\n",
                    urls[i], call.http_status);
        lease_client_call_clear(&call);
        return LEASE_EXIT_UNAVAILABLE;
    }
    return LEASE_EXIT_OK;
}

/* Prints the SQL function's answer, with the floor used ("floor") when
 * one was given or read, so the record of the recovery says it. */
static void print_answer(const char *out, bool floored, int64_t floor)
{
    json_t *answer = out ? json_loads(out, 0, NULL) : NULL;
    char *text = NULL;
    if (json_is_object(answer) && floored &&
        json_object_set_new(answer, "floor", json_integer((json_int_t)floor)) == 0)
        text = json_dumps(answer, JSON_COMPACT);
    json_decref(answer);
    puts(text ? text : out ? out : "null");
    free(text);
}

int ctl_recover_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"reason", required_argument, NULL, 'r'},
        {"floor", required_argument, NULL, 'f'},
        {"floor-from", required_argument, NULL, 'F'},
        {"database-url", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *reason = NULL, *floor_arg = NULL, *url_flag = NULL;
    const char *floor_from[FLOOR_FROM_MAX];
    size_t n_floor_from = 0;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "r:f:F:d:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'F':
            if (n_floor_from == FLOOR_FROM_MAX) {
                fprintf(stderr, "leasectl recover: at most %d --floor-from URLs\n",
                        FLOOR_FROM_MAX);
                return LEASE_EXIT_USAGE;
            }
            floor_from[n_floor_from++] = optarg;
            break;
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
            printf("usage: leasectl recover --reason TEXT [--floor N] [--floor-from URL]...\n"
                   "                        [--database-url URL]\n"
                   "Raises every fencing counter by the policy's epoch stride (or to N),\n"
                   "revokes every live lease and unseals the namespace (lease.recover_epoch).\n"
                   "--floor-from URL (repeatable): a leased's base URL; the floor is at least\n"
                   "its leased_fencing_token_max (GET URL/metrics) + 1. Any URL unread: refused,\n"
                   "nothing changed. Name every leased that served since the last recovery.\n"
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
    int64_t floor = 0;
    if (floor_arg) {
        char *end;
        errno = 0;
        long long v = strtoll(floor_arg, &end, 10);
        if (errno || *end || v < 0) {
            fprintf(stderr, "leasectl recover: --floor must be a non-negative integer\n");
            return LEASE_EXIT_USAGE;
        }
        floor = v;
    }
    const char *url = ctl_store_url(url_flag);
    if (!url)
        return LEASE_EXIT_USAGE;
    /* every instance is read before the store is touched */
    int rc = floor_from_instances(floor_from, n_floor_from, &floor);
    if (rc != LEASE_EXIT_OK)
        return rc;
    bool floored = floor_arg || n_floor_from > 0;
    if (floored)
        fprintf(stderr, "leasectl recover: floor %lld\n", (long long)floor);
    if (ctl_valkey_url(url))
        return ctl_valkey_recover(url, reason, floor);
    char floor_text[24];
    snprintf(floor_text, sizeof floor_text, "%lld", (long long)floor);
    char err[1024] = "";
    char *out = NULL;
    rc = exit_for(
        lease_admin_recover(url, reason, floored ? floor_text : NULL, &out, err, sizeof err), err);
    if (rc == LEASE_EXIT_OK)
        print_answer(out, floored, floor);
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
