package cluster

import (
	"log/slog"
	"strings"
	"testing"
)

// TestShutdownPanics: protoactor's race at the end of its remote's
// shutdown (a send on a reader's closed channel) is not a failed stop, and
// the remote's server is stopped after it; any other panic is an error.
func TestShutdownPanics(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	sendOnClosed := func() {
		ch := make(chan bool, 1)
		close(ch)
		ch <- true
	}
	killedServer := false
	if err := shutdown(sendOnClosed, func() { killedServer = true }, quiet); err != nil {
		t.Errorf("shutdown after protoactor's closed-channel race = %v, want nil", err)
	}
	if !killedServer {
		t.Error("the remote's server was not stopped after the race")
	}

	var m map[string]int
	for name, stop := range map[string]func(){
		"nil map":     func() { m["x"] = 1 },
		"plain panic": func() { panic("memberlist would not stop") },
	} {
		killedServer = false
		err := shutdown(stop, func() { killedServer = true }, quiet)
		if err == nil || !strings.HasPrefix(err.Error(), "protoactor: ") {
			t.Errorf("%s: shutdown = %v, want a protoactor error", name, err)
		}
		if killedServer {
			t.Errorf("%s: kill ran", name)
		}
	}
	if err := shutdown(func() {}, func() { t.Error("kill ran after a clean stop") }, quiet); err != nil {
		t.Errorf("clean stop = %v", err)
	}
}
