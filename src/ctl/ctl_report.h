/*
 * ctl_report.h - how leasectl words an outcome for people when leased gave
 * no answer at all: the URL it tried and what the connection said, so a
 * stopped or misaddressed service is not mistaken for a database problem.
 */
#ifndef LEASE_CTL_REPORT_H
#define LEASE_CTL_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "lease/client.h"

/*
 * When call got no HTTP answer and the transport said why, writes "leased
 * at URL could not be reached: WHY" into out (size outsz) and returns true.
 * Otherwise writes "" and returns false. url is the client's base URL.
 */
bool ctl_report_unreachable(const char *url, const lease_client_call_t *call, char *out,
                            size_t outsz);

/* The hint printed after an unreachable service. */
#define CTL_REPORT_UNREACHABLE_HINT "is leased running there? --url or LEASE_URL names it"

#endif
