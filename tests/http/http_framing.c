/*
 * http_framing.c - HTTP framing a proxy and leased could read differently
 * (issue 10, defects 6, 7 and 8), over raw sockets: Content-Length with
 * Transfer-Encoding, duplicate or conflicting Content-Length, duplicate
 * Authorization and escaped control characters in paths are refused with
 * 400 and the connection is closed (a request smuggled behind never runs);
 * every error leased answers (huge heads, bad fields, versions, methods)
 * is in the JSON envelope with a correlation id; a long query string gets
 * an answer. The few malformed requests libmicrohttpd refuses itself,
 * before leased sees them, are answered with its own status and page and
 * the connection closed (docs/contract.md, "Malformed HTTP the library
 * answers itself"). Each refusal changes nothing in the store (on either backend:
 * http_fx_state_digest).
 */
#include "http_common.h"
#include "raw_http.h"

static http_fx_t fx;
static const char *worker; /* owned by fx */
static int port;

static int setup(void **state)
{
    http_fx_open(&fx, state, "http_framing");
    worker = http_fx_worker(&fx, "prn_framing");
    http_fx_serve(&fx, NULL);
    port = leased_proc_port(fx.srv);
    return 0;
}

/* The envelope of an error the HTTP layer made: status, code, field, a
 * correlation id equal in header and body, JSON content type. */
static void check_raw(const raw_resp_t *r, int status, const char *code, const char *field)
{
    assert_non_null(r);
    if (r->status != status || !raw_str(r, "code") || strcmp(raw_str(r, "code"), code) != 0)
        fprintf(stderr, "unexpected reply:\n%s%s\n", r->head, r->body);
    assert_int_equal(r->status, status);
    assert_non_null(r->json);
    assert_string_equal(raw_str(r, "status"), status == 200 ? "success" : "error");
    assert_string_equal(raw_str(r, "code"), code);
    assert_non_null(raw_str(r, "msg"));
    assert_true(json_is_boolean(json_object_get(r->json, "retryable")));
    const char *corr = raw_str(r, "correlation_id");
    assert_non_null(corr);
    assert_int_equal(strncmp(corr, "corr_", 5), 0);
    assert_int_equal(strlen(corr), 31);
    const char *hdr = raw_header(r, "X-Correlation-Id");
    assert_non_null(hdr);
    assert_string_equal(hdr, corr);
    assert_non_null(strstr(raw_header(r, "Content-Type"), "application/json"));
    if (field) {
        assert_non_null(raw_str(r, "field"));
        assert_string_equal(raw_str(r, "field"), field);
    }
}

/* Sends text on a fresh connection and expects one refusal, then close. */
static void expect_refusal(const char *text, size_t len, int status, const char *code,
                           const char *field)
{
    raw_conn_t *c = raw_connect(port, NULL);
    assert_non_null(c);
    assert_true(raw_send_bytes(c, text, len));
    raw_resp_t *r = raw_read(c, 10000);
    if (!r || r->status != status)
        fprintf(stderr, "unexpected reply to: %.200s\n", text);
    check_raw(r, status, code, field);
    assert_string_equal(raw_header(r, "Connection"), "close");
    raw_resp_free(r);
    /* nothing else comes back: the connection is closed */
    assert_true(raw_closed(c, 10000));
    raw_close(c);
}

/* A request libmicrohttpd 0.9.75 refuses itself before leased sees it
 * (docs/contract.md): its status (with its own HTML page, no correlation
 * id), Connection: close, then the close; nothing ran. */
static void expect_library_refusal(const char *text, size_t len, int status)
{
    raw_conn_t *c = raw_connect(port, NULL);
    assert_non_null(c);
    assert_true(raw_send_bytes(c, text, len));
    raw_resp_t *r = raw_read(c, 10000);
    assert_non_null(r);
    if (r->status != status)
        fprintf(stderr, "unexpected reply to %.60s:\n%s%s\n", text, r->head, r->body);
    assert_int_equal(r->status, status);
    assert_null(r->json);
    assert_string_equal(raw_header(r, "Connection"), "close");
    raw_resp_free(r);
    assert_true(raw_closed(c, 10000));
    raw_close(c);
}

