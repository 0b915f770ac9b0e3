/*
 * settings.h - one table-driven settings parser for leased and leased-relay.
 *
 * A program describes its settings as a table of rows (name, environment
 * variable, flag, type, default, bounds, where the value lands in its config
 * struct, help line) and lease_settings_load fills any config struct from it:
 * defaults first, then the environment, then flags (a flag wins; --flag VALUE
 * or --flag=VALUE). A bad value is one line in err naming the setting and
 * where the value came from; secret values are never copied into err.
 *
 * Every secret row (LEASE_SETTING_SECRET) also reads ENV_FILE: the path of
 * a file holding the value (systemd's LoadCredential, Docker and Kubernetes
 * secrets), read once by lease_settings_load. Setting both ENV and ENV_FILE
 * is an error; a flag still wins over either.
 */
#ifndef LEASE_SETTINGS_H
#define LEASE_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lease/result.h"

typedef enum lease_setting_type {
    LEASE_SETTING_STRING, /* char *, copied; `check` may refuse it or derive fields */
    LEASE_SETTING_SECRET, /* char *, copied, wiped on free, never echoed */
    LEASE_SETTING_INT,    /* int64_t within [min, max] */
    LEASE_SETTING_RATE,   /* int64_t, "<n>/s" with n within [min, max] */
    LEASE_SETTING_BOOL,   /* bool, true|false */
    LEASE_SETTING_LEVEL,  /* lease_log_level_t, debug|info|warn|error */
    LEASE_SETTING_FORMAT, /* lease_log_format_t, json|text */
} lease_setting_type_t;

typedef struct lease_setting {
    const char *name; /* short name used in messages: "database url" */
    const char *env;  /* LEASE_DATABASE_URL */
    const char *flag; /* --database-url */
    lease_setting_type_t type;
    const char *default_value; /* NULL: required (or computed, see compute_default) */
    /* A default that depends on the machine (NULL: default_value); writes
     * into buf and returns it. */
    const char *(*compute_default)(char *buf, size_t bufsz);
    /* How --help and the docs show an empty default ("(host-pid)"); NULL:
     * "(none)". */
    const char *empty_default_text;
    int64_t min, max; /* LEASE_SETTING_INT and LEASE_SETTING_RATE */
    size_t offset;    /* of the field in the program's config struct */
    const char *help;
    /* LEASE_SETTING_STRING: false refuses the value (it is then not stored);
     * may fill fields derived from it. NULL: any value. */
    bool (*check)(const char *value, void *cfg);
    /* What a refused value must be, the words after "is not " in the error
     * (NULL: the type's own words; a check's row must name them). */
    const char *expect;
} lease_setting_t;

/* The two logging rows every program has, into CFG_TYPE's LEVEL and FORMAT
 * fields. */
/* clang-format off */
#define LEASE_SETTINGS_LOG_ROWS(cfg_type, level, format)                                           \
    {.name = "log level", .env = "LEASE_LOG_LEVEL", .flag = "--log-level",                         \
     .type = LEASE_SETTING_LEVEL, .default_value = "info", .offset = offsetof(cfg_type, level),    \
     .help = "debug, info, warn or error"},                                                        \
    {.name = "log format", .env = "LEASE_LOG_FORMAT", .flag = "--log-format",                      \
     .type = LEASE_SETTING_FORMAT, .default_value = "json", .offset = offsetof(cfg_type, format),  \
     .help = "json or text"}
/* clang-format on */

typedef struct lease_settings {
    const lease_setting_t *rows;
    size_t n;
    size_t cfg_size;     /* the config struct, zeroed before the defaults */
    const char *program; /* named in "unknown argument ... (see PROGRAM --help)" */
    const char *usage;   /* --help's text above the table */
    int help_widths[3];  /* --help's columns: environment, flag, default */
    /* Flags without a value that are modes of one run rather than settings
     * (leased-relay --once): true when arg was one. NULL: none. */
    bool (*switch_arg)(const char *arg, void *cfg);
    /* Relations between settings, checked after every value was applied
     * (false: err says why). NULL: none. */
    bool (*check_relations)(void *cfg, char *err, size_t errsz);
} lease_settings_t;

typedef enum lease_settings_status {
    LEASE_SETTINGS_OK = 0,  /* cfg is filled */
    LEASE_SETTINGS_HELP,    /* --help or -h was asked for */
    LEASE_SETTINGS_VERSION, /* --version was asked for */
    LEASE_SETTINGS_ERROR,   /* err holds one line naming the setting */
} lease_settings_status_t;

/* One row of a table as the docs check and --help see it. */
typedef struct lease_setting_info {
    const char *env;          /* LEASE_DB_POOL_SIZE */
    const char *flag;         /* --db-pool-size */
    const char *default_text; /* "(required)", "(none)" (or the row's own words) or the value */
    const char *help;
} lease_setting_info_t;

/*
 * Zeroes cfg and fills it from the table's defaults, then envp ("NAME=value",
 * NULL-terminated; may be NULL), then argv[1..]; then checks that required
 * strings (no default) were set and the table's relations. cfg must be
 * released with lease_settings_free whatever the status.
 */
LEASE_MUST_USE lease_settings_status_t lease_settings_load(const lease_settings_t *t, void *cfg,
                                                           int argc, char *const *argv,
                                                           char *const *envp, char *err,
                                                           size_t errsz);

/*
 * Reads a secret from path for the variable var (named in err): a regular
 * file readable by its owner only (no permission for group or others, so
 * mode 0600 or 0400), at most 64 KiB, not empty; one trailing newline (LF
 * or CRLF) is dropped. Returns the value (heap; wipe with OPENSSL_cleanse
 * before free) or NULL with err naming var, the path and why, never the
 * contents.
 */
LEASE_MUST_USE char *lease_settings_read_secret_file(const char *var, const char *path, char *err,
                                                     size_t errsz);

/* Releases the string fields of cfg named by the table, wiping them;
 * accepts NULL. */
void lease_settings_free(const lease_settings_t *t, void *cfg);

/* Replaces *slot by a copy of value (the old one wiped); false when out of
 * memory, *slot unchanged. */
LEASE_MUST_USE bool lease_settings_set_string(char **slot, const char *value);

/* A listen address: host:port with a numeric IPv4 address, or [IPv6]:port
 * (port 0..65535). On success host (hostsz bytes; a longer host is refused)
 * and port are set; on failure they are unchanged. */
LEASE_MUST_USE bool lease_settings_parse_listen(const char *value, char *host, size_t hostsz,
                                                int *port);

/* Row i (i < t->n); a computed default is written into buf, which must
 * outlive out (32 bytes are enough; NULL when the table computes none). */
void lease_settings_info(const lease_settings_t *t, size_t i, lease_setting_info_t *out, char *buf,
                         size_t bufsz);

/* --help: the table's usage text, then a header line and one line a row. */
void lease_settings_print_help(const lease_settings_t *t, FILE *out);

#endif
