/*
 * ctl_lease.c - `leasectl acquire|renew|release|inspect|list|watch|
 * force-release|revoke|commit`: one HTTP call each through the client
 * library (watch: one long poll after another until the lease ends).
 *
 * stdout carries the service's JSON answer (or, when no typed answer
 * arrived, a client-made envelope of the same shape with the typed code);
 * list, inspect and watch print a successful answer as a table instead
 * when asked (--output table) or when stdout is a terminal (ctl_output.h).
 * stderr carries one human line on failure. Exit statuses are
 * docs/executor.md's ("Exit statuses"), from lease_code_exit_status.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_options.h"
#include "ctl_output.h"
#include "ctl_report.h"
#include "lease/clock.h"
#include "lease/client.h"

/* --help of each client command: only the options that command uses.
 * (Kept as written: clang-format would split the sentences.) */
/* clang-format off */
static const char help_acquire[] =
    "usage: leasectl acquire IDENTITY [OPTIONS]\n"
    "Acquires the lease of one identity if it is free; prints the answer as JSON.\n\n"
    CTL_HELP_IDENTITY "options:\n"
    "  --ttl-ms N               time to live (default: the policy's)\n"
    "  --maximum-lifetime-ms N  lower the policy's maximum lifetime\n"
    "  --wait-ms N              while another holds it, retry for up to N ms\n"
    "  --service-instance ID    the holding instance (default: HOSTNAME-PID)\n"
    "  --execution-id ID --job-id ID --trace-id ID  recorded on the lease (generated)\n"
    CTL_HELP_REQUEST_ID CTL_HELP_COMMON;

static const char help_renew[] =
    "usage: leasectl renew IDENTITY --lease-id ID --fencing-token N --service-instance ID "
    "[OPTIONS]\n"
    "Extends a lease you hold; the fencing token stays the same.\n\n" CTL_HELP_IDENTITY
    "the held lease (defaults: LEASE_ID, LEASE_FENCING_TOKEN, LEASE_SERVICE_INSTANCE_ID):\n"
    "  --lease-id ID --fencing-token N --service-instance ID (the acquiring instance)\n"
    "options:\n"
    "  --ttl-ms N               new time to live (default: the lease's)\n" CTL_HELP_REQUEST_ID
        CTL_HELP_COMMON;

static const char help_release[] =
    "usage: leasectl release IDENTITY --lease-id ID --fencing-token N --service-instance ID "
    "[OPTIONS]\n"
    "Ends a lease you hold; the next acquisition gets a greater token.\n\n" CTL_HELP_IDENTITY
    "the held lease (defaults: LEASE_ID, LEASE_FENCING_TOKEN, LEASE_SERVICE_INSTANCE_ID):\n"
    "  --lease-id ID --fencing-token N --service-instance ID (the acquiring instance)\n"
    "options:\n" CTL_HELP_REQUEST_ID CTL_HELP_COMMON;

static const char help_inspect[] =
    "usage: leasectl inspect (--lease-id ID | IDENTITY) [OPTIONS]\n"
    "Shows one lease: by id (active or ended), or the active lease of an identity.\n\n"
    "  --lease-id ID            the lease (default: LEASE_ID)\n" CTL_HELP_IDENTITY
    "options:\n" CTL_HELP_OUTPUT CTL_HELP_COMMON;

static const char help_watch[] =
    "usage: leasectl watch [LEASE_ID] [--timeout-ms N] [--output json|table] [OPTIONS]\n"
    "Waits until the lease ends (released, revoked or expired) and prints its final\n"
    "state; long-polls GET /v1/leases/{id}/watch, one wait after another.\n"
    "Exit status: 0 the lease ended; 75 it was still active when --timeout-ms passed\n"
    "(the lease as it was is printed); 1 lease_not_found; 69, 77 as other commands.\n\n"
    "  LEASE_ID                 the lease (default: --lease-id, else LEASE_ID)\n"
    "options:\n"
    "  --timeout-ms N           give up after N ms (default: wait until it ends)\n"
    CTL_HELP_OUTPUT
    "  --url URL --token TOKEN  as for every command (LEASE_URL, LEASE_TOKEN)\n"
    "  --help                   this text\n";