/* A request libmicrohttpd reads in its own way and leased serves
 * (docs/contract.md): answered 200. */
static void expect_served_bytes(const char *text, size_t len)
{
    raw_conn_t *c = raw_connect(port, NULL);
    assert_non_null(c);
    assert_true(raw_send_bytes(c, text, len));
    raw_resp_t *r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    raw_resp_free(r);
    raw_close(c);
}

static void expect_served(const char *text)
{
    expect_served_bytes(text, strlen(text));
}

static void expect_refusal_text(const char *text, int status, const char *code, const char *field)
{
    expect_refusal(text, strlen(text), status, code, field);
}

/* A POST of body to path with extra header lines, as raw text (heap). */
static char *post(const char *path, const char *extra_headers, const char *body)
{
    char *out = NULL;
    assert_true(asprintf(&out,
                         "POST %s HTTP/1.1\r\nHost: leased\r\nAuthorization: Bearer %s\r\n"
                         "Content-Type: application/json\r\n%s\r\n%s",
                         path, worker, extra_headers, body) > 0);
    return out;
}

static void test_smuggling_refused(void **state)
{
    (void)state;
    char *before = http_fx_state_digest(&fx);
    char *smuggled_body = acquire_body("smuggled-1", "t-smuggled");
    char headers[128];
    snprintf(headers, sizeof headers, "Content-Length: %zu\r\n", strlen(smuggled_body));
    char *smuggled = post("/v1/leases/acquire", headers, smuggled_body);

    /* Content-Length with Transfer-Encoding: 400, closed; the request
     * pipelined behind (which a proxy would have seen as body) never runs */
    char *text = NULL;
    assert_true(asprintf(&text,
                         "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n"
                         "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s",
                         smuggled) > 0);
    expect_refusal_text(text, 400, "invalid_lease_request", "headers.transfer-encoding");
    free(text);
    /* and in the other order, and with a doubled chunked */
    assert_true(asprintf(&text,
                         "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n"
                         "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n%s",
                         smuggled) > 0);
    expect_refusal_text(text, 400, "invalid_lease_request", "headers.transfer-encoding");
    free(text);
    assert_true(asprintf(&text,
                         "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n"
                         "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "0\r\n\r\n%s",
                         smuggled) > 0);
    expect_refusal_text(text, 400, "invalid_lease_request", "headers.transfer-encoding");
    free(text);
    assert_true(asprintf(&text,
                         "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n"
                         "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n%s",
                         smuggled) > 0);
    expect_refusal_text(text, 400, "invalid_lease_request", "headers.transfer-encoding");
    free(text);

    /* duplicate Content-Length, equal or not */
    static const char *const lengths[] = {"Content-Length: 0\r\nContent-Length: 0\r\n",
                                          "Content-Length: 0\r\nContent-Length: 250\r\n"};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        assert_true(asprintf(&text, "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n%s\r\n%s",
                             lengths[i], smuggled) > 0);
        expect_refusal_text(text, 400, "invalid_lease_request", "headers.content-length");
        free(text);
    }
    /* a Content-Length that is not one decimal number: the library's 400 */
    static const char *const malformed[] = {"Content-Length: 0, 0\r\n", "Content-Length: +0\r\n",
                                            "Content-Length: 0x10\r\n"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        assert_true(asprintf(&text, "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n%s\r\n%s",
                             malformed[i], smuggled) > 0);
        expect_library_refusal(text, strlen(text), 400);
        free(text);
    }

    /* two Authorization headers, even the same valid token twice */
    char dup_auth[256];
    snprintf(dup_auth, sizeof dup_auth, "Authorization: Bearer %s\r\nContent-Length: %zu\r\n",
             worker, strlen(smuggled_body));
    char *twice = post("/v1/leases/acquire", dup_auth, smuggled_body);
    expect_refusal_text(twice, 400, "invalid_lease_request", "headers.authorization");
    free(twice);

    /* nothing was acquired or remembered */
    char *after = http_fx_state_digest(&fx);
    assert_string_equal(before, after);
    assert_int_equal(http_fx_lock_records(&fx, "t-smuggled"), 0);
    free(before);
    free(after);
    free(smuggled);
    free(smuggled_body);
}

