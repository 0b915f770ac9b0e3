/*
 * valkey_audit_export.c - the audit export's cursor on Valkey
 * (docs/backends.md, "Audit export"), through the adapter against a real
 * redis-server: an export reads the Stream a page at a time
 * (leased_v1_audit_read) and acknowledges what it has taken
 * (leased_v1_audit_ack). Once registered, no entry after the cursor is
 * trimmed, however old; acknowledging lets the retention trim what was
 * taken. The cursor never moves back nor past the last entry; a malformed
 * id or page size is refused; a sealed namespace refuses the
 * acknowledgement and still answers reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lease/clock.h"
#include "valkey_service.h"

#define AUDIT_KEY "lease:{t}:audit"

/* Appends one service event per request id (leased_v1_record_audit). */
static void append(lease_valkey_t *v, const char *const *rids)
{
    for (const char *const *rid = rids; *rid; rid++) {
        lease_audit_event_t ev;
        memset(&ev, 0, sizeof ev);
        ev.event_type = "target_lease_inspect";
        ev.code = LEASE_NOT_FOUND;
        ev.decision = "deny";
        ev.occurred_at_ms = lease_wall_now_ms();
        vk_fill_call(&ev.call, "p1", *rid, 'e', 5000);
        lease_deadline_t dl = lease_deadline_in(5000);
        assert_int_equal(lease_valkey_record_audit(v, &ev, 1, &dl), LEASE_INSPECTED);
    }
}

/* Appends `before` (request ids), lets a retention of one second pass
 * over them, then appends `after`: the second append trims what it may. */
static void append_across_the_retention(vk_server_t *s, lease_valkey_t *v,
                                        const char *const *before, const char *const *after)
{
    append(v, before);
    freeReplyObject(vk_cmd(s, "HSET lease:{t}:ns audit_retention_ms 1000"));
    lease_sleep_ms(1200);
    append(v, after);
}

static long long xlen(vk_server_t *s)
{
    redisReply *r = vk_cmd(s, "XLEN " AUDIT_KEY);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* A page read (after: NULL for the cursor), parsed; fails the test when
 * the read fails. */
static json_t *read_page(lease_valkey_t *v, const char *after, int count)
{
    char *text = NULL;
    char err[256] = "";
    if (lease_valkey_audit_read(v, after, count, &text, err, sizeof err) != LEASE_INSPECTED)
        fail_msg("audit_read: %s", err);
    json_t *page = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(page);
    return page;
}

static const char *entry_member(const json_t *page, size_t i, const char *name)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(page, "entries"), i), name));
}

static lease_code_t ack(lease_valkey_t *v, const char *id, long long *trimmed, char *err)
{
    return lease_valkey_audit_ack(v, id, trimmed, err, 256);
}

