// Command hookline is the Hookline binary: `hookline serve` runs a node,
// `hookline dev` a local playground, `hookline relay` moves a producer's
// outbox rows into Hookline, `hookline receive` is a local receiver that
// verifies and prints webhooks, and the other commands are clients of a
// node's control API (through the client package). Wiring only: the logic
// lives in the packages.
//
// Every command is one row of the table commands, from which the usage
// text is made: a command added there is listed. The flags of serve are one
// table too (serveFlags): a row names the flag, its environment variable,
// its default and the field of node.Config it sets.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// command is one command of the binary. Exactly one of run and call is
// set.
type command struct {
	// name is one or two words: "serve", "endpoints create".
	name string
	// group heads the command's part of the usage text.
	group   string
	summary string
	// args is the synopsis after the command's name ("" for "[flags]"),
	// about an optional paragraph of its -h text, and example a command
	// line that runs it (help.go makes the -h text from them).
	args, about, example string
	// run runs a command that parses its own flags (newFlags, parseFlags).
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// call declares a client command's own flags and returns what it does
	// with a connected client; the client flags (clientFlags) are added.
	call func(fs *flag.FlagSet) func(ctx context.Context, c *conn) error
}

// synopsis is what follows the command's name in its usage line.
func (c command) synopsis() string {
	if c.args == "" {
		return "[flags]"
	}
	return c.args
}

const (
	groupNode     = "Run Hookline"
	groupProducer = "Producers: the transactional outbox (see the README)"
	groupReceiver = "Receivers"
	groupClient   = "Clients of a node's control API"
)

