/*
 * ctl_credential.c - `leasectl credential create|revoke|list`.
 *
 * Owns the operator's side of credentials: validating what a credential may
 * grant before anything reaches the database, generating the token, storing
 * only its digest, and printing the token exactly once. The token is built
 * into one buffer written straight to stdout with write(2), so no stdio
 * buffer keeps a copy, and every copy of the secret is wiped afterwards.
 *
 * Output is one JSON object on stdout; messages go to stderr. Exit statuses:
 * 0 ok, 2 usage, 65 invalid input (here or as judged by the database),
 * 69 database unavailable, 77 the login role may not administer credentials,
 * 1 anything else (including revoking an unknown or already revoked id).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_valkey.h"
#include "lease/clock.h"
#include "lease/hex.h"
#include "lease/identity.h"
#include "lease/store.h"
#include "lease/token.h"
#include "lease/store_admin.h"

#define DESCRIPTION_MAX 256
#define EXPIRES_IN_MAX_S (3650LL * 86400) /* ten years */

static const struct {
    const char *name;
    unsigned bit;
    bool admin_only;
} capability_table[] = {
    {"targets:lease", LEASE_CAP_LEASE, false},
    {"targets:read", LEASE_CAP_READ, false},
    {"targets:force-release", LEASE_CAP_FORCE_RELEASE, true},
    {"targets:revoke", LEASE_CAP_REVOKE, true},
    {"audit:read", LEASE_CAP_AUDIT_READ, false},
};
#define N_CAPABILITIES (sizeof capability_table / sizeof capability_table[0])

static void usage_create(FILE *out)
{
    fprintf(out,
            "usage: leasectl credential create --principal ID --client ID --tenant T\n"
            "         --program P [--actor NAME]... --capability CAP... [--admin]\n"
            "         [--expires-in 30d|12h|90m|3600s] [--description TEXT]\n"
            "         [--database-url URL]\n"
            "Creates a credential and prints it with its token, once:\n"
            "  {\"credential_id\":\"key_...\",\"token\":\"lsk_...\",...}\n"
            "Only a digest of the secret is stored (HMAC-SHA256 with LEASE_TOKEN_PEPPER\n"
            "when set, else SHA-256); leased must run with the same pepper.\n"
            "  --actor        an actor name the credential may lease for (repeat), or '*'\n"
            "                 for every actor; default '*'\n"
            "  --capability   targets:lease, targets:read, audit:read, and with --admin\n"
            "                 targets:force-release, targets:revoke (repeat or comma-separate)\n"
            "  --program      a program id, or '*' (every program; --admin only)\n"
            "  --admin        an administrator credential\n");
}

static void usage(FILE *out)
{
    fprintf(out, "usage: leasectl credential create|revoke|list [OPTIONS]\n"
                 "  create ...              make a credential and print its token once\n"
                 "  revoke ID               revoke a credential (leased stops accepting it\n"
                 "                          within LEASE_CREDENTIAL_CACHE_MS)\n"
                 "  list                    list credentials (never secrets or digests)\n"
                 "Each takes --database-url URL (default LEASE_DATABASE_URL, or\n"
                 "LEASE_STORE_URL=redis://... for the Valkey backend).\n"
                 "'leasectl credential create --help' describes create.\n");
}

int ctl_admin_exit(lease_admin_status_t st)
{
    switch (st) {
    case LEASE_ADMIN_OK:
        return LEASE_EXIT_OK;
    case LEASE_ADMIN_INVALID:
        return LEASE_EXIT_INVALID;
    case LEASE_ADMIN_DENIED:
        return LEASE_EXIT_DENIED;
    case LEASE_ADMIN_UNAVAILABLE:
        return LEASE_EXIT_UNAVAILABLE;
    case LEASE_ADMIN_FAILED:
        break;
    }
    return LEASE_EXIT_FAILURE;
}

/* "30d", "12h", "90m", "3600s" -> seconds; false on anything else. */
static bool parse_expires_in(const char *s, int64_t *seconds)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end = NULL;
    long long n = strtoll(s, &end, 10);
    if (errno != 0 || n <= 0 || !end || end[0] == '\0' || end[1] != '\0')
        return false;
    long long unit;
    switch (end[0]) {
    case 'd':
        unit = 86400;
        break;
    case 'h':
        unit = 3600;
        break;
    case 'm':
        unit = 60;
        break;
    case 's':
        unit = 1;
        break;
    default:
        return false;
    }
    if (n > EXPIRES_IN_MAX_S / unit)
        return false;
    *seconds = n * unit;
    return true;
}

