/*
 * settings.c - the table-driven settings parser of leased and leased-relay.
 *
 * The tables live next to each program's config struct (server/config.c,
 * relay/relay_config.c); this file only knows rows. The words of its errors
 * are part of the programs' interface (operators grep for them), so each
 * type keeps its own.
 */
#include "lease/settings.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "lease/log.h"

static bool is_string(lease_setting_type_t type)
{
    return type == LEASE_SETTING_STRING || type == LEASE_SETTING_SECRET;
}

static bool parse_int(const char *v, int64_t *out)
{
    if (!*v || isspace((unsigned char)*v))
        return false;
    errno = 0;
    char *end;
    long long n = strtoll(v, &end, 10);
    if (errno || *end)
        return false;
    *out = n;
    return true;
}

static bool parse_rate(const char *v, int64_t *out)
{
    const char *slash = strchr(v, '/');
    if (!slash || strcmp(slash, "/s") != 0 || slash == v)
        return false;
    char num[32];
    size_t n = (size_t)(slash - v);
    if (n >= sizeof num)
        return false;
    memcpy(num, v, n);
    num[n] = '\0';
    return parse_int(num, out);
}

static bool parse_bool(const char *v, bool *out)
{
    if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
        return false;
    *out = strcmp(v, "true") == 0;
    return true;
}

bool lease_settings_parse_listen(const char *v, char *host, size_t hostsz, int *port)
{
    const char *colon;
    char found[128]; /* longer than any numeric address */
    size_t len;
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (!close || close[1] != ':')
            return false;
        len = (size_t)(close - v - 1);
        colon = close + 1;
    } else {
        colon = strrchr(v, ':');
        if (!colon)
            return false;
        len = (size_t)(colon - v);
    }
    if (len >= hostsz || len >= sizeof found)
        return false;
    memcpy(found, v[0] == '[' ? v + 1 : v, len);
    found[len] = '\0';
    unsigned char addr[sizeof(struct in6_addr)];
    if (inet_pton(v[0] == '[' ? AF_INET6 : AF_INET, found, addr) != 1)
        return false;
    int64_t n;
    if (!parse_int(colon + 1, &n) || n < 0 || n > 65535)
        return false;
    memcpy(host, found, len + 1);
    *port = (int)n;
    return true;
}

bool lease_settings_set_string(char **slot, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return false;
    if (*slot) {
        OPENSSL_cleanse(*slot, strlen(*slot));
        free(*slot);
    }
    *slot = copy;
    return true;
}

/* The words after "is not " for a value of the row's type. */
static const char *expected(const lease_setting_t *s)
{
    if (s->expect)
        return s->expect;
    switch (s->type) {
    case LEASE_SETTING_BOOL:
        return "one of true, false";
    case LEASE_SETTING_LEVEL:
        return "one of debug, info, warn, error";
    case LEASE_SETTING_FORMAT:
        return "one of json, text";
    case LEASE_SETTING_INT:
        return "an integer";
    case LEASE_SETTING_RATE:
        return "<n>/s with n";
    case LEASE_SETTING_STRING:
    case LEASE_SETTING_SECRET:
        break;
    }
    return "valid";
}

/* Applies one textual value. On failure writes the reason into err. */
static bool apply(const lease_setting_t *s, const char *origin, const char *value, void *cfg,
                  char *err, size_t errsz)
{
    void *field = (char *)cfg + s->offset;
    int64_t n = 0;
    bool ok = false;
    switch (s->type) {
    case LEASE_SETTING_STRING:
    case LEASE_SETTING_SECRET:
        if (s->check && !s->check(value, cfg)) {
            if (s->type == LEASE_SETTING_SECRET)
                snprintf(err, errsz, "%s (%s): the value is not %s", s->name, origin, expected(s));
            else
                snprintf(err, errsz, "%s (%s): '%.80s' is not %s", s->name, origin, value,
                         expected(s));
            return false;
        }
        if (!lease_settings_set_string(field, value)) {
            snprintf(err, errsz, "%s: out of memory", s->name);
            return false;
        }
        return true;
    case LEASE_SETTING_INT:
    case LEASE_SETTING_RATE:
        ok = s->type == LEASE_SETTING_RATE ? parse_rate(value, &n) : parse_int(value, &n);
        if (!ok || n < s->min || n > s->max) {
            snprintf(err, errsz, "%s (%s): '%.40s' is not %s in %lld..%lld", s->name, origin, value,
                     expected(s), (long long)s->min, (long long)s->max);
            return false;
        }
        *(int64_t *)field = n;
        return true;
    case LEASE_SETTING_BOOL:
        ok = parse_bool(value, field);
        break;
    case LEASE_SETTING_LEVEL:
        ok = lease_log_parse_level(value, field);
        break;
    case LEASE_SETTING_FORMAT:
        ok = lease_log_parse_format(value, field);
        break;
    }
    if (!ok)
        snprintf(err, errsz, "%s (%s): '%.40s' is not %s", s->name, origin, value, expected(s));
    return ok;
}

