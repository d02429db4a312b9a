/* Helpers for the cmocka unit tests: throwaway directories and files. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpuprov/root.h"
#include "gpuprov/util.h"

/* mkdtemp under $TMPDIR; the caller removes it with tu_rmrf. */
static inline char *tu_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char tmpl[PATH_MAX];
	snprintf(tmpl, sizeof tmpl, "%s/gpuprov-unit-XXXXXX", base ? base : "/tmp");
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	return strdup(d);
}

/* Writes text to dir/rel, creating parent directories. */
static inline void tu_write(const char *dir, const char *rel, const char *text)
{
	char path[PATH_MAX * 2];
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	for (char *p = path + strlen(dir) + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(path, 0755) < 0)
				assert_int_equal(errno, EEXIST);
			*p = '/';
		}
	}
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* The whole file at path (a file of the source tree), its length in *len
 * when len is not NULL; a test failure when it cannot be opened. */
static inline char *tu_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	struct gp_buf b = { 0 };
	char chunk[4096];
	for (size_t n; (n = fread(chunk, 1, sizeof chunk, f)) > 0;)
		gp_buf_append(&b, chunk, n);
	fclose(f);
	if (len)
		*len = b.len;
	return gp_buf_steal(&b);
}

static inline void tu_mkdir(const char *dir, const char *rel)
{
	char path[PATH_MAX * 2];
	snprintf(path, sizeof path, "%s/%s/.keep", dir, rel);
	tu_write(dir, path + strlen(dir) + 1, "");
	unlink(path);
}

static inline void tu_rmrf(const char *dir)
{
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/rm", "rm", "-rf", "--", dir, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
}

/* A fixture for tests on a throwaway root: dir is created by setup, r is
 * opened by the test when it needs it, both go at teardown. */
struct tu_root_fixture {
	char *dir;
	struct gp_root r;
};

static inline int tu_root_setup(void **state)
{
	struct tu_root_fixture *fx = calloc(1, sizeof *fx);
	assert_non_null(fx);
	fx->dir = tu_tmpdir();
	*state = fx;
	return 0;
}

static inline int tu_root_teardown(void **state)
{
	struct tu_root_fixture *fx = *state;
	if (fx->r.dir)
		gp_root_close(&fx->r);
	tu_rmrf(fx->dir);
	free(fx->dir);
	free(fx);
	return 0;
}
