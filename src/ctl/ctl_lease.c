/*
 * ctl_lease.c - `leasectl acquire|renew|release|inspect|list|force-release|
 * revoke|commit`: one HTTP call each through the client library.
 *
 * stdout carries the service's JSON answer (or, when no typed answer
 * arrived, a client-made envelope of the same shape with the typed code);
 * stderr carries one human line on failure. Exit statuses are
 * interface.md section 5's, from lease_code_exit_status.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "ctl/ctl_options.h"
#include "lease/client.h"

static int usage_of(const char *cmd, const char *synopsis, int status)
{
    FILE *out = status == CTL_EXIT_OK ? stdout : stderr;
    fprintf(out, "usage: leasectl %s %s\n%s", cmd, synopsis, ctl_options_usage);
    return status;
}

/* Parse result to exit status: -1 when the command should go on. */
static int parse_exit(int parsed, const char *cmd, const char *synopsis)
{
    if (parsed == CTL_PARSE_HELP)
        return usage_of(cmd, synopsis, CTL_EXIT_OK);
    if (parsed < 0)
        return CTL_EXIT_USAGE;
    return -1;
}

static lease_client_t *client_for(const ctl_options_t *o, const char *cmd)
{
    lease_client_t *c = lease_client_new(o->url, o->token);
    if (!c)
        fprintf(stderr, "leasectl %s: LEASE_URL must be an http:// or https:// URL\n", cmd);
    return c;
}

/*
 * Prints the outcome: the service's body when it is the typed answer that
 * decided `code`, else a client-made envelope. Returns the exit status.
 */
