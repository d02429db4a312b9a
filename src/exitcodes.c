/* The mapping from a failure's code to the exit status (exitcodes.h). */
#include "gpuprov/exitcodes.h"

int gp_exit_code(const struct gp_err *err)
{
	switch (err->code) {
	case GP_EINPUT:
	case GP_FETCH_EINVAL:
	case GP_FETCH_EREFUSED:
		return GP_EXIT_INVALID_INPUT;
	case GP_EBLOCKED:
	case GP_FETCH_EOFFLINE:
		return GP_EXIT_BLOCKED;
	case GP_EOPTION:
		return GP_EXIT_USAGE;
	case GP_ELOCKED:
		return GP_EXIT_LOCKED;
	default:
		return GP_EXIT_APPLY_FAILED;
	}
}
