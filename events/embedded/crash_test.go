package embedded_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
)

// crashChildEnv switches the test binary into the crash test's child: it
// then appends to the log in the directory it names until it is killed.
const crashChildEnv = "HOOKLINE_EMBEDDED_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	os.Exit(m.Run())
}

// Child appenders: each own-stream appender writes its stream with Exact;
// the shared ones race on one stream with Any.
const (
	crashOwnAppenders    = 4
	crashSharedAppenders = 2
	crashShared          = "crash-shared"
)

// crashChild appends in a loop from several goroutines, and prints each
// append to stdout only once Append has returned:
//
//	ack STREAM FIRST LAST POSITION ID,ID,...
//
// Each event's metadata is "APPEND-ID I/N" (APPEND-ID is the id of the
// append's first event), so the parent can tell that an append is whole.
func crashChild(dir string) int {
	l, err := embedded.Open(embedded.Config{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		return 2
	}
	var (
		out sync.Mutex // guards stdout: one write per line
		wg  sync.WaitGroup
	)
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	// appendLoop appends to stream forever: with Exact (the stream's only
	// writer, it knows where the stream is) or with Any (shared).
	appendLoop := func(stream string, exact bool, last events.Revision, exists bool) {
		for {
			n := 1 + rand.IntN(5)
			evs := make([]events.Event, n)
			ids := make([]string, n)
			for i := range evs {
				evs[i] = events.Event{ID: uuid.New(), Type: "Crash", Data: make([]byte, 100+rand.IntN(2000))}
				ids[i] = evs[i].ID.String()
			}
			for i := range evs {
				evs[i].Metadata = fmt.Appendf(nil, "%s %d/%d", ids[0], i, n)
			}
			var exp events.ExpectedRevision = events.Any{}
			if exact {
				exp = events.ExpectAfter(last, exists)
			}
			res, err := l.Append(context.Background(), stream, exp, evs...)
			if err != nil {
				fail(err)
			}
			last, exists = res.Revision, true
			line := fmt.Sprintf("ack %s %d %d %d %s\n", stream, res.Revision+1-events.Revision(n), res.Revision, res.Position.Commit, strings.Join(ids, ","))
			out.Lock()
			_, err = io.WriteString(os.Stdout, line)
			out.Unlock()
			if err != nil {
				fail(err)
			}
		}
	}
	for k := range crashOwnAppenders {
		stream := fmt.Sprintf("crash-%d", k)
		last, exists := events.Revision(0), true
		recs, err := l.ReadStream(context.Background(), stream, events.Backwards, events.End, 1)
		switch {
		case errors.Is(err, events.ErrStreamNotFound):
			exists = false
		case err != nil:
			fail(err)
		default:
			last = recs[0].Revision
		}
		wg.Go(func() { appendLoop(stream, true, last, exists) })
	}
	for range crashSharedAppenders {
		wg.Go(func() { appendLoop(crashShared, false, 0, false) })
	}
	wg.Wait()
	return 0
}

// ack is one append the child acknowledged.
type ack struct {
	stream      string
	first, last events.Revision
	position    uint64
	ids         []uuid.UUID
}

func parseAck(line string) (ack, error) {
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "ack" {
		return ack{}, fmt.Errorf("bad ack line %q", line)
	}
	first, err1 := strconv.ParseUint(f[2], 10, 64)
	last, err2 := strconv.ParseUint(f[3], 10, 64)
	pos, err3 := strconv.ParseUint(f[4], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return ack{}, fmt.Errorf("bad ack line %q: %w", line, err)
	}
	a := ack{stream: f[1], first: events.Revision(first), last: events.Revision(last), position: pos}
	for _, s := range strings.Split(f[5], ",") {
		id, err := uuid.Parse(s)
		if err != nil {
			return ack{}, fmt.Errorf("bad ack line %q: %w", line, err)
		}
		a.ids = append(a.ids, id)
	}
	if int(last-first)+1 != len(a.ids) {
		return ack{}, fmt.Errorf("bad ack line %q: %d ids for revisions %d..%d", line, len(a.ids), first, last)
	}
	return a, nil
}

// TestCrash kills a process appending to the log with SIGKILL at random
// moments, reopens the log after each kill, and checks that every
// acknowledged append survived, whole and in order, that no append is ever
// half there, and that positions only grow. The child is this test binary
// (see TestMain); the kill lands anywhere: during Open and recovery, between
// appends, in the middle of a group commit.
func TestCrash(t *testing.T) {
	kills, budget := 25, 50*time.Second
	if testing.Short() {
		kills, budget = 5, 15*time.Second
	}
	dir := t.TempDir()
	deadline := time.Now().Add(budget)
	var acks []ack
	for kill := range kills {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d kills within %s", kill, kills, budget)
		}
		got, err := crashOnce(dir, kill)
		if err != nil {
			t.Fatalf("kill %d: %v", kill, err)
		}
		acks = append(acks, got...)
		n := checkCrashLog(t, dir, acks)
		t.Logf("kill %d: %d acks this run, %d in all, %d events in the log", kill, len(got), len(acks), n)
	}
}