/* A required secret may not be set empty; its value is never echoed. */
static bool apply_checked(const lease_setting_t *s, const char *origin, const char *value,
                          void *cfg, char *err, size_t errsz)
{
    if (s->type == LEASE_SETTING_SECRET && !*value && s->default_value == NULL) {
        snprintf(err, errsz, "%s (%s) is empty", s->name, origin);
        return false;
    }
    return apply(s, origin, value, cfg, err, errsz);
}

static const lease_setting_t *find_flag(const lease_settings_t *t, const char *arg, size_t len)
{
    for (size_t i = 0; i < t->n; i++)
        if (strlen(t->rows[i].flag) == len && strncmp(t->rows[i].flag, arg, len) == 0)
            return &t->rows[i];
    return NULL;
}

static const char *env_lookup(char *const *envp, const char *name)
{
    if (!envp)
        return NULL;
    size_t n = strlen(name);
    for (char *const *e = envp; *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* The default a row applies: default_value or the computed one (into buf);
 * NULL when the setting is required. */
static const char *default_value(const lease_setting_t *s, char *buf, size_t bufsz)
{
    return s->compute_default ? s->compute_default(buf, bufsz) : s->default_value;
}

static const char *default_text(const lease_setting_t *s, char *buf, size_t bufsz)
{
    const char *def = default_value(s, buf, bufsz);
    if (!def)
        return "(required)";
    if (!*def)
        return s->empty_default_text ? s->empty_default_text : "(none)";
    return def;
}

void lease_settings_info(const lease_settings_t *t, size_t i, lease_setting_info_t *out, char *buf,
                         size_t bufsz)
{
    const lease_setting_t *s = &t->rows[i];
    out->env = s->env;
    out->flag = s->flag;
    out->help = s->help;
    out->default_text = default_text(s, buf, bufsz);
}

/* A string without a default must have been given. */
static bool check_required(const lease_settings_t *t, void *cfg, char *err, size_t errsz)
{
    for (size_t i = 0; i < t->n; i++) {
        const lease_setting_t *s = &t->rows[i];
        if (!is_string(s->type) || s->default_value || s->compute_default)
            continue;
        if (!*(char **)((char *)cfg + s->offset)) {
            if (s->type == LEASE_SETTING_SECRET)
                snprintf(err, errsz, "%s: set %s, %s_FILE or %s", s->name, s->env, s->env,
                         s->flag);
            else
                snprintf(err, errsz, "%s: set %s or %s", s->name, s->env, s->flag);
            return false;
        }
    }
    return true;
}

/* Large enough for any URL or pepper; a bigger file is a wrong path. */
#define SECRET_FILE_MAX 65536

char *lease_settings_read_secret_file(const char *var, const char *path, char *err, size_t errsz)
{
    /* O_NOFOLLOW is not used: systemd's credentials and Kubernetes' secrets
     * are symbolic links; the checks below are of the file itself */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errsz, "%s: cannot open %.200s: %s", var, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    char *value = NULL;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errsz, "%s: cannot stat %.200s: %s", var, path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errsz, "%s: %.200s is not a regular file", var, path);
        goto out;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errsz,
                 "%s: %.200s is accessible by group or others (mode %04o); a secret file must be "
                 "readable by its owner only (chmod 600)",
                 var, path, (unsigned)(st.st_mode & 07777));
        goto out;
    }
    if (st.st_size > SECRET_FILE_MAX) {
        snprintf(err, errsz, "%s: %.200s is larger than %d bytes", var, path, SECRET_FILE_MAX);
        goto out;
    }
    value = malloc((size_t)st.st_size + 1);
    if (!value) {
        snprintf(err, errsz, "%s: out of memory", var);
        goto out;
    }
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, value + len, (size_t)st.st_size - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errsz, "%s: cannot read %.200s: %s", var, path, strerror(errno));
            OPENSSL_cleanse(value, (size_t)st.st_size + 1);
            free(value);
            value = NULL;
            goto out;
        }
        if (n == 0 || (len += (size_t)n) == (size_t)st.st_size)
            break;
    }
    value[len] = '\0';
    if (len > 0 && value[len - 1] == '\n')
        value[--len] = '\0';
    if (len > 0 && value[len - 1] == '\r')
        value[--len] = '\0';
    if (len == 0 || strlen(value) != len) {
        snprintf(err, errsz, "%s: %.200s is %s", var, path,
                 len == 0 ? "empty" : "not text (it holds a NUL byte)");
        OPENSSL_cleanse(value, (size_t)st.st_size + 1);
        free(value);
        value = NULL;
    }
