package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReport reads a stream with a passing package, a failed test, and
// skips expected, allowed and not: it fails, prints the failed test's
// output but not the passing one's, and names the unexpected skips (among
// them a skip expected only while a variable that is set is unset).
func TestReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skips")
	os.WriteFile(path, []byte(`# package test when
events/esdb   TestConformance   unset:HOOKLINE_ESDB_URL
node/e2e      TestSlow          slow
events/embedded TestDisk/Closed always
events/postgres TestLog         unset:HOOKLINE_POSTGRES_URL
`), 0o644)
	env := map[string]string{"HOOKLINE_POSTGRES_URL": "postgres://"}
	skips, err := readSkips(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	const m = "github.com/hookline/hookline/"
	stream := strings.Join([]string{
		`{"Action":"start","Package":"` + m + `dispatch"}`,
		`{"Action":"run","Package":"` + m + `dispatch","Test":"TestA"}`,
		`{"Action":"output","Package":"` + m + `dispatch","Test":"TestA","Output":"quiet log of a passing test\n"}`,
		`{"Action":"pass","Package":"` + m + `dispatch","Test":"TestA"}`,
		`{"Action":"pass","Package":"` + m + `dispatch","Elapsed":0.5}`,
		`{"Action":"output","Package":"` + m + `node","Test":"TestB","Output":"    b_test.go:9: want 2, got 3\n"}`,
		`{"Action":"fail","Package":"` + m + `node","Test":"TestB"}`,
		`{"Action":"output","Package":"` + m + `node","Output":"FAIL\n"}`,
		`{"Action":"fail","Package":"` + m + `node","Elapsed":1}`,
		`{"Action":"output","Package":"` + m + `events/esdb","Test":"TestConformance","Output":"    log_test.go:24: HOOKLINE_ESDB_URL not set\n"}`,
		`{"Action":"skip","Package":"` + m + `events/esdb","Test":"TestConformance"}`,
		`{"Action":"pass","Package":"` + m + `events/esdb","Elapsed":0.1}`,
		`{"Action":"skip","Package":"` + m + `node/e2e","Test":"TestSlow"}`,
		`{"Action":"pass","Package":"` + m + `node/e2e","Elapsed":0.1}`,
		`{"Action":"skip","Package":"` + m + `events/embedded","Test":"TestDisk/Closed"}`,
		`{"Action":"pass","Package":"` + m + `events/embedded","Elapsed":0.1}`,
		`{"Action":"output","Package":"` + m + `events/postgres","Test":"TestLog","Output":"--- SKIP: TestLog (0.00s)\n"}`,
		`{"Action":"output","Package":"` + m + `events/postgres","Test":"TestLog","Output":"    log_test.go:24: HOOKLINE_POSTGRES_URL not set\n"}`,
		`{"Action":"skip","Package":"` + m + `events/postgres","Test":"TestLog"}`,
		`{"Action":"pass","Package":"` + m + `events/postgres","Elapsed":0.1}`,
		`{"Action":"output","Package":"` + m + `console","Test":"TestBrowser/page","Output":"    no Chromium\n"}`,
		`{"Action":"skip","Package":"` + m + `console","Test":"TestBrowser/page"}`,
		`{"Action":"pass","Package":"` + m + `console","Elapsed":0.1}`,
		`{"Action":"skip","Package":"` + m + `proto"}`,
	}, "\n")
	var out strings.Builder
	r := newReport(&out, skips)
	if err := r.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	if r.summary() {
		t.Errorf("the report passed a failed test and unexpected skips:\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{
		"ok   " + m + "dispatch 0.5s",
		"FAIL " + m + "node 1.0s",
		"b_test.go:9: want 2, got 3",
		"FAILED: " + m + "node TestB",
		"skipped as expected: " + m + "events/esdb TestConformance (HOOKLINE_ESDB_URL is unset)",
		"skipped as expected: " + m + "node/e2e TestSlow (too slow to tell: allowed)",
		"skipped as expected: " + m + "events/embedded TestDisk/Closed (does not apply to its harness)",
		"SKIPPED, NOT EXPECTED: " + m + "events/postgres TestLog: log_test.go:24: HOOKLINE_POSTGRES_URL not set",
		"SKIPPED, NOT EXPECTED: " + m + "console TestBrowser/page: no Chromium",
		"7 packages, 1 failed; 1 tests passed, 1 failed, 5 skipped (3 expected, 2 not)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet log") || strings.Contains(got, "cut short") {
		t.Errorf("the report prints a passing test's output, or a package cut short:\n%s", got)
	}
}

// TestReportPasses: only passes and expected skips pass.
func TestReportPasses(t *testing.T) {
	r := newReport(&strings.Builder{}, []skip{{pkg: "events/esdb", test: "TestConformance", unset: "X", why: "X is unset"}})
	r.read(strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Elapsed":1}
{"Action":"skip","Package":"github.com/hookline/hookline/events/esdb","Test":"TestConformance"}
{"Action":"pass","Package":"github.com/hookline/hookline/events/esdb","Elapsed":1}`))
	if !r.summary() {
		t.Error("the report failed a run of passes and an expected skip")
	}
}