static int report(const char *cmd, lease_code_t code, const char *field,
                  const lease_client_call_t *call)
{
    bool printed = false;
    if (call->body) {
        json_t *root = json_loads(call->body, 0, NULL);
        const char *said = json_string_value(json_object_get(root, "code"));
        if (said && strcmp(said, lease_code_name(code)) == 0) {
            fputs(call->body, stdout);
            fputc('\n', stdout);
            printed = true;
        }
        json_decref(root);
    }
    if (!printed) {
        json_t *env = json_pack("{s:s, s:s, s:s, s:b}", "status",
                                lease_code_is_success(code) ? "success" : "error", "code",
                                lease_code_name(code), "msg", lease_code_message(code), "retryable",
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
    if (!lease_code_is_success(code)) {
        fprintf(stderr, "leasectl %s: %s: %s", cmd, lease_code_name(code),
                lease_code_message(code));
        if (field && *field)
            fprintf(stderr, " (field %s)", field);
        if (call->correlation_id[0])
            fprintf(stderr, " [correlation %s]", call->correlation_id);
        if (code == LEASE_OUTCOME_UNKNOWN && call->request_id_used[0])
            fprintf(stderr, " (request id %s)", call->request_id_used);
        fputc('\n', stderr);
    }
    return lease_code_exit_status(code);
}

static lease_client_call_t call_for(const ctl_options_t *o, bool acquire)
{
    lease_client_call_t call = {.request_id = o->request_id,
                                .deadline_ms = ctl_options_deadline_ms(o, acquire),
                                .keep_body = true};
    return call;
}

int ctl_acquire_main(int argc, char **argv)
{
    static const char synopsis[] = "IDENTITY [LEASE OPTIONS]";
    ctl_options_t o;
    int status =
        parse_exit(ctl_options_parse(&o, CTL_OPT_IDENTITY, argc, argv, NULL), argv[0], synopsis);
    if (status >= 0)
        return status;
    lease_client_t *c = client_for(&o, argv[0]);
    if (!c) {
        ctl_options_free(&o);
        return CTL_EXIT_USAGE;
    }
    lease_client_acquire_t req = {
        .identity = o.identity,
        .service_instance_id = o.service_instance_id,
        .execution_id = o.execution_id,
        .job_id = o.job_id,
        .trace_id = o.trace_id,
        .ttl_ms = o.ttl_ms,
        .maximum_lifetime_ms = o.maximum_lifetime_ms,
        .wait_ms = o.wait_ms,
    };
    lease_client_call_t call = call_for(&o, true);
    lease_result_t res;
    lease_code_t code = lease_client_acquire(c, &req, &call, &res);
    status = report(argv[0], code, res.field, &call);
    lease_client_call_clear(&call);
    lease_client_free(c);
    ctl_options_free(&o);
    return status;
}

/* renew and release */
static int owner_main(int argc, char **argv, bool renew)
{
    static const char synopsis[] = "IDENTITY --lease-id ID --fencing-token N "
                                   "[--service-instance ID] [--ttl-ms N]";
    ctl_options_t o;
    int status =
        parse_exit(ctl_options_parse(&o, CTL_OPT_IDENTITY | CTL_OPT_HELD, argc, argv, NULL),
                   argv[0], synopsis);
    if (status >= 0)
        return status;
    lease_client_t *c = client_for(&o, argv[0]);
    if (!c) {
        ctl_options_free(&o);
        return CTL_EXIT_USAGE;
    }
    lease_client_owner_t req = {o.identity, o.lease_id, o.fencing_token, o.service_instance_id,
                                o.ttl_ms};
    lease_client_call_t call = call_for(&o, false);
    lease_result_t res;
    lease_code_t code = renew ? lease_client_renew(c, &req, &call, &res)
                              : lease_client_release(c, &req, &call, &res);
    status = report(argv[0], code, res.field, &call);
    lease_client_call_clear(&call);
    lease_client_free(c);
    ctl_options_free(&o);
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

int ctl_inspect_main(int argc, char **argv)
{
    static const char synopsis[] = "(--lease-id ID | IDENTITY)";
    ctl_options_t o;
    int status = parse_exit(ctl_options_parse(&o, CTL_OPT_HELD_OPTIONAL, argc, argv, NULL), argv[0],
                            synopsis);
    if (status >= 0)
        return status;
    if (!o.lease_id && !identity_complete(&o.identity)) {
        ctl_options_free(&o);
        fprintf(stderr, "leasectl inspect: give --lease-id or all six identity options\n");
        return CTL_EXIT_USAGE;
    }
    lease_client_t *c = client_for(&o, argv[0]);
    if (!c) {
        ctl_options_free(&o);
        return CTL_EXIT_USAGE;
    }
    lease_client_call_t call = call_for(&o, false);
    lease_result_t res;
    lease_code_t code = o.lease_id ? lease_client_inspect_id(c, o.lease_id, &call, &res)
                                   : lease_client_inspect_identity(c, &o.identity, &call, &res);
    status = report(argv[0], code, res.field, &call);
    lease_client_call_clear(&call);
    lease_client_free(c);
    ctl_options_free(&o);
    return status;
}

typedef struct list_args {
    lease_list_by_t by;
    bool by_given;
    int64_t page_size;
    const char *page_token;
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
    }
    fprintf(stderr,
            "leasectl list: bad value '%s' (--by owner|target|program, "
            "--page-size N)\n",
            arg);
    return false;
}

int ctl_list_main(int argc, char **argv)
{
    static const char synopsis[] = "[--by owner|target|program] --tenant T --program P "
                                   "[--namespace N --target ID] [--page-size N] "
                                   "[--page-token T]";
    static const struct option opts[] = {
        {"by", required_argument, NULL, OPT_BY},
        {"page-size", required_argument, NULL, OPT_PAGE_SIZE},
        {"page-token", required_argument, NULL, OPT_PAGE_TOKEN},
        {NULL, 0, NULL, 0},
    };
    list_args_t a = {.by = LEASE_LIST_BY_PROGRAM};
    ctl_extra_t extra = {opts, take_list, &a};
    ctl_options_t o;
    int status = parse_exit(ctl_options_parse(&o, 0, argc, argv, &extra), argv[0], synopsis);
    if (status >= 0)
        return status;
    if (!a.by_given && o.identity.target_namespace && o.identity.target_id)
        a.by = LEASE_LIST_BY_TARGET;
    bool target = a.by == LEASE_LIST_BY_TARGET;
    if (!o.identity.tenant_id || !o.identity.program_id ||
        (target && (!o.identity.target_namespace || !o.identity.target_id))) {
        ctl_options_free(&o);
        fprintf(stderr, "leasectl list: --tenant and --program are required%s\n",
                target ? ", and --namespace and --target with --by target" : "");
        return CTL_EXIT_USAGE;
    }
    lease_client_t *c = client_for(&o, argv[0]);
    if (!c) {
        ctl_options_free(&o);
        return CTL_EXIT_USAGE;
    }
    lease_client_list_t req = {a.by,
                               o.identity.tenant_id,
                               o.identity.program_id,
                               o.identity.target_namespace,
                               o.identity.target_id,
                               (int)a.page_size,
                               a.page_token};
    lease_client_call_t call = call_for(&o, false);
    lease_list_result_t res;
    lease_code_t code = lease_client_list(c, &req, &call, &res);
    status = report(argv[0], code, res.field, &call);
    lease_list_result_free(&res);
    lease_client_call_clear(&call);
    lease_client_free(c);
    ctl_options_free(&o);
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
static int admin_act(lease_client_t *c, const ctl_options_t *o, const admin_args_t *a, bool revoke,
                     const char *cmd, lease_client_call_t *call)
{
    lease_result_t res;
    char observed_id[LEASE_ID_MAX + 1];
    int64_t token = o->fencing_token;
    if (o->lease_id) {
        snprintf(observed_id, sizeof observed_id, "%s", o->lease_id);
    } else {
        lease_client_call_t look = {.deadline_ms = call->deadline_ms, .keep_body = true};
        lease_code_t code = lease_client_inspect_identity(c, &o->identity, &look, &res);
        int status = code == LEASE_INSPECTED ? CTL_EXIT_OK : report(cmd, code, res.field, &look);
        lease_client_call_clear(&look);
        if (code != LEASE_INSPECTED)
            return status;
        snprintf(observed_id, sizeof observed_id, "%s", res.lease.lease_id);
        token = res.lease.fencing_token;
    }
    lease_client_admin_t req = {o->identity, observed_id, token, a->reason, a->incident_id};
    lease_code_t code = revoke ? lease_client_revoke(c, &req, call, &res)
                               : lease_client_force_release(c, &req, call, &res);
    return report(cmd, code, res.field, call);
}

/* force-release and revoke */
static int admin_main(int argc, char **argv, bool revoke)
{
    static const char synopsis[] = "IDENTITY --reason TEXT [--lease-id ID --fencing-token N] "
                                   "[--incident-id ID (revoke)]";
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
    ctl_options_t o;
    int status = parse_exit(
        ctl_options_parse(&o, CTL_OPT_IDENTITY | CTL_OPT_HELD_OPTIONAL, argc, argv, &extra),
        argv[0], synopsis);
    if (status >= 0)
        return status;
    if (!a.reason || !*a.reason || (!o.lease_id != !o.fencing_token)) {
        ctl_options_free(&o);
        fprintf(stderr,
                "leasectl %s: --reason is required; --lease-id and --fencing-token "
                "go together\n",
                argv[0]);
        return CTL_EXIT_USAGE;
    }
    lease_client_t *c = client_for(&o, argv[0]);
    if (!c) {
        ctl_options_free(&o);
        return CTL_EXIT_USAGE;
    }
    lease_client_call_t call = call_for(&o, false);
    status = admin_act(c, &o, &a, revoke, argv[0], &call);
    lease_client_call_clear(&call);
    lease_client_free(c);
    ctl_options_free(&o);
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
    static const char synopsis[] =
        "[--document KEY --expected-revision N --body JSON]... "
        "[--publication TOPIC --payload JSON]...\n"
        "       [--lease-id ID --fencing-token N IDENTITY]   (default: the LEASE_* "
        "environment of `leasectl run`)";
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
    ctl_options_t o;
    int status =
        parse_exit(ctl_options_parse(&o, CTL_OPT_IDENTITY | CTL_OPT_HELD, argc, argv, &extra),
                   argv[0], synopsis);
    if (status >= 0)
        return status;
    const char *problem = a.n == 0 ? "at least one --document or --publication is required" : NULL;
    for (size_t i = 0; !problem && i < a.n; i++) {
        if (!a.writes[i].json)
            problem = "every --document needs --body and every --publication --payload";
        else if (a.writes[i].kind == LEASE_WRITE_DOCUMENT && !a.has_revision[i])
            problem = "every --document needs --expected-revision";
    }
    if (problem) {
        ctl_options_free(&o);
        fprintf(stderr, "leasectl commit: %s\n", problem);
        return CTL_EXIT_USAGE;
    }
    lease_client_t *c = client_for(&o, argv[0]);
    if (!c) {
        ctl_options_free(&o);
        return CTL_EXIT_USAGE;
    }
    lease_client_commit_t req = {o.identity, o.lease_id, o.fencing_token, o.execution_id,
                                 o.trace_id, a.n,        a.writes};
    lease_client_call_t call = call_for(&o, false);
    lease_commit_result_t res;
    lease_code_t code = lease_client_commit(c, &req, &call, &res);
    status = report(argv[0], code, res.field, &call);
    lease_client_call_clear(&call);
    lease_client_free(c);
    ctl_options_free(&o);
    return status;
}
