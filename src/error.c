/* The error object and the names of error codes (error.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuprov/error.h"
#include "gpuprov/util.h"

_Static_assert(GP_E_GENERAL_BASE > GP_ERRNO_MAX, "domain codes overlap errno");
_Static_assert(GP_E_GENERAL_END <= GP_E_GENERAL_BASE + GP_E_RANGE_SIZE,
               "the general codes outgrew their range");
_Static_assert(GP_E_FETCH_END <= GP_E_FETCH_BASE + GP_E_RANGE_SIZE,
               "the download codes outgrew their range");

static const char *const general_names[] = {
	[GP_EFAILED - GP_E_GENERAL_BASE] = "operation failed",
	[GP_EINPUT - GP_E_GENERAL_BASE] = "invalid input",
	[GP_EBLOCKED - GP_E_GENERAL_BASE] = "precondition not met",
	[GP_EOPTION - GP_E_GENERAL_BASE] = "unusable setting",
	[GP_ELOCKED - GP_E_GENERAL_BASE] = "another gpuprov run holds the lock",
};

static const char *const fetch_names[] = {
	[GP_FETCH_EINVAL - GP_E_FETCH_BASE] = "invalid artifact (sha256 or URL)",
	[GP_FETCH_EREFUSED - GP_E_FETCH_BASE] = "download refused by policy",
	[GP_FETCH_EOFFLINE - GP_E_FETCH_BASE] = "not in the cache while offline",
	[GP_FETCH_ETLS - GP_E_FETCH_BASE] = "TLS failure",
	[GP_FETCH_EHTTP - GP_E_FETCH_BASE] = "HTTP error status",
	[GP_FETCH_ENETWORK - GP_E_FETCH_BASE] = "network failure",
	[GP_FETCH_ECHECKSUM - GP_E_FETCH_BASE] = "sha256 mismatch",
	[GP_FETCH_ESIZE - GP_E_FETCH_BASE] = "larger than its size",
	[GP_FETCH_EBUSY - GP_E_FETCH_BASE] = "download in progress elsewhere",
	[GP_FETCH_ECANCELED - GP_E_FETCH_BASE] = "download canceled",
};

/* Each domain's range and names (one name per code: checked below and by
 * tests/unit/test_error.c). */
static const struct {
	int base, end;
	const char *const *names;
} domains[] = {
	{ GP_E_GENERAL_BASE, GP_E_GENERAL_END, general_names },
	{ GP_E_FETCH_BASE, GP_E_FETCH_END, fetch_names },
};
_Static_assert(ARRAY_SIZE(general_names) == GP_E_GENERAL_END - GP_E_GENERAL_BASE,
               "a general code has no name");
_Static_assert(ARRAY_SIZE(fetch_names) == GP_E_FETCH_END - GP_E_FETCH_BASE,
               "a download code has no name");

const char *gp_strerror(int code)
{
	if (code < 0)
		code = -code;
	if (code > 0 && code <= GP_ERRNO_MAX) {
		const char *s = strerrordesc_np(code);
		return s ? s : "unknown error";
	}
	for (size_t i = 0; i < ARRAY_SIZE(domains); i++)
		if (code >= domains[i].base && code < domains[i].end &&
		    domains[i].names[code - domains[i].base])
			return domains[i].names[code - domains[i].base];
	return "unknown error";
}

/* msg cut to fit GP_ERR_MSG_MAX with its marker, at a UTF-8 boundary. */
static void truncate_message(char *msg)
{
	size_t len = strlen(msg);
	if (len < GP_ERR_MSG_MAX)
		return;
	size_t cut = GP_ERR_MSG_MAX - sizeof GP_ERR_TRUNCATED;
	while (cut > 0 && ((unsigned char)msg[cut] & 0xc0) == 0x80)
		cut--;
	memcpy(msg + cut, GP_ERR_TRUNCATED, sizeof GP_ERR_TRUNCATED);
}

int gp_fail(struct gp_err *err, int code, const char *fmt, ...)
{
	if (!err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	char *msg = gp_xvasprintf(fmt, ap);
	va_end(ap);
	truncate_message(msg);
	if (!err->all || !err->all[0]) {
		memcpy(err->msg, msg, strlen(msg) + 1);
		err->code = code < 0 ? -code : code;
	}
	if (err->all)
		gp_strv_push(&err->all, msg);
	free(msg);
	return -1;
}
