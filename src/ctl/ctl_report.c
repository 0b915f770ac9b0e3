/*
 * ctl_report.c - the words for an outcome without an answer from leased
 * (see ctl_report.h). The client library keeps libcurl's description of
 * the last failed attempt (it names the host and port and, where there is
 * one, the system error); this adds the URL the user configured.
 */
#include "ctl_report.h"

#include <stdio.h>

bool ctl_report_unreachable(const char *url, const lease_client_call_t *call, char *out,
                            size_t outsz)
{
    if (outsz)
        out[0] = '\0';
    if (!call || call->http_status != 0 || !call->transport_error[0])
        return false;
    snprintf(out, outsz, "leased at %s could not be reached: %s", url ? url : "(no URL)",
             call->transport_error);
    return true;
}
