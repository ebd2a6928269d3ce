package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHelpShowsNoSecret: the -h text of a command names the environment
// variables that hold secrets, never their values (the flag package
// prints a flag's default, and a default taken from the environment
// would be printed); the binary exits 0 after printing it.
func TestHelpShowsNoSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const secret = "s3cr3t-value"
	env := []string{
		"HOOKLINE_TOKEN=hk_" + secret, "HOOKLINE_RECEIVER_SECRET=whsec_" + secret,
		"HOOKLINE_OUTBOX_DB=postgres://u:" + secret + "@db/app", "HOOKLINE_STORE=postgres://u:" + secret + "@db/log",
	}
	for _, args := range [][]string{
		{"endpoints", "list", "-h"}, {"keys", "issue", "-h"}, {"receive", "-h"}, {"relay", "-h"},
		{"outbox", "reconcile", "-h"}, {"reconcile", "-h"}, {"serve", "-h"}, {"help"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cmd := exec.Command(binary(t), args...)
			cmd.Env = append(os.Environ(), env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Errorf("exit: %v, want 0", err)
			}
			if !strings.Contains(out.String(), "HOOKLINE_") {
				t.Fatalf("no help text:\n%s", out.String())
			}
			if strings.Contains(out.String(), secret) {
				t.Errorf("the help shows a secret:\n%s", out.String())
			}
		})
	}
}