static const char help_list[] =
    "usage: leasectl list [--by owner|program|target] [--tenant T --program P]\n"
    "                     [--namespace N --target ID] [--page-size N] [--page-token T]\n"
    "Lists active leases, one page at a time.\n\n"
    "options:\n"
    "  --by owner               your own leases; --tenant and --program default to your\n"
    "                           credential's (an administrator credential of every\n"
    "                           program names --program)\n"
    "  --by program             the leases of --tenant T --program P (the default)\n"
    "  --by target              the leases of --tenant T --program P --namespace N\n"
    "                           --target ID (the default when a target is given)\n"
    "  --page-size N            leases per page (default 100, at most the server's)\n"
    "  --page-token T           next_page_token of the previous page, same filter\n"
    CTL_HELP_OUTPUT CTL_HELP_COMMON;

static const char help_force_release[] =
    "usage: leasectl force-release IDENTITY --reason TEXT [--lease-id ID --fencing-token N]\n"
    "Administrator: ends another owner's lease (operational end; audited with the reason).\n"
    "Without --lease-id it inspects the identity and ends the lease it saw, never a\n"
    "successor.\n\n" CTL_HELP_IDENTITY
    "options:\n"
    "  --reason TEXT            why (1..512 characters, required)\n"
    "  --lease-id ID --fencing-token N   the lease to end (default: the one inspected)\n"
    CTL_HELP_REQUEST_ID CTL_HELP_COMMON;

static const char help_revoke[] =
    "usage: leasectl revoke IDENTITY --reason TEXT [--incident-id ID] [--lease-id ID "
    "--fencing-token N]\n"
    "Administrator: revokes a lease (security end; audited with the reason).\n"
    "Without --lease-id it inspects the identity and revokes the lease it saw, never a\n"
    "successor.\n\n" CTL_HELP_IDENTITY
    "options:\n"
    "  --reason TEXT            why (1..512 characters, required)\n"
    "  --incident-id ID         the incident it belongs to\n"
    "  --lease-id ID --fencing-token N   the lease to revoke (default: the one inspected)\n"
    CTL_HELP_REQUEST_ID CTL_HELP_COMMON;

static const char help_commit[] =
    "usage: leasectl commit [--document KEY --expected-revision N --body JSON]...\n"
    "                       [--publication TOPIC --payload JSON]... [OPTIONS]\n"
    "Fenced commit: the writes happen only while the lease is held with this token.\n"
    "Inside `leasectl run` the lease and identity come from its LEASE_* variables.\n\n"
    "writes (at least one, at most 32):\n"
    "  --document KEY --expected-revision N --body JSON\n"
    "                           N is the revision you read (0: must not exist yet)\n"
    "  --publication TOPIC --payload JSON\n"
    "the held lease (defaults: LEASE_ID, LEASE_FENCING_TOKEN, LEASE_EXECUTION_ID, "
    "LEASE_TRACE_ID):\n"
    "  --lease-id ID --fencing-token N --execution-id ID [--trace-id ID] and the identity\n"
    CTL_HELP_IDENTITY "options:\n" CTL_HELP_REQUEST_ID CTL_HELP_COMMON;

static const char help_session[] =
    "usage: leasectl session list [--database-url URL] [--tenant TENANT]\n"
    "       leasectl session close [OPTIONS] SESSION_ID\n"
    "list prints the open sessions of lease.active_sessions as JSON ({\"sessions\":[...]},\n"
    "each with its owner, TTL, times, remaining_ms and leases), oldest first; it reads\n"
    "the database (--database-url, default LEASE_DATABASE_URL; PostgreSQL only).\n"
    "close ends a session: every lease in it ends at once (released, each with its history\n"
    "row and audit event) and its holders lose them. Needs the credential that opened\n"
    "it (targets:lease). Prints the answer as JSON: the session, leases_ended and more\n"
    "(true: the sweeper ends the rest). Exit 0 closed; 1 lease_lost (closed, expired,\n"
    "unknown or another principal's); 65 on a backend without sessions.\n"
    "\n"
    "options of close:\n" CTL_HELP_REQUEST_ID CTL_HELP_COMMON;

