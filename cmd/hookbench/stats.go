package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
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
// could not be measured is 0 and its reason is in Notes.
type Summary struct {
	Scenario string `json:"scenario"`
	// Planned is the deliveries planned by the node for the awaited tenants;
	// Deliveries the planned ones received with a 2xx at least once.
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
	// Duplicates are 2xx receipts beyond the first per webhook-id.
	Duplicates int64 `json:"duplicates"`
	// Lost is planned − received successfully; it must be 0.
	Lost int64 `json:"lost"`
	// Attempts per planned delivery, as the receiver saw them.
	Attempts            int64   `json:"attempts"`
	AttemptsPerDelivery float64 `json:"attempts_per_delivery"`
	// BodyMismatch and Unknown must be 0: every attempt of a webhook-id has
	// the same bytes, and every webhook-id was planned by a publish.
	BodyMismatch int64 `json:"body_mismatch"`
	Unknown      int64 `json:"unknown_ids"`
	// Node figures: CPU seconds per 1000 deliveries, peak RSS, bytes of
	// the data directory per delivery.
	CPUSecPer1k          float64 `json:"cpu_s_per_1k"`
	PeakRSSMB            float64 `json:"peak_rss_mb"`
	DiskBytesPerDelivery float64 `json:"disk_bytes_per_delivery"`
	// DrainS is the time from the end of publishing to the last awaited
	// delivery received.
	DrainS float64 `json:"drain_s"`
	// The node's own counts (ListDeliveries) for the awaited tenants.
	NodeSucceeded int64 `json:"node_succeeded"`
	NodePending   int64 `json:"node_pending"`
	NodeFailed    int64 `json:"node_failed"`
	// Throughput only: the raw loop's figure and Hookline's ratio to it.
	RawPerSec  float64 `json:"raw_per_sec,omitempty"`
	RatioToRaw float64 `json:"ratio_to_raw,omitempty"`
	// Extra holds scenario-specific figures (fairness phases, crash kills).
	Extra map[string]float64 `json:"extra,omitempty"`
	Notes []string           `json:"notes,omitempty"`
}

// summaryKeys are the keys every summary line carries; the test checks them.
var summaryKeys = []string{"scenario", "deliveries", "deliveries_per_sec", "first_attempt_p50_ms",
	"first_attempt_p99_ms", "first_attempt_max_ms", "publish_p99_ms", "duplicates", "lost",
	"cpu_s_per_1k", "peak_rss_mb", "disk_bytes_per_delivery"}

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
	fmt.Fprintf(tw, "deliveries\t%d of %d planned (lost %d, duplicates %d)\n", s.Deliveries, s.Planned, s.Lost, s.Duplicates)
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
	for _, n := range s.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
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
