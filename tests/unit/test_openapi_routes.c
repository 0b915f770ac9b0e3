/*
 * test_openapi_routes.c - docs/openapi.yaml and the server's route table
 * name the same routes: every (method, path) of the table is an operation
 * of the document, and every operation of the document is a route.
 * And each operation's request body names the fields of its description
 * in lease/operations.h, with the same ones required (batch items too):
 * a field added to the descriptor and not to the document, or the other
 * way round, fails here.
 * No database; reads the document as text (paths at two spaces of
 * indentation, methods at four, schemas at four under components, as the
 * file is written).
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

#include "lease/operations.h"
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

/* ---- body fields ---------------------------------------------------- */

#define MAX_LINES 4096
#define MAX_NAMES 64

typedef struct doc {
    char *lines[MAX_LINES];
    size_t n;
} doc_t;

typedef struct names {
    char v[MAX_NAMES][64];
    size_t n;
} names_t;

static void doc_load(doc_t *d)
{
    FILE *f = fopen(LEASE_TEST_SOURCE_DIR "/docs/openapi.yaml", "r");
    assert_non_null(f);
    char line[1024];
    d->n = 0;
    while (fgets(line, sizeof line, f) && d->n < MAX_LINES) {
        line[strcspn(line, "\r\n")] = '\0';
        d->lines[d->n] = strdup(line);
        assert_non_null(d->lines[d->n]);
        d->n++;
    }
    fclose(f);
}

static void doc_free(doc_t *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->lines[i]);
}

static size_t indent(const char *l)
{
    size_t n = 0;
    while (l[n] == ' ')
        n++;
    return n;
}

/* The end of the block that starts after line i (lines indented deeper). */
static size_t block_end(const doc_t *d, size_t i)
{
    size_t base = indent(d->lines[i]);
    size_t j = i + 1;
    while (j < d->n && (d->lines[j][0] == '\0' || indent(d->lines[j]) > base))
        j++;
    return j;
}

static void add_name(names_t *s, const char *name, size_t len)
{
    assert_true(len > 0 && len < sizeof s->v[0]);
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->v[i]) == len && strncmp(s->v[i], name, len) == 0)
            return;
    assert_true(s->n < MAX_NAMES);
    snprintf(s->v[s->n++], sizeof s->v[0], "%.*s", (int)len, name);
}

static bool has_name(const names_t *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return true;
    return false;
}

static void collect(const doc_t *d, size_t from, size_t to, names_t *props, names_t *req);

/* The schema components/schemas/name, collected. */
static void collect_schema(const doc_t *d, const char *name, size_t len, names_t *props,
                           names_t *req)
{
    char head[96];
    snprintf(head, sizeof head, "    %.*s:", (int)len, name);
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->lines[i], head) == 0) {
            collect(d, i + 1, block_end(d, i), props, req);
            return;
        }
    fail_msg("docs/openapi.yaml: no schema %.*s", (int)len, name);
}

/* The properties and required names of a schema's lines [from, to),
 * following the schema references a body is made of (schema: {$ref} and
 * allOf's - $ref), not those of its properties' values. */
static void collect(const doc_t *d, size_t from, size_t to, names_t *props, names_t *req)
{
    static const char ref[] = "$ref: '#/components/schemas/";
    for (size_t i = from; i < to; i++) {
        const char *l = d->lines[i];
        const char *t = l + indent(l);
        const char *r = strstr(t, ref);
        if (r && (strncmp(t, "schema: {", 9) == 0 || strncmp(t, "- $ref", 6) == 0)) {
            const char *name = r + sizeof ref - 1;
            collect_schema(d, name, strcspn(name, "'"), props, req);
        } else if (strcmp(t, "properties:") == 0) {
            size_t keys = indent(l) + 2, end = block_end(d, i);
            for (size_t j = i + 1; j < end; j++)
                if (indent(d->lines[j]) == keys)
                    add_name(props, d->lines[j] + keys, strcspn(d->lines[j] + keys, ":"));
            i = end - 1;
        } else if (strncmp(t, "required: [", 11) == 0) {
            const char *p = t + 11;
            while (*p && *p != ']') {
                size_t n = strcspn(p, ",]");
                while (*p == ' ')
                    p++, n--;
                add_name(req, p, n);
                p += n;
                if (*p == ',')
                    p++;
            }
        }
    }
}

