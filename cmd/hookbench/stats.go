package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is the result of one scenario, printed as the last line of
// `hookbench run` as one JSON object. Times are milliseconds; a figure that
// could not be measured is 0 and its reason is in Notes. The counts come
// from the bench's ledger and receiver (ledger.count), never from the
// node's answers alone; Config holds the settings the run was given,
// apart from what it measured.
type Summary struct {
	Scenario string `json:"scenario"`
	// Pass is false when a check failed (Failed says which): lost,
	// planned_mismatch, unplanned, bad_signature, body_mismatch and
	// duplicates_unexplained must be 0, and something must be delivered.
	Pass   bool     `json:"pass"`
	Failed []string `json:"failed,omitempty"`
	// Expected is the deliveries of the awaited tenants as the bench
	// computes them (each event × the endpoints it created subscribed to
	// its type); Planned those of them the node's publish answers
	// announced; Deliveries those received with a valid signature, a 2xx
	// and the published bytes.
	Expected         int64   `json:"expected"`
	Planned          int64   `json:"planned"`
	Deliveries       int64   `json:"deliveries"`
	DeliveriesPerSec float64 `json:"deliveries_per_sec"`
	// First attempt: publish acknowledged → first receipt at the receiver,
	// per delivery (0 when the receipt came before the acknowledgement).
	FirstAttemptP50 float64 `json:"first_attempt_p50_ms"`
	FirstAttemptP99 float64 `json:"first_attempt_p99_ms"`
	FirstAttemptMax float64 `json:"first_attempt_max_ms"`
	// PublishP99 is the p99 of PublishBatch calls.
	PublishP99 float64 `json:"publish_p99_ms"`
	Checks
	// Attempts per expected delivery, as the receiver saw them.
	Attempts            int64   `json:"attempts"`
	AttemptsPerDelivery float64 `json:"attempts_per_delivery"`
	// Node figures: CPU seconds per 1000 deliveries, peak RSS, bytes of
	// the data directory per delivery.
	CPUSecPer1k          float64 `json:"cpu_s_per_1k"`
	PeakRSSMB            float64 `json:"peak_rss_mb"`
	DiskBytesPerDelivery float64 `json:"disk_bytes_per_delivery"`
	// DrainS is the time from the end of publishing to the last awaited
	// delivery received.
	DrainS float64 `json:"drain_s"`
	// The node's own counts (ListDeliveries) for the awaited tenants: its
	// word, reported beside the bench's, never judged.
	NodeSucceeded int64 `json:"node_succeeded"`
	NodePending   int64 `json:"node_pending"`
	NodeFailed    int64 `json:"node_failed"`
	// Throughput only: the raw loop's figure and Hookline's ratio to it.
	RawPerSec  float64 `json:"raw_per_sec,omitempty"`
	RatioToRaw float64 `json:"ratio_to_raw,omitempty"`
	// Extra holds scenario-specific measured figures (fairness phases,
	// kills counted).
	Extra map[string]float64 `json:"extra,omitempty"`
	// Config is what the run was given (flags and defaults), not measured.
	Config map[string]any `json:"config,omitempty"`
	Notes  []string       `json:"notes,omitempty"`
}

// Checks are the ledger's counts that every scenario's last line carries
// (ledger.count): all but Duplicates must be 0.
type Checks struct {
	// Lost is expected − delivered (received with a valid signature, a
	// 2xx and the published bytes).
	Lost int64 `json:"lost"`
	// PlannedMismatch counts the expected deliveries the node did not
	// announce and those it announced unexpected.
	PlannedMismatch int64 `json:"planned_mismatch"`
	// Unplanned counts the webhook-ids received that the bench never
	// expected.
	Unplanned int64 `json:"unplanned"`
	// BadSignature counts the requests the receiver refused (401).
	BadSignature int64 `json:"bad_signature"`
	// BodyMismatch counts the deliveries received with other bytes than
	// published.
	BodyMismatch int64 `json:"body_mismatch"`
	// Duplicates are 2xx receipts beyond the first per webhook-id;
	// Unexplained those of them that no evidence the receiver holds
	// explains (a window the bench caused between the two receipts, or a
	// sender gone before the first answer).
	Duplicates  int64 `json:"duplicates"`
	Unexplained int64 `json:"duplicates_unexplained"`
	// OrderViolations counts the requests of ordered deliveries that came
	// out of their key's order (see ledger.orderViolations).
	OrderViolations int64 `json:"order_violations"`
}