/* clang-format on */

static int usage_of(const char *help, int status)
{
    fputs(help, status == LEASE_EXIT_OK ? stdout : stderr);
    return status;
}

/* One command's parsed options, client and call. */
typedef struct session {
    const char *cmd;
    ctl_output_t output; /* resolved: JSON or table */
    int first_operand;   /* argc when none */
    ctl_options_t o;
    lease_client_t *client;
    lease_client_call_t call;
} session_t;

/*
 * Prints the outcome: the service's body when it is the typed answer that
 * decided `code`, else a client-made envelope. Returns the exit status.
 */
static int report(const session_t *s, const lease_client_call_t *call, lease_code_t code,
                  const char *field)
{
    const char *cmd = s->cmd;
    const char *url = lease_client_url(s->client);
    bool printed = false;
    /* no answer from leased at all: say where we looked and what happened */
    char unreachable[LEASE_CLIENT_TRANSPORT_ERROR_MAX + 256];
    bool no_answer = ctl_report_unreachable(url, call, unreachable, sizeof unreachable);
    if (call->body) {
        json_t *root = json_loads(call->body, 0, NULL);
        const char *said = json_string_value(json_object_get(root, "code"));
        if (said && strcmp(said, lease_code_name(code)) == 0) {
            /* a table shows a successful answer; a failure's story is the
             * stderr line */
            bool table = s->output == CTL_OUTPUT_TABLE;
            if (!table || (lease_code_is_success(code) &&
                           !ctl_output_table(stdout, root, (long long)lease_wall_now_ms()))) {
                fputs(call->body, stdout);
                fputc('\n', stdout);
            }
            printed = true;
        }
        json_decref(root);
    }
    if (!printed && s->output != CTL_OUTPUT_TABLE) {
        json_t *env = json_pack("{s:s, s:s, s:s, s:b}", "status",
                                lease_code_is_success(code) ? "success" : "error", "code",
                                lease_code_name(code), "msg",
                                no_answer ? unreachable : lease_code_message(code), "retryable",
                                lease_code_retryable(code));
        if (env && field && *field)
            json_object_set_new(env, "field", json_string(field));
        if (env && call->request_id_used[0])
            json_object_set_new(env, "request_id", json_string(call->request_id_used));
        char *text = env ? json_dumps(env, JSON_COMPACT) : NULL;
        if (text)
            puts(text);
        free(text);
        json_decref(env);
    }
    fflush(stdout);
    if (no_answer && code == LEASE_BACKEND_UNAVAILABLE) {
        /* nothing was sent: the service, not the database, is the problem */
        fprintf(stderr, "leasectl %s: %s (%s) [%s]\n", cmd, unreachable,
                CTL_REPORT_UNREACHABLE_HINT, lease_code_name(code));
    } else if (!lease_code_is_success(code)) {
        fprintf(stderr, "leasectl %s: %s: %s", cmd, lease_code_name(code),
                lease_code_message(code));
        if (field && *field)
            fprintf(stderr, " (field %s)", field);
        if (call->correlation_id[0])
            fprintf(stderr, " [correlation %s]", call->correlation_id);
        if (code == LEASE_OUTCOME_UNKNOWN && call->request_id_used[0])
            fprintf(stderr, " (request id %s)", call->request_id_used);
        if (no_answer)
            fprintf(stderr, "; %s", unreachable);
        fputc('\n', stderr);
    }
    return lease_code_exit_status(code);
}

