/*
 * log.h - structured logs of leased and its libraries: one JSON object per line on stderr.
 *
 * Fields: level, time, msg and, when known, correlation_id, trace_id, route,
 * code, latency_ms. The macros test the level before evaluating or
 * formatting anything, so debug logging costs one comparison when off.
 * Never pass secrets (tokens, connection strings, peppers), request bodies,
 * lock keys or metadata: nothing here filters them.
 */
#ifndef LEASE_LOG_H
#define LEASE_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum lease_log_level {
    LEASE_LOG_DEBUG = 0, /* per-request detail */
    LEASE_LOG_INFO,      /* lifecycle, one line per request */
    LEASE_LOG_WARN,      /* degraded: retries, fallbacks, drops */
    LEASE_LOG_ERROR,     /* an operator must look */
} lease_log_level_t;

typedef enum lease_log_format {
    LEASE_LOG_JSON = 0, /* one JSON object per line */
    LEASE_LOG_TEXT,     /* "time level msg key=value ..." for humans */
} lease_log_format_t;

/* Request context of a log line; every member may be NULL / negative. */
typedef struct lease_log_fields {
    const char *correlation_id;
    const char *trace_id;
    const char *route;
    const char *code;
    int64_t latency_ms; /* < 0: absent */
} lease_log_fields_t;

/* Current minimum level; read by the macros without a lock (a level change
 * racing a log line can only decide that one line). */
extern volatile lease_log_level_t lease_log_min_level;

void lease_log_init(lease_log_level_t level, lease_log_format_t format);

bool lease_log_parse_level(const char *s, lease_log_level_t *out);
bool lease_log_parse_format(const char *s, lease_log_format_t *out);
const char *lease_log_level_name(lease_log_level_t level);

/* Writes one line. fields may be NULL. Use the macros instead. */
void lease_log_write(lease_log_level_t level, const lease_log_fields_t *fields, const char *fmt,
                      ...) __attribute__((format(printf, 3, 4)));

/* Writes one line with an extra member `key` whose value is the JSON text
 * json_value (an object or array, already serialised; copied verbatim). */
void lease_log_write_json(lease_log_level_t level, const lease_log_fields_t *fields,
                           const char *msg, const char *key, const char *json_value);

#define LEASE_LOG_ENABLED(level) ((level) >= lease_log_min_level)

#define LEASE_LOG(level, fields, ...)                                                             \
    do {                                                                                           \
        if (LEASE_LOG_ENABLED(level))                                                             \
            lease_log_write((level), (fields), __VA_ARGS__);                                      \
    } while (0)

#define LOG_DEBUG(...) LEASE_LOG(LEASE_LOG_DEBUG, NULL, __VA_ARGS__)
#define LOG_INFO(...) LEASE_LOG(LEASE_LOG_INFO, NULL, __VA_ARGS__)
#define LOG_WARN(...) LEASE_LOG(LEASE_LOG_WARN, NULL, __VA_ARGS__)
#define LOG_ERROR(...) LEASE_LOG(LEASE_LOG_ERROR, NULL, __VA_ARGS__)

#endif
