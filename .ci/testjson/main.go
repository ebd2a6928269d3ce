// Command testjson reads the events of `go test -json` on stdin and prints
// what a person reading CI needs: a line per package, the output of every
// failed test (and of a package that failed outside its tests), and a
// summary. It exits with status 1 when a test or a package failed, or when
// a test skipped that the skips file does not expect: in CI every test
// runs, but for those whose dependency CI does not provide.
//
//	go test -race -json ./... | go run ./.ci/testjson -skips .ci/skips
//
// The skips file lists one expected skip a line, "package test when"
// (# starts a comment): package is the module-relative directory, test the
// test's name (a subtest as Parent/Sub), and when is unset:VAR, the skip
// is expected while the environment variable VAR is unset; slow, the test
// skips itself when the machine was too slow for it to tell (reported,
// never a failure); or always, a case that does not apply to the harness
// it runs under and runs under another.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json), with the build
// events of Go 1.24 and later.
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

func main() {
	skipsPath := flag.String("skips", ".ci/skips", "the file of expected skips")
	flag.Parse()
	skips, err := readSkips(*skipsPath, os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testjson: %v\n", err)
		os.Exit(2)
	}
	r := newReport(os.Stdout, skips)
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testjson: %v\n", err)
		os.Exit(2)
	}
	if !r.summary() {
		os.Exit(1)
	}
}

// skip is an expected skip of the skips file.
type skip struct {
	pkg, test string
	// always (slow, or a case another harness runs): allowed whenever it
	// happens; otherwise expected only while the variable unset is unset.
	// A listed test that runs is fine.
	always bool
	unset  string
	why    string // for the summary
}

// readSkips reads the skips file; getenv says which variables are set.
func readSkips(path string, getenv func(string) string) ([]skip, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []skip
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: want \"package test when\", got %q", path, n, sc.Text())
		}
		s := skip{pkg: fields[0], test: fields[1]}
		switch when := fields[2]; {
		case when == "slow":
			s.always, s.why = true, "too slow to tell: allowed"
		case when == "always":
			s.always, s.why = true, "does not apply to its harness"
		case strings.HasPrefix(when, "unset:") && len(when) > len("unset:"):
			s.unset = strings.TrimPrefix(when, "unset:")
			if getenv(s.unset) != "" {
				continue // set: the test must run
			}
			s.why = s.unset + " is unset"
		default:
			return nil, fmt.Errorf("%s:%d: when is %q; use unset:VAR, slow or always", path, n, when)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// expected returns the expected skip of test in pkg (an import path).
func expected(skips []skip, pkg, test string) (skip, bool) {
	for _, s := range skips {
		if s.test == test && (pkg == s.pkg || strings.HasSuffix(pkg, "/"+s.pkg)) {
			return s, true
		}
	}
	return skip{}, false
}

// line is one line of a package's output: of a test ("" for the package).
type line struct{ test, text string }

// pkgState is what a package printed so far and how its tests ended.
type pkgState struct {
	lines []line
	ended map[string]string // test → pass, fail or skip
}

// skipped is a skipped test and why, as it said.
type skipped struct {
	pkg, test, reason string
	expect            skip
	ok                bool
}

// report prints packages as they end and keeps the counts for the
// summary.
type report struct {
	w        io.Writer
	skips    []skip
	pkgs     map[string]*pkgState
	packages int
	failPkgs []string
	passed   int
	failed   []string
	skipped  []skipped
}

func newReport(w io.Writer, skips []skip) *report {
	return &report{w: w, skips: skips, pkgs: map[string]*pkgState{}}
}

// read consumes the event stream; a line that is not an event is printed
// as it is.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(r.w, sc.Text())
			continue
		}
		r.event(e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the events: %w", err)
	}
	return nil
}

