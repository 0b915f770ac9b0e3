/*
 * test_process_metrics.c - the process_* families of lease_prom_process
 * against what this process can see for itself: the descriptor limit of
 * getrlimit, a descriptor opened between two scrapes, a resident size that
 * is not zero, CPU time that grows with work, and a start time of this
 * run (not the boot, not the epoch).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include <cmocka.h>

#include "lease/process_metrics.h"
#include "lease/schema.h"

static char *scrape(void)
{
    lease_prom_text_t t;
    assert_true(lease_prom_init(&t, 64));
    lease_prom_process(&t);
    char *text = lease_prom_finish(&t);
    assert_non_null(text);
    return text;
}

/* The value of a sample without labels; fails the test when absent. */
static double sample(const char *text, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(text, key);
    if (!p)
        fail_msg("%s is missing from:\n%s", name, text);
    char family[160];
    snprintf(family, sizeof family, "# TYPE %s ", name);
    assert_non_null(strstr(text, family));
    return strtod(p + strlen(key), NULL);
}

static void test_process_families(void **state)
{
    (void)state;
    char *before = scrape();
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    volatile double spin = 0;
    for (long i = 0; i < 30000000; i++) /* about 0.05 s of CPU */
        spin += (double)i * 0.5;
    char *after = scrape();

    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(sample(after, "process_max_fds") == (double)rl.rlim_cur);
    assert_true(sample(after, "process_open_fds") == sample(before, "process_open_fds") + 1);
    assert_true(sample(after, "process_open_fds") >= 4); /* stdin, stdout, stderr, fd */
    assert_true(sample(after, "process_resident_memory_bytes") > 100000);
    assert_true(sample(after, "process_virtual_memory_bytes") >=
                sample(after, "process_resident_memory_bytes"));
    assert_true(sample(after, "process_cpu_seconds_total") > sample(before, "process_cpu_seconds_total"));

    double now = (double)time(NULL);
    double start = sample(after, "process_start_time_seconds");
    if (!(start <= now + 1 && start > now - 300))
        fail_msg("process_start_time_seconds %.2f, now %.0f: not this run", start, now);
    close(fd);
    free(before);
    free(after);
}

static void test_build_info(void **state)
{
    (void)state;
    lease_prom_text_t t;
    assert_true(lease_prom_init(&t, 64));
    lease_prom_build_info(&t, "leased_build_info", "1.2.3");
    char *text = lease_prom_finish(&t);
    char want[160];
    snprintf(want, sizeof want, "# TYPE leased_build_info gauge\nleased_build_info{version=\"1.2.3\",schema=\"%d\"} 1\n",
             LEASE_SCHEMA_VERSION);
    assert_non_null(strstr(text, want));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_process_families),
                                       cmocka_unit_test(test_build_info)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