static void test_paths_canonical(void **state)
{
    (void)state;
    json_t *lease = acquire_lease(fx.base, worker, "path-1", "t-path");
    const char *id = json_string_value(json_object_get(lease, "lease_id"));
    char *before = http_fx_state_digest(&fx);
    static const char *const suffixes[] = {"%00x", "%00", "%0a", "%0D%0Ax", "%7f", "%2fx",
                                           "%5c",  "%zz", "%4",  "%",       "%1F"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "GET /v1/leases/%s%s HTTP/1.1\r\nHost: leased\r\nAuthorization: Bearer %s\r\n\r\n",
                 id, suffixes[i], worker);
        expect_refusal_text(text, 400, "invalid_lease_request", "path");
    }
    /* raw control characters and spaces cannot even form a request line */
    char text[512];
    snprintf(text, sizeof text, "GET /v1/leases/%s\x01 HTTP/1.1\r\nHost: leased\r\n\r\n", id);
    expect_refusal_text(text, 400, "invalid_lease_request", "path");
    snprintf(text, sizeof text, "GET /v1/leases/%s x HTTP/1.1\r\nHost: leased\r\n\r\n", id);
    expect_refusal_text(text, 400, "invalid_lease_request", "request");
    /* the lease itself answers as usual */
    char path[256];
    snprintf(path, sizeof path, "/v1/leases/%s", id);
    http_resp_t *r = call(fx.base, "GET", path, worker, NULL);
    check_reply(r, 200, "lease_inspected", NULL);
    http_resp_free(r);
    char *after = http_fx_state_digest(&fx);
    assert_string_equal(before, after);
    free(before);
    free(after);
    json_decref(lease);
}

static void test_long_query_string(void **state)
{
    (void)state;
    size_t cap = 16000, n = 0;
    char *text = malloc(cap);
    n += (size_t)snprintf(text + n, cap - n, "GET /healthz?");
    /* 300 arguments, 2.5 KB: the library holds each parsed argument in
     * the connection's 32 KiB (docs/contract.md, leased-3) */
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(text + n, cap - n, "%sp%d=%d", i ? "&" : "", i, i);
    snprintf(text + n, cap - n, " HTTP/1.1\r\nHost: leased\r\n\r\n");
    raw_conn_t *c = raw_connect(port, NULL);
    assert_non_null(c);
    /* twice on one connection: answered, and the connection stays usable */
    for (int i = 0; i < 2; i++) {
        assert_true(raw_send(c, text));
        raw_resp_t *r = raw_read(c, 10000);
        assert_non_null(r);
        assert_int_equal(r->status, 200);
        assert_string_equal(raw_str(r, "status"), "ok");
        raw_resp_free(r);
    }
    assert_true(raw_send(c, "GET /healthz? HTTP/1.1\r\nHost: leased\r\n\r\n"));
    raw_resp_t *r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    raw_resp_free(r);
    raw_close(c);
    free(text);
}

