/*
 * ctl_options.c - parsing of the shared identity and lease options of the
 * leasectl client commands and `run`, with LEASE_* environment defaults and
 * generated ids (see ctl_options.h for the precedence).
 */
#include "ctl_options.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lease/client.h"
#include "lease/settings.h"

#define MS_MAX 2147483647LL /* any *_ms option: a positive 32-bit count */

enum {
    OPT_TENANT = 1000,
    OPT_PROGRAM,
    OPT_NAMESPACE,
    OPT_TARGET,
    OPT_ACTOR,
    OPT_WORKFLOW,
    OPT_OPCLASS,
    OPT_TTL,
    OPT_MAX_LIFETIME,
    OPT_WAIT,
    OPT_SERVICE_INSTANCE,
    OPT_EXECUTION,
    OPT_JOB,
    OPT_TRACE,
    OPT_REQUEST,
    OPT_DEADLINE,
    OPT_URL,
    OPT_LEASE_ID,
    OPT_FENCING_TOKEN,
    OPT_TOKEN,
    OPT_HELP,
};

static const struct option shared_opts[] = {
    {"tenant", required_argument, NULL, OPT_TENANT},
    {"program", required_argument, NULL, OPT_PROGRAM},
    {"namespace", required_argument, NULL, OPT_NAMESPACE},
    {"target", required_argument, NULL, OPT_TARGET},
    {"actor", required_argument, NULL, OPT_ACTOR},
    {"workflow", required_argument, NULL, OPT_WORKFLOW},
    {"operation-class", required_argument, NULL, OPT_OPCLASS},
    {"ttl-ms", required_argument, NULL, OPT_TTL},
    {"maximum-lifetime-ms", required_argument, NULL, OPT_MAX_LIFETIME},
    {"wait-ms", required_argument, NULL, OPT_WAIT},
    {"service-instance", required_argument, NULL, OPT_SERVICE_INSTANCE},
    {"execution-id", required_argument, NULL, OPT_EXECUTION},
    {"job-id", required_argument, NULL, OPT_JOB},
    {"trace-id", required_argument, NULL, OPT_TRACE},
    {"request-id", required_argument, NULL, OPT_REQUEST},
    {"deadline-ms", required_argument, NULL, OPT_DEADLINE},
    {"url", required_argument, NULL, OPT_URL},
    /* docs/config.md: the flag of LEASE_TOKEN; the variable is the
     * better place (argv is visible to every local user), so --help says so */
    {"token", required_argument, NULL, OPT_TOKEN},
    {"help", no_argument, NULL, OPT_HELP},
};

static const struct option held_opts[] = {
    {"lease-id", required_argument, NULL, OPT_LEASE_ID},
    {"fencing-token", required_argument, NULL, OPT_FENCING_TOKEN},
};

bool ctl_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = (int64_t)v;
    return true;
}

void ctl_default_service_instance(char *out, size_t outsz)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++) {
        bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == ':' || *p == '-';
        if (!ok)
            *p = '-';
    }
    char pid[24];
    int plen = snprintf(pid, sizeof pid, "-%ld", (long)getpid());
    size_t room = outsz - 1 < LEASE_ID_MAX ? outsz - 1 : LEASE_ID_MAX;
    size_t hlen = strlen(host);
    if (hlen + (size_t)plen > room)
        hlen = room - (size_t)plen; /* keep the pid: it is what tells instances apart */
    snprintf(out, outsz, "%.*s%s", (int)hlen, host, pid);
}

/* A W3C-style trace id: 32 lower-case hex characters. */
static bool new_trace_id(char *out, size_t outsz)
{
    unsigned char raw[16];
    if (outsz < 33 || RAND_bytes(raw, sizeof raw) != 1)
        return false;
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return true;
}

/*
 * With --request-id, the ids this process would otherwise make up fresh
 * (service instance, execution, job and trace ids) are derived from the
 * request id, so repeating a command with the same --request-id repeats the
 * same request: that is how an unknown outcome is resolved, and fresh ids
 * would make the repeat an idempotency_conflict. Ids given by flag or
 * environment still win.
 */
