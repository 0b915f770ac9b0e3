/*
 * http_pagination.c - lists walk every page: each lease appears exactly once
 * across pages, the last page has no next_page_token, and a tampered page
 * token (or one from another filter) is refused as page_token.
 */
#include "http_common.h"

#define MINE 23
#define THEIRS 3
#define WORKFLOWS 7

static http_fx_t fx;
static const char *mine, *theirs; /* owned by fx */

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_pages");
    mine = http_fx_worker(&fx, "prn_pager");
    theirs = http_fx_worker(&fx, "prn_other");
    http_fx_serve(&fx, NULL);
    char rid[32], target[32];
    for (int i = 0; i < MINE + THEIRS; i++) {
        snprintf(rid, sizeof rid, "page-acq-%d", i);
        snprintf(target, sizeof target, "p-%02d", i);
        http_resp_t *r = acquire_call(fx.base, i < MINE ? mine : theirs, rid, target);
        check_reply(r, 200, "lease_acquired", NULL);
        http_resp_free(r);
    }
    /* several leases on one target: one per workflow */
    for (int w = 0; w < WORKFLOWS; w++) {
        json_t *id = identity_json("p-shared");
        char wf[16];
        snprintf(wf, sizeof wf, "wf-%d", w);
        json_object_set_new(id, "workflow_name", json_string(wf));
        snprintf(rid, sizeof rid, "page-wf-%d", w);
        http_resp_t *r = call_owned(
            fx.base, "POST", "/v1/leases/acquire", mine,
            dump(json_pack("{s:s, s:o, s:s, s:s, s:s}", "request_id", rid, "lock_identity", id,
                           "service_instance_id", "inst_1", "execution_id", "e", "job_id", "j")));
        check_reply(r, 200, "lease_acquired", NULL);
        http_resp_free(r);
    }
    return 0;
}

static json_t *list_filter(const char *by)
{
    json_t *f = json_pack("{s:s, s:s, s:s, s:i}", "by", by, "tenant_id", TENANT, "program_id",
                          PROGRAM, "page_size", 5);
    if (strcmp(by, "target") == 0) {
        json_object_set_new(f, "target_namespace", json_string(NAMESPACE));
        json_object_set_new(f, "target_id", json_string("p-shared"));
        json_object_set_new(f, "page_size", json_integer(3));
    }
    return f;
}

/* Walks every page of a filter; returns the lease ids seen (a JSON array)
 * and the number of pages. Fails on a repeated id. */
static json_t *walk(const char *token, const char *by, int *pages, json_t **first_token)
{
    json_t *seen = json_object();
    json_t *ids = json_array();
    char *page_token = NULL;
    *pages = 0;
    for (;;) {
        json_t *f = list_filter(by);
        if (page_token)
            json_object_set_new(f, "page_token", json_string(page_token));
        http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/list", token, dump(f));
        check_reply(r, 200, "lease_listed", NULL);
        (*pages)++;
        json_t *leases = http_resp_get(r, "leases");
        size_t i;
        json_t *l;
        json_array_foreach(leases, i, l)
        {
            const char *id = json_string_value(json_object_get(l, "lease_id"));
            assert_non_null(id);
            assert_null(json_object_get(seen, id)); /* never twice */
            json_object_set_new(seen, id, json_true());
            json_array_append_new(ids, json_string(id));
        }
        free(page_token);
        page_token = NULL;
        const char *next = http_resp_str(r, "next_page_token");
        if (next) {
            assert_true(json_array_size(leases) > 0);
            page_token = strdup(next);
            if (first_token && !*first_token)
                *first_token = json_string(next);
        }
        http_resp_free(r);
        if (!page_token)
            break;
        assert_true(*pages < 100);
    }
    json_decref(seen);
    return ids;
}

static void test_every_page_once(void **state)
{
    (void)state;
    int pages;
    json_t *ids = walk(mine, "program", &pages, NULL);
    assert_int_equal(json_array_size(ids), MINE + THEIRS + WORKFLOWS);
    assert_int_equal(pages, (MINE + THEIRS + WORKFLOWS + 4) / 5);
    json_decref(ids);

    ids = walk(theirs, "owner", &pages, NULL);
    assert_int_equal(json_array_size(ids), THEIRS);
    assert_int_equal(pages, 1);
    json_decref(ids);

    ids = walk(mine, "owner", &pages, NULL);
    assert_int_equal(json_array_size(ids), MINE + WORKFLOWS);
    json_decref(ids);

    ids = walk(mine, "target", &pages, NULL);
    assert_int_equal(json_array_size(ids), WORKFLOWS);
    assert_int_equal(pages, (WORKFLOWS + 2) / 3);
    json_decref(ids);
}

static void expect_bad_token(const char *by, const char *token_text)
{
    json_t *f = list_filter(by);
    json_object_set_new(f, "page_token", json_string(token_text));
    http_resp_t *r = call_owned(fx.base, "POST", "/v1/leases/list", mine, dump(f));
    check_reply(r, 400, "invalid_lease_request", NULL);
    assert_string_equal(http_resp_str(r, "field"), "page_token");
    http_resp_free(r);
}

/* A real next_page_token of the program listing (new reference). */
static json_t *a_real_token(void)
{
    int pages;
    json_t *token = NULL;
    json_decref(walk(mine, "program", &pages, &token));
    assert_non_null(token);
    return token;
}

static void test_tampered_tokens(void **state)
{
    (void)state;
    /* signed on both backends (docs/backends.md): a changed character,
     * in the cursor or in the signature, is never a token that starts
     * elsewhere */
    json_t *token = a_real_token();
    const char *good = json_string_value(token);
    size_t n = strlen(good);
    /* every position flipped is refused */
    for (size_t i = 0; i < n; i += n / 7 + 1) {
        char *bad = strdup(good);
        bad[i] = bad[i] == 'a' ? 'b' : 'a';
        expect_bad_token("program", bad);
        free(bad);
    }
    json_decref(token);
}

/* On both backends: a token is bound to its filter, and text that is no
 * token is refused. */
static void test_tokens_of_another_filter(void **state)
{
    (void)state;
    json_t *token = a_real_token();
    expect_bad_token("owner", json_string_value(token));
    expect_bad_token("program", "not-a-token");
    json_decref(token);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_page_once),
        cmocka_unit_test(test_tampered_tokens),
        cmocka_unit_test(test_tokens_of_another_filter),
    };
    static const http_pg_only_t pg_only[] = {
        {NULL, NULL},
    };
    return http_fx_run_group("http_pagination", tests, sizeof tests / sizeof tests[0], setup,
                             http_fx_teardown, pg_only);
}