// commands is every command, in the order of the usage text.
var commands = []command{
	{name: "dev", group: groupNode, summary: "a local playground: node, receiver, sample events", run: dev,
		about:   "Starts a node on a temporary embedded log (private targets allowed: development only), a receiver that verifies every signature, a tenant and an endpoint, publishes three sample events and shows their deliveries as they unfold, until Ctrl-C.",
		example: "hookline dev"},
	{name: "serve", group: groupNode, summary: "run a node", about: serveAbout,
		run:     func(ctx context.Context, args []string, _, stderr io.Writer) error { return serve(ctx, args, stderr) },
		example: "HOOKLINE_ADMIN_TOKEN=$(openssl rand -hex 24) hookline serve --data ./data --allow-private-targets"},
	{name: "reconcile", group: groupNode, summary: "compare every durable boundary with the log (admin; --repair; --data DIR: a stopped node)", about: reconcileAbout,
		run: reconcileRun, example: "hookline reconcile --data ./data --skip-replay"},

	{name: "relay", group: groupProducer, summary: "move committed outbox rows into Hookline, until stopped", args: "--db postgres://… [flags]",
		about: "Moves committed rows of the outbox table into Hookline, at least once and idempotently by event id, until stopped. Run several for availability.",
		run:   relayRun, example: "hookline relay --db postgres://relay:secret@db:5432/app --addr hookline:7070 --ca ca.pem"},
	{name: "outbox schema", group: groupProducer, summary: "print the outbox table's SQL, for your migrations", run: outboxSchema,
		example: "hookline outbox schema --table app.outbox > migration.sql"},
	{name: "outbox init", group: groupProducer, summary: "create the outbox table (if it does not exist)", args: "--db postgres://… [flags]", run: outboxInit,
		example: "hookline outbox init --db postgres://app:secret@db:5432/app"},
	{name: "outbox reconcile", group: groupProducer, summary: "compare committed outbox rows with the events Hookline accepted", args: "--db postgres://… --since TIME [flags]",
		run: outboxReconcile, example: "hookline outbox reconcile --db postgres://app:secret@db:5432/app --since 24h --repair"},

	{name: "receive", group: groupReceiver, summary: "a local receiver for trying Hookline out: verifies and prints each webhook (--secret)", about: receiveAbout,
		run: receiveRun, example: "hookline receive --addr 127.0.0.1:9000 --secret whsec_…"},

	{name: "tenants create", group: groupClient, summary: "create a tenant (admin)", args: "--id ID [--name NAME]", call: tenantsCreate,
		example: `hookline tenants create --id acme --name "Acme Inc"`},
	{name: "tenants get", group: groupClient, summary: "show a tenant and its keys", call: tenantsGet,
		example: "hookline tenants get --id acme"},
	{name: "tenants update", group: groupClient, summary: "change a tenant's own settings (--schema-enforcement off|warn|reject, --retention DURATION)", call: tenantsUpdate,
		example: "hookline tenants update --schema-enforcement warn"},
	{name: "tenants erase", group: groupClient, summary: "crypto-shred a tenant's payloads and response bodies, for good (admin; --confirm repeats --id)", args: "--id ID --confirm ID",
		call: tenantsErase, example: "hookline tenants erase --id acme --confirm acme"},
	{name: "event-types put", group: groupClient, summary: "define an event type of the catalog, or a new version: description, example, JSON Schema", args: "--type TYPE [flags]",
		call: eventTypesPut, example: `hookline event-types put --type order.paid --description "An order was paid." --schema @order.paid.schema.json`},
	{name: "event-types list", group: groupClient, summary: "list the catalog's event types and the schema enforcement", call: eventTypesList,
		example: "hookline event-types list"},
	{name: "event-types export", group: groupClient, summary: "print the catalog as an OpenAPI 3.1 document of webhooks, or as JSON Schemas (--format jsonschema)", call: eventTypesExport,
		example: "hookline event-types export --format jsonschema"},
	{name: "keys issue", group: groupClient, summary: "issue an API key for a tenant (admin); shown once", args: "--tenant ID [flags]", call: keysIssue,
		example: "hookline keys issue --tenant acme --name billing --quiet"},
	{name: "keys revoke", group: groupClient, summary: "revoke an API key (admin)", args: "--tenant ID --key-id ID", call: keysRevoke,
		example: "hookline keys revoke --tenant acme --key-id key_…"},
	{name: "keys reseal", group: groupClient, summary: "rotate the master key: reseal every endpoint's secrets under the current one (admin)", call: keysReseal,
		example: "hookline keys reseal"},
	{name: "endpoints create", group: groupClient, summary: "register an endpoint; its secret is shown once", args: "--url URL --types TYPES [flags]", call: endpointsCreate,
		example: "hookline endpoints create --url https://hooks.example.com/in --types 'invoice.*' --quiet"},
	{name: "endpoints get", group: groupClient, summary: "show an endpoint", args: "--id ID [flags]", call: endpointsGet,
		example: "hookline endpoints get --id ep_…"},
	{name: "endpoints list", group: groupClient, summary: "list endpoints", call: endpointsList,
		example: "hookline endpoints list --limit 20"},
	{name: "endpoints update", group: groupClient, summary: "change an endpoint's settings", args: "--id ID SETTING… [flags]", call: endpointsUpdate,
		example: "hookline endpoints update --id ep_… --types invoice.paid,order.shipped"},
	{name: "endpoints pause", group: groupClient, summary: "hold an endpoint's deliveries", args: "--id ID", call: endpointsPause,
		example: "hookline endpoints pause --id ep_…"},
	{name: "endpoints resume", group: groupClient, summary: "resume a paused endpoint", args: "--id ID", call: endpointsResume,
		example: "hookline endpoints resume --id ep_…"},
	{name: "endpoints delete", group: groupClient, summary: "delete an endpoint", args: "--id ID", call: endpointsDelete,
		example: "hookline endpoints delete --id ep_…"},
	{name: "endpoints rotate-secret", group: groupClient, summary: "add a new signing secret; shown once", args: "--id ID [flags]", call: endpointsRotate,
		example: "hookline endpoints rotate-secret --id ep_… --overlap 48h --quiet"},
	{name: "endpoints retire-secret", group: groupClient, summary: "retire an old secret before its overlap ends", args: "--id ID --version N", call: endpointsRetire,
		example: "hookline endpoints retire-secret --id ep_… --version 1"},
	{name: "endpoints recover", group: groupClient, summary: "replay an endpoint's deliveries in a time window (filter by status, types; --dry-run for the manifest)", args: "--id ID --since TIME [flags]",
		call: endpointsRecover, example: "hookline endpoints recover --id ep_… --since 2h --until 1h --dry-run"},
	{name: "endpoints pull", group: groupClient, summary: "lease a pull endpoint's due deliveries and print them (--ack acknowledges them)", args: "--id ID [flags]", call: endpointsPull,
		example: "hookline endpoints pull --id ep_… --max 10 --lease 30s --wait 5s --ack"},
	{name: "endpoints ordering-keys", group: groupClient, summary: "list an ordered endpoint's blocked keys (--state all: every key with a delivery waiting)", args: "--id ID [flags]",
		call: endpointsOrderingKeys, example: "hookline endpoints ordering-keys --id ep_… --state all"},
	{name: "endpoints skip-key", group: groupClient, summary: "end an ordering key's head delivery so that its next one goes (--key, --head)", args: "--id ID --key KEY [--head DELIVERY]",
		call: endpointsSkipKey, example: "hookline endpoints skip-key --id ep_… --key ord_7 --head dlv_…"},
	{name: "endpoints recovery", group: groupClient, summary: "show the progress of a recovery (--recovery), or list an endpoint's recoveries", args: "--id ID [--recovery ID]",
		call: endpointsRecovery, example: "hookline endpoints recovery --id ep_…"},
	{name: "events publish", group: groupClient, summary: "publish an event", args: "--id ID --type TYPE --data JSON [flags]", call: eventsPublish,
		example: `hookline events publish --id inv_1001 --type invoice.paid --data '{"invoice":"1001","amount":4200}'`},
	{name: "events get", group: groupClient, summary: "show an event and its payload", args: "--id ID", call: eventsGet,
		example: "hookline events get --id inv_1001"},
	{name: "events operational-types", group: groupClient, summary: "list Hookline's own event types (hookline.*) an endpoint can name, with an example each", call: eventsOperationalTypes,
		example: "hookline events operational-types --examples"},
	{name: "events routing", group: groupClient, summary: "why an event reached, or did not reach, each endpoint (from the log)", args: "--id ID", call: eventsRouting,
		example: "hookline events routing --id inv_1001"},
	{name: "deliveries list", group: groupClient, summary: "search deliveries (newest first); a pending one says what it waits for", call: deliveriesList,
		example: "hookline deliveries list --status pending --since 2h"},
	{name: "deliveries get", group: groupClient, summary: "show a delivery and its attempts", args: "--id ID", call: deliveriesGet,
		example: "hookline deliveries get --id dlv_…"},
	{name: "deliveries replay", group: groupClient, summary: "attempt a delivery again (same webhook-id)", args: "--id ID", call: deliveriesReplay,
		example: "hookline deliveries replay --id dlv_…"},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "hookline:", err)
		}
		os.Exit(1)
	}
}