static void derive_ids_from_request_id(ctl_options_t *o)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)o->request_id, strlen(o->request_id), md);
    char hex[2 * SHA256_DIGEST_LENGTH + 1];
    for (size_t i = 0; i < sizeof md; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    if (!o->service_instance_id[0]) {
        char host[sizeof o->service_instance_id];
        ctl_default_service_instance(host, sizeof host);
        char *pid = strrchr(host, '-'); /* "-<pid>": one process's, not the request's */
        if (pid)
            *pid = '\0';
        int room = LEASE_ID_MAX - 14 < (int)strlen(host) ? LEASE_ID_MAX - 14 : (int)strlen(host);
        snprintf(o->service_instance_id, sizeof o->service_instance_id, "%.*s-r%.12s", room, host,
                 hex);
    }
    if (!o->execution_id[0])
        snprintf(o->execution_id, sizeof o->execution_id, "exec_%.24s", hex);
    if (!o->job_id[0])
        snprintf(o->job_id, sizeof o->job_id, "job_%.24s", hex + 24);
    if (!o->trace_id[0])
        snprintf(o->trace_id, sizeof o->trace_id, "%.32s", hex + 32);
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static bool usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "leasectl %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'leasectl %s --help')\n", cmd);
    va_end(ap);
    return false;
}

static bool copy_id(const char *cmd, const char *flag, const char *value, char *out, size_t sz)
{
    if (strlen(value) >= sz || !*value)
        return usage_error(cmd, "%s needs a value of 1..128 characters", flag);
    strcpy(out, value);
    return true;
}

static bool take_ms(const char *cmd, const char *flag, const char *value, int64_t min, int64_t *out)
{
    if (!ctl_parse_int(value, min, MS_MAX, out))
        return usage_error(cmd, "%s needs a whole number of milliseconds", flag);
    return true;
}

/* One shared option. */
static bool take_shared(ctl_options_t *o, const char *cmd, int val, const char *arg)
{
    switch (val) {
    case OPT_TENANT:
        o->identity.tenant_id = arg;
        return true;
    case OPT_PROGRAM:
        o->identity.program_id = arg;
        return true;
    case OPT_NAMESPACE:
        o->identity.target_namespace = arg;
        return true;
    case OPT_TARGET:
        o->identity.target_id = arg;
        return true;
    case OPT_ACTOR:
        o->identity.actor_name = arg;
        return true;
    case OPT_WORKFLOW:
        o->identity.workflow_name = arg;
        return true;
    case OPT_OPCLASS:
        o->identity.operation_class = arg;
        return true;
    case OPT_TTL:
        return take_ms(cmd, "--ttl-ms", arg, 1, &o->ttl_ms);
    case OPT_MAX_LIFETIME:
        return take_ms(cmd, "--maximum-lifetime-ms", arg, 1, &o->maximum_lifetime_ms);
    case OPT_WAIT:
        return take_ms(cmd, "--wait-ms", arg, 0, &o->wait_ms);
    case OPT_DEADLINE:
        return take_ms(cmd, "--deadline-ms", arg, 1, &o->deadline_ms);
    case OPT_SERVICE_INSTANCE:
        return copy_id(cmd, "--service-instance", arg, o->service_instance_id,
                       sizeof o->service_instance_id);
    case OPT_EXECUTION:
        return copy_id(cmd, "--execution-id", arg, o->execution_id, sizeof o->execution_id);
    case OPT_JOB:
        return copy_id(cmd, "--job-id", arg, o->job_id, sizeof o->job_id);
    case OPT_TRACE:
        return copy_id(cmd, "--trace-id", arg, o->trace_id, sizeof o->trace_id);
    case OPT_REQUEST:
        if (!*arg || strlen(arg) > LEASE_ID_MAX)
            return usage_error(cmd, "%s needs a value of 1..128 characters", "--request-id");
        o->request_id = arg;
        return true;
    case OPT_URL:
        o->url = arg;
        return true;
    case OPT_TOKEN: {
        if (!*arg)
            return usage_error(cmd, "%s needs a value", "--token");
        char *copy = strdup(arg);
        if (!copy)
            return usage_error(cmd, "%s", "out of memory");
        ctl_options_free(o); /* a repeated --token: the last one wins */
        o->token = copy;
        return true;
    }
    case OPT_LEASE_ID:
        o->lease_id = arg;
        return true;
    case OPT_FENCING_TOKEN:
        if (!ctl_parse_int(arg, 1, INT64_MAX, &o->fencing_token))
            return usage_error(cmd, "%s needs a positive whole number", "--fencing-token");
        return true;
    }
    return false;
}