// add adds o's counts to c.
func (c *Checks) add(o Checks) {
	c.Lost, c.PlannedMismatch, c.Unplanned = c.Lost+o.Lost, c.PlannedMismatch+o.PlannedMismatch, c.Unplanned+o.Unplanned
	c.BadSignature, c.BodyMismatch = c.BadSignature+o.BadSignature, c.BodyMismatch+o.BodyMismatch
	c.Duplicates, c.Unexplained = c.Duplicates+o.Duplicates, c.Unexplained+o.Unexplained
	c.OrderViolations += o.OrderViolations
}

// failed lists the checks that are not 0, as "name count".
func (c Checks) failed() []string {
	var out []string
	for _, k := range []struct {
		name string
		n    int64
	}{{"lost", c.Lost}, {"planned_mismatch", c.PlannedMismatch}, {"unplanned", c.Unplanned},
		{"bad_signature", c.BadSignature}, {"body_mismatch", c.BodyMismatch}, {"duplicates_unexplained", c.Unexplained},
		{"order_violations", c.OrderViolations}} {
		if k.n != 0 {
			out = append(out, fmt.Sprintf("%s %d", k.name, k.n))
		}
	}
	return out
}

// summaryKeys are the keys every summary line carries; the test checks them.
var summaryKeys = []string{"scenario", "pass", "expected", "planned", "deliveries", "deliveries_per_sec", "first_attempt_p50_ms",
	"first_attempt_p99_ms", "first_attempt_max_ms", "publish_p99_ms", "lost", "planned_mismatch", "unplanned",
	"bad_signature", "body_mismatch", "duplicates", "duplicates_unexplained", "order_violations", "cpu_s_per_1k", "peak_rss_mb",
	"disk_bytes_per_delivery", "config"}

// add adds o's counts to s.
func (s *Summary) add(o Summary) {
	s.Expected, s.Planned, s.Deliveries = s.Expected+o.Expected, s.Planned+o.Planned, s.Deliveries+o.Deliveries
	s.Checks.add(o.Checks)
}

// setCounts sets s's counts to o's.
func (s *Summary) setCounts(o Summary) {
	s.Expected, s.Planned, s.Deliveries, s.Checks = o.Expected, o.Planned, o.Deliveries, o.Checks
}

// ErrFailed reports a run whose checks failed; its summary was printed.
var ErrFailed = errors.New("hookbench: the run failed its checks")

// judge sets Pass and Failed: every check 0, and something delivered.
func (s *Summary) judge() {
	s.Failed = s.Checks.failed()
	if s.Deliveries == 0 {
		s.Failed = append(s.Failed, fmt.Sprintf("nothing delivered (%d expected)", s.Expected))
	}
	s.Pass = len(s.Failed) == 0
}

// verdict is nil when the summary passed, else ErrFailed with the checks
// missed.
func (s *Summary) verdict() error {
	if s.Pass {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrFailed, strings.Join(s.Failed, ", "))
}