static bool capability_add(const char *text, unsigned *caps)
{
    for (size_t i = 0; i < N_CAPABILITIES; i++) {
        if (strcmp(text, capability_table[i].name) == 0) {
            *caps |= capability_table[i].bit;
            return true;
        }
    }
    return false;
}

/* Accepts "a", or "a,b,c". */
static bool capabilities_add(const char *list, unsigned *caps)
{
    char buf[256];
    if (!list || strlen(list) >= sizeof buf)
        return false;
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    int n = 0;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save), n++)
        if (!capability_add(p, caps))
            return false;
    return n > 0 && list[strlen(list) - 1] != ',' && list[0] != ',' && !strstr(list, ",,");
}

/* A description is free text for operators: bounded, printable, UTF-8 (the
 * JSON encoder rejects invalid UTF-8). */
static bool description_valid(const char *s)
{
    if (strlen(s) > DESCRIPTION_MAX)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

static bool write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

typedef struct create_opts {
    const char *principal, *client, *tenant, *program, *expires_in, *description, *url;
    const char *actors[LEASE_SCOPE_ACTORS_MAX + 1];
    size_t n_actors;
    unsigned caps;
    bool admin;
} create_opts_t;

static int parse_create(int argc, char **argv, create_opts_t *o)
{
    static const struct option opts[] = {
        {"principal", required_argument, NULL, 'p'},
        {"client", required_argument, NULL, 'c'},
        {"tenant", required_argument, NULL, 't'},
        {"program", required_argument, NULL, 'g'},
        {"actor", required_argument, NULL, 'a'},
        {"capability", required_argument, NULL, 'C'},
        {"admin", no_argument, NULL, 'A'},
        {"expires-in", required_argument, NULL, 'e'},
        {"description", required_argument, NULL, 'D'},
        {"database-url", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    optind = 1;
    /* "+": no permutation, so the values after --capability are still in place */
    while ((ch = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (ch) {
        case 'p':
            o->principal = optarg;
            break;
        case 'c':
            o->client = optarg;
            break;
        case 't':
            o->tenant = optarg;
            break;
        case 'g':
            o->program = optarg;
            break;
        case 'a':
            if (o->n_actors == LEASE_SCOPE_ACTORS_MAX) {
                fprintf(stderr, "leasectl credential create: at most %d --actor\n",
                        LEASE_SCOPE_ACTORS_MAX);
                return LEASE_EXIT_INVALID;
            }
            o->actors[o->n_actors++] = optarg;
            break;
        case 'C':
            /* --capability CAP... : repeated flags, commas, or several values */
            for (const char *cap = optarg; cap;
                 cap = optind < argc && argv[optind][0] != '-' ? argv[optind++] : NULL) {
                if (!capabilities_add(cap, &o->caps)) {
                    fprintf(stderr,
                            "leasectl credential create: unknown capability '%s' (one of "
                            "targets:lease, targets:read, targets:force-release, targets:revoke, "
                            "audit:read)\n",
                            cap);
                    return LEASE_EXIT_INVALID;
                }
            }
            break;
        case 'A':
            o->admin = true;
            break;
        case 'e':
            o->expires_in = optarg;
            break;
        case 'D':
            o->description = optarg;
            break;
        case 'd':
            o->url = optarg;
            break;
        case 'h':
            usage_create(stdout);
            return -1;
        default:
            usage_create(stderr);
            return LEASE_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "leasectl credential create: unexpected argument '%s'\n", argv[optind]);
        return LEASE_EXIT_USAGE;
    }
    const char *missing = !o->principal ? "--principal"
                          : !o->client  ? "--client"
                          : !o->tenant  ? "--tenant"
                          : !o->program ? "--program"
                          : !o->caps    ? "--capability"
                                        : NULL;
    if (missing) {
        fprintf(stderr, "leasectl credential create: %s is required\n", missing);
        usage_create(stderr);
        return LEASE_EXIT_USAGE;
    }
    return 0;
}

/* Validates and normalises everything into the jsonb request (without the
 * digest). Returns NULL after printing why. */
static json_t *build_request(const create_opts_t *o, const char *credential_id)
{
    static const char me[] = "leasectl credential create";
    char tenant[LEASE_NAME_MAX + 1], program[LEASE_NAME_MAX + 1];

    if (!lease_id_valid(o->principal)) {
        fprintf(stderr, "%s: --principal must be 1..128 of [A-Za-z0-9._:-]\n", me);
        return NULL;
    }
    if (!lease_id_valid(o->client)) {
        fprintf(stderr, "%s: --client must be 1..128 of [A-Za-z0-9._:-]\n", me);
        return NULL;
    }
    if (!lease_identity_component_normalize("tenant_id", o->tenant, tenant, sizeof tenant)) {
        fprintf(stderr, "%s: --tenant is not a valid tenant id ([a-z0-9][a-z0-9_-]*, 1..64)\n", me);
        return NULL;
    }
    if (strcmp(o->program, "*") == 0) {
        if (!o->admin) {
            fprintf(stderr, "%s: --program '*' is for administrator credentials (--admin)\n", me);
            return NULL;
        }
        memcpy(program, "*", 2);
    } else if (!lease_identity_component_normalize("program_id", o->program, program,
                                                   sizeof program)) {
        fprintf(stderr,
                "%s: --program is not a valid program id ([a-z0-9][a-z0-9_-]*, 1..64, or '*')\n",
                me);
        return NULL;
    }
    for (size_t i = 0; i < N_CAPABILITIES; i++) {
        if (capability_table[i].admin_only && (o->caps & capability_table[i].bit) && !o->admin) {
            fprintf(stderr, "%s: %s is for administrator credentials (--admin)\n", me,
                    capability_table[i].name);
            return NULL;
        }
    }
    if (o->description && !description_valid(o->description)) {
        fprintf(stderr, "%s: --description must be at most %d printable bytes\n", me,
                DESCRIPTION_MAX);
        return NULL;
    }

    json_t *actors = json_array();
    bool wildcard = o->n_actors == 0;
    for (size_t i = 0; i < o->n_actors; i++) {
        char actor[LEASE_NAME_MAX + 1];
        if (strcmp(o->actors[i], "*") == 0) {
            wildcard = true;
            continue;
        }
        if (!lease_identity_component_normalize("actor_name", o->actors[i], actor, sizeof actor)) {
            fprintf(stderr,
                    "%s: --actor '%s' is not a valid actor name "
                    "([a-z0-9][a-z0-9_-]*, 1..64, or '*')\n",
                    me, o->actors[i]);
            json_decref(actors);
            return NULL;
        }
        bool dup = false;
        size_t j;
        json_t *seen;
        json_array_foreach(actors, j, seen) dup |= strcmp(json_string_value(seen), actor) == 0;
        if (!dup)
            json_array_append_new(actors, json_string(actor));
    }
    if (wildcard) {
        if (json_array_size(actors) > 0) {
            fprintf(stderr, "%s: --actor '*' already covers every actor; name no others\n", me);
            json_decref(actors);
            return NULL;
        }
        json_array_append_new(actors, json_string("*"));
    }

    json_t *caps = json_array();
    for (size_t i = 0; i < N_CAPABILITIES; i++)
        if (o->caps & capability_table[i].bit)
            json_array_append_new(caps, json_string(capability_table[i].name));

    json_t *expires = json_null();
    if (o->expires_in) {
        int64_t secs;
        if (!parse_expires_in(o->expires_in, &secs)) {
            fprintf(stderr,
                    "%s: --expires-in takes a positive count and a unit: 30d, 12h, 90m, 3600s "
                    "(at most 3650d)\n",
                    me);
            json_decref(actors);
            json_decref(caps);
            return NULL;
        }
        char at[LEASE_TIME_LEN + 1];
        lease_time_format(lease_wall_now_ms() + secs * 1000, at);
        json_decref(expires);
        expires = json_string(at);
    }

    json_t *req = json_object();
    json_object_set_new(req, "credential_id", json_string(credential_id));
    json_object_set_new(req, "principal_id", json_string(o->principal));
    json_object_set_new(req, "client_id", json_string(o->client));
    json_object_set_new(req, "tenant_id", json_string(tenant));
    json_object_set_new(req, "program_id", json_string(program));
    json_object_set_new(req, "actor_names", actors);
    json_object_set_new(req, "capabilities", caps);
    json_object_set_new(req, "admin", json_boolean(o->admin));
    json_object_set_new(req, "expires_at", expires);
    json_object_set_new(req, "description",
                        o->description ? json_string(o->description) : json_null());
    return req;
}

/* Prints {"credential_id":..,"token":..,<the stored row>} in one write. */
static bool print_created(const char *credential_id, const char *token, json_t *row)
{
    json_object_del(row, "credential_id");
    json_object_del(row, "secret_digest");
    json_object_del(row, "token");
    char *rest = json_dumps(row, JSON_COMPACT);
    if (!rest)
        return false;
    /* rest is "{}" or "{...}": splice its members after ours. */
    size_t cap = strlen(rest) + LEASE_TOKEN_MAX + 128;
    char *out = malloc(cap);
    bool ok = false;
    if (out) {
        int n = snprintf(out, cap, "{\"credential_id\":\"%s\",\"token\":\"%s\"%s%s\n",
                         credential_id, token, strcmp(rest, "{}") == 0 ? "" : ",",
                         strcmp(rest, "{}") == 0 ? "}" : rest + 1);
        ok = n > 0 && (size_t)n < cap && write_all(STDOUT_FILENO, out, (size_t)n);
        OPENSSL_cleanse(out, cap);
        free(out);
    }
    free(rest);
    return ok;
}

static int credential_create(int argc, char **argv)
{
    create_opts_t o;
    memset(&o, 0, sizeof o);
    int rc = parse_create(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? LEASE_EXIT_OK : rc;
    const char *url = ctl_store_url(o.url);
    if (!url)
        return LEASE_EXIT_USAGE;

    char credential_id[LEASE_CREDENTIAL_ID_LEN + 1];
    unsigned char secret[LEASE_SECRET_BYTES];
    char token[LEASE_TOKEN_MAX + 1];
    unsigned char digest[32];
    char digest_hex[65];
    char err[1024] = "";
    json_t *req = NULL, *row = NULL;
    rc = LEASE_EXIT_FAILURE;

    if (!lease_token_generate(credential_id, secret, token)) {
        fprintf(stderr, "leasectl credential create: the system random generator failed\n");
        goto cleanup;
    }
    req = build_request(&o, credential_id);
    if (!req) {
        rc = LEASE_EXIT_INVALID;
        goto cleanup;
    }
    const char *pepper = ctl_secret("LEASE_TOKEN_PEPPER"); /* or its _FILE's */
    lease_token_digest(secret, pepper, digest);
    OPENSSL_cleanse(secret, sizeof secret);
    static const unsigned char zero[32];
    if (CRYPTO_memcmp(digest, zero, sizeof zero) == 0) {
        fprintf(stderr, "leasectl credential create: computing the digest failed\n");
        goto cleanup;
    }
    lease_hex_encode(digest, sizeof digest, digest_hex);
    json_object_set_new(req, "secret_digest", json_string(digest_hex));

    lease_admin_status_t st = ctl_valkey_url(url)
                                  ? ctl_valkey_credential_create(url, req, &row, err, sizeof err)
                                  : lease_admin_credential_create(url, req, &row, err, sizeof err);
    if (st != LEASE_ADMIN_OK) {
        fprintf(stderr, "leasectl credential create: %s\n", err);
        rc = ctl_admin_exit(st);
        goto cleanup;
    }
    json_t *stored_id = json_object_get(row, "credential_id");
    if (stored_id &&
        !(json_is_string(stored_id) && strcmp(json_string_value(stored_id), credential_id) == 0)) {
        fprintf(stderr, "leasectl credential create: the database stored another id\n");
        goto cleanup;
    }
    if (!print_created(credential_id, token, row)) {
        fprintf(stderr,
                "leasectl credential create: could not write the token to stdout; "
                "revoke %s and create another\n",
                credential_id);
        goto cleanup;
    }
    rc = LEASE_EXIT_OK;

cleanup:
    OPENSSL_cleanse(secret, sizeof secret);
    OPENSSL_cleanse(token, sizeof token);
    OPENSSL_cleanse(digest, sizeof digest);
    OPENSSL_cleanse(digest_hex, sizeof digest_hex);
    json_decref(req);
    json_decref(row);
    return rc;
}

/* Parses [--database-url URL] [--help] plus `want` positional arguments. */
static int parse_simple(int argc, char **argv, const char *usage_line, int want, const char **url,
                        const char **positional)
{
    static const struct option opts[] = {
        {"database-url", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'd':
            *url = optarg;
            break;
        case 'h':
            printf("usage: %s\n", usage_line);
            return -1;
        default:
            fprintf(stderr, "usage: %s\n", usage_line);
            return LEASE_EXIT_USAGE;
        }
    }
    if (argc - optind != want) {
        fprintf(stderr, "usage: %s\n", usage_line);
        return LEASE_EXIT_USAGE;
    }
    if (want == 1)
        *positional = argv[optind];
    return 0;
}

static int print_json(json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT);
    if (!text)
        return LEASE_EXIT_FAILURE;
    puts(text);
    free(text);
    return LEASE_EXIT_OK;
}

static int credential_revoke(int argc, char **argv)
{
    const char *url_flag = NULL, *id = NULL;
    int rc = parse_simple(argc, argv, "leasectl credential revoke ID [--database-url URL]", 1,
                          &url_flag, &id);
    if (rc != 0)
        return rc < 0 ? LEASE_EXIT_OK : rc;
    if (!lease_id_valid(id)) {
        fprintf(stderr, "leasectl credential revoke: '%s' is not a credential id\n", id);
        return LEASE_EXIT_INVALID;
    }
    const char *url = ctl_store_url(url_flag);
    if (!url)
        return LEASE_EXIT_USAGE;
    char err[1024] = "";
    bool revoked = false;
    lease_admin_status_t st =
        ctl_valkey_url(url) ? ctl_valkey_credential_revoke(url, id, &revoked, err, sizeof err)
                            : lease_admin_credential_revoke(url, id, &revoked, err, sizeof err);
    if (st != LEASE_ADMIN_OK) {
        fprintf(stderr, "leasectl credential revoke: %s\n", err);
        return ctl_admin_exit(st);
    }
    json_t *out = json_pack("{s:s, s:b}", "credential_id", id, "revoked", revoked);
    rc = print_json(out);
    json_decref(out);
    if (rc == LEASE_EXIT_OK && !revoked) {
        fprintf(stderr, "leasectl credential revoke: %s is unknown or already revoked\n", id);
        rc = LEASE_EXIT_FAILURE;
    }
    return rc;
}

static int credential_list(int argc, char **argv)
{
    const char *url_flag = NULL;
    int rc = parse_simple(argc, argv, "leasectl credential list [--database-url URL]", 0, &url_flag,
                          NULL);
    if (rc != 0)
        return rc < 0 ? LEASE_EXIT_OK : rc;
    const char *url = ctl_store_url(url_flag);
    if (!url)
        return LEASE_EXIT_USAGE;
    char err[1024] = "";
    json_t *rows = NULL;
    lease_admin_status_t st = ctl_valkey_url(url)
                                  ? ctl_valkey_credential_list(url, &rows, err, sizeof err)
                                  : lease_admin_credential_list(url, &rows, err, sizeof err);
    if (st != LEASE_ADMIN_OK) {
        fprintf(stderr, "leasectl credential list: %s\n", err);
        return ctl_admin_exit(st);
    }
    /* One object on stdout, like every other command. */
    json_t *out = json_is_array(rows) ? json_pack("{s:O}", "credentials", rows) : json_incref(rows);
    rc = print_json(out);
    json_decref(out);
    json_decref(rows);
    return rc;
}

int ctl_credential_main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return LEASE_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        usage(stdout);
        return LEASE_EXIT_OK;
    }
    if (strcmp(sub, "create") == 0)
        return credential_create(argc - 1, argv + 1);
    if (strcmp(sub, "revoke") == 0)
        return credential_revoke(argc - 1, argv + 1);
    if (strcmp(sub, "list") == 0)
        return credential_list(argc - 1, argv + 1);
    fprintf(stderr, "leasectl credential: unknown subcommand '%s'\n", sub);
    usage(stderr);
    return LEASE_EXIT_USAGE;
}
