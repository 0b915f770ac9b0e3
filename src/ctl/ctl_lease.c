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

/* One command's parsed options, client and call. */
typedef struct session {
    const char *cmd;
    ctl_options_t o;
    lease_client_t *client;
    lease_client_call_t call;
} session_t;

/*
 * Parses the options and makes the client. Returns -1 when the command
 * should go on (then session_close), else the exit status to return at once
 * (--help, a usage error).
 */
static int session_open(session_t *s, int argc, char **argv, unsigned flags,
                        const ctl_extra_t *extra, const char *synopsis, bool acquire)
{
    memset(s, 0, sizeof *s);
    s->cmd = argv[0];
    int parsed = ctl_options_parse(&s->o, flags, argc, argv, extra);
    if (parsed == CTL_PARSE_HELP)
        return usage_of(s->cmd, synopsis, CTL_EXIT_OK);
    if (parsed < 0)
        return CTL_EXIT_USAGE;
    s->client = ctl_client_new(&s->o);
    if (!s->client) {
        fprintf(stderr, "leasectl %s: LEASE_URL must be an http:// or https:// URL\n", s->cmd);
        ctl_options_free(&s->o);
        return CTL_EXIT_USAGE;
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
    return CTL_EXIT_USAGE;
}

int ctl_acquire_main(int argc, char **argv)
{
    session_t s;
    int status =
        session_open(&s, argc, argv, CTL_OPT_IDENTITY, NULL, "IDENTITY [LEASE OPTIONS]", true);
    if (status >= 0)
        return status;
    lease_client_acquire_t req = ctl_options_acquire_req(&s.o);
    lease_result_t res;
    lease_code_t code = lease_client_acquire(s.client, &req, &s.call, &res);
    status = report(s.cmd, code, res.field, &s.call);
    session_close(&s);
    return status;
}

/* renew and release */
static int owner_main(int argc, char **argv, bool renew)
{
    session_t s;
    int status = session_open(&s, argc, argv, CTL_OPT_IDENTITY | CTL_OPT_HELD, NULL,
                              "IDENTITY --lease-id ID --fencing-token N "
                              "[--service-instance ID] [--ttl-ms N]",
                              false);
    if (status >= 0)
        return status;
    const ctl_options_t *o = &s.o;
    lease_client_owner_t req = {o->identity, o->lease_id, o->fencing_token, o->service_instance_id,
                                o->ttl_ms};
    lease_result_t res;
    lease_code_t code = renew ? lease_client_renew(s.client, &req, &s.call, &res)
                              : lease_client_release(s.client, &req, &s.call, &res);
    status = report(s.cmd, code, res.field, &s.call);
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

int ctl_inspect_main(int argc, char **argv)
{
    session_t s;
    int status = session_open(&s, argc, argv, CTL_OPT_HELD_OPTIONAL, NULL,
                              "(--lease-id ID | IDENTITY)", false);
    if (status >= 0)
        return status;
    const ctl_options_t *o = &s.o;
    if (!o->lease_id && !identity_complete(&o->identity))
        return session_usage(&s, "give --lease-id or all six identity options");
    lease_result_t res;
    lease_code_t code = o->lease_id
                            ? lease_client_inspect_id(s.client, o->lease_id, &s.call, &res)
                            : lease_client_inspect_identity(s.client, &o->identity, &s.call, &res);
    status = report(s.cmd, code, res.field, &s.call);
    session_close(&s);
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
    session_t s;
    int status = session_open(&s, argc, argv, 0, &extra, synopsis, false);
    if (status >= 0)
        return status;
    const lease_identity_input_t *id = &s.o.identity;
    if (!a.by_given && id->target_namespace && id->target_id)
        a.by = LEASE_LIST_BY_TARGET;
    bool target = a.by == LEASE_LIST_BY_TARGET;
    if (!id->tenant_id || !id->program_id || (target && (!id->target_namespace || !id->target_id)))
        return session_usage(&s, target ? "--tenant, --program, --namespace and --target are "
                                          "required with --by target"
                                        : "--tenant and --program are required");
    lease_client_list_t req = {
        a.by,          id->tenant_id,    id->program_id, id->target_namespace,
        id->target_id, (int)a.page_size, a.page_token};
    lease_list_result_t res;
    lease_code_t code = lease_client_list(s.client, &req, &s.call, &res);
    status = report(s.cmd, code, res.field, &s.call);
    lease_list_result_free(&res);
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
        int status = code == LEASE_INSPECTED ? CTL_EXIT_OK : report(s->cmd, code, res.field, &look);
        lease_client_call_clear(&look);
        if (code != LEASE_INSPECTED)
            return status;
        snprintf(observed_id, sizeof observed_id, "%s", res.lease.lease_id);
        token = res.lease.fencing_token;
    }
    lease_client_admin_t req = {o->identity, observed_id, token, a->reason, a->incident_id};
    lease_code_t code = revoke ? lease_client_revoke(s->client, &req, &s->call, &res)
                               : lease_client_force_release(s->client, &req, &s->call, &res);
    return report(s->cmd, code, res.field, &s->call);
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
    session_t s;
    int status = session_open(&s, argc, argv, CTL_OPT_IDENTITY | CTL_OPT_HELD_OPTIONAL, &extra,
                              synopsis, false);
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
    session_t s;
    int status =
        session_open(&s, argc, argv, CTL_OPT_IDENTITY | CTL_OPT_HELD, &extra, synopsis, false);
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
    status = report(s.cmd, code, res.field, &s.call);
    session_close(&s);
    return status;
}