// percentiles returns the q-quantiles (0..1, nearest rank) of ds in
// milliseconds; ds is sorted in place. Empty ds gives zeros.
func percentiles(ds []time.Duration, qs ...float64) []float64 {
	out := make([]float64, len(qs))
	if len(ds) == 0 {
		return out
	}
	slices.Sort(ds)
	for i, q := range qs {
		rank := int(math.Ceil(q*float64(len(ds)))) - 1
		rank = min(max(rank, 0), len(ds)-1)
		out[i] = ms(ds[rank])
	}
	return out
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// Print writes the table (for people) and then the summary as one JSON
// line, the last line of the output (for scripts).
func (s Summary) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\t%s\n", s.Scenario)
	fmt.Fprintf(tw, "deliveries\t%d of %d expected (the node planned %d; lost %d, duplicates %d, unexplained %d)\n",
		s.Deliveries, s.Expected, s.Planned, s.Lost, s.Duplicates, s.Unexplained)
	fmt.Fprintf(tw, "checks\tplanned mismatch %d, unplanned %d, bad signature %d, body mismatch %d\n",
		s.PlannedMismatch, s.Unplanned, s.BadSignature, s.BodyMismatch)
	fmt.Fprintf(tw, "throughput\t%.1f deliveries/s\n", s.DeliveriesPerSec)
	if s.RawPerSec > 0 {
		fmt.Fprintf(tw, "raw loop\t%.1f deliveries/s (Hookline at %.1f%%)\n", s.RawPerSec, 100*s.RatioToRaw)
	}
	fmt.Fprintf(tw, "first attempt\tp50 %.1f ms, p99 %.1f ms, max %.1f ms\n", s.FirstAttemptP50, s.FirstAttemptP99, s.FirstAttemptMax)
	fmt.Fprintf(tw, "publish\tp99 %.1f ms\n", s.PublishP99)
	fmt.Fprintf(tw, "attempts\t%d (%.2f per delivery), drain %.1f s\n", s.Attempts, s.AttemptsPerDelivery, s.DrainS)
	fmt.Fprintf(tw, "node\t%.3f CPU s per 1k, peak RSS %.0f MB, %.0f disk bytes per delivery\n", s.CPUSecPer1k, s.PeakRSSMB, s.DiskBytesPerDelivery)
	fmt.Fprintf(tw, "node counts\tsucceeded %d, pending %d, failed %d\n", s.NodeSucceeded, s.NodePending, s.NodeFailed)
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%g\n", k, s.Extra[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Config)) {
		fmt.Fprintf(tw, "config %s\t%v\n", k, s.Config[k])
	}
	for _, n := range s.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	fmt.Fprintf(tw, "verdict\tpass=%v %s\n", s.Pass, strings.Join(s.Failed, ", "))
	if err := tw.Flush(); err != nil {
		return err
	}
	line, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// Usage is a process's resource use.
type Usage struct {
	CPU     time.Duration // user + system
	PeakRSS int64         // bytes (VmHWM)
}

// procUsage reads utime+stime from /proc/PID/stat and VmHWM from
// /proc/PID/status.
func procUsage(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("read cpu of node %d: %w (hookbench measures a node on this Linux machine only)", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return u, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return u, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(fields))
	}
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after ")".
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return u, fmt.Errorf("parse /proc/%d/stat: utime %q stime %q", pid, fields[11], fields[12])
	}
	const clockTicks = 100 // USER_HZ, 100 on every Linux Go supports
	u.CPU = time.Duration(utime+stime) * time.Second / clockTicks

	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("read memory of node %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return u, fmt.Errorf("parse VmHWM %q", v)
			}
			u.PeakRSS = kb << 10
		}
	}
	return u, sc.Err()
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) (int64, error) {
	n, _, err := dirSizes(dir)
	return n, err
}

// dirSizes is the total size of the regular files under dir, and of its
// tables (Pebble's .sst files): the part that grows with the deliveries.
// The rest is mostly Pebble's write-ahead logs, current and kept for
// reuse (up to three, each up to a memtable's 64 MiB), a fixed amount
// that a short run divides by few deliveries.
func dirSizes(dir string) (total, tables int64, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // a file removed under us (compaction)
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
				if strings.HasSuffix(path, ".sst") {
					tables += info.Size()
				}
			}
		}
		return nil
	})
	return total, tables, err
}