/* The body of method path's operation; false when it has none. */
static bool body_of(const doc_t *d, const char *method, const char *path, names_t *props,
                    names_t *req)
{
    char path_line[160], method_line[32];
    snprintf(path_line, sizeof path_line, "  %s:", path);
    snprintf(method_line, sizeof method_line, "    %s:", method);
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->lines[i], path_line) != 0)
            continue;
        size_t pend = block_end(d, i);
        for (size_t m = i + 1; m < pend; m++) {
            if (strcmp(d->lines[m], method_line) != 0)
                continue;
            size_t mend = block_end(d, m);
            for (size_t b = m + 1; b < mend; b++)
                if (strcmp(d->lines[b], "      requestBody:") == 0) {
                    collect(d, b + 1, block_end(d, b), props, req);
                    return true;
                }
            return false;
        }
    }
    fail_msg("docs/openapi.yaml: no operation %s %s", method, path);
    return false;
}

static void same_fields(const char *what, const lease_field_t *fields, const names_t *props,
                        const names_t *req)
{
    size_t accepted = 0, required = 0;
    for (const lease_field_t *f = fields; f->name; f++) {
        if (f->presence == LEASE_FIELD_DIGEST_ONLY)
            continue;
        accepted++;
        if (!has_name(props, f->name))
            fail_msg("%s: field %s of lease/operations.h is not in docs/openapi.yaml", what,
                     f->name);
        if (f->presence == LEASE_FIELD_REQUIRED) {
            required++;
            if (!has_name(req, f->name))
                fail_msg("%s: %s is required by lease/operations.h, not by docs/openapi.yaml", what,
                         f->name);
        }
    }
    if (props->n != accepted || req->n != required) {
        for (size_t i = 0; i < props->n; i++) {
            bool known = false;
            for (const lease_field_t *f = fields; f->name; f++)
                known |= f->presence != LEASE_FIELD_DIGEST_ONLY && !strcmp(f->name, props->v[i]);
            if (!known)
                fprintf(stderr, "%s: docs/openapi.yaml has %s, lease/operations.h does not\n", what,
                        props->v[i]);
        }
        fail_msg("%s: %zu fields (%zu required) in docs/openapi.yaml, %zu (%zu) in "
                 "lease/operations.h",
                 what, props->n, req->n, accepted, required);
    }
}

static void test_same_body_fields(void **state)
{
    (void)state;
    doc_t d;
    doc_load(&d);
    size_t n_routes;
    const leased_route_t *routes = leased_routes_table(&n_routes);
    for (size_t i = 0; i < n_routes; i++) {
        const lease_operation_t *op = lease_operation(routes[i].op);
        char m[16];
        lower(m, sizeof m, routes[i].method);
        names_t props = {.n = 0}, req = {.n = 0};
        bool has_body = body_of(&d, m, routes[i].path, &props, &req);
        char what[160];
        snprintf(what, sizeof what, "%s %s", routes[i].method, routes[i].path);
        if (!op->fields[0].name) {
            if (has_body)
                fail_msg("%s: a request body in docs/openapi.yaml, none in lease/operations.h",
                         what);
            continue;
        }
        assert_true(has_body);
        same_fields(what, op->fields, &props, &req);
    }
    /* a batch's items are their single operation's fields */
    static const struct {
        const char *schema;
        const lease_field_t *fields;
    } items[] = {{"RenewItem", lease_renew_item_fields},
                 {"ReleaseItem", lease_release_item_fields}};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        names_t props = {.n = 0}, req = {.n = 0};
        collect_schema(&d, items[i].schema, strlen(items[i].schema), &props, &req);
        same_fields(items[i].schema, items[i].fields, &props, &req);
    }
    doc_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_routes),
        cmocka_unit_test(test_same_body_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
