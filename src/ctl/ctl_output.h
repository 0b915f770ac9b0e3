/*
 * ctl_output.h - how leasectl shows a lease answer: JSON (the service's
 * answer, one line: what scripts read) or a table for people.
 *
 * `--output json|table` chooses; without it leasectl prints a table when
 * stdout is a terminal and JSON otherwise, so a pipe or a file still gets
 * JSON (scripts keep working) while a person at a shell gets a table.
 */
#ifndef LEASE_CTL_OUTPUT_H
#define LEASE_CTL_OUTPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

typedef enum ctl_output {
    CTL_OUTPUT_DEFAULT = 0, /* not chosen: table on a terminal, else JSON */
    CTL_OUTPUT_JSON,
    CTL_OUTPUT_TABLE,
} ctl_output_t;

/* "json" or "table"; false on anything else. */
bool ctl_output_parse(const char *arg, ctl_output_t *out);
/* The mode to print in: out itself when chosen, else by isatty(stdout). */
ctl_output_t ctl_output_resolve(ctl_output_t out);

/* The help line of the option. */
#define CTL_HELP_OUTPUT                                                                            \
    "  --output json|table      JSON (one line, the service's answer) or a table for\n"            \
    "                           people (default: table on a terminal, else JSON)\n"

/*
 * Writes answer (a successful answer of the service, parsed) as a table:
 * for "leases" (list) one row per lease and the next page's token; for
 * "lease" (inspect, watch) one line per field. now_ms is the wall clock, for
 * "in 29s" / "3s ago" beside the times. Returns false when answer holds
 * neither (the caller prints JSON then).
 */
bool ctl_output_table(FILE *out, const json_t *answer, long long now_ms);

#endif
