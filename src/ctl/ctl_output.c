/*
 * ctl_output.c - leasectl's tables: a list as rows with aligned columns, a
 * single lease as "field  value" lines. Only successful answers are shown
 * as tables; failures keep their one human line on stderr.
 */
#include "ctl_output.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

bool ctl_output_parse(const char *arg, ctl_output_t *out)
{
    if (strcmp(arg, "json") == 0)
        *out = CTL_OUTPUT_JSON;
    else if (strcmp(arg, "table") == 0)
        *out = CTL_OUTPUT_TABLE;
    else
        return false;
    return true;
}

ctl_output_t ctl_output_resolve(ctl_output_t out)
{
    if (out != CTL_OUTPUT_DEFAULT)
        return out;
    return isatty(STDOUT_FILENO) ? CTL_OUTPUT_TABLE : CTL_OUTPUT_JSON;
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* Milliseconds since the epoch of "YYYY-MM-DDTHH:MM:SS.mmmZ"; -1 if not. */
static long long parse_time_ms(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!rest)
        return -1;
    long long ms = 0;
    if (*rest == '.') {
        int digits = 0;
        for (rest++; *rest >= '0' && *rest <= '9'; rest++)
            if (digits++ < 3)
                ms = ms * 10 + (*rest - '0');
        for (; digits < 3; digits++)
            ms *= 10;
    }
    if (*rest != 'Z')
        return -1;
    return (long long)timegm(&tm) * 1000 + ms;
}

/* "in 29s", "3m12s ago", "" when t does not parse. */
static void relative(const char *t, long long now_ms, char *out, size_t outsz)
{
    long long at = parse_time_ms(t);
    if (at < 0) {
        snprintf(out, outsz, "%s", "");
        return;
    }
    long long d = (at - now_ms) / 1000;
    bool past = at <= now_ms;
    long long a = past ? -d : d;
    char span[32];
    if (a >= 86400)
        snprintf(span, sizeof span, "%lldd%lldh", a / 86400, a % 86400 / 3600);
    else if (a >= 3600)
        snprintf(span, sizeof span, "%lldh%lldm", a / 3600, a % 3600 / 60);
    else if (a >= 60)
        snprintf(span, sizeof span, "%lldm%llds", a / 60, a % 60);
    else
        snprintf(span, sizeof span, "%llds", a);
    snprintf(out, outsz, past ? "%s ago" : "in %s", span);
}

enum { COL_ID, COL_TOKEN, COL_STATE, COL_TARGET, COL_HOLDER, COL_EXPIRES, N_COLS };

static const char *const headers[N_COLS] = {"LEASE ID", "TOKEN",  "STATE",
                                            "TARGET",   "HOLDER", "EXPIRES"};

/* One row's cells (heap). */
static void row_cells(const json_t *lease, long long now_ms, char *cells[N_COLS])
{
    const json_t *id = json_object_get(lease, "lock_identity");
    char rel[48];
    relative(str(lease, "expires_at"), now_ms, rel, sizeof rel);
    const char *state = str(lease, "state");
    if (asprintf(&cells[COL_ID], "%s", str(lease, "lease_id")) < 0)
        cells[COL_ID] = NULL;
    if (asprintf(&cells[COL_TOKEN], "%lld",
                 (long long)json_integer_value(json_object_get(lease, "fencing_token"))) < 0)
        cells[COL_TOKEN] = NULL;
    if (asprintf(&cells[COL_STATE], "%s", *state ? state : "active") < 0)
        cells[COL_STATE] = NULL;
    if (asprintf(&cells[COL_TARGET], "%s/%s/%s/%s", str(id, "tenant_id"), str(id, "program_id"),
                 str(id, "target_namespace"), str(id, "target_id")) < 0)
        cells[COL_TARGET] = NULL;
    if (asprintf(&cells[COL_HOLDER], "%s@%s", str(id, "actor_name"),
                 str(lease, "service_instance_id")) < 0)
        cells[COL_HOLDER] = NULL;
    if (asprintf(&cells[COL_EXPIRES], "%s", rel) < 0)
        cells[COL_EXPIRES] = NULL;
}

static void list_table(FILE *out, const json_t *leases, const char *next, long long now_ms)
{
    size_t n = json_array_size(leases);
    if (n == 0) {
        fprintf(out, "no active leases\n");
    } else {
        char *(*cells)[N_COLS] = calloc(n, sizeof *cells);
        size_t width[N_COLS];
        for (int c = 0; c < N_COLS; c++)
            width[c] = strlen(headers[c]);
        for (size_t i = 0; cells && i < n; i++) {
            row_cells(json_array_get(leases, i), now_ms, cells[i]);
            for (int c = 0; c < N_COLS; c++) {
                size_t w = cells[i][c] ? strlen(cells[i][c]) : 0;
                if (w > width[c])
                    width[c] = w;
            }
        }
        for (int c = 0; c + 1 < N_COLS; c++)
            fprintf(out, "%-*s  ", (int)width[c], headers[c]);
        fprintf(out, "%s\n", headers[N_COLS - 1]);
        for (size_t i = 0; cells && i < n; i++) {
            for (int c = 0; c < N_COLS; c++) {
                const char *v = cells[i][c] ? cells[i][c] : "";
                if (c + 1 < N_COLS)
                    fprintf(out, "%-*s  ", (int)width[c], v);
                else
                    fprintf(out, "%s\n", v);
                free(cells[i][c]);
            }
        }
        free(cells);
    }
    if (next && *next)
        fprintf(out, "more: --page-token %s\n", next);
}

/* "name  value" for every field of the lease, the identity's first. */
static void lease_fields(FILE *out, const json_t *lease, long long now_ms)
{
    /* jansson iterates non-const objects only; nothing is changed */
    json_t *id = json_object_get(lease, "lock_identity");
    json_t *all = (json_t *)(uintptr_t)lease;
    const char *key;
    json_t *v;
    json_object_foreach(id, key, v)
    {
        fprintf(out, "%-20s %s\n", key, json_is_string(v) ? json_string_value(v) : "");
    }
    json_object_foreach(all, key, v)
    {
        if (strcmp(key, "lock_identity") == 0)
            continue;
        if (json_is_string(v)) {
            char rel[48] = "";
            if (strlen(key) > 3 && strcmp(key + strlen(key) - 3, "_at") == 0)
                relative(json_string_value(v), now_ms, rel, sizeof rel);
            fprintf(out, "%-20s %s%s%s%s\n", key, json_string_value(v), *rel ? " (" : "", rel,
                    *rel ? ")" : "");
        } else if (json_is_integer(v)) {
            fprintf(out, "%-20s %lld\n", key, (long long)json_integer_value(v));
        } else {
            char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            fprintf(out, "%-20s %s\n", key, text ? text : "");
            free(text);
        }
    }
}

bool ctl_output_table(FILE *out, const json_t *answer, long long now_ms)
{
    const json_t *leases = json_object_get(answer, "leases");
    if (json_is_array(leases)) {
        list_table(out, leases, json_string_value(json_object_get(answer, "next_page_token")),
                   now_ms);
        return true;
    }
    const json_t *lease = json_object_get(answer, "lease");
    if (json_is_object(lease)) {
        lease_fields(out, lease, now_ms);
        return true;
    }
    return false;
}