static void the_export_cursor_holds_the_stream(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    lease_valkey_t *v = vk_open_bound(&s, "t");
    assert_non_null(v);
    char err[256] = "";
    long long trimmed = -1;

    /* registered before anything was written: "0-0" */
    assert_int_equal(ack(v, "0-0", &trimmed, err), LEASE_INSPECTED);
    assert_int_equal(trimmed, 0);
    /* past the retention, but the export has not taken them */
    const char *first_three[] = {"e1", "e2", "e3", NULL}, *fourth[] = {"e4", NULL};
    append_across_the_retention(&s, v, first_three, fourth);
    assert_int_equal(xlen(&s), 4);

    /* a page of two after the cursor, in order */
    json_t *page = read_page(v, NULL, 2);
    assert_int_equal(json_array_size(json_object_get(page, "entries")), 2);
    assert_string_equal(entry_member(page, 0, "request_id"), "e1");
    assert_string_equal(entry_member(page, 1, "request_id"), "e2");
    assert_string_equal(entry_member(page, 0, "event_type"), "target_lease_inspect");
    assert_string_equal(json_string_value(json_object_get(page, "cursor")), "0-0");
    assert_string_equal(json_string_value(json_object_get(page, "first")),
                        entry_member(page, 0, "id"));
    char e1[64], e2[64];
    snprintf(e1, sizeof e1, "%s", entry_member(page, 0, "id"));
    snprintf(e2, sizeof e2, "%s", entry_member(page, 1, "id"));
    json_decref(page);

    /* taken up to e2: the retention trims what is before the cursor */
    assert_int_equal(ack(v, e2, &trimmed, err), LEASE_INSPECTED);
    assert_int_equal(trimmed, 1); /* e1; e2 stays as the cursor's entry */
    assert_int_equal(xlen(&s), 3);
    page = read_page(v, NULL, 0);
    assert_int_equal(json_array_size(json_object_get(page, "entries")), 2);
    assert_string_equal(entry_member(page, 0, "request_id"), "e3");
    assert_string_equal(entry_member(page, 1, "request_id"), "e4");
    assert_string_equal(json_string_value(json_object_get(page, "cursor")), e2);
    char e4[64];
    snprintf(e4, sizeof e4, "%s", entry_member(page, 1, "id"));
    json_decref(page);
    /* a read from a given id, whatever the cursor */
    page = read_page(v, e1, 1);
    assert_string_equal(entry_member(page, 0, "request_id"), "e2");
    json_decref(page);

    /* never back, never past the last entry, never malformed; the cursor
     * and the Stream unchanged */
    assert_int_equal(ack(v, e1, &trimmed, err), LEASE_INVALID_LEASE_REQUEST);
    assert_non_null(strstr(err, "below the export cursor"));
    assert_int_equal(ack(v, "99999999999999-0", &trimmed, err), LEASE_INVALID_LEASE_REQUEST);
    assert_non_null(strstr(err, "after the last entry"));
    assert_int_equal(ack(v, "e4", &trimmed, err), LEASE_INVALID_LEASE_REQUEST);
    char *text = NULL;
    assert_int_equal(lease_valkey_audit_read(v, "x", 10, &text, err, sizeof err),
                     LEASE_INVALID_LEASE_REQUEST);
    assert_int_equal(lease_valkey_audit_read(v, NULL, 1001, &text, err, sizeof err),
                     LEASE_INVALID_LEASE_REQUEST);
    assert_null(text);
    redisReply *r = vk_cmd(&s, "HGET lease:{t}:ns audit_export_id");
    assert_string_equal(r->str, e2);
    freeReplyObject(r);
    assert_int_equal(xlen(&s), 3);

    /* everything taken: the next append trims by the retention again */
    assert_int_equal(ack(v, e4, &trimmed, err), LEASE_INSPECTED);
    assert_int_equal(trimmed, 2); /* e2, e3: older than a second, taken */
    lease_sleep_ms(1200);
    const char *fifth[] = {"e5", NULL};
    append(v, fifth);
    page = read_page(v, NULL, 0);
    assert_int_equal(json_array_size(json_object_get(page, "entries")), 1);
    assert_string_equal(entry_member(page, 0, "request_id"), "e5");
    json_decref(page);
    assert_int_equal(xlen(&s), 2); /* e4 (the cursor's entry), e5 */

    /* a restart seals: acknowledging is a write, refused; reading is not */
    lease_valkey_close(v);
    assert_true(vk_restart(&s, NULL));
    v = vk_open(&s, "t");
    assert_non_null(v);
    assert_int_equal(ack(v, e4, &trimmed, err), LEASE_INVALID_LEASE_REQUEST);
    assert_non_null(strstr(err, "namespace_sealed"));
    page = read_page(v, NULL, 0);
    assert_int_equal(json_array_size(json_object_get(page, "entries")), 1);
    json_decref(page);

    lease_valkey_close(v);
    vk_stop(&s);
}

/* Without an export nothing holds the Stream: trimming by retention only,
 * as before the cursor existed. */
static void no_export_trims_by_retention(void **state)
{
    (void)state;
    vk_server_t s;
    memset(&s, 0, sizeof s);
    assert_true(vk_start(&s));
    lease_valkey_t *v = vk_open_bound(&s, "t");
    assert_non_null(v);
    const char *two[] = {"e1", "e2", NULL}, *third[] = {"e3", NULL};
    append_across_the_retention(&s, v, two, third);
    assert_int_equal(xlen(&s), 1);
    json_t *page = read_page(v, NULL, 0);
    assert_true(json_is_null(json_object_get(page, "cursor")));
    assert_string_equal(entry_member(page, 0, "request_id"), "e3");
    json_decref(page);
    lease_valkey_close(v);
    vk_stop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_export_cursor_holds_the_stream),
        cmocka_unit_test(no_export_trims_by_retention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
