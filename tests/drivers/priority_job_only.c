/*
 * Broken: the effective priority is the job's priority alone; the uid's
 * appPriority (and its band) are ignored.  vts must fail
 * NpuSchedulingAidl.EffectivePriorityFormula.
 */
#include "broken.h"

BROKEN_PRIORITY(job)