/*
 * Parses the options and makes the client. Returns -1 when the command
 * should go on (then session_close), else the exit status to return at once
 * (--help, a usage error).
 */
static int session_open(session_t *s, int argc, char **argv, unsigned flags,
                        const ctl_extra_t *extra, const char *help, bool acquire)
{
    memset(s, 0, sizeof *s);
    s->cmd = argv[0];
    s->output = CTL_OUTPUT_JSON;
    int parsed = ctl_options_parse(&s->o, flags, argc, argv, extra);
    if (parsed == CTL_PARSE_HELP)
        return usage_of(help, LEASE_EXIT_OK);
    if (parsed < 0)
        return LEASE_EXIT_USAGE;
    s->first_operand = parsed;
    s->client = ctl_client_new(&s->o);
    if (!s->client) {
        fprintf(stderr, "leasectl %s: LEASE_URL must be an http:// or https:// URL\n", s->cmd);
        ctl_options_free(&s->o);
        return LEASE_EXIT_USAGE;
    }
    s->call.request_id = s->o.request_id;
    s->call.deadline_ms = ctl_options_deadline_ms(&s->o, acquire);
    s->call.keep_body = true;
    return -1;
}

static void session_close(session_t *s)
{
    lease_client_call_clear(&s->call);
    lease_client_free(s->client);
    ctl_options_free(&s->o);
}

/* A usage problem found after parsing: closes the session, returns 2. */
static int session_usage(session_t *s, const char *problem)
{
    fprintf(stderr, "leasectl %s: %s\n", s->cmd, problem);
    session_close(s);
    return LEASE_EXIT_USAGE;
}

int ctl_acquire_main(int argc, char **argv)
{
    session_t s;
    int status = session_open(&s, argc, argv, CTL_OPT_IDENTITY, NULL, help_acquire, true);
    if (status >= 0)
        return status;
    lease_client_acquire_t req = ctl_options_acquire_req(&s.o);
    lease_result_t res;
    lease_code_t code = lease_client_acquire(s.client, &req, &s.call, &res);
    status = report(&s, &s.call, code, res.field);
    session_close(&s);
    return status;
}

/* renew and release */
static int owner_main(int argc, char **argv, bool renew)
{
    session_t s;
    int status = session_open(&s, argc, argv, CTL_OPT_IDENTITY | CTL_OPT_HELD, NULL,
                              renew ? help_renew : help_release, false);
    if (status >= 0)
        return status;
    const ctl_options_t *o = &s.o;
    lease_client_owner_t req = {o->identity, o->lease_id, o->fencing_token, o->service_instance_id,
                                o->ttl_ms};
    lease_result_t res;
    lease_code_t code = renew ? lease_client_renew(s.client, &req, &s.call, &res)
                              : lease_client_release(s.client, &req, &s.call, &res);
    status = report(&s, &s.call, code, res.field);
    session_close(&s);
    return status;
}

int ctl_renew_main(int argc, char **argv)
{
    return owner_main(argc, argv, true);
}

int ctl_release_main(int argc, char **argv)
{
    return owner_main(argc, argv, false);
}

static bool identity_complete(const lease_identity_input_t *id)
{
    return id->tenant_id && id->program_id && id->target_namespace && id->target_id &&
           id->actor_name && id->workflow_name;
}

enum { OPT_OUTPUT = 900, OPT_TIMEOUT };

static bool take_output(const char *cmd, const char *arg, ctl_output_t *out)
{
    if (ctl_output_parse(arg, out))
        return true;
    fprintf(stderr, "leasectl %s: bad value '%s' (--output json|table)\n", cmd, arg);
    return false;
}

static bool take_inspect(void *ctx, int val, const char *arg)
{
    (void)val; /* --output only */
    return take_output("inspect", arg, ctx);
}