// run runs the command args name. A command's -h prints its help on
// stdout and succeeds.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return flag.ErrHelp
	}
	switch args[0] {
	case "help", "-h", "--help", "-help":
		if len(args) > 1 && args[0] == "help" { // hookline help endpoints create
			return run(ctx, append(args[1:], "-h"), stdout, stderr)
		}
		fmt.Fprint(stdout, usage())
		return nil
	}
	// Flags may come before the command (hookline --addr X endpoints
	// list): they are moved after it.
	lead, rest := leadingFlags(args)
	cmd, err := lookup(rest)
	if err != nil {
		return err
	}
	words := len(strings.Fields(cmd.name))
	args = append(lead, rest[words:]...)
	if cmd.run != nil {
		err = cmd.run(ctx, args, stdout, stderr)
	} else {
		err = runClient(ctx, cmd, args, stdout, stderr)
	}
	var h helpWanted
	if errors.As(err, &h) {
		fmt.Fprint(stdout, help(cmd, h.fs))
		return nil
	}
	return err
}

// leadingFlags splits the flags before the command's words from the rest.
// A flag takes the next argument as its value unless it has "=" or is a
// boolean flag of the client commands.
func leadingFlags(args []string) (lead, rest []string) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		lead = append(lead, args[0])
		name := strings.TrimLeft(args[0], "-")
		takesValue := !strings.Contains(name, "=") && !boolFlags[name]
		args = args[1:]
		if takesValue && len(args) > 0 {
			lead = append(lead, args[0])
			args = args[1:]
		}
	}
	return lead, args
}

