/* The error model: codes, their names and the error object.
 *
 * A function that fails returns a negative code: -errno for a failed system
 * call, or minus one of the domain codes below, gpuprov's own kinds of
 * failure, which lie above the errno range so the two never meet. A
 * function that takes a struct gp_err also leaves a message there (what,
 * where, what next) with the code; it returns -1 (gp_fail's value) or,
 * where its header says so, the negative code itself. No code is an exit
 * status: the CLI turns a failure into one in one place, gp_exit_code
 * (exitcodes.h). docs/architecture.md, "Errors", has the rules per layer. */
#pragma once

/* errno values are 1..4095 (the kernel's MAX_ERRNO). */
#define GP_ERRNO_MAX 4095

/* Each domain has a range of GP_E_RANGE_SIZE codes of its own. */
#define GP_E_RANGE_SIZE 64
#define GP_E_GENERAL_BASE 4096
#define GP_E_FETCH_BASE (GP_E_GENERAL_BASE + GP_E_RANGE_SIZE)

enum gp_error_code {
	/* gpuprov's own, for any layer */
	GP_EFAILED = GP_E_GENERAL_BASE, /* a step failed: the message says which, why */
	GP_EINPUT, /* invalid input: a profile, the journal, a JSON document */
	GP_EBLOCKED, /* a precondition is not met (a missing pin, a refused stage) */
	GP_EOPTION, /* a setting given to gpuprov cannot be used (a CA file, a mirror) */
	GP_ELOCKED, /* another gpuprov run holds the lock */
	GP_E_GENERAL_END, /* one past the last */

	/* the download layer (fetch.h); local I/O failures there are -errno */
	GP_FETCH_EINVAL =
	    GP_E_FETCH_BASE, /* bad artifact: no or malformed sha256, bad URL */
	GP_FETCH_EREFUSED, /* policy: http without allow_http, a redirect to http, ... */
	GP_FETCH_EOFFLINE, /* offline and not in the cache */
	GP_FETCH_ETLS, /* certificate or TLS handshake failure (not retried) */
	GP_FETCH_EHTTP, /* an HTTP error status (see http_code) */
	GP_FETCH_ENETWORK, /* connect/DNS/timeout/partial, after every attempt */
	GP_FETCH_ECHECKSUM, /* sha256 mismatch, twice */
	GP_FETCH_ESIZE, /* more bytes than the size given, twice */
	GP_FETCH_EBUSY, /* another process is downloading the same file */
	GP_FETCH_ECANCELED, /* the progress callback asked to stop */
	GP_E_FETCH_END, /* one past the last */
};

/* What a code means, for an errno or a domain code, of either sign
 * ("No such file or directory", "invalid input"). Never NULL: a code
 * nothing defines is "unknown error". Thread-safe. */
const char *gp_strerror(int code);

/* The longest message an error object holds, its NUL included; a longer
 * one is cut at a UTF-8 boundary and ends GP_ERR_TRUNCATED. */
#define GP_ERR_MSG_MAX (64 * 1024)
#define GP_ERR_TRUNCATED "\xe2\x80\xa6(truncated)" /* "…(truncated)" */

/* A user-facing error: what failed, as a code and a message that already
 * says what, where and what next. Zero-initialise it; it owns nothing
 * unless all is set. */
struct gp_err {
	int code; /* the latest failure's code (positive errno or domain code) */
	/* The latest failure's message: gp_fail replaces what was there, so a
	 * caller can restate a lower layer's error in its own words (it may
	 * pass err->msg itself as an argument). */
	char msg[GP_ERR_MSG_MAX];
	/* Set by a caller that wants every problem (profiles lint): each
	 * error is also appended here, code and msg keep the first one, and
	 * validation goes on where it can. The caller frees it with
	 * gp_strv_free. */
	char **all;
};

/* Records a failure in err (when non-NULL): code is an errno or a domain
 * code, of either sign, or 0 for one that has no kind of its own (the CLI
 * treats it as GP_EFAILED). Returns -1, so callers can
 * `return gp_fail(...)`. */
int gp_fail(struct gp_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
