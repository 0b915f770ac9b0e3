/*
 * process_metrics.c - process_* metrics from /proc/self, and build_info.
 *
 * Linux only, like the rest of the project. CPU time comes from getrusage
 * (exact, no tick rounding); the start time from /proc/self/stat's
 * starttime (clock ticks after boot) plus /proc/stat's btime.
 */
#include "lease/process_metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lease/schema.h"

static double cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* statm: size and resident, in pages. */
static int memory_bytes(double *virt, double *rss)
{
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f)
        return -1;
    unsigned long long size, resident;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    if (n != 2)
        return -1;
    double page = (double)sysconf(_SC_PAGESIZE);
    *virt = (double)size * page;
    *rss = (double)resident * page;
    return 0;
}

static double open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return (double)(n - 1); /* not the descriptor opendir itself holds */
}

static double max_fds(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return -1;
    return (double)rl.rlim_cur;
}

static double boot_time(void)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return -1;
    char line[256];
    double btime = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "btime ", 6) == 0) {
            btime = strtod(line + 6, NULL);
            break;
        }
    fclose(f);
    return btime;
}

static double start_time(void)
{
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f)
        return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* fields after the command name, which may hold spaces and ')' */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    p++;
    /* starttime is field 22; the text after ')' starts at field 3 */
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    double btime = boot_time();
    long hz = sysconf(_SC_CLK_TCK);
    if (!p || btime < 0 || hz <= 0)
        return -1;
    return btime + strtod(p + 1, NULL) / (double)hz;
}

void lease_prom_process(lease_prom_text_t *t)
{
    double v = cpu_seconds();
    if (v >= 0) {
        lease_prom_emit(t, "# HELP process_cpu_seconds_total Total user and system CPU time "
                           "spent in seconds.\n# TYPE process_cpu_seconds_total counter\n"
                           "process_cpu_seconds_total %.6f\n",
                        v);
    }
    double virt, rss;
    if (memory_bytes(&virt, &rss) == 0) {
        lease_prom_gauge(t, "process_resident_memory_bytes", "Resident memory size in bytes.", rss);
        lease_prom_gauge(t, "process_virtual_memory_bytes", "Virtual memory size in bytes.", virt);
    }
    if ((v = open_fds()) >= 0)
        lease_prom_gauge(t, "process_open_fds", "Number of open file descriptors.", v);
    if ((v = max_fds()) >= 0)
        lease_prom_gauge(t, "process_max_fds", "Maximum number of open file descriptors.", v);
    if ((v = start_time()) >= 0)
        lease_prom_emit(t, "# HELP process_start_time_seconds Start time of the process since "
                           "unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"
                           "process_start_time_seconds %.2f\n",
                        v);
}

void lease_prom_build_info(lease_prom_text_t *t, const char *name, const char *version)
{
    lease_prom_emit(t,
                    "# HELP %s The version of this build and the schema version it expects.\n"
                    "# TYPE %s gauge\n%s{version=\"%s\",schema=\"%d\"} 1\n",
                    name, name, name, version, LEASE_SCHEMA_VERSION);
}