int ctl_inspect_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, OPT_OUTPUT},
        {NULL, 0, NULL, 0},
    };
    ctl_output_t output = CTL_OUTPUT_DEFAULT;
    ctl_extra_t extra = {opts, take_inspect, &output};
    session_t s;
    int status = session_open(&s, argc, argv, CTL_OPT_HELD_OPTIONAL, &extra, help_inspect, false);
    if (status >= 0)
        return status;
    s.output = ctl_output_resolve(output);
    const ctl_options_t *o = &s.o;
    if (!o->lease_id && !identity_complete(&o->identity))
        return session_usage(&s, "give --lease-id or all six identity options");
    lease_result_t res;
    lease_code_t code = o->lease_id
                            ? lease_client_inspect_id(s.client, o->lease_id, &s.call, &res)
                            : lease_client_inspect_identity(s.client, &o->identity, &s.call, &res);
    status = report(&s, &s.call, code, res.field);
    session_close(&s);
    return status;
}

typedef struct list_args {
    lease_list_by_t by;
    bool by_given;
    int64_t page_size;
    const char *page_token;
    ctl_output_t output;
} list_args_t;

enum { OPT_BY = 1, OPT_PAGE_SIZE, OPT_PAGE_TOKEN };

static bool take_list(void *ctx, int val, const char *arg)
{
    list_args_t *a = ctx;
    switch (val) {
    case OPT_BY:
        a->by_given = true;
        if (strcmp(arg, "owner") == 0)
            a->by = LEASE_LIST_BY_OWNER;
        else if (strcmp(arg, "target") == 0)
            a->by = LEASE_LIST_BY_TARGET;
        else if (strcmp(arg, "program") == 0)
            a->by = LEASE_LIST_BY_PROGRAM;
        else
            break;
        return true;
    case OPT_PAGE_SIZE:
        if (ctl_parse_int(arg, 1, 100000, &a->page_size))
            return true;
        break;
    case OPT_PAGE_TOKEN:
        a->page_token = arg;
        return true;
    case OPT_OUTPUT:
        return take_output("list", arg, &a->output);
    }
    fprintf(stderr,
            "leasectl list: bad value '%s' (--by owner|target|program, "
            "--page-size N)\n",
            arg);
    return false;
}

int ctl_list_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"by", required_argument, NULL, OPT_BY},
        {"page-size", required_argument, NULL, OPT_PAGE_SIZE},
        {"page-token", required_argument, NULL, OPT_PAGE_TOKEN},
        {"output", required_argument, NULL, OPT_OUTPUT},
        {NULL, 0, NULL, 0},
    };
    list_args_t a = {.by = LEASE_LIST_BY_PROGRAM};
    ctl_extra_t extra = {opts, take_list, &a};
    session_t s;
    int status = session_open(&s, argc, argv, 0, &extra, help_list, false);
    if (status >= 0)
        return status;
    s.output = ctl_output_resolve(a.output);
    const lease_identity_input_t *id = &s.o.identity;
    if (!a.by_given && id->target_namespace && id->target_id)
        a.by = LEASE_LIST_BY_TARGET;
    bool target = a.by == LEASE_LIST_BY_TARGET;
    /* by owner, the service takes what is left out from the credential */
    if (a.by != LEASE_LIST_BY_OWNER && (!id->tenant_id || !id->program_id ||
                                        (target && (!id->target_namespace || !id->target_id))))
        return session_usage(&s, target ? "--tenant, --program, --namespace and --target are "
                                          "required with --by target"
                                        : "--tenant and --program are required (or --by owner)");
    lease_client_list_t req = {
        a.by,          id->tenant_id,    id->program_id, id->target_namespace,
        id->target_id, (int)a.page_size, a.page_token};
    lease_list_result_t res;
    lease_code_t code = lease_client_list(s.client, &req, &s.call, &res);
    status = report(&s, &s.call, code, res.field);
    lease_list_result_free(&res);
    session_close(&s);
    return status;
}

typedef struct watch_args {
    ctl_output_t output;
    int64_t timeout_ms; /* 0: until the lease ends */
} watch_args_t;

