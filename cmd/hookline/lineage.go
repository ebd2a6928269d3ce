package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// printAttempts prints a delivery's attempts as its lineage table, one
// row each (why it ran, what held it, what signed it, the body sent, the
// answer), then, per attempt, its trace context, the response's digest
// and what its failure decided about the next attempt.
func printAttempts(w io.Writer, attempts []*hooklinev1.Attempt) {
	if len(attempts) == 0 {
		fmt.Fprintln(w, "attempts   none yet")
		return
	}
	fmt.Fprintln(w, "attempts")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tstarted\ttrigger\tresult\ttime\twaited\tsigned\tbody sha256")
	for _, a := range attempts {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.GetNumber(), fmtTime(a.GetStartedAt()), triggerText(a),
			resultText(a), ms(time.Duration(a.GetLatencyUs())*time.Microsecond), waitsText(a.GetWaits()),
			versionsText(a.GetSecretVersions()), digestText(a.GetBodySha256(), a.GetBodyBytes(), false))
	}
	tw.Flush()
	for _, a := range attempts {
		fmt.Fprintf(w, "attempt %d\n", a.GetNumber())
		if tr := a.GetTrace(); tr != nil {
			parent := "a trace of the event's own"
			if tr.GetParentSpanId() != "" {
				parent = "child of the producer's span " + tr.GetParentSpanId()
			}
			fmt.Fprintf(w, "  traceparent  %s (%s)\n", tr.GetTraceparent(), parent)
		}
		if len(a.GetBodySha256()) > 0 {
			fmt.Fprintf(w, "  body         sha256 %s (%d bytes)\n", hex.EncodeToString(a.GetBodySha256()), a.GetBodyBytes())
		}
		if a.GetHttpStatus() != 0 {
			fmt.Fprintf(w, "  response     %d after %s (headers after %s), sha256 %s\n", a.GetHttpStatus(),
				ms(time.Duration(a.GetLatencyUs())*time.Microsecond), ms(time.Duration(a.GetHeadersUs())*time.Microsecond),
				digestText(a.GetResponseSha256(), a.GetResponseBytes(), a.GetResponseTruncated()))
		}
		if a.GetError() != "" {
			fmt.Fprintf(w, "  error        %s\n", a.GetError())
		}
		if r := a.GetRetry(); r != nil {
			fmt.Fprintf(w, "  decided      %s\n", decisionText(r))
		}
	}
}

// triggerText says why an attempt ran: scheduled, retry n, replay or
// recovery and by whom.
func triggerText(a *hooklinev1.Attempt) string {
	t := a.GetTrigger()
	switch t.GetKind() {
	case hooklinev1.AttemptTrigger_KIND_SCHEDULED:
		return "scheduled"
	case hooklinev1.AttemptTrigger_KIND_RETRY:
		return fmt.Sprintf("retry %d", t.GetRetry())
	case hooklinev1.AttemptTrigger_KIND_REPLAY:
		return "replay by " + actorText(t.GetRequestedBy())
	case hooklinev1.AttemptTrigger_KIND_RECOVERY:
		return fmt.Sprintf("recovery %s by %s", t.GetRecoveryId(), actorText(t.GetRequestedBy()))
	}
	if a.GetManual() {
		return "manual"
	}
	return "auto"
}

func actorText(a *hooklinev1.Actor) string {
	kind := strings.ToLower(strings.TrimPrefix(a.GetKind().String(), "KIND_"))
	if a.GetId() == "" {
		return kind
	}
	return kind + " " + a.GetId()
}

// resultText is the HTTP status, or the error class without one.
func resultText(a *hooklinev1.Attempt) string {
	if a.GetHttpStatus() != 0 {
		return fmt.Sprint(a.GetHttpStatus())
	}
	return strings.ToLower(strings.TrimPrefix(a.GetErrorClass().String(), "ERROR_CLASS_"))
}

// waitsText is the time an attempt waited once ready, and on what.
func waitsText(w *hooklinev1.AttemptWaits) string {
	if w == nil {
		return "-"
	}
	var parts []string
	for _, p := range []struct {
		name string
		ms   int64
	}{
		{"rate limit", w.GetRateLimitMs()}, {"tenant quota", w.GetTenantQuotaMs()}, {"breaker", w.GetBreakerMs()},
		{"in flight", w.GetInFlightMs()}, {"slot", w.GetSlotMs()},
	} {
		if p.ms > 0 {
			parts = append(parts, p.name+" "+ms(time.Duration(p.ms)*time.Millisecond))
		}
	}
	total := ms(time.Duration(w.GetTotalMs()) * time.Millisecond)
	if len(parts) == 0 {
		return total
	}
	return total + " (" + strings.Join(parts, ", ") + ")"
}

// versionsText names the secret versions that signed an attempt.
func versionsText(vs []int32) string {
	if len(vs) == 0 {
		return "-"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf("v%d", v)
	}
	return strings.Join(s, "+")
}

// digestText is a digest's first 12 hex digits and the bytes it covers
// (all of them with full).
func digestText(sum []byte, n int64, truncated bool) string {
	if len(sum) == 0 {
		return "-"
	}
	more := ""
	if truncated {
		more = ", more not read"
	}
	return fmt.Sprintf("%s… (%d B%s)", hex.EncodeToString(sum)[:12], n, more)
}

// decisionText says what a failure decided about the next attempt.
func decisionText(r *hooklinev1.RetryDecision) string {
	s := r.GetReason()
	if s == "" {
		s = strings.ToLower(strings.TrimPrefix(r.GetOutcome().String(), "OUTCOME_"))
	}
	if t := r.GetNextAttemptAt(); t != nil && !strings.Contains(s, fmtTime(t)) {
		s += "; next at " + fmtTime(t)
	}
	return s
}

// ms formats a duration for the table: 12.3 ms, 1.50 s, 2m0s.
func ms(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Minute:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}
