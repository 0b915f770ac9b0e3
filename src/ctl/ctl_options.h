/*
 * ctl_options.h - the identity and lease options every leasectl client
 * command and `run` share (docs/executor.md), their defaults from the
 * LEASE_* environment that `run` exports, and generated ids.
 *
 * Precedence, highest first: a flag; the environment; a generated value.
 * Strings in the identity and lease_id are borrowed from argv or environ;
 * the token is a heap copy wiped by ctl_options_free.
 */
#ifndef LEASE_CTL_OPTIONS_H
#define LEASE_CTL_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "lease/client.h"
#include "lease/identity.h"

/* What a command takes besides the shared identity and lease options. */
enum {
    CTL_OPT_IDENTITY = 1u << 0,      /* the six identity components are required */
    CTL_OPT_HELD = 1u << 1,          /* --lease-id / --fencing-token, defaults LEASE_ID,
                                        LEASE_FENCING_TOKEN, LEASE_EXECUTION_ID,
                                        LEASE_SERVICE_INSTANCE_ID; both required */
    CTL_OPT_HELD_OPTIONAL = 1u << 2, /* --lease-id / --fencing-token accepted, not required */
    CTL_OPT_OPERANDS = 1u << 3,      /* operands allowed (run: the command after --) */
};

/* ctl_options_parse's answers besides an operand index. */
enum {
    CTL_PARSE_USAGE = -1, /* usage error, message already on stderr */
    CTL_PARSE_HELP = -2,  /* --help was given: print usage, exit 0 */
};

#define CTL_ENV_URL "LEASE_URL"
#define CTL_ENV_TOKEN "LEASE_TOKEN"

#define CTL_DEFAULT_DEADLINE_MS 5000
#define CTL_MAX_DEADLINE_MS 30000 /* the service caps any deadline there */

typedef struct ctl_options {
    const char *url; /* --, LEASE_URL, else http://127.0.0.1:8080 */
    char *token;     /* --token, else LEASE_TOKEN (heap copy), or NULL */
    lease_identity_input_t identity;
    int64_t ttl_ms;              /* 0: not given */
    int64_t maximum_lifetime_ms; /* 0: not given */
    int64_t wait_ms;             /* 0: not given */
    int64_t deadline_ms;         /* 0: not given (see ctl_options_deadline_ms) */
    char service_instance_id[LEASE_ID_MAX + 1];
    char execution_id[LEASE_ID_MAX + 1];
    char job_id[LEASE_ID_MAX + 1];
    char trace_id[LEASE_ID_MAX + 1];
    const char *request_id; /* NULL: generated per call */
    const char *lease_id;   /* CTL_OPT_HELD*: --lease-id or LEASE_ID */
    int64_t fencing_token;  /* CTL_OPT_HELD*: 0 when not given */
} ctl_options_t;

/* A command's own options: getopt_long entries (val must be below 1000)
 * ended by a zero entry, and the function that takes each. handle returns
 * false after printing a usage message. */
typedef struct ctl_extra {
    const struct option *opts;
    bool (*handle)(void *ctx, int val, const char *arg);
    void *ctx;
} ctl_extra_t;

/*
 * Parses argv (argv[0] is the subcommand's name) into o, then fills what
 * flags left out from the environment and with generated ids. flags are
 * CTL_OPT_* bits; extra may be NULL. Returns the index of the first operand
 * (argc when there is none), CTL_PARSE_HELP or CTL_PARSE_USAGE. Stops at the
 * first operand or at "--" (which is skipped), so `run -- cmd -x` leaves
 * "cmd -x" for the caller.
 */
LEASE_MUST_USE int ctl_options_parse(ctl_options_t *o, unsigned flags, int argc, char **argv,
                                     const ctl_extra_t *extra);
/* Wipes and frees the token; o may be reused after ctl_options_parse. */
void ctl_options_free(ctl_options_t *o);

/* The deadline of a call: --deadline-ms, else 5 s (plus --wait-ms for an
 * acquire that waits), capped at CTL_MAX_DEADLINE_MS. */
int64_t ctl_options_deadline_ms(const ctl_options_t *o, bool acquire);

/* The acquire the options describe (borrows o's strings). */
lease_client_acquire_t ctl_options_acquire_req(const ctl_options_t *o);

/* Strict decimal parse into [min, max]; false on anything else. */
LEASE_MUST_USE bool ctl_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);

/* "<hostname>-<pid>" with characters outside [A-Za-z0-9._:-] replaced by
 * '-', bounded to LEASE_ID_MAX. */
void ctl_default_service_instance(char *out, size_t outsz);

/*
 * Pieces of the commands' --help texts. Each command prints only the
 * options it uses: its own lines, these shared pieces where they apply,
 * and CTL_HELP_COMMON last. (The parser accepts every shared option for
 * every command, so one set of flags serves them all; a command ignores
 * the ones it does not use.)
 */
#define CTL_HELP_IDENTITY                                                                          \
    "identity (each one left out comes from its LEASE_* variable):\n"                              \
    "  --tenant T --program P --namespace N --target ID --actor A --workflow W\n"                  \
    "  [--operation-class default|collect|enrich|publish|maintenance]\n"
#define CTL_HELP_REQUEST_ID                                                                        \
    "  --request-id ID          idempotency key; repeat it to retry safely (generated)\n"
#define CTL_HELP_COMMON                                                                            \
    "  --deadline-ms N          give up after N ms (default 5000, at most 30000)\n"                \
    "  --url URL                the service (default: LEASE_URL, else " LEASE_CLIENT_DEFAULT_URL   \
    ")\n"                                                                                          \
    "  --token TOKEN            the bearer token (default: LEASE_TOKEN; prefer the variable:\n"    \
    "                           a flag is visible to other local users in ps)\n"                   \
    "  --help                   this text\n"                                                       \
    "environment: LEASE_URL, LEASE_TOKEN (the bearer token), LEASE_CA_FILE (PEM CA\n"              \
    "  certificates to trust for an https:// URL instead of the system's)\n"

/* The HTTP client of a client command: o's URL and token, and the CA file
 * of LEASE_CA_FILE (a private CA for https://) when set. NULL when the URL
 * is not http(s) or memory runs out. */
lease_client_t *ctl_client_new(const ctl_options_t *o);

/* The secrets leasectl reads from the environment (LEASE_TOKEN,
 * LEASE_DATABASE_URL, LEASE_TOKEN_PEPPER), NULL-terminated. */
extern const char *const ctl_secret_names[];
/*
 * Once, at start: for every NAME of ctl_secret_names whose NAME_FILE is set,
 * reads the file (lease_settings_read_secret_file: owner-only, not empty)
 * into memory for ctl_secret. The environment is left as it is: no secret
 * is ever setenv()ed, so none can reach a command `run` starts (run leaves
 * NAME and NAME_FILE out of the command's environment, ctl_run_passes).
 * NAME and NAME_FILE both set is an error. false: err says which variable
 * and why (never the value).
 */
LEASE_MUST_USE bool ctl_resolve_secret_files(char *err, size_t errsz);
/* The secret NAME (one of ctl_secret_names): the contents of NAME_FILE as
 * read by ctl_resolve_secret_files, else the NAME variable when set and not
 * empty, else NULL. Borrowed until ctl_secrets_free. */
const char *ctl_secret(const char *name);
/* Wipes and frees what ctl_resolve_secret_files read. */
void ctl_secrets_free(void);

#endif