static bool take_watch(void *ctx, int val, const char *arg)
{
    watch_args_t *a = ctx;
    if (val == OPT_OUTPUT)
        return take_output("watch", arg, &a->output);
    if (ctl_parse_int(arg, 1, INT64_MAX / 2, &a->timeout_ms))
        return true;
    fprintf(stderr, "leasectl watch: bad value '%s' (--timeout-ms N, N >= 1)\n", arg);
    return false;
}

/* One long poll at most this long: within leased's default cap (60 s) and
 * its default wait; each poll's deadline is its wait plus the client's. */
#define CTL_WATCH_POLL_MS 30000

/* Prints the final answer of a watch (or the lease as it was at the
 * timeout); the exit status: 0 ended, 75 still active, else the code's. */
static int watch_loop(session_t *s, const char *lease_id, int64_t timeout_ms)
{
    lease_deadline_t until = lease_deadline_in(timeout_ms > 0 ? timeout_ms : INT64_MAX / 4);
    for (;;) {
        int64_t wait = lease_deadline_remaining_ms(&until);
        if (wait > CTL_WATCH_POLL_MS)
            wait = CTL_WATCH_POLL_MS;
        lease_client_call_clear(&s->call);
        s->call = (lease_client_call_t){.keep_body = true}; /* deadline: wait + the client's */
        lease_result_t res;
        lease_code_t code = lease_client_watch(s->client, lease_id, wait, -1, &s->call, &res);
        if (code != LEASE_INSPECTED)
            return report(s, &s->call, code, res.field);
        bool ended = res.has_lease && res.lease.state != LEASE_STATE_ACTIVE;
        if (ended || lease_deadline_passed(&until)) {
            report(s, &s->call, code, res.field);
            if (!ended)
                fprintf(stderr, "leasectl watch: lease %s still active after %lld ms\n", lease_id,
                        (long long)timeout_ms);
            return ended ? LEASE_EXIT_OK : LEASE_EXIT_HELD;
        }
    }
}

int ctl_watch_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, OPT_OUTPUT},
        {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
        {NULL, 0, NULL, 0},
    };
    /* `watch LEASE_ID [OPTIONS]` as well as `watch [OPTIONS] LEASE_ID`:
     * the parser stops at the first operand, so a leading one is taken
     * out first */
    const char *lease_id = NULL;
    char *args[256];
    if (argc > 255) {
        fprintf(stderr, "leasectl watch: too many arguments\n");
        return LEASE_EXIT_USAGE;
    }
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (i == 1 && argv[i][0] != '-' && !lease_id) {
            lease_id = argv[i];
            continue;
        }
        args[n++] = argv[i];
    }
    args[n] = NULL;
    watch_args_t a = {0};
    ctl_extra_t extra = {opts, take_watch, &a};
    session_t s;
    int status = session_open(&s, n, args, CTL_OPT_HELD_OPTIONAL | CTL_OPT_OPERANDS, &extra,
                              help_watch, false);
    if (status >= 0)
        return status;
    s.output = ctl_output_resolve(a.output);
    if (s.first_operand < n) {
        if (lease_id || s.first_operand + 1 < n)
            return session_usage(&s, "one LEASE_ID");
        lease_id = args[s.first_operand];
    }
    if (!lease_id)
        lease_id = s.o.lease_id; /* --lease-id, else LEASE_ID */
    if (!lease_id || !*lease_id)
        return session_usage(&s, "which lease? give LEASE_ID (or --lease-id, or LEASE_ID in "
                                 "the environment)");
    status = watch_loop(&s, lease_id, a.timeout_ms);
    session_close(&s);
    return status;
}

typedef struct admin_args {
    const char *reason;
    const char *incident_id;
} admin_args_t;

enum { OPT_REASON = 1, OPT_INCIDENT };

static bool take_admin(void *ctx, int val, const char *arg)
{
    admin_args_t *a = ctx;
    if (val == OPT_REASON)
        a->reason = arg;
    else
        a->incident_id = arg;
    return true;
}