// crashOnce runs the child on dir, kills it at a random moment, and returns
// the appends it acknowledged before dying.
func crashOnce(dir string, kill int) ([]ack, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // a partial last line was never acknowledged
			}
			lines <- line
		}
	}()

	// Every other run dies at a random moment after its first ack; the
	// others at a random moment from the start, maybe in Open.
	var acks []ack
	var timer <-chan time.Time
	if kill%2 == 1 {
		timer = time.After(time.Duration(rand.IntN(300)) * time.Millisecond)
	}
	killed := false
	for !killed {
		select {
		case line, ok := <-lines:
			if !ok {
				err := cmd.Wait()
				return nil, fmt.Errorf("child ended by itself (%v): %s", err, stderr.String())
			}
			a, err := parseAck(line)
			if err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				return nil, err
			}
			acks = append(acks, a)
			if timer == nil {
				timer = time.After(time.Duration(rand.IntN(150)) * time.Millisecond)
			}
		case <-timer:
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				return nil, err
			}
			killed = true
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("child acknowledged nothing in 20s: %s", stderr.String())
		}
	}
	for line := range lines { // what the child printed before it died
		a, err := parseAck(line)
		if err != nil {
			return nil, err
		}
		acks = append(acks, a)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return nil, fmt.Errorf("child did not die of SIGKILL: %v: %s", err, stderr.String())
	}
	return acks, nil
}

// checkCrashLog opens the log in dir and checks it against acks: every
// acknowledged append is there, at its revisions and position; every append
// in the log, acknowledged or not, is whole; every stream's revisions are
// 0, 1, 2... in position order; positions strictly increase. It returns the
// number of events in the log.
func checkCrashLog(t *testing.T, dir string, acks []ack) int {
	t.Helper()
	ctx := context.Background()
	l, err := embedded.Open(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()

	streams := map[string][]events.Record{}
	var last events.Position
	total := 0
	for {
		page, err := l.ReadAll(ctx, last, 1000)
		if err != nil {
			t.Fatalf("read all from %s: %v", last, err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			if !last.Less(r.Position) {
				t.Fatalf("position %s after %s", r.Position, last)
			}
			last = r.Position
			if want := events.Revision(len(streams[r.Stream])); r.Revision != want {
				t.Fatalf("%s: revision %d at position %s, want %d", r.Stream, r.Revision, r.Position, want)
			}
			streams[r.Stream] = append(streams[r.Stream], r)
			total++
		}
	}

	// Whole appends: metadata "APPEND-ID I/N", I = 0..N-1 in a row.
	for stream, recs := range streams {
		for i := 0; i < len(recs); {
			var id string
			var n int
			if _, err := fmt.Sscanf(string(recs[0+i].Metadata), "%s 0/%d", &id, &n); err != nil {
				t.Fatalf("%s@%d: metadata %q does not start an append: %v", stream, i, recs[i].Metadata, err)
			}
			if i+n > len(recs) {
				t.Fatalf("%s@%d: append %s of %d events has only %d", stream, i, id, n, len(recs)-i)
			}
			for j := range n {
				if want := fmt.Sprintf("%s %d/%d", id, j, n); string(recs[i+j].Metadata) != want {
					t.Fatalf("%s@%d: metadata %q, want %q: a torn append", stream, i+j, recs[i+j].Metadata, want)
				}
			}
			i += n
		}
	}

	for _, a := range acks {
		recs := streams[a.stream]
		if int(a.last) >= len(recs) {
			t.Fatalf("acknowledged append %s@%d..%d lost: the stream has %d events", a.stream, a.first, a.last, len(recs))
		}
		for i, id := range a.ids {
			if r := recs[int(a.first)+i]; r.ID != id {
				t.Fatalf("%s@%d: id %s, acknowledged %s", a.stream, r.Revision, r.ID, id)
			}
		}
		if p := recs[a.last].Position.Commit; p != a.position {
			t.Fatalf("%s@%d: position %d, acknowledged %d", a.stream, a.last, p, a.position)
		}
	}
	return total
}
