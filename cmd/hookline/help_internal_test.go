package main

import (
	"bytes"
	"net"
	"regexp"
	"strings"
	"testing"
)

// flagOf finds the flags an example gives.
var flagOf = regexp.MustCompile(`(?:^|\s)--([a-z0-9-]+)`)

// TestEveryCommandHelp walks the command table: `hookline <cmd> -h` (and
// --help, and `hookline help <cmd>`) succeeds and prints, on stdout, the
// command's one help format: its name and summary, a synopsis, its flags
// each written with "--", and an example that names the command and gives
// only flags the command has.
func TestEveryCommandHelp(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			words := strings.Fields(c.name)
			var first string
			for _, args := range [][]string{append(words, "-h"), append(words, "--help"), append([]string{"help"}, words...)} {
				var out, errOut bytes.Buffer
				if err := run(t.Context(), args, &out, &errOut); err != nil {
					t.Fatalf("hookline %s: %v", strings.Join(args, " "), err)
				}
				if errOut.Len() > 0 {
					t.Errorf("hookline %s wrote on stderr:\n%s", strings.Join(args, " "), errOut.String())
				}
				if first == "" {
					first = out.String()
				} else if out.String() != first {
					t.Errorf("hookline %s differs from -h:\n%s", strings.Join(args, " "), out.String())
				}
			}
			h := first
			if want := "hookline " + c.name + ": " + c.summary + "\n\nUsage:\n  hookline " + c.name + " "; !strings.HasPrefix(h, want) {
				t.Errorf("help does not start with %q:\n%s", want, h)
			}
			i := strings.Index(h, "\nExample:\n  ")
			if i < 0 || !strings.Contains(h[i:], "hookline "+c.name) {
				t.Fatalf("no example of hookline %s:\n%s", c.name, h)
			}
			listed := map[string]bool{}
			for _, line := range strings.Split(h[:i], "\n") {
				trimmed := strings.TrimLeft(line, " ")
				if strings.HasPrefix(trimmed, "-") && !strings.HasPrefix(line, "  --") {
					t.Errorf("a flag not written as \"  --name\": %q", line)
				}
				if strings.HasPrefix(line, "  --") {
					listed[strings.Fields(line)[0][2:]] = true
				}
			}
			if strings.Contains(h, "Flags:") != (len(listed) > 0) {
				t.Errorf("a Flags section without flags, or flags without one:\n%s", h)
			}
			for _, m := range flagOf.FindAllStringSubmatch(h[i:], -1) {
				if !listed[m[1]] {
					t.Errorf("the example gives --%s, which hookline %s does not have", m[1], c.name)
				}
			}
		})
	}
}

// TestDidYouMean: a mistyped command, action or flag is answered with the
// closest one, and an action missing or unknown with the group's actions.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"endpoints", "lst"}, []string{"endpoints: unknown action lst; did you mean list?", "create, get, list, update"}},
		{[]string{"endpoints"}, []string{"endpoints: give an action", "create, get, list"}},
		{[]string{"endpionts", "list"}, []string{"unknown command endpionts; did you mean hookline endpoints list?"}},
		{[]string{"serv"}, []string{"unknown command serv; did you mean hookline serve?"}},
		{[]string{"endpoints", "create", "--tpyes", "order.paid"}, []string{"endpoints create: unknown flag --tpyes; did you mean --types?", "hookline endpoints create -h"}},
		{[]string{"dev", "--dtaa", "x"}, []string{"dev: unknown flag --dtaa; did you mean --data?"}},
		{[]string{"events", "publish", "--id"}, []string{"events publish: --id needs a value"}},
		{[]string{"endpoints", "list", "--limit", "ten"}, []string{`endpoints list: --limit "ten"`}},
		{[]string{"deliveries", "list", "extra"}, []string{`unexpected argument "extra"`}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Setenv("HOOKLINE_TOKEN", "hk_test")
			var out bytes.Buffer
			err := run(t.Context(), tc.args, &out, &out)
			if err == nil {
				t.Fatalf("no error; printed:\n%s", out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestClientWithoutTokenOrNode: a client command without a token says how
// to give one, before any call; with one, but no node at the address, it
// says so and how to start one, not gRPC's transport error.
func TestClientWithoutTokenOrNode(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	t.Setenv("HOOKLINE_ADDR", "")
	t.Run("no token", func(t *testing.T) {
		t.Setenv("HOOKLINE_TOKEN", "")
		for _, args := range [][]string{{"endpoints", "list", "--addr", addr}, {"reconcile", "--addr", addr}} {
			err := run(t.Context(), args, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), "set HOOKLINE_TOKEN or pass --token") {
				t.Errorf("hookline %s: %v", strings.Join(args, " "), err)
			}
		}
	})
	t.Run("no node", func(t *testing.T) {
		t.Setenv("HOOKLINE_TOKEN", "hk_test")
		for _, args := range [][]string{{"endpoints", "list", "--addr", addr}, {"reconcile", "--addr", addr}} {
			err := run(t.Context(), args, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), "no node at "+addr+" (connection refused): start one with `hookline serve`") ||
				strings.Contains(err.Error(), "transport") {
				t.Errorf("hookline %s: %v", strings.Join(args, " "), err)
			}
		}
	})
}