func (r *report) event(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.w, e.Output)
		return
	case "build-fail":
		return // its package fails too, naming FailedBuild
	}
	p := r.pkgs[e.Package]
	if p == nil {
		p = &pkgState{ended: map[string]string{}}
		r.pkgs[e.Package] = p
	}
	switch e.Action {
	case "output":
		p.lines = append(p.lines, line{e.Test, e.Output})
	case "pass", "fail", "skip":
		if e.Test != "" {
			p.ended[e.Test] = e.Action
			r.testEnded(e, p)
			return
		}
		r.packageEnded(e, p)
		delete(r.pkgs, e.Package)
	}
}

func (r *report) testEnded(e event, p *pkgState) {
	switch e.Action {
	case "pass":
		r.passed++
	case "fail":
		r.failed = append(r.failed, e.Package+" "+e.Test)
	case "skip":
		s := skipped{pkg: e.Package, test: e.Test, reason: reason(p.lines, e.Test)}
		s.expect, s.ok = expected(r.skips, e.Package, e.Test)
		r.skipped = append(r.skipped, s)
	}
}

// reason is what a skipped test said: its lines but for the framing ones.
func reason(lines []line, test string) string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l.text)
		if l.test != test || t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		out = append(out, t)
	}
	return strings.Join(out, " ")
}

func (r *report) packageEnded(e event, p *pkgState) {
	if e.Action == "skip" && len(p.ended) == 0 {
		return // no test files
	}
	r.packages++
	if e.Action != "fail" {
		fmt.Fprintf(r.w, "ok   %s %.1fs\n", e.Package, e.Elapsed)
		return
	}
	r.failPkgs = append(r.failPkgs, e.Package)
	fmt.Fprintf(r.w, "FAIL %s %.1fs\n", e.Package, e.Elapsed)
	if e.FailedBuild != "" {
		fmt.Fprintf(r.w, "     (the build of %s failed, above)\n", e.FailedBuild)
	}
	// The output of every failed test and of those that never ended (a
	// timeout, a panic), with the package's own lines, in order.
	for _, l := range p.lines {
		top, _, _ := strings.Cut(l.test, "/")
		if l.test == "" || p.ended[top] == "fail" || p.ended[top] == "" {
			fmt.Fprint(r.w, "     ", l.text)
		}
	}
}

// summary prints the counts, the skips and the failures; it reports
// whether CI passes.
func (r *report) summary() bool {
	var unexpected, allowed []skipped
	for _, s := range r.skipped {
		if s.ok {
			allowed = append(allowed, s)
		} else {
			unexpected = append(unexpected, s)
		}
	}
	// Packages that started and never ended: the stream was cut.
	for name := range r.pkgs {
		r.failPkgs = append(r.failPkgs, name+" (no end: the run was cut short)")
	}
	slices.Sort(r.failPkgs)
	fmt.Fprintf(r.w, "\n%d packages, %d failed; %d tests passed, %d failed, %d skipped (%d expected, %d not)\n",
		r.packages, len(r.failPkgs), r.passed, len(r.failed), len(r.skipped), len(allowed), len(unexpected))
	for _, s := range allowed {
		fmt.Fprintf(r.w, "skipped as expected: %s %s (%s)\n", s.pkg, s.test, s.expect.why)
	}
	for _, s := range unexpected {
		fmt.Fprintf(r.w, "SKIPPED, NOT EXPECTED: %s %s: %s\n", s.pkg, s.test, s.reason)
	}
	if len(unexpected) > 0 {
		fmt.Fprintln(r.w, "  CI runs every test: give the test what it needs, or list it in .ci/skips with the reason")
	}
	for _, f := range r.failed {
		fmt.Fprintf(r.w, "FAILED: %s\n", f)
	}
	for _, p := range r.failPkgs {
		fmt.Fprintf(r.w, "FAILED PACKAGE: %s\n", p)
	}
	return len(unexpected) == 0 && len(r.failed) == 0 && len(r.failPkgs) == 0
}
