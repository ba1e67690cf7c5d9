/*
 * Broken: direct access not enforced.  The driver stores every config as if
 * hasDirectAccess were true, so a uid the framework denied direct access can
 * still submit.  vts must fail NpuSchedulingAidl.RunInferenceFailsWithoutDirectAccess.
 */
#include "broken.h"

BROKEN_CONFIGS(c->has_direct_access = true)
