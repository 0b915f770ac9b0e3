/*
 * state_file.h - the KEY='value' lines a fixture script writes for the
 * test programs (pgcluster's pgtest.state, rabbitcluster's rabbit.state).
 */
#ifndef LEASE_TEST_STATE_FILE_H
#define LEASE_TEST_STATE_FILE_H

/* Calls each(key, value, arg) for every KEY='value' line of path (quotes
 * and the newline removed). When path cannot be read, the test process
 * exits naming the ctest fixture (setup_test) that writes it. */
void state_file_read(const char *path, const char *setup_test,
                     void (*each)(const char *key, const char *value, void *arg), void *arg);

#endif