/* Environment defaults, generated ids and required-option checks. */
static bool complete(ctl_options_t *o, unsigned flags, const char *cmd)
{
    static const struct {
        size_t offset;
        const char *env;
        const char *flag;
    } parts[] = {
        {offsetof(lease_identity_input_t, tenant_id), "LEASE_TENANT_ID", "--tenant"},
        {offsetof(lease_identity_input_t, program_id), "LEASE_PROGRAM_ID", "--program"},
        {offsetof(lease_identity_input_t, target_namespace), "LEASE_TARGET_NAMESPACE",
         "--namespace"},
        {offsetof(lease_identity_input_t, target_id), "LEASE_TARGET_ID", "--target"},
        {offsetof(lease_identity_input_t, actor_name), "LEASE_ACTOR_NAME", "--actor"},
        {offsetof(lease_identity_input_t, workflow_name), "LEASE_WORKFLOW_NAME", "--workflow"},
        {offsetof(lease_identity_input_t, operation_class), "LEASE_OPERATION_CLASS", NULL},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const char **slot = (const char **)((char *)&o->identity + parts[i].offset);
        if (!*slot)
            *slot = env(parts[i].env);
        if (!*slot && parts[i].flag && (flags & CTL_OPT_IDENTITY))
            return usage_error(cmd, "%s is required (or its LEASE_* variable)", parts[i].flag);
    }
    if (!o->url)
        o->url = env(CTL_ENV_URL) ? env(CTL_ENV_URL) : LEASE_CLIENT_DEFAULT_URL;
    const char *token = ctl_secret(CTL_ENV_TOKEN); /* or LEASE_TOKEN_FILE's */
    if (!o->token && token && !(o->token = strdup(token)))
        return usage_error(cmd, "%s", "out of memory");

    bool held = flags & (CTL_OPT_HELD | CTL_OPT_HELD_OPTIONAL);
    if (held) {
        if (!o->lease_id)
            o->lease_id = env("LEASE_ID");
        if (!o->fencing_token && env("LEASE_FENCING_TOKEN") &&
            !ctl_parse_int(env("LEASE_FENCING_TOKEN"), 1, INT64_MAX, &o->fencing_token))
            return usage_error(cmd, "%s is not a positive whole number", "LEASE_FENCING_TOKEN");
        /* the held lease's own execution and instance, as `run` exported them */
        if (!o->execution_id[0] && env("LEASE_EXECUTION_ID"))
            snprintf(o->execution_id, sizeof o->execution_id, "%s", env("LEASE_EXECUTION_ID"));
        if (!o->service_instance_id[0] && env("LEASE_SERVICE_INSTANCE_ID"))
            snprintf(o->service_instance_id, sizeof o->service_instance_id, "%s",
                     env("LEASE_SERVICE_INSTANCE_ID"));
    }
    if ((flags & CTL_OPT_HELD) && !o->lease_id)
        return usage_error(cmd, "%s is required (or LEASE_ID)", "--lease-id");
    if ((flags & CTL_OPT_HELD) && !o->fencing_token)
        return usage_error(cmd, "%s is required (or LEASE_FENCING_TOKEN)", "--fencing-token");
    if (!o->trace_id[0] && env("LEASE_TRACE_ID"))
        snprintf(o->trace_id, sizeof o->trace_id, "%s", env("LEASE_TRACE_ID"));

    if (o->request_id)
        derive_ids_from_request_id(o);
    if (!o->service_instance_id[0])
        ctl_default_service_instance(o->service_instance_id, sizeof o->service_instance_id);
    if ((!o->execution_id[0] &&
         !lease_client_new_id("exec_", o->execution_id, sizeof o->execution_id)) ||
        (!o->job_id[0] && !lease_client_new_id("job_", o->job_id, sizeof o->job_id)) ||
        (!o->trace_id[0] && !new_trace_id(o->trace_id, sizeof o->trace_id)))
        return usage_error(cmd, "%s", "the system random generator failed");
    return true;
}

