package main

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Every command's flags go through newFlags and parseFlags, so that every
// command answers -h with the same help (help) and refuses a mistyped flag
// the same way, naming the closest one.

// newFlags is the flag set of the command name. It prints nothing itself:
// parseFlags turns its outcomes into help and errors.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(discard{})
	fs.Usage = func() {}
	return fs
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// helpWanted is what -h asks for: run prints the help of its command, made
// from fs, on stdout and succeeds.
type helpWanted struct{ fs *flag.FlagSet }

func (h helpWanted) Error() string { return h.fs.Name() + ": help wanted" }

// parseFlags parses args into fs, the flags of the command name: -h (or
// --help) answers helpWanted; a flag error is
// rewritten with "--" and, for an unknown flag, the closest known one; an
// argument left over is refused.
func parseFlags(fs *flag.FlagSet, args []string) error {
	name := fs.Name()
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return helpWanted{fs}
	case err != nil:
		return flagError(name, fs, err)
	case fs.NArg() > 0:
		return fmt.Errorf("%s: unexpected argument %q; flags go as --name value (hookline %s -h lists them)", name, fs.Arg(0), name)
	}
	return nil
}

// The flag package's errors, whose flag names parseFlags rewrites.
var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	missingValue  = regexp.MustCompile(`^flag needs an argument: -+(.+)$`)
	badValue      = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for flag -+([^:]+): (.*)$`)
)

// flagError says what was wrong with a command's flags, with "--", the
// closest flag to an unknown one, and where the flags are listed.
func flagError(name string, fs *flag.FlagSet, err error) error {
	msg := err.Error()
	see := fmt.Sprintf("(hookline %s -h lists its flags)", name)
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		var known []string
		fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
		if best := closest(m[1], known); best != "" {
			return fmt.Errorf("%s: unknown flag --%s; did you mean --%s? %s", name, m[1], best, see)
		}
		return fmt.Errorf("%s: unknown flag --%s %s", name, m[1], see)
	}
	if m := missingValue.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s: --%s needs a value %s", name, m[1], see)
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s: --%s %s: %s", name, m[2], strconv.Quote(m[1]), m[3])
	}
	return fmt.Errorf("%s: %s %s", name, msg, see)
}

// clientFlagNames are the flags clientFlags declares: help lists them
// apart.
var clientFlagNames = []string{"addr", "token", "ca", "plaintext", "timeout", "json"}

// help is a command's -h text: what it does, its synopsis, its flags with
// "--", each with its default when it has one, and an example.
func help(cmd command, fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hookline %s: %s\n\nUsage:\n  hookline %s %s\n", cmd.name, cmd.summary, cmd.name, cmd.synopsis())
	if cmd.about != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(cmd.about))
	}
	var own, client []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if cmd.call != nil && slices.Contains(clientFlagNames, f.Name) {
			client = append(client, f)
		} else {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		b.WriteString("\nFlags:\n")
		writeFlags(&b, own)
	}
	if len(client) > 0 {
		b.WriteString("\nClient flags (also before the command):\n")
		writeFlags(&b, client)
	}
	fmt.Fprintf(&b, "\nExample:\n  %s\n", cmd.example)
	return b.String()
}

// writeFlags lists flags as "--name VALUE", their usage below, indented.
func writeFlags(b *strings.Builder, flags []*flag.Flag) {
	for _, f := range flags {
		kind, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(b, "  %s\n      %s", strings.TrimSpace("--"+f.Name+" "+kind), usage)
		if d := f.DefValue; d != "" && d != "0" && d != "0s" && d != "false" && d != "[]" {
			fmt.Fprintf(b, " (default %s)", strconv.Quote(redactDSN(d)))
		}
		b.WriteString("\n")
	}
}

// closest is the word of known nearest to word, if it is near enough to
// be what was meant (an edit or two, or a prefix); "" otherwise.
func closest(word string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		d := distance(word, k)
		if strings.HasPrefix(k, word) && len(word) >= 3 {
			d = min(d, 1)
		}
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD < 0 || bestD > max(2, len(word)/3) {
		return ""
	}
	return best
}

// distance is the Levenshtein distance of a and b, with a transposition
// of two neighbours counting one (lst/list, tpyes/types).
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
