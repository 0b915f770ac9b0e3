/*
 * clock.c - wall/monotonic time, deadlines, RFC 3339 and jitter.
 */
#include "lease/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

int64_t lease_wall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t lease_mono_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Offsets beyond a century are clamped: every caller caps deadlines far
 * lower, and the clamp keeps ms * 1e6 (and now + ms) inside int64 for any
 * input, e.g. a client's deadline_at in year 9999. */
#define DEADLINE_LIMIT_MS ((int64_t)100 * 366 * 24 * 3600 * 1000)

static int64_t clamp_offset(int64_t ms)
{
    if (ms > DEADLINE_LIMIT_MS)
        return DEADLINE_LIMIT_MS;
    if (ms < -DEADLINE_LIMIT_MS)
        return -DEADLINE_LIMIT_MS;
    return ms;
}

int64_t lease_time_add_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

int64_t lease_time_sub_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

int64_t lease_ms_to_ns_sat(int64_t ms)
{
    int64_t r;
    if (__builtin_mul_overflow(ms, (int64_t)1000000, &r))
        return ms > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

lease_deadline_t lease_deadline_after(int64_t wall_ms, int64_t mono_ns, int64_t rel_ms)
{
    rel_ms = clamp_offset(rel_ms);
    lease_deadline_t d = {lease_time_add_sat(wall_ms, rel_ms),
                          lease_time_add_sat(mono_ns, rel_ms * 1000000)};
    return d;
}

lease_deadline_t lease_deadline_in(int64_t ms)
{
    return lease_deadline_after(lease_wall_now_ms(), lease_mono_now_ns(), ms);
}

lease_deadline_t lease_deadline_at_wall(int64_t wall_ms)
{
    int64_t now = lease_wall_now_ms();
    int64_t delta;
    if (__builtin_sub_overflow(wall_ms, now, &delta))
        delta = wall_ms > 0 ? INT64_MAX : INT64_MIN;
    int64_t clamped = clamp_offset(delta);
    /* Keep the caller's wall time exactly (it goes to Postgres) unless it was
     * out of range; reading the clock twice could move it by a millisecond. */
    lease_deadline_t d = {clamped == delta ? wall_ms : now + clamped,
                          lease_time_add_sat(lease_mono_now_ns(), clamped * 1000000)};
    return d;
}

lease_deadline_t lease_deadline_min(lease_deadline_t a, lease_deadline_t b)
{
    return a.mono_ns <= b.mono_ns ? a : b;
}

int64_t lease_deadline_remaining_ms(const lease_deadline_t *d)
{
    int64_t left_ns = lease_time_sub_sat(d->mono_ns, lease_mono_now_ns());
    /* round toward zero: 0.4 ms left is 0 ms, i.e. passed */
    return left_ns / 1000000;
}

bool lease_deadline_passed(const lease_deadline_t *d)
{
    return lease_mono_now_ns() >= d->mono_ns;
}

/* RFC 3339 years have four digits: 0000-01-01 .. 9999-12-31 in epoch ms. */
#define TIME_MIN_MS (-62167219200000LL)
#define TIME_MAX_MS (253402300799999LL)

/* v (0 <= v < 10^n) as n decimal digits with leading zeros */
static void put_digits(char *p, int v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

void lease_time_format(int64_t wall_ms, char out[LEASE_TIME_LEN + 1])
{
    /* Clamping keeps the text exactly LEASE_TIME_LEN characters and keeps
     * gmtime_r inside its range, so tm is always filled. */
    if (wall_ms < TIME_MIN_MS)
        wall_ms = TIME_MIN_MS;
    if (wall_ms > TIME_MAX_MS)
        wall_ms = TIME_MAX_MS;
    time_t secs = (time_t)(wall_ms / 1000);
    int ms = (int)(wall_ms % 1000);
    if (ms < 0) {
        ms += 1000;
        secs -= 1;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    gmtime_r(&secs, &tm);
    /* "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" written digit by digit: every
     * reply and log line carries a time, and snprintf cost more than the
     * rest of the formatting (the year is 0..9999 after the clamp) */
    put_digits(out, tm.tm_year + 1900, 4);
    out[4] = '-';
    put_digits(out + 5, tm.tm_mon + 1, 2);
    out[7] = '-';
    put_digits(out + 8, tm.tm_mday, 2);
    out[10] = 'T';
    put_digits(out + 11, tm.tm_hour, 2);
    out[13] = ':';
    put_digits(out + 14, tm.tm_min, 2);
    out[16] = ':';
    put_digits(out + 17, tm.tm_sec, 2);
    out[19] = '.';
    put_digits(out + 20, ms, 3);
    out[23] = 'Z';
    out[LEASE_TIME_LEN] = '\0';
}

static bool digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

bool lease_time_parse(const char *s, int64_t *wall_ms)
{
    int y, mo, d, h, mi, sec;
    if (!s || strlen(s) < 20)
        return false;
    if (!digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') || !digits(s + 11, 2, &h) ||
        s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return false;
    const char *p = s + 19;
    int ms = 0;
    if (*p == '.') {
        p++;
        int n = 0;
        while (*p >= '0' && *p <= '9') {
            if (n < 3)
                ms = ms * 10 + (*p - '0');
            n++;
            p++;
        }
        if (n == 0 || n > 9)
            return false;
        for (int i = n; i < 3; i++)
            ms *= 10;
    }
    int offset_min = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (!digits(p + 1, 2, &oh) || p[3] != ':' || !digits(p + 4, 2, &om) || oh > 23 ||
            om > 59)
            return false;
        offset_min = (oh * 60 + om) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return false;
    }
    if (*p != '\0')
        return false;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap))
        return false;
    /* days since the epoch, proleptic Gregorian (Howard Hinnant's algorithm) */
    int yy = y - (mo <= 2);
    int era = (yy >= 0 ? yy : yy - 399) / 400;
    int yoe = yy - era * 400;
    int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = (int64_t)era * 146097 + doe - 719468;
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + (sec == 60 ? 59 : sec) -
                   (int64_t)offset_min * 60;
    *wall_ms = secs * 1000 + ms;
    return true;
}

void lease_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

uint64_t lease_jitter(uint64_t bound)
{
    static __thread uint64_t state;
    if (bound == 0)
        return 0;
    if (state == 0) {
        if (getrandom(&state, sizeof state, 0) != (ssize_t)sizeof state || state == 0)
            state = (uint64_t)lease_mono_now_ns() | 1;
    }
    /* xorshift64*: cheap, good enough for spreading retries */
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return (state * 0x2545F4914F6CDD1DULL) % bound;
}