int ctl_options_parse(ctl_options_t *o, unsigned flags, int argc, char **argv,
                      const ctl_extra_t *extra)
{
    memset(o, 0, sizeof *o);
    const char *cmd = argc > 0 ? argv[0] : "leasectl";
    size_t n_shared = sizeof shared_opts / sizeof shared_opts[0];
    size_t n_held = (flags & (CTL_OPT_HELD | CTL_OPT_HELD_OPTIONAL))
                        ? sizeof held_opts / sizeof held_opts[0]
                        : 0;
    size_t n_extra = 0;
    while (extra && extra->opts[n_extra].name)
        n_extra++;
    struct option *table = calloc(n_shared + n_held + n_extra + 1, sizeof *table);
    if (!table) {
        fprintf(stderr, "leasectl %s: out of memory\n", cmd);
        return CTL_PARSE_USAGE;
    }
    memcpy(table, shared_opts, sizeof shared_opts);
    memcpy(table + n_shared, held_opts, n_held * sizeof *table);
    if (n_extra)
        memcpy(table + n_shared + n_held, extra->opts, n_extra * sizeof *table);

    int result = CTL_PARSE_USAGE;
    optind = 0; /* glibc: a full reset, so parsing can run more than once */
    opterr = 0;
    int ch;
    /* '+': stop at the first operand; ':' reports a missing value as ':' */
    while ((ch = getopt_long(argc, argv, "+:", table, NULL)) != -1) {
        if (ch == OPT_HELP) {
            result = CTL_PARSE_HELP;
            goto cleanup;
        }
        if (ch == '?' || ch == ':') {
            usage_error(cmd, ch == ':' ? "option %s needs a value" : "unknown option %s",
                        argv[optind - 1]);
            goto cleanup;
        }
        bool ok = ch >= OPT_TENANT ? take_shared(o, cmd, ch, optarg)
                                   : extra && extra->handle(extra->ctx, ch, optarg);
        if (!ok)
            goto cleanup;
    }
    if (optind < argc && !(flags & CTL_OPT_OPERANDS)) {
        usage_error(cmd, "unexpected argument '%s'", argv[optind]);
        goto cleanup;
    }
    if (!complete(o, flags, cmd))
        goto cleanup;
    result = optind;

cleanup:
    free(table);
    if (result == CTL_PARSE_USAGE || result == CTL_PARSE_HELP)
        ctl_options_free(o);
    return result;
}

void ctl_options_free(ctl_options_t *o)
{
    if (!o || !o->token)
        return;
    OPENSSL_cleanse(o->token, strlen(o->token));
    free(o->token);
    o->token = NULL;
}

lease_client_acquire_t ctl_options_acquire_req(const ctl_options_t *o)
{
    return (lease_client_acquire_t){
        .identity = o->identity,
        .service_instance_id = o->service_instance_id,
        .execution_id = o->execution_id,
        .job_id = o->job_id,
        .trace_id = o->trace_id,
        .ttl_ms = o->ttl_ms,
        .maximum_lifetime_ms = o->maximum_lifetime_ms,
        .wait_ms = o->wait_ms,
    };
}

int64_t ctl_options_deadline_ms(const ctl_options_t *o, bool acquire)
{
    int64_t d = o->deadline_ms;
    if (d <= 0)
        d = CTL_DEFAULT_DEADLINE_MS + (acquire ? o->wait_ms : 0);
    return d > CTL_MAX_DEADLINE_MS ? CTL_MAX_DEADLINE_MS : d;
}

lease_client_t *ctl_client_new(const ctl_options_t *o)
{
    lease_client_t *c = lease_client_new(o->url, o->token);
    const char *ca = getenv("LEASE_CA_FILE");
    if (c && ca && *ca && !lease_client_set_ca_file(c, ca)) {
        lease_client_free(c);
        return NULL;
    }
    return c;
}

const char *const ctl_secret_names[] = {"LEASE_TOKEN", "LEASE_DATABASE_URL", "LEASE_STORE_URL",
                                        "LEASE_TOKEN_PEPPER", NULL};

/* The values read from NAME_FILE, by the index of NAME in ctl_secret_names:
 * held here, never put in the environment, so a command `run` starts
 * cannot inherit them (issue 35). */
static char *secret_from_file[sizeof ctl_secret_names / sizeof ctl_secret_names[0]];

static int secret_index(const char *name)
{
    for (int i = 0; ctl_secret_names[i]; i++)
        if (strcmp(ctl_secret_names[i], name) == 0)
            return i;
    return -1;
}

void ctl_secrets_free(void)
{
    for (size_t i = 0; i < sizeof secret_from_file / sizeof secret_from_file[0]; i++) {
        if (secret_from_file[i]) {
            OPENSSL_cleanse(secret_from_file[i], strlen(secret_from_file[i]));
            free(secret_from_file[i]);
            secret_from_file[i] = NULL;
        }
    }
}

const char *ctl_secret(const char *name)
{
    int i = secret_index(name);
    if (i >= 0 && secret_from_file[i])
        return secret_from_file[i];
    return env(name);
}

bool ctl_resolve_secret_files(char *err, size_t errsz)
{
    ctl_secrets_free();
    for (int i = 0; ctl_secret_names[i]; i++) {
        const char *name = ctl_secret_names[i];
        char var[64];
        snprintf(var, sizeof var, "%s_FILE", name);
        const char *path = getenv(var);
        if (!path)
            continue;
        if (getenv(name)) {
            snprintf(err, errsz, "set %s or %s, not both", name, var);
            ctl_secrets_free();
            return false;
        }
        secret_from_file[i] = lease_settings_read_secret_file(var, path, err, errsz);
        if (!secret_from_file[i]) {
            ctl_secrets_free();
            return false;
        }
    }
    return true;
}
