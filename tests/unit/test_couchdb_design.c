/*
 * test_couchdb_design.c - contrib/couchdb/lease_fencing.json (the design
 * document users PUT into CouchDB) carries exactly the function of
 * contrib/couchdb/validate_doc_update.js (the readable source), under
 * _design/lease_fencing; the JavaScript sticks to ES5 (CouchDB's
 * SpiderMonkey may be old): no let/const/arrow functions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIR LEASE_TEST_SOURCE_DIR "/contrib/couchdb/"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strdup(buf);
}

static void test_design_document_matches_source(void **state)
{
    (void)state;
    json_error_t jerr;
    json_t *doc = json_load_file(DIR "lease_fencing.json", JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        fail_msg("lease_fencing.json: %s (line %d)", jerr.text, jerr.line);
    assert_string_equal(json_string_value(json_object_get(doc, "_id")), "_design/lease_fencing");
    assert_string_equal(json_string_value(json_object_get(doc, "language")), "javascript");
    char *js = slurp(DIR "validate_doc_update.js");
    const char *fn = json_string_value(json_object_get(doc, "validate_doc_update"));
    assert_non_null(fn);
    if (strcmp(fn, js) != 0)
        fail_msg("lease_fencing.json's validate_doc_update differs from validate_doc_update.js: "
                 "regenerate it (docs/fencing.md says how)");
    assert_int_equal(strncmp(js, "function (newDoc, oldDoc, userCtx, secObj)", 42), 0);
    const char *es6[] = {"let ", "const ", "=>", "`", NULL};
    for (const char *const *w = es6; *w; w++)
        if (strstr(js, *w))
            fail_msg("validate_doc_update.js uses '%s' (not ES5)", *w);
    free(js);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_document_matches_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