// boolFlags are the client flags that take no value (--quiet and -q are
// those of the commands that show a secret once).
var boolFlags = map[string]bool{"json": true, "plaintext": true, "quiet": true, "q": true, "h": true, "help": true}

// find is the command named name.
func find(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// lookup finds the command that args start with: two words, or one. A
// word that names no command is answered with the closest one.
func lookup(args []string) (command, error) {
	if len(args) == 0 {
		return command{}, usageError("give a command, e.g. hookline endpoints list")
	}
	if len(args) >= 2 {
		if c, ok := find(args[0] + " " + args[1]); ok {
			return c, nil
		}
	}
	if c, ok := find(args[0]); ok {
		return c, nil
	}
	if actions := actionsOf(args[0]); len(actions) > 0 {
		list := "actions of hookline " + args[0] + ": " + strings.Join(actions, ", ")
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return command{}, fmt.Errorf("%s: give an action, e.g. hookline %s %s\n%s", args[0], args[0], actions[0], list)
		}
		if best := closest(args[1], actions); best != "" {
			return command{}, fmt.Errorf("%s: unknown action %s; did you mean %s?\n%s", args[0], args[1], best, list)
		}
		return command{}, fmt.Errorf("%s: unknown action %s\n%s", args[0], args[1], list)
	}
	var firsts []string // the commands' first words, and one-word commands
	for _, c := range commands {
		if w := strings.Fields(c.name)[0]; !slices.Contains(firsts, w) {
			firsts = append(firsts, w)
		}
	}
	if best := closest(args[0], firsts); best != "" {
		meant := best
		if len(args) >= 2 && len(actionsOf(best)) > 0 {
			if a := closest(args[1], actionsOf(best)); a != "" {
				meant += " " + a
			}
		}
		return command{}, fmt.Errorf("unknown command %s; did you mean hookline %s? (hookline help lists the commands)", args[0], meant)
	}
	return command{}, usageError(fmt.Sprintf("unknown command %q", args[0]))
}

// actionsOf lists the second words of the two-word commands that start
// with group ("endpoints": create, get, …), in the table's order.
func actionsOf(group string) []string {
	var out []string
	for _, c := range commands {
		if g, action, ok := strings.Cut(c.name, " "); ok && g == group {
			out = append(out, action)
		}
	}
	return out
}

// usageError is msg followed by the list of commands.
func usageError(msg string) error {
	return fmt.Errorf("%s\n\n%s", msg, commandList())
}

// usage is the binary's help text, made from the command table and the
// client flags.
func usage() string {
	var b strings.Builder
	b.WriteString("hookline: webhook delivery, at least once, signed, retried, searchable.\n\n")
	b.WriteString("Usage: hookline COMMAND [flags]    (hookline COMMAND -h lists a command's flags)\n\n")
	b.WriteString(commandList())
	b.WriteString("\nClient flags (before or after the command; the client commands, relay and outbox reconcile):\n")
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	clientFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%-18s %s\n", strings.TrimSpace(f.Name+" "+name), help)
	})
	return b.String()
}

// commandList lists the commands by group, with their summaries.
func commandList() string {
	var b strings.Builder
	group := ""
	for _, c := range commands {
		if c.group != group {
			if group != "" {
				b.WriteString("\n")
			}
			group = c.group
			b.WriteString(group + ":\n")
		}
		fmt.Fprintf(&b, "  hookline %-24s %s\n", c.name, c.summary)
	}
	return b.String()
}
