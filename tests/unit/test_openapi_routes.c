/*
 * test_openapi_routes.c - docs/openapi.yaml and the server's route table
 * name the same routes: every (method, path) of the table is an operation
 * of the document, and every operation of the document is a route.
 * No database; reads the document as text (paths at two spaces of
 * indentation, methods at four, as the file is written).
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/routes.h"

#define MAX_OPS 64

typedef struct op {
    char method[16];
    char path[128];
} op_t;

static size_t read_operations(op_t *ops)
{
    FILE *f = fopen(LEASE_TEST_SOURCE_DIR "/docs/openapi.yaml", "r");
    assert_non_null(f);
    char line[1024];
    bool in_paths = false, saw_version = false;
    char path[128] = "";
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strcmp(line, "openapi: 3.1.0") == 0)
            saw_version = true;
        if (line[0] && !isspace((unsigned char)line[0])) {
            in_paths = strcmp(line, "paths:") == 0;
            continue;
        }
        if (!in_paths)
            continue;
        if (strncmp(line, "  /", 3) == 0) {
            size_t len = strlen(line);
            assert_true(line[len - 1] == ':');
            snprintf(path, sizeof path, "%.*s", (int)(len - 3), line + 2);
        } else if (strncmp(line, "    ", 4) == 0 && line[4] != ' ') {
            static const char *const methods[] = {"get",  "put",     "post",  "delete", "patch",
                                                  "head", "options", "trace", NULL};
            for (const char *const *m = methods; *m; m++) {
                size_t ml = strlen(*m);
                if (strncmp(line + 4, *m, ml) == 0 && line[4 + ml] == ':') {
                    assert_true(path[0] != '\0');
                    assert_true(n < MAX_OPS);
                    snprintf(ops[n].method, sizeof ops[n].method, "%s", *m);
                    snprintf(ops[n].path, sizeof ops[n].path, "%s", path);
                    n++;
                }
            }
        }
    }
    fclose(f);
    assert_true(saw_version);
    return n;
}

static void lower(char *out, size_t outsz, const char *in)
{
    size_t i = 0;
    for (; in[i] && i + 1 < outsz; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
    out[i] = '\0';
}

static void test_same_routes(void **state)
{
    (void)state;
    op_t ops[MAX_OPS];
    size_t n_ops = read_operations(ops);
    size_t n_routes;
    const leased_route_t *routes = leased_routes_table(&n_routes);
    for (size_t i = 0; i < n_routes; i++) {
        char m[16];
        lower(m, sizeof m, routes[i].method);
        size_t found = 0;
        for (size_t k = 0; k < n_ops; k++)
            if (strcmp(ops[k].method, m) == 0 && strcmp(ops[k].path, routes[i].path) == 0)
                found++;
        if (found != 1)
            fprintf(stderr, "route %s %s appears %zu times in docs/openapi.yaml\n",
                    routes[i].method, routes[i].path, found);
        assert_int_equal(found, 1);
    }
    for (size_t k = 0; k < n_ops; k++) {
        bool found = false;
        for (size_t i = 0; i < n_routes; i++) {
            char m[16];
            lower(m, sizeof m, routes[i].method);
            if (strcmp(ops[k].method, m) == 0 && strcmp(ops[k].path, routes[i].path) == 0)
                found = true;
        }
        if (!found)
            fprintf(stderr, "docs/openapi.yaml has %s %s, which no route serves\n", ops[k].method,
                    ops[k].path);
        assert_true(found);
    }
    assert_int_equal(n_ops, n_routes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_routes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
