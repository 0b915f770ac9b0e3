/*
 * relay_routes.c - parsing LEASE_RELAY_ROUTES and looking topics up.
 *
 * Names are checked here, once, at start: a route that could only fail at
 * publication time (an exchange name RabbitMQ refuses, a database name
 * CouchDB refuses) stops leased-relay before it claims anything.
 */
#include "relay_routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct route {
    char *pattern; /* without the trailing '*' when prefix */
    bool prefix;
    relay_dest_kind_t kind;
    char *target;
    char *routing_key; /* NULL: the topic */
} route_t;

struct relay_routes {
    route_t *items;
    size_t count;
    char *default_exchange;
    const char **exchanges; /* distinct, default first */
    size_t n_exchanges;
    bool couchdb;
};

static bool chars_in(const char *s, const char *extra)
{
    for (const char *c = s; *c; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || strchr(extra, *c) != NULL;
        if (!ok)
            return false;
    }
    return true;
}

bool relay_routes_topic_valid(const char *s, bool allow_star)
{
    size_t n = strlen(s);
    if (allow_star && n > 0 && s[n - 1] == '*') {
        if (n == 1)
            return true;
        char body[RELAY_TOPIC_MAX + 1];
        if (n - 1 > RELAY_TOPIC_MAX)
            return false;
        memcpy(body, s, n - 1);
        body[n - 1] = '\0';
        return chars_in(body, "._:/-");
    }
    return n >= 1 && n <= RELAY_TOPIC_MAX && chars_in(s, "._:/-");
}

static bool exchange_valid(const char *s)
{
    /* "" is RabbitMQ's default exchange */
    return strlen(s) <= RELAY_EXCHANGE_MAX && chars_in(s, "._:-") && strncmp(s, "amq.", 4) != 0;
}

static bool routing_key_valid(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= RELAY_ROUTING_KEY_MAX && chars_in(s, "._:/-");
}

/* CouchDB: ^[a-z][a-z0-9_$()+/-]*$ */
static bool couchdb_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > RELAY_COUCHDB_NAME_MAX || !(s[0] >= 'a' && s[0] <= 'z'))
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || strchr("_$()+/-", *c)))
            return false;
    return true;
}

void relay_routes_free(relay_routes_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->count; i++) {
        free(r->items[i].pattern);
        free(r->items[i].target);
        free(r->items[i].routing_key);
    }
    free(r->items);
    free(r->default_exchange);
    free(r->exchanges);
    free(r);
}

static bool add_exchange(relay_routes_t *r, const char *name)
{
    for (size_t i = 0; i < r->n_exchanges; i++)
        if (strcmp(r->exchanges[i], name) == 0)
            return true;
    const char **grown = realloc(r->exchanges, (r->n_exchanges + 1) * sizeof *grown);
    if (!grown)
        return false;
    r->exchanges = grown;
    r->exchanges[r->n_exchanges++] = name;
    return true;
}

