/*
 * Broken: config validation without the upper bounds.  The driver checks that
 * priorities are not negative and minPriority <= maxPriority, but takes an
 * appPriority above 1000 or a maxPriority above 2000 (clamping them to the
 * range), where driver.h says such a call is NPU_E_INVALID_PRIORITY and changes
 * nothing.  vts must fail NpuSchedulingAidl.PrioritiesValidatedAcrossRange.
 */
#include "broken.h"

BROKEN_CONFIGS(
    bool ordered = c->min_priority <= c->max_priority;
    c->app_priority = c->app_priority > 1000 ? 1000 : c->app_priority;
    c->max_priority = c->max_priority > 2000 ? 2000 : c->max_priority;
    if (ordered && c->min_priority > c->max_priority) c->min_priority = c->max_priority)