/*
 * force-release or revoke of the lease named by --lease-id/--fencing-token,
 * or else of the lease an inspection of the identity observes, so a
 * successor acquired in between is never touched (the service compares).
 */
static int admin_act(session_t *s, const admin_args_t *a, bool revoke)
{
    const ctl_options_t *o = &s->o;
    lease_result_t res;
    char observed_id[LEASE_ID_MAX + 1];
    int64_t token = o->fencing_token;
    if (o->lease_id) {
        snprintf(observed_id, sizeof observed_id, "%s", o->lease_id);
    } else {
        lease_client_call_t look = {.deadline_ms = s->call.deadline_ms, .keep_body = true};
        lease_code_t code = lease_client_inspect_identity(s->client, &o->identity, &look, &res);
        int status = code == LEASE_INSPECTED ? LEASE_EXIT_OK : report(s, &look, code, res.field);
        lease_client_call_clear(&look);
        if (code != LEASE_INSPECTED)
            return status;
        snprintf(observed_id, sizeof observed_id, "%s", res.lease.lease_id);
        token = res.lease.fencing_token;
    }
    lease_client_admin_t req = {o->identity, observed_id, token, a->reason, a->incident_id};
    lease_code_t code = revoke ? lease_client_revoke(s->client, &req, &s->call, &res)
                               : lease_client_force_release(s->client, &req, &s->call, &res);
    return report(s, &s->call, code, res.field);
}

/* force-release and revoke */
static int admin_main(int argc, char **argv, bool revoke)
{
    static const struct option force_opts[] = {
        {"reason", required_argument, NULL, OPT_REASON},
        {NULL, 0, NULL, 0},
    };
    static const struct option revoke_opts[] = {
        {"reason", required_argument, NULL, OPT_REASON},
        {"incident-id", required_argument, NULL, OPT_INCIDENT},
        {NULL, 0, NULL, 0},
    };
    admin_args_t a = {0};
    ctl_extra_t extra = {revoke ? revoke_opts : force_opts, take_admin, &a};
    session_t s;
    int status = session_open(&s, argc, argv, CTL_OPT_IDENTITY | CTL_OPT_HELD_OPTIONAL, &extra,
                              revoke ? help_revoke : help_force_release, false);
    if (status >= 0)
        return status;
    if (!a.reason || !*a.reason || (!s.o.lease_id != !s.o.fencing_token))
        return session_usage(&s, "--reason is required; --lease-id and --fencing-token go "
                                 "together");
    status = admin_act(&s, &a, revoke);
    session_close(&s);
    return status;
}

int ctl_force_release_main(int argc, char **argv)
{
    return admin_main(argc, argv, false);
}

int ctl_revoke_main(int argc, char **argv)
{
    return admin_main(argc, argv, true);
}

typedef struct commit_args {
    size_t n;
    lease_write_t writes[LEASE_COMMIT_WRITES_MAX];
    bool has_revision[LEASE_COMMIT_WRITES_MAX];
    const char *problem; /* the first usage problem */
} commit_args_t;

enum { OPT_DOCUMENT = 1, OPT_REVISION, OPT_BODY, OPT_PUBLICATION, OPT_PAYLOAD };

/* --document / --publication start a write; the other options fill the
 * latest write of the matching kind. */
