package reconcile

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Checks, as named in reports.
const (
	CheckPlans       = "plans"
	CheckDeliveries  = "deliveries"
	CheckGrains      = "grains"
	CheckAttempts    = "attempts"
	CheckProjections = "projections"
	CheckArchive     = "archive"
)

// checkOrder is the order of the checks in a report.
var checkOrder = []string{CheckPlans, CheckDeliveries, CheckGrains, CheckAttempts, CheckProjections, CheckArchive}

// Kinds of discrepancy. See the package documentation for each check.
const (
	KindPlanMissing        = "plan_missing"
	KindPlanIncomplete     = "plan_incomplete"
	KindPlanShort          = "plan_short"
	KindPlanUnsubscribed   = "plan_unsubscribed"
	KindPlanConfigVersion  = "plan_config_version"
	KindPlanOrphan         = "plan_without_event"
	KindPlanBadID          = "plan_bad_delivery_id"
	KindStranded           = "delivery_stranded"
	KindDueAfterEnd        = "due_after_end"
	KindDueUnplanned       = "due_unplanned"
	KindNotPulled          = "due_not_pulled"
	KindDeletedHolding     = "due_deleted_endpoint"
	KindAttemptNumbering   = "attempt_numbering"
	KindExpiredCount       = "expired_attempt_count"
	KindSucceededTwice     = "succeeded_twice"
	KindOutcomeUnplanned   = "outcome_without_plan"
	KindHistoryMissing     = "history_missing"
	KindHistoryStatus      = "history_status"
	KindSuccessNoAttempt   = "success_without_attempt"
	KindAttemptCount       = "attempt_count"
	KindProjectionDiverged = "projection_diverged"
	KindArchiveMissing     = "archive_missing"
)

// DefaultMaxListed bounds the discrepancies a report lists.
const DefaultMaxListed = 1000

// tally collects one part of a run: counts per tenant and per check, and
// the discrepancies, all kept (repairs need them) and at most max listed.
// It is used by one goroutine.
type tally struct {
	node    string
	max     int
	tenants map[string]*controlv1.ReconcileTenant
	checks  map[string]*controlv1.ReconcileCheck
	found   []*controlv1.Discrepancy
	digests []*controlv1.ProjectionDigest
	notes   []string
}

func newTally(node string, max int) *tally {
	if max <= 0 {
		max = DefaultMaxListed
	}
	return &tally{node: node, max: max, tenants: map[string]*controlv1.ReconcileTenant{}, checks: map[string]*controlv1.ReconcileCheck{}}
}

// tenant returns the counts of tenant id, made on first use.
func (p *tally) tenant(id string) *controlv1.ReconcileTenant {
	return entry(p.tenants, id, func() *controlv1.ReconcileTenant { return &controlv1.ReconcileTenant{TenantId: id} })
}

// check returns the counts of the check name, made on first use.
func (p *tally) check(name string) *controlv1.ReconcileCheck {
	return entry(p.checks, name, func() *controlv1.ReconcileCheck { return &controlv1.ReconcileCheck{Name: name} })
}

// entry returns m[k], first storing fresh() there when k is absent: the
// tally's maps fill as the checks meet tenants and checks.
func entry[K comparable, V any](m map[K]V, k K, fresh func() V) V {
	v, ok := m[k]
	if !ok {
		v = fresh()
		m[k] = v
	}
	return v
}

// examined counts n things examined by a check.
func (p *tally) examined(check string, n int) { p.check(check).Examined += int64(n) }

// add records a discrepancy.
func (p *tally) add(d *controlv1.Discrepancy) {
	d.Node = p.node
	p.check(d.GetCheck()).Discrepancies++
	if d.GetTenantId() != "" {
		p.tenant(d.GetTenantId()).Discrepancies++
	}
	p.found = append(p.found, d)
}

// repaired marks d repaired.
func (p *tally) repaired(d *controlv1.Discrepancy) {
	if !d.GetRepaired() {
		d.Repaired = true
		p.check(d.GetCheck()).Repaired++
	}
}

