/*
 * log.c - structured log lines (JSON or text) on stderr.
 *
 * Each line is assembled in a local buffer and written with one write(2)
 * under a mutex, so lines from many threads never interleave. Lines are
 * bounded (LINE_MAX_BYTES); a longer message is cut, never split.
 */
#include "lease/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lease/clock.h"

#define LINE_MAX_BYTES 8192
#define MSG_MAX_BYTES 2048

volatile lease_log_level_t lease_log_min_level = LEASE_LOG_INFO;
static lease_log_format_t log_format = LEASE_LOG_JSON;
static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void lease_log_init(lease_log_level_t level, lease_log_format_t format)
{
    lease_log_min_level = level;
    log_format = format;
}

bool lease_log_parse_level(const char *s, lease_log_level_t *out)
{
    for (int i = 0; i <= LEASE_LOG_ERROR; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (lease_log_level_t)i;
            return true;
        }
    }
    return false;
}

bool lease_log_parse_format(const char *s, lease_log_format_t *out)
{
    if (strcmp(s, "json") == 0)
        *out = LEASE_LOG_JSON;
    else if (strcmp(s, "text") == 0)
        *out = LEASE_LOG_TEXT;
    else
        return false;
    return true;
}

const char *lease_log_level_name(lease_log_level_t level)
{
    if ((unsigned)level > LEASE_LOG_ERROR)
        return "error";
    return level_names[level];
}

typedef struct line {
    char buf[LINE_MAX_BYTES];
    size_t len;
    bool full;
} line_t;

/* Room kept for what closes a line: a string's quote, the truncation
 * marker and "}\n". Once content would eat into it the line is "full" and
 * further content is dropped, but closers still go in, so a cut line is
 * still one valid JSON object. */
#define CLOSE_RESERVE 64

static void put_raw(line_t *l, const char *s, size_t n)
{
    if (l->full)
        return;
    if (l->len + n + CLOSE_RESERVE > sizeof l->buf) {
        l->full = true;
        return;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void put_close(line_t *l, const char *s)
{
    size_t n = strlen(s);
    if (l->len + n <= sizeof l->buf) {
        memcpy(l->buf + l->len, s, n);
        l->len += n;
    }
}

static void put(line_t *l, const char *s)
{
    put_raw(l, s, strlen(s));
}

/* JSON string escaping; control characters become \u00XX so a line stays
 * one line whatever the message holds. */
static void put_escaped(line_t *l, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"':
            put_raw(l, "\\\"", 2);
            break;
        case '\\':
            put_raw(l, "\\\\", 2);
            break;
        case '\n':
            put_raw(l, "\\n", 2);
            break;
        case '\t':
            put_raw(l, "\\t", 2);
            break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                put_raw(l, esc, 6);
            } else {
                put_raw(l, (const char *)p, 1);
            }
        }
    }
}

static void put_member(line_t *l, const char *key, const char *value)
{
    if (l->full)
        return;
    char prefix[96];
    if (log_format == LEASE_LOG_JSON)
        snprintf(prefix, sizeof prefix, ",\"%s\":\"", key);
    else
        snprintf(prefix, sizeof prefix, " %s=", key);
    put(l, prefix);
    if (l->full)
        return;
    put_escaped(l, value);
    if (log_format == LEASE_LOG_JSON)
        put_close(l, "\"");
}

static void begin(line_t *l, lease_log_level_t level, const char *msg)
{
    char now[LEASE_TIME_LEN + 1];
    lease_time_format(lease_wall_now_ms(), now);
    l->len = 0;
    l->full = false;
    if (log_format == LEASE_LOG_JSON) {
        put(l, "{\"level\":\"");
        put(l, lease_log_level_name(level));
        put(l, "\",\"time\":\"");
        put(l, now);
        put(l, "\",\"msg\":\"");
        put_escaped(l, msg);
        put_close(l, "\"");
    } else {
        put(l, now);
        put(l, " ");
        put(l, lease_log_level_name(level));
        put(l, " ");
        put_escaped(l, msg);
    }
}

static void put_fields(line_t *l, const lease_log_fields_t *f)
{
    if (!f)
        return;
    if (f->correlation_id && *f->correlation_id)
        put_member(l, "correlation_id", f->correlation_id);
    if (f->trace_id && *f->trace_id)
        put_member(l, "trace_id", f->trace_id);
    if (f->route && *f->route)
        put_member(l, "route", f->route);
    if (f->code && *f->code)
        put_member(l, "code", f->code);
    if (f->latency_ms >= 0) {
        char num[32];
        snprintf(num, sizeof num, "%lld", (long long)f->latency_ms);
        if (log_format == LEASE_LOG_JSON) {
            put(l, ",\"latency_ms\":");
            put(l, num);
        } else {
            put(l, " latency_ms=");
            put(l, num);
        }
    }
}

static void finish_and_write(line_t *l)
{
    if (log_format == LEASE_LOG_JSON) {
        if (l->full)
            put_close(l, ",\"truncated\":true");
        put_close(l, "}");
    }
    put_close(l, "\n");
    pthread_mutex_lock(&log_mutex);
    size_t off = 0;
    while (off < l->len) {
        ssize_t n = write(STDERR_FILENO, l->buf + off, l->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* stderr is gone: nothing sensible left to do */
        off += (size_t)n;
    }
    pthread_mutex_unlock(&log_mutex);
}

void lease_log_write(lease_log_level_t level, const lease_log_fields_t *fields, const char *fmt,
                      ...)
{
    char msg[MSG_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    line_t l;
    begin(&l, level, msg);
    put_fields(&l, fields);
    finish_and_write(&l);
}

void lease_log_write_json(lease_log_level_t level, const lease_log_fields_t *fields,
                           const char *msg, const char *key, const char *json_value)
{
    if (!LEASE_LOG_ENABLED(level))
        return;
    line_t l;
    begin(&l, level, msg);
    put_fields(&l, fields);
    size_t need = strlen(key) + strlen(json_value) + 8;
    /* an object cut in half is worse than none: all of it or nothing */
    if (!l.full && l.len + need + CLOSE_RESERVE < sizeof l.buf) {
        if (log_format == LEASE_LOG_JSON) {
            put(&l, ",\"");
            put(&l, key);
            put(&l, "\":");
            put(&l, json_value);
        } else {
            put(&l, " ");
            put(&l, key);
            put(&l, "=");
            put_escaped(&l, json_value);
        }
    }
    finish_and_write(&l);
}
