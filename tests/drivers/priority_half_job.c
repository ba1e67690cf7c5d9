/*
 * Broken: the effective priority is appPriority + jobPriority / 2, clamped (a
 * driver that "weights the app more").  Orders the SPEC's cases as the formula
 * does, so only the exact probe shows it.  vts must fail
 * NpuSchedulingAidl.EffectivePriorityFormula.
 */
#include "broken.h"

BROKEN_PRIORITY(app + job / 2 < lo ? lo : app + job / 2 > hi ? hi : app + job / 2)
