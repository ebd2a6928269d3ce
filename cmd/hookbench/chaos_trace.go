package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The chaos run's report: its figures, each check's verdict and, for a
// broken promise, the seed and the smallest trace that shows it: the
// actions that touched the delivery's endpoint (or tenant, or every
// endpoint: the nodes, the database) around it, and what the endpoint's
// consumer got of that delivery (of that key, for the checks of a key).

// traceShown bounds the violations of one check printed with a trace;
// traceLines the lines of one trace.
const (
	traceShown = 3
	traceLines = 40
)

// report judges the run, prints its report and JSON line, and returns
// ErrFailed (naming the seed and the checks broken) when a check failed.
func (c *chaosRun) report(w io.Writer, end chaosEnd) error {
	f := c.facts(end)
	violations := map[string][]chaosViolation{}
	for _, ch := range chaosChecks {
		vs := ch.run(f)
		slices.SortStableFunc(vs, func(a, b chaosViolation) int { return a.at.Compare(b.at) })
		violations[ch.name] = vs
	}
	sum := f.summary(c.sched, violations)
	f.print(w, c.sched, sum, violations)
	line, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%s\n", line); err != nil {
		return err
	}
	return errChaos(sum)
}

// print writes the report for people.
func (f *chaosFacts) print(w io.Writer, s chaosSchedule, sum chaosSummary, violations map[string][]chaosViolation) {
	mode := "one node on the embedded log, --retention " + f.retention.String()
	if s.Nodes > 1 {
		mode = fmt.Sprintf("%d nodes on PostgreSQL", s.Nodes)
	}
	fmt.Fprintf(w, "chaos: seed %d, %v, %s; schedule %s\n", s.Seed, s.Duration, mode, sum.Schedule)
	var acts []string
	for _, k := range slices.Sorted(maps.Keys(sum.Actions)) {
		a := fmt.Sprintf("%s %d", k, sum.Actions[k])
		if n := sum.Refused[k]; n > 0 {
			a += fmt.Sprintf(" (%d refused or unanswered)", n)
		}
		acts = append(acts, a)
	}
	fmt.Fprintf(w, "actions: %s\n", strings.Join(acts, ", "))
	fmt.Fprintf(w, "events %d, deliveries %d: delivered %d, erased %d, permanent answers %d, past retention %d; messages pushed %d, pulled %d, duplicates %d; drained in %.1f s\n",
		sum.Events, sum.Deliveries, sum.Delivered, sum.Erased, sum.Permanent, sum.Retained, sum.Pushed, sum.Pulled, sum.Duplicates, sum.DrainS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tbroken\tpromise")
	for _, ch := range chaosChecks {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", ch.name, len(violations[ch.name]), ch.promise)
	}
	tw.Flush()
	for _, n := range f.end.notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, p := range f.probes {
		if p.control && !p.found {
			fmt.Fprintf(w, "note: %s of %s before its erasure did not show its marker (%s): the reads after it prove less\n", p.what, p.event, cmp.Or(p.err, "no error"))
		}
	}
	for _, ch := range chaosChecks {
		vs := violations[ch.name]
		if len(vs) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nBROKEN %s (%d): %s\n", ch.name, len(vs), ch.promise)
		for _, v := range vs[:min(traceShown, len(vs))] {
			fmt.Fprintf(w, "  seed %d: %s\n", s.Seed, v.String())
			for _, l := range f.trace(s, v) {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
		if len(vs) > traceShown {
			fmt.Fprintf(w, "  … and %d more\n", len(vs)-traceShown)
		}
	}
	fmt.Fprintf(w, "\nverdict: pass=%v; replay with: %s\n", sum.Pass, sum.Replay)
}

// String says what a violation is about and what broke.
func (v chaosViolation) String() string {
	var about []string
	for _, p := range []struct{ k, v string }{{"tenant", v.tenant}, {"endpoint", v.endpoint}, {"key", v.key}, {"event", v.event}, {"delivery", v.delivery}} {
		if p.v != "" {
			about = append(about, p.k+" "+p.v)
		}
	}
	return strings.Join(append(about, v.detail), ": ")
}

// traceLine is one line of a trace and when it happened.
type traceLine struct {
	at   time.Time
	text string
}

// trace returns the lines that show a violation, in time order: the
// schedule's actions that touched its endpoint around it (a publish only
// if it published the event, or an event of the key), and the messages
// of its delivery (of its key, for the checks of a key).
func (f *chaosFacts) trace(s chaosSchedule, v chaosViolation) []string {
	ti, ei := f.indexOf(v.tenant, v.endpoint)
	ofKey := v.key != "" && (strings.HasPrefix(v.check, "key_") || v.check == "sequence_numbering")
	var seen []chaosSeen
	for _, x := range f.seen {
		if (v.delivery != "" && x.Delivery == v.delivery) || (ofKey && x.Key == v.key && x.Endpoint == v.endpoint) {
			seen = append(seen, x)
		}
	}
	from, to := v.at, v.at
	if e := f.eventByID(v.event); e != nil && !e.sent.IsZero() {
		from = e.sent
	}
	for _, x := range seen {
		from, to = earlier(from, x.Arrived), later(to, x.Arrived)
	}
	from, to = from.Add(-10*time.Second), to.Add(2*time.Second)
	var lines []traceLine
	for _, st := range f.steps {
		a := st.Action
		relevant := false
		switch a.Kind {
		case actPublish, actRepublish:
			relevant = slices.Contains(st.Events, v.event) || (ofKey && a.Tenant == ti && f.publishedKey(st, v.tenant, v.key, v.endpoint))
		case actErase:
			relevant = a.Tenant == ti
		case actReplay:
			relevant = (v.delivery != "" && st.Delivery == v.delivery) || (v.delivery == "" && a.touches(ti, ei))
		default:
			relevant = a.touches(ti, ei) && !st.Began.After(to) && !st.Ended.Before(from)
		}
		if relevant {
			lines = append(lines, traceLine{st.Began, fmt.Sprintf("%s  action %s → %s (%s)", f.rel(st.Began), a, cmp.Or(st.Err, st.Note, "ok"), st.Ended.Sub(st.Began).Round(time.Millisecond))})
		}
	}
	for _, x := range seen {
		how := "pushed to " + x.Host
		if x.Host == pullHost {
			how = "pulled"
		}
		extra := ""
		if x.Seq > 0 || x.Key != "" {
			extra = fmt.Sprintf(" key %s seq %d", x.Key, x.Seq)
		}
		if x.Secret != "" {
			extra += " " + chaosSecretHeader + " " + x.Secret
		}
		lines = append(lines, traceLine{x.Arrived, fmt.Sprintf("%s  %s %s: %s event %s%s → %d (answered %s)", f.rel(x.Arrived), x.Endpoint, how, x.Delivery, x.Event, extra, x.Status, f.rel(x.Answered))})
	}
	for _, p := range f.probes {
		if p.event == v.event && v.event != "" {
			lines = append(lines, traceLine{p.at, fmt.Sprintf("%s  read %s of %s (control %v): marker found %v %s", f.rel(p.at), p.what, p.event, p.control, p.found, p.err)})
		}
	}
	slices.SortStableFunc(lines, func(a, b traceLine) int { return a.at.Compare(b.at) })
	if len(lines) > traceLines {
		// The lines nearest the violation.
		i, _ := slices.BinarySearchFunc(lines, v.at, func(l traceLine, t time.Time) int { return l.at.Compare(t) })
		lo := max(0, min(i-traceLines*3/4, len(lines)-traceLines))
		lines = lines[lo : lo+traceLines]
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// indexOf returns the indexes of a tenant and of an endpoint of it in the
// schedule's terms (-1 when unknown).
func (f *chaosFacts) indexOf(tenant, endpoint string) (ti, ei int) {
	ti, ei = -1, -1
	if i := strings.LastIndex(tenant, "_t"); i >= 0 {
		fmt.Sscanf(tenant[i+2:], "%d", &ti)
	}
	if i := strings.LastIndex(endpoint, "_e"); i >= 0 {
		fmt.Sscanf(endpoint[i+2:], "%d", &ei)
	}
	return ti, ei
}

// publishedKey reports whether a publish published an event of a
// tenant's key to an endpoint.
func (f *chaosFacts) publishedKey(st chaosStep, tenant, key, endpoint string) bool {
	return slices.ContainsFunc(st.Events, func(id string) bool {
		e := f.byEvent[eventKey{tenant, id}]
		return e != nil && e.key == key && slices.Contains(e.endpoints, endpoint)
	})
}
