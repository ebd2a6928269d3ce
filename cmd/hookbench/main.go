package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const usage = `hookbench: load, latency, fairness and fault scenarios for Hookline, and their receiver.

Usage:
  hookbench receive [flags]          a verifying webhook receiver; GET /stats for its counts
  hookbench raw [flags]              this machine's limit: signed POSTs to a receiver, no persistence
  hookbench run SCENARIO [flags]     start a node (or use --node), drive it, print a table and a JSON line

Scenarios: ` + "%s" + `
Each subcommand takes -h for its flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "hookbench:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, usage, scenarioNames())
		return flag.ErrHelp
	}
	switch args[0] {
	case "receive":
		return receiveCmd(ctx, args[1:], stdout, stderr)
	case "raw":
		return rawCmd(ctx, args[1:], stdout, stderr)
	case "run":
		cfg, err := parseRun(args[1:], stderr)
		if err != nil {
			return err
		}
		return Run(ctx, cfg, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintf(stdout, usage, scenarioNames())
		return nil
	}
	return fmt.Errorf("unknown command %q: use receive, raw or run (hookbench -h)", args[0])
}

// secretList is a repeatable --secret flag.
type secretList []string

func (s *secretList) String() string { return fmt.Sprint(len(*s), " secrets") }
func (s *secretList) Set(v string) error {
	*s = append(*s, strings.Split(v, ",")...)
	return nil
}

func receiveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hookbench receive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address (port 0: any)")
	var secrets secretList
	fs.Var(&secrets, "secret", "whsec_ secret that verifies requests; repeat (or comma-separate) to accept several")
	mix := fs.String("status-mix", "200", `answers by weight, e.g. "200:0.9,500:0.1"`)
	latency := fs.Duration("latency", 0, "wait this long before answering")
	retryAfter := fs.Duration("retry-after", 0, "send Retry-After (whole seconds) with every non-2xx answer")
	hang := fs.Bool("hang", false, "never answer: hold each request until the caller gives up")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("receive: unexpected argument %q", fs.Arg(0))
	}
	if len(secrets) == 0 {
		return errors.New("receive: give --secret whsec_... (the endpoint's signing secret, shown once at creation)")
	}
	b := Behaviour{Latency: *latency, RetryAfter: *retryAfter, Hang: *hang}
	var err error
	if b.Mix, err = ParseMix(*mix); err != nil {
		return err
	}
	r, err := NewReceiver(*addr, secrets, b)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "hookbench: receiving on http://%s/ (per endpoint: /e/{endpoint}); counts at GET /stats\n", r.Addr())
	err = r.Run(ctx)
	return errors.Join(err, printJSON(stdout, r.Stats()))
}

func rawCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hookbench raw", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "POST to this receiver URL; empty starts a receiver in this process")
	secret := fs.String("secret", "", "whsec_ secret the receiver at --url verifies with (a new one with its own receiver)")
	workers := fs.Int("workers", 64, "concurrent senders")
	duration := fs.Duration("duration", 10*time.Second, "how long to send")
	size := fs.Int("payload", 1536, "payload bytes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("raw: unexpected argument %q", fs.Arg(0))
	}
	cfg := RawConfig{URL: *url, Secret: *secret, Workers: *workers, Duration: *duration, PayloadBytes: *size}
	if *url == "" {
		r, stopRecv, err := ownReceiver(ctx, &cfg)
		if err != nil {
			return err
		}
		defer func() { stopRecv() }()
		res, err := Raw(ctx, cfg)
		stopRecv()
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "hookbench: raw: %d sent, %d succeeded, %d errors in %v; receiver: %d unique, %d duplicates, %d bad signatures\n",
			res.Sent, res.Succeeded, res.Errors, res.Elapsed.Round(time.Millisecond), r.Stats().Unique, r.Stats().Duplicates, r.Stats().BadSignature)
		return printJSON(stdout, res)
	}
	res, err := Raw(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "hookbench: raw: %d sent, %d succeeded, %d errors in %v\n", res.Sent, res.Succeeded, res.Errors, res.Elapsed.Round(time.Millisecond))
	return printJSON(stdout, res)
}

func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