/* One "PATTERN=DESTINATION" entry (entry is modified). */
static bool parse_entry(relay_routes_t *r, char *entry, char *err, size_t errsz)
{
    char *eq = strchr(entry, '=');
    if (!eq) {
        snprintf(err, errsz,
                 "route '%.80s' is not PATTERN=amqp:EXCHANGE[/KEY] or "
                 "PATTERN=couchdb:DATABASE",
                 entry);
        return false;
    }
    *eq = '\0';
    const char *pattern = entry, *dest = eq + 1;
    if (!relay_routes_topic_valid(pattern, true)) {
        snprintf(err, errsz,
                 "route pattern '%.80s' is not a topic of [A-Za-z0-9._:/-] "
                 "(optionally ending in *)",
                 pattern);
        return false;
    }
    route_t rt = {0};
    size_t plen = strlen(pattern);
    rt.prefix = pattern[plen - 1] == '*';
    rt.pattern = strndup(pattern, rt.prefix ? plen - 1 : plen);
    if (strncmp(dest, "amqp:", 5) == 0) {
        rt.kind = RELAY_DEST_AMQP;
        const char *name = dest + 5;
        const char *slash = strchr(name, '/');
        rt.target = slash ? strndup(name, (size_t)(slash - name)) : strdup(name);
        if (slash)
            rt.routing_key = strdup(slash + 1);
        if (rt.target && !exchange_valid(rt.target)) {
            snprintf(err, errsz,
                     "route '%.80s': exchange '%.80s' is not 0..127 of "
                     "[A-Za-z0-9._:-] (and not amq.*)",
                     pattern, rt.target);
            goto fail;
        }
        if (slash && rt.routing_key && !routing_key_valid(rt.routing_key)) {
            snprintf(err, errsz,
                     "route '%.80s': routing key '%.80s' is not 1..255 of "
                     "[A-Za-z0-9._:/-]",
                     pattern, rt.routing_key);
            goto fail;
        }
    } else if (strncmp(dest, "couchdb:", 8) == 0) {
        rt.kind = RELAY_DEST_COUCHDB;
        rt.target = strdup(dest + 8);
        if (rt.target && !couchdb_name_valid(rt.target)) {
            snprintf(err, errsz,
                     "route '%.80s': '%.80s' is not a CouchDB database name "
                     "(^[a-z][a-z0-9_$()+/-]*$)",
                     pattern, rt.target);
            goto fail;
        }
        r->couchdb = true;
    } else {
        snprintf(err, errsz,
                 "route '%.80s': destination '%.80s' is neither amqp:EXCHANGE[/KEY] "
                 "nor couchdb:DATABASE",
                 pattern, dest);
        goto fail;
    }
    if (!rt.pattern || !rt.target ||
        (strchr(dest, '/') && rt.kind == RELAY_DEST_AMQP && !rt.routing_key)) {
        snprintf(err, errsz, "out of memory");
        goto fail;
    }
    route_t *grown = realloc(r->items, (r->count + 1) * sizeof *grown);
    if (!grown) {
        snprintf(err, errsz, "out of memory");
        goto fail;
    }
    r->items = grown;
    r->items[r->count++] = rt;
    return true;
fail:
    free(rt.pattern);
    free(rt.target);
    free(rt.routing_key);
    return false;
}

relay_routes_t *relay_routes_parse(const char *spec, const char *default_exchange, char *err,
                                   size_t errsz)
{
    relay_routes_t *r = calloc(1, sizeof *r);
    char *copy = spec ? strdup(spec) : strdup("");
    if (!r || !copy) {
        snprintf(err, errsz, "out of memory");
        goto fail;
    }
    if (!default_exchange || !exchange_valid(default_exchange)) {
        snprintf(err, errsz, "exchange '%.80s' is not 0..127 of [A-Za-z0-9._:-] (and not amq.*)",
                 default_exchange ? default_exchange : "");
        goto fail;
    }
    r->default_exchange = strdup(default_exchange);
    if (!r->default_exchange || !add_exchange(r, r->default_exchange)) {
        snprintf(err, errsz, "out of memory");
        goto fail;
    }
    char *save = NULL;
    for (char *entry = strtok_r(copy, ",", &save); entry; entry = strtok_r(NULL, ",", &save)) {
        while (*entry == ' ')
            entry++;
        size_t n = strlen(entry);
        while (n > 0 && entry[n - 1] == ' ')
            entry[--n] = '\0';
        if (!*entry)
            continue;
        if (!parse_entry(r, entry, err, errsz))
            goto fail;
    }
    for (size_t i = 0; i < r->count; i++)
        if (r->items[i].kind == RELAY_DEST_AMQP && !add_exchange(r, r->items[i].target)) {
            snprintf(err, errsz, "out of memory");
            goto fail;
        }
    free(copy);
    return r;
fail:
    free(copy);
    relay_routes_free(r);
    return NULL;
}

relay_destination_t relay_routes_lookup(const relay_routes_t *r, const char *topic)
{
    for (size_t i = 0; i < r->count; i++) {
        const route_t *rt = &r->items[i];
        bool match = rt->prefix ? strncmp(topic, rt->pattern, strlen(rt->pattern)) == 0
                                : strcmp(topic, rt->pattern) == 0;
        if (match)
            return (relay_destination_t){rt->kind, rt->target, rt->routing_key};
    }
    return (relay_destination_t){RELAY_DEST_AMQP, r->default_exchange, NULL};
}

const char *const *relay_routes_exchanges(const relay_routes_t *r, size_t *n)
{
    *n = r->n_exchanges;
    return r->exchanges;
}

bool relay_routes_use_couchdb(const relay_routes_t *r)
{
    return r->couchdb;
}
