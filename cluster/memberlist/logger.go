package memberlist

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// newStdLogger returns the *log.Logger that memberlist requires, writing
// each of its lines to l at debug level. memberlist prefixes its lines with
// a level ("[DEBUG] memberlist: ..."); that level is kept as the attribute
// memberlist_level rather than mapped, because memberlist logs routine
// events of a graceful leave as errors. Membership changes that matter are
// logged by the provider itself at info level.
func newStdLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{l: l}, "", 0)
}

// slogWriter adapts a *slog.Logger to io.Writer, one Write per log line.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !w.l.Enabled(context.Background(), slog.LevelDebug) {
		return n, nil
	}
	line := bytes.TrimSpace(p)
	level := "INFO"
	if len(line) > 0 && line[0] == '[' {
		if end := bytes.IndexByte(line, ']'); end > 0 {
			level = string(line[1:end])
			line = bytes.TrimSpace(line[end+1:])
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	w.l.Debug("memberlist", slog.String("memberlist_level", level), slog.String("line", string(line)))
	return n, nil
}
