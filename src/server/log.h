/*
 * log.h - leased's structured logs: one JSON object per line on stderr.
 *
 * Fields: level, time, msg and, when known, correlation_id, trace_id, route,
 * code, latency_ms. The macros test the level before evaluating or
 * formatting anything, so debug logging costs one comparison when off.
 * Never pass secrets (tokens, connection strings, peppers), request bodies,
 * lock keys or metadata: nothing here filters them.
 */
#ifndef LEASED_LOG_H
#define LEASED_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum leased_log_level {
    LEASED_LOG_DEBUG = 0, /* per-request detail */
    LEASED_LOG_INFO,      /* lifecycle, one line per request */
    LEASED_LOG_WARN,      /* degraded: retries, fallbacks, drops */
    LEASED_LOG_ERROR,     /* an operator must look */
} leased_log_level_t;

typedef enum leased_log_format {
    LEASED_LOG_JSON = 0, /* one JSON object per line */
    LEASED_LOG_TEXT,     /* "time level msg key=value ..." for humans */
} leased_log_format_t;

/* Request context of a log line; every member may be NULL / negative. */
typedef struct leased_log_fields {
    const char *correlation_id;
    const char *trace_id;
    const char *route;
    const char *code;
    int64_t latency_ms; /* < 0: absent */
} leased_log_fields_t;

/* Current minimum level; read by the macros without a lock (a level change
 * racing a log line can only decide that one line). */
extern volatile leased_log_level_t leased_log_min_level;

void leased_log_init(leased_log_level_t level, leased_log_format_t format);

bool leased_log_parse_level(const char *s, leased_log_level_t *out);
bool leased_log_parse_format(const char *s, leased_log_format_t *out);
const char *leased_log_level_name(leased_log_level_t level);

/* Writes one line. fields may be NULL. Use the macros instead. */
void leased_log_write(leased_log_level_t level, const leased_log_fields_t *fields, const char *fmt,
                      ...) __attribute__((format(printf, 3, 4)));

/* Writes one line with an extra member `key` whose value is the JSON text
 * json_value (an object or array, already serialised; copied verbatim). */
void leased_log_write_json(leased_log_level_t level, const leased_log_fields_t *fields,
                           const char *msg, const char *key, const char *json_value);

#define LEASED_LOG_ENABLED(level) ((level) >= leased_log_min_level)

#define LEASED_LOG(level, fields, ...)                                                             \
    do {                                                                                           \
        if (LEASED_LOG_ENABLED(level))                                                             \
            leased_log_write((level), (fields), __VA_ARGS__);                                      \
    } while (0)

#define LOG_DEBUG(...) LEASED_LOG(LEASED_LOG_DEBUG, NULL, __VA_ARGS__)
#define LOG_INFO(...) LEASED_LOG(LEASED_LOG_INFO, NULL, __VA_ARGS__)
#define LOG_WARN(...) LEASED_LOG(LEASED_LOG_WARN, NULL, __VA_ARGS__)
#define LOG_ERROR(...) LEASED_LOG(LEASED_LOG_ERROR, NULL, __VA_ARGS__)

#endif
