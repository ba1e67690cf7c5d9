/*
 * Broken: the effective priority is appPriority + jobPriority, never clamped to
 * the uid's [minPriority, maxPriority].  vts must fail
 * NpuSchedulingAidl.EffectivePriorityFormula.
 */
#include "broken.h"

BROKEN_PRIORITY(app + job)