func (p *tally) notef(format string, args ...any) {
	p.notes = append(p.notes, fmt.Sprintf(format, args...))
}

// done returns the part as a message, for partitions parts.
func (p *tally) done(parts events.PartitionSet) *internalv1.ReconcilePartDone {
	out := &internalv1.ReconcilePartDone{Node: p.node, Partitions: parts.Words(), Projections: p.digests, Notes: p.notes,
		Tenants: p.sortedTenants(), Checks: p.orderedChecks()}
	out.DiscrepanciesTotal = int64(len(p.found))
	for _, d := range p.found {
		if d.GetRepaired() {
			out.Repaired++
		}
	}
	out.Discrepancies = p.found[:min(len(p.found), p.max)]
	return out
}

// sortedTenants returns the tenants' counts in tenant id order.
func (p *tally) sortedTenants() []*controlv1.ReconcileTenant {
	ts := slices.Collect(maps.Values(p.tenants))
	slices.SortFunc(ts, func(a, b *controlv1.ReconcileTenant) int { return strings.Compare(a.GetTenantId(), b.GetTenantId()) })
	return ts
}

// orderedChecks returns the checks' counts in the checks' order.
func (p *tally) orderedChecks() []*controlv1.ReconcileCheck {
	var cs []*controlv1.ReconcileCheck
	for _, name := range checkOrder {
		if c, ok := p.checks[name]; ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// Merge puts the parts of one run together into its report: counts summed
// per tenant and per check, discrepancies listed up to max (0:
// DefaultMaxListed). clean is set when no part found a discrepancy and the
// parts covered every partition; a part's error is a note and makes the
// report unclean.
func Merge(report *controlv1.ReconcileReport, max int, parts ...*internalv1.ReconcilePartDone) {
	if max <= 0 {
		max = DefaultMaxListed
	}
	sum := newTally("", max)
	for _, t := range report.GetTenants() {
		sum.tenants[t.GetTenantId()] = t
	}
	for _, c := range report.GetChecks() {
		sum.checks[c.GetName()] = c
	}
	var covered events.PartitionSet
	failed := false
	for _, p := range parts {
		if p.GetError() != "" {
			failed = true
			report.Notes = append(report.Notes, fmt.Sprintf("node %s could not reconcile: %s", p.GetNode(), p.GetError()))
			continue
		}
		covered = covered.Union(events.PartitionSetOfWords(p.GetPartitions()))
		for _, t := range p.GetTenants() {
			m := sum.tenant(t.GetTenantId())
			m.Events += t.GetEvents()
			m.Planned += t.GetPlanned()
			m.Succeeded += t.GetSucceeded()
			m.Failed += t.GetFailed()
			m.Pending += t.GetPending()
			m.Due += t.GetDue()
			m.Held += t.GetHeld()
			m.Discrepancies += t.GetDiscrepancies()
			m.Filtered += t.GetFiltered()
		}
		for _, c := range p.GetChecks() {
			m := sum.check(c.GetName())
			m.Examined += c.GetExamined()
			m.Discrepancies += c.GetDiscrepancies()
			m.Repaired += c.GetRepaired()
		}
		for _, d := range p.GetDiscrepancies() {
			if len(report.Discrepancies) < max {
				report.Discrepancies = append(report.Discrepancies, d)
			}
		}
		report.DiscrepanciesTotal += p.GetDiscrepanciesTotal()
		report.Repaired += p.GetRepaired()
		report.Projections = append(report.Projections, p.GetProjections()...)
		report.Notes = append(report.Notes, p.GetNotes()...)
	}
	report.Tenants, report.Checks = sum.sortedTenants(), sum.orderedChecks()
	all := events.AllPartitions()
	all.Remove(events.NoPartition)
	covered.Remove(events.NoPartition)
	missing := all.Minus(covered)
	if !missing.IsEmpty() {
		report.Notes = append(report.Notes, fmt.Sprintf("%d of %d partitions (%s) were reconciled by no node (a node down, or partitions catching up): run again", missing.Len(), events.Partitions, missing))
	}
	report.Clean = !failed && missing.IsEmpty() && report.GetDiscrepanciesTotal() == 0
}