static bool take_commit(void *ctx, int val, const char *arg)
{
    commit_args_t *a = ctx;
    lease_write_t *last = a->n ? &a->writes[a->n - 1] : NULL;
    switch (val) {
    case OPT_DOCUMENT:
    case OPT_PUBLICATION:
        if (a->n == LEASE_COMMIT_WRITES_MAX) {
            a->problem = "too many writes (at most 32)";
            break;
        }
        if (strlen(arg) == 0 || strlen(arg) > LEASE_DOC_KEY_MAX) {
            a->problem = "a document key or topic has 1..256 characters";
            break;
        }
        last = &a->writes[a->n++];
        last->kind = val == OPT_DOCUMENT ? LEASE_WRITE_DOCUMENT : LEASE_WRITE_PUBLICATION;
        strcpy(last->key, arg);
        return true;
    case OPT_REVISION:
        if (!last || last->kind != LEASE_WRITE_DOCUMENT || a->has_revision[a->n - 1]) {
            a->problem = "--expected-revision follows its --document, once";
            break;
        }
        if (!ctl_parse_int(arg, 0, INT64_MAX, &last->expected_revision)) {
            a->problem = "--expected-revision needs a whole number (0: must not exist)";
            break;
        }
        a->has_revision[a->n - 1] = true;
        return true;
    case OPT_BODY:
    case OPT_PAYLOAD: {
        lease_write_kind_t kind = val == OPT_BODY ? LEASE_WRITE_DOCUMENT : LEASE_WRITE_PUBLICATION;
        if (!last || last->kind != kind || last->json) {
            a->problem = "--body follows its --document and --payload its --publication, once";
            break;
        }
        last->json = arg;
        return true;
    }
    }
    fprintf(stderr, "leasectl commit: %s\n", a->problem);
    return false;
}

int ctl_commit_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"document", required_argument, NULL, OPT_DOCUMENT},
        {"expected-revision", required_argument, NULL, OPT_REVISION},
        {"body", required_argument, NULL, OPT_BODY},
        {"publication", required_argument, NULL, OPT_PUBLICATION},
        {"payload", required_argument, NULL, OPT_PAYLOAD},
        {NULL, 0, NULL, 0},
    };
    commit_args_t a = {0};
    ctl_extra_t extra = {opts, take_commit, &a};
    session_t s;
    int status =
        session_open(&s, argc, argv, CTL_OPT_IDENTITY | CTL_OPT_HELD, &extra, help_commit, false);
    if (status >= 0)
        return status;
    const char *problem = a.n == 0 ? "at least one --document or --publication is required" : NULL;
    for (size_t i = 0; !problem && i < a.n; i++) {
        if (!a.writes[i].json)
            problem = "every --document needs --body and every --publication --payload";
        else if (a.writes[i].kind == LEASE_WRITE_DOCUMENT && !a.has_revision[i])
            problem = "every --document needs --expected-revision";
    }
    if (problem)
        return session_usage(&s, problem);
    const ctl_options_t *o = &s.o;
    lease_client_commit_t req = {o->identity, o->lease_id, o->fencing_token, o->execution_id,
                                 o->trace_id, a.n,         a.writes};
    lease_commit_result_t res;
    lease_code_t code = lease_client_commit(s.client, &req, &s.call, &res);
    status = report(&s, &s.call, code, res.field);
    session_close(&s);
    return status;
}

int ctl_session_main(int argc, char **argv)
{
    bool help = argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
    if (help)
        return usage_of(help_session, LEASE_EXIT_OK);
    if (argc >= 2 && strcmp(argv[1], "list") == 0)
        return ctl_session_list(argc - 1, argv + 1);
    if (argc < 2 || strcmp(argv[1], "close") != 0) {
        fprintf(stderr, "leasectl session: expected 'list' or 'close SESSION_ID'\n");
        return usage_of(help_session, LEASE_EXIT_USAGE);
    }
    session_t s;
    int status = session_open(&s, argc - 1, argv + 1, CTL_OPT_OPERANDS, NULL, help_session, false);
    if (status >= 0)
        return status;
    s.cmd = "session close";
    /* argv + 1 is "close", its operands follow */
    if (s.first_operand != argc - 2)
        return session_usage(&s, "exactly one SESSION_ID is required");
    const char *session_id = argv[1 + s.first_operand];
    lease_result_t res;
    lease_code_t code = lease_client_session_close(s.client, session_id, &s.call, &res);
    status = report(&s, &s.call, code, res.field);
    session_close(&s);
    return status;
}
