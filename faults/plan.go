package faults

import hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"

// ShortPlan applies plan-short to the deliveries a publish plans: every
// PlanShort-th of them, counted over the node's publishes, is left out,
// and nothing says so. It is the control API's plan seam
// (control.Config.PlanFault); without plan-short, and on a nil Set, it
// returns planned as it is.
func (s *Set) ShortPlan(planned []*hooklinev1.PlannedDelivery) []*hooklinev1.PlannedDelivery {
	if s == nil || s.PlanShort == 0 || len(planned) == 0 {
		return planned
	}
	kept := make([]*hooklinev1.PlannedDelivery, 0, len(planned))
	for _, d := range planned {
		if s.count(&s.routed)%s.PlanShort != 0 {
			kept = append(kept, d)
		}
	}
	return kept
}