out:
    close(fd);
    return value;
}

/* ENV_FILE of a secret row: read once, applied as if ENV held the value. */
static bool apply_secret_file(const lease_setting_t *s, char *const *envp, void *cfg, char *err,
                              size_t errsz)
{
    char var[128];
    snprintf(var, sizeof var, "%s_FILE", s->env);
    const char *path = env_lookup(envp, var);
    if (!path)
        return true;
    if (env_lookup(envp, s->env)) {
        snprintf(err, errsz, "%s: set %s or %s, not both", s->name, s->env, var);
        return false;
    }
    char *value = lease_settings_read_secret_file(var, path, err, errsz);
    if (!value)
        return false;
    bool ok = apply_checked(s, var, value, cfg, err, errsz);
    OPENSSL_cleanse(value, strlen(value));
    free(value);
    return ok;
}

static lease_settings_status_t apply_all(const lease_settings_t *t, void *cfg, int argc,
                                         char *const *argv, char *const *envp, char *err,
                                         size_t errsz)
{
    for (size_t i = 0; i < t->n; i++) {
        char buf[32];
        const char *def = default_value(&t->rows[i], buf, sizeof buf);
        if (def && !apply(&t->rows[i], "default", def, cfg, err, errsz))
            return LEASE_SETTINGS_ERROR;
    }
    for (size_t i = 0; i < t->n; i++) {
        const char *v = env_lookup(envp, t->rows[i].env);
        if (v && !apply_checked(&t->rows[i], t->rows[i].env, v, cfg, err, errsz))
            return LEASE_SETTINGS_ERROR;
        if (t->rows[i].type == LEASE_SETTING_SECRET &&
            !apply_secret_file(&t->rows[i], envp, cfg, err, errsz))
            return LEASE_SETTINGS_ERROR;
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return LEASE_SETTINGS_HELP;
        if (strcmp(arg, "--version") == 0)
            return LEASE_SETTINGS_VERSION;
        if (t->switch_arg && t->switch_arg(arg, cfg))
            continue;
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const lease_setting_t *s = strncmp(arg, "--", 2) == 0 ? find_flag(t, arg, len) : NULL;
        if (!s) {
            snprintf(err, errsz, "unknown argument '%.*s' (see %s --help)",
                     (int)(len > 60 ? 60 : len), arg, t->program);
            return LEASE_SETTINGS_ERROR;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value) {
            if (a + 1 >= argc) {
                snprintf(err, errsz, "%s needs a value", s->flag);
                return LEASE_SETTINGS_ERROR;
            }
            value = argv[++a];
        }
        if (!apply_checked(s, s->flag, value, cfg, err, errsz))
            return LEASE_SETTINGS_ERROR;
    }
    return LEASE_SETTINGS_OK;
}

lease_settings_status_t lease_settings_load(const lease_settings_t *t, void *cfg, int argc,
                                            char *const *argv, char *const *envp, char *err,
                                            size_t errsz)
{
    memset(cfg, 0, t->cfg_size);
    err[0] = '\0';
    lease_settings_status_t st = apply_all(t, cfg, argc, argv, envp, err, errsz);
    if (st != LEASE_SETTINGS_OK)
        return st;
    if (!check_required(t, cfg, err, errsz))
        return LEASE_SETTINGS_ERROR;
    if (t->check_relations && !t->check_relations(cfg, err, errsz))
        return LEASE_SETTINGS_ERROR;
    return LEASE_SETTINGS_OK;
}

void lease_settings_free(const lease_settings_t *t, void *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < t->n; i++) {
        if (!is_string(t->rows[i].type))
            continue;
        char **slot = (char **)((char *)cfg + t->rows[i].offset);
        if (*slot) {
            OPENSSL_cleanse(*slot, strlen(*slot));
            free(*slot);
            *slot = NULL;
        }
    }
}

void lease_settings_print_help(const lease_settings_t *t, FILE *out)
{
    const int *w = t->help_widths;
    fputs(t->usage, out);
    fprintf(out, "%-*s %-*s %-*s %s\n", w[0], "environment", w[1], "flag", w[2], "default",
            "meaning");
    for (size_t i = 0; i < t->n; i++) {
        const lease_setting_t *s = &t->rows[i];
        char buf[32];
        fprintf(out, "%-*s %-*s %-*s %s\n", w[0], s->env, w[1], s->flag, w[2],
                default_text(s, buf, sizeof buf), s->help);
    }
}