/* What the HTTP library used to answer in HTML (or not at all). */
static void test_errors_in_envelope(void **state)
{
    (void)state;
    char *before = http_fx_state_digest(&fx);
    /* a Content-Length past 2^64: the library's 413 */
    static const char absurd[] = "POST /v1/leases/acquire HTTP/1.1\r\nHost: leased\r\n"
                                 "Content-Length: 99999999999999999999\r\n\r\n";
    expect_library_refusal(absurd, sizeof absurd - 1, 413);
    /* oversized Content-Length */
    expect_refusal_text("POST /v1/leases/acquire HTTP/1.1\r\nHost: leased\r\n"
                        "Content-Length: 9999999999999999999\r\n\r\n",
                        400, "invalid_lease_request", "body");
    expect_refusal_text("POST /v1/leases/acquire HTTP/1.1\r\nHost: leased\r\n"
                        "Content-Length: 70000\r\nExpect: 100-continue\r\n\r\n",
                        400, "invalid_lease_request", "body");
    /* a 24 KB header (past the 16 KiB cap, within the library's 32 KiB of
     * connection memory: refused in the envelope), and more header fields
     * than allowed */
    size_t big = 24 * 1024;
    char *text = malloc(big + 256);
    int n = snprintf(text, big + 256, "GET /healthz HTTP/1.1\r\nHost: leased\r\nX-Big: ");
    memset(text + n, 'a', big);
    snprintf(text + n + big, 256, "\r\n\r\n");
    expect_refusal_text(text, 400, "invalid_lease_request", "headers");
    n = snprintf(text, big + 256, "GET /healthz HTTP/1.1\r\nHost: leased\r\n");
    for (int i = 0; i < 101; i++)
        n += snprintf(text + n, big + 256 - (size_t)n, "X-%d: v\r\n", i);
    snprintf(text + n, big + 256 - (size_t)n, "\r\n");
    expect_refusal_text(text, 400, "invalid_lease_request", "headers");
    free(text);
    /* malformed heads */
    static const struct {
        const char *text, *field;
        int library; /* the library answers this status itself (docs/contract.md) */
    } bad[] = {
        {"GET /healthz HTTP/1.2\r\nHost: leased\r\n\r\n", "request", 0},
        {"GET /healthz HTTP/2.0\r\nHost: leased\r\n\r\n", NULL, 505},
        {"GET /healthz HTTP/1.1\r\n\r\n", "headers.host", 0},
        {"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "headers.host", 0},
        {"GET /healthz HTTP/1.1\r\nHost: leased\r\nX-A : b\r\n\r\n", "headers", 0},
        /* obs-fold: the library joins the folded line to the value */
        {"GET /healthz HTTP/1.1\r\nHost: leased\r\nX-A: b\r\n folded\r\n\r\n", NULL, 200},
        {"GET /healthz HTTP/1.1\r\nHost: leased\r\nX-A: b\rc\r\n\r\n", "headers", 0},
        {"GET http://leased/healthz HTTP/1.1\r\nHost: leased\r\n\r\n", "path", 0},
        {"GET * HTTP/1.1\r\nHost: leased\r\n\r\n", "path", 0},
        {"G@T /healthz HTTP/1.1\r\nHost: leased\r\n\r\n", "method", 0},
        {"GET /healthz HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
         "headers.transfer-encoding", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (bad[i].library == 200)
            expect_served(bad[i].text);
        else if (bad[i].library)
            expect_library_refusal(bad[i].text, strlen(bad[i].text), bad[i].library);
        else
            expect_refusal_text(bad[i].text, 400, "invalid_lease_request", bad[i].field);
    }
    /* bare LF line ends: the library reads them as line ends (one
     * reading, the library's, documented in docs/contract.md); the empty
     * lines after the request are skipped */
    expect_served("GET /healthz HTTP/1.1\nHost: leased\n\n\r\n\r\n");
    /* a NUL in a header value: the library ends the value there */
    static const char nul[] = "GET /healthz HTTP/1.1\r\nHost: leased\r\nX-A: a\0b\r\n\r\n";
    expect_served_bytes(nul, sizeof nul - 1);
    /* a malformed chunked body: the library's 400 */
    static const char bad_chunk[] = "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n"
                                    "Transfer-Encoding: chunked\r\n\r\nzz\r\n";
    expect_library_refusal(bad_chunk, sizeof bad_chunk - 1, 400);
    char *after = http_fx_state_digest(&fx);
    assert_string_equal(before, after);
    free(before);
    free(after);
}

/* Well-formed traffic still flows: an oversized body is read, refused and
 * the connection kept; chunked bodies, pipelining and 100-continue work. */
static void test_wellformed_still_served(void **state)
{
    (void)state;
    raw_conn_t *c = raw_connect(port, NULL);
    assert_non_null(c);
    size_t big = 70000;
    char *text = malloc(big + 256);
    int n = snprintf(
        text, big + 256,
        "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\nContent-Length: %zu\r\n\r\n", big);
    memset(text + n, ' ', big);
    assert_true(raw_send_bytes(c, text, (size_t)n + big));
    free(text);
    raw_resp_t *r = raw_read(c, 10000);
    check_raw(r, 400, "invalid_lease_request", "body");
    raw_resp_free(r);
    assert_true(raw_send(c, "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n"));
    r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    raw_resp_free(r);

    /* chunked acquire, then two pipelined requests answered in order */
    char *body = acquire_body("chunked-1", "t-chunked");
    char *req = NULL;
    assert_true(asprintf(&req,
                         "POST /v1/leases/acquire HTTP/1.1\r\nHost: leased\r\n"
                         "Authorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "%zx;ext=1\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n"
                         "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n"
                         "GET /readyz HTTP/1.1\r\nHost: leased\r\n\r\n",
                         worker, strlen(body), body) > 0);
    assert_true(raw_send(c, req));
    free(req);
    free(body);
    r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    assert_string_equal(raw_str(r, "code"), "lease_acquired");
    raw_resp_free(r);
    r = raw_read(c, 10000);
    assert_non_null(r);
    assert_string_equal(raw_str(r, "status"), "ok");
    raw_resp_free(r);
    r = raw_read(c, 10000);
    assert_non_null(r);
    assert_string_equal(raw_str(r, "status"), "ready");
    raw_resp_free(r);

    /* Expect: 100-continue */
    body = inspect_body("t-chunked");
    assert_true(asprintf(&req,
                         "POST /v1/leases/inspect HTTP/1.1\r\nHost: leased\r\n"
                         "Authorization: Bearer %s\r\nExpect: 100-continue\r\n"
                         "Content-Length: %zu\r\n\r\n",
                         worker, strlen(body)) > 0);
    assert_true(raw_send(c, req));
    free(req);
    r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 100);
    raw_resp_free(r);
    assert_true(raw_send(c, body));
    free(body);
    r = raw_read(c, 10000);
    assert_non_null(r);
    assert_int_equal(r->status, 200);
    assert_string_equal(raw_str(r, "code"), "lease_inspected");
    raw_resp_free(r);

    /* Connection: close: exactly one reply, then the close */
    for (int i = 0; i < 20; i++) {
        assert_true(raw_send(c, i < 19 ? "GET /healthz HTTP/1.1\r\nHost: leased\r\n\r\n"
                                       : "GET /healthz HTTP/1.1\r\nHost: leased\r\n"
                                         "Connection: close\r\n\r\n"));
        r = raw_read(c, 10000);
        assert_non_null(r);
        assert_int_equal(r->status, 200);
        raw_resp_free(r);
    }
    assert_null(raw_read(c, 10000));
    assert_true(raw_closed(c, 10000));
    raw_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smuggling_refused),       cmocka_unit_test(test_paths_canonical),
        cmocka_unit_test(test_long_query_string),       cmocka_unit_test(test_errors_in_envelope),
        cmocka_unit_test(test_wellformed_still_served),
    };
    return http_fx_run_group("http_framing", tests, sizeof tests / sizeof tests[0], setup,
                             http_fx_teardown, NULL);
}
