/*
 * state_file.c - see state_file.h.
 */
#include "state_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void state_file_read(const char *path, const char *setup_test,
                     void (*each)(const char *key, const char *value, void *arg), void *arg)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "no fixture state at %s (run through ctest so %s runs first)\n", path,
                setup_test);
        exit(1);
    }
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *val = eq + 1;
        if (*val == '\'')
            val++;
        val[strcspn(val, "'\n")] = '\0';
        each(line, val, arg);
    }
    fclose(f);
}
