package control

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The REST side of decoding a request: the publish routes' "data" moved
// into "payload" before the gateway parses the body, and the gateway's
// parse errors, which are protojson's ("proto: (line 1:36): invalid value
// for bytes field payload"), turned into field errors a user can act on.

// moveData rewrites a publish body (or, with batch, each of its "events")
// so that a JSON "data" value becomes "payload": the base64 of its
// compacted bytes. It fails on a body that is not a JSON object; the
// caller then hands the body to the gateway unchanged, which reports it.
func moveData(body []byte, batch bool) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	if !batch {
		if err := moveOne(obj); err != nil {
			return nil, err
		}
		return json.Marshal(obj)
	}
	var evs []map[string]json.RawMessage
	if raw, ok := obj["events"]; ok {
		if err := json.Unmarshal(raw, &evs); err != nil {
			return nil, err
		}
		for _, ev := range evs {
			if err := moveOne(ev); err != nil {
				return nil, err
			}
		}
		raw, err := json.Marshal(evs)
		if err != nil {
			return nil, err
		}
		obj["events"] = raw
	}
	return json.Marshal(obj)
}

func moveOne(obj map[string]json.RawMessage) error {
	if obj == nil {
		return errors.New("an event is not a JSON object")
	}
	data, ok := obj["data"]
	if !ok {
		return nil
	}
	if _, has := obj["payload"]; has {
		return nil // let validation name the conflict
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return err
	}
	enc, err := json.Marshal(base64.StdEncoding.EncodeToString(buf.Bytes()))
	if err != nil {
		return err
	}
	delete(obj, "data")
	obj["payload"] = enc
	return nil
}

var (
	// protojson's messages, after its "proto: " prefix.
	pjInvalidValue = regexp.MustCompile(`^\(line (\d+):(\d+)\): invalid value for (\w+) field (\w+): `)
	pjFieldProblem = regexp.MustCompile(`^\(line (\d+):(\d+)\): (unknown|duplicate) field "([^"]*)"`)
	pjWellKnown    = regexp.MustCompile(`^\(line (\d+):(\d+)\): invalid (google\.protobuf\.\w+) value`)
	pjSyntax       = regexp.MustCompile(`^syntax error \(line (\d+):(\d+)\): (.*)$`)
	pjAt           = regexp.MustCompile(`^\(line (\d+):(\d+)\): (.*)$`)
	identifier     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// kinds says, for a protobuf field kind, what JSON a field of it takes.
var kinds = map[string]string{
	"bytes":    "a base64 string (or, for an event's body, a JSON value in data)",
	"string":   "a JSON string",
	"bool":     "true or false",
	"int32":    "an integer",
	"sint32":   "an integer",
	"sfixed32": "an integer",
	"uint32":   "a non-negative integer",
	"fixed32":  "a non-negative integer",
	"int64":    "an integer (or a string of digits)",
	"sint64":   "an integer (or a string of digits)",
	"sfixed64": "an integer (or a string of digits)",
	"uint64":   "a non-negative integer (or a string of digits)",
	"fixed64":  "a non-negative integer (or a string of digits)",
	"float":    "a number",
	"double":   "a number",
	"enum":     "one of the value names listed in /openapi.json",
}

// restError rewrites a REST body parse error into a field error: the
// gateway answers INVALID_ARGUMENT with protojson's message. Any other
// error is returned as it is.
func restError(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return err
	}
	// protojson's prefix is "proto:" and a space, which is a no-break
	// space (U+00A0) in some builds, on purpose: its messages are not
	// meant to be parsed. What follows the prefix is stable.
	msg, ok := strings.CutPrefix(st.Message(), "proto: ")
	if !ok {
		msg, ok = strings.CutPrefix(st.Message(), "proto:\u00a0")
	}
	if !ok {
		// The gateway reads the body with encoding/json before protojson
		// sees it: syntax errors come from there, unprefixed.
		if m := st.Message(); m == "unexpected EOF" || strings.HasPrefix(m, "invalid character ") || strings.HasPrefix(m, "json: ") {
			return status.Error(codes.InvalidArgument, (&fieldError{field: "body", msg: "is not valid JSON: " + strings.TrimPrefix(m, "json: ")}).Error())
		}
		return err
	}
	return status.Error(codes.InvalidArgument, parseProblem(msg).Error())
}

// parseProblem turns protojson's message (without "proto: ") into a
// *fieldError.
func parseProblem(msg string) *fieldError {
	at := func(line, col string) string { return "at line " + line + ", column " + col }
	if m := pjInvalidValue.FindStringSubmatch(msg); m != nil {
		want, ok := kinds[m[3]]
		if !ok {
			want = "a " + m[3]
		}
		return &fieldError{field: snake(m[4]), msg: fmt.Sprintf("is not %s (%s)", want, at(m[1], m[2]))}
	}
	if m := pjFieldProblem.FindStringSubmatch(msg); m != nil {
		name := m[4]
		if !identifier.MatchString(name) {
			// Not a name any field could have: say it in the message.
			return &fieldError{field: "body", msg: fmt.Sprintf("has the %s field %q (%s); see /openapi.json for the fields", m[3], name, at(m[1], m[2]))}
		}
		if m[3] == "unknown" {
			return &fieldError{field: name, msg: fmt.Sprintf("is not a field of this request (%s); see /openapi.json for the fields", at(m[1], m[2]))}
		}
		return &fieldError{field: name, msg: fmt.Sprintf("is given twice (%s); give it once", at(m[1], m[2]))}
	}
	if m := pjWellKnown.FindStringSubmatch(msg); m != nil {
		want := "a valid " + m[3]
		switch m[3] {
		case "google.protobuf.Timestamp":
			want = "an RFC 3339 time such as 2026-12-01T10:00:00Z"
		case "google.protobuf.Duration":
			want = "a duration in seconds such as \"1.5s\""
		case "google.protobuf.FieldMask":
			want = "a comma-separated list of field names"
		}
		return &fieldError{field: "body", msg: fmt.Sprintf("has a value that is not %s (%s)", want, at(m[1], m[2]))}
	}
	if m := pjSyntax.FindStringSubmatch(msg); m != nil {
		return &fieldError{field: "body", msg: fmt.Sprintf("is not valid JSON: %s (%s)", m[3], at(m[1], m[2]))}
	}
	if msg == "unexpected EOF" {
		return &fieldError{field: "body", msg: "is not valid JSON: it ends before the value is complete"}
	}
	if m := pjAt.FindStringSubmatch(msg); m != nil {
		return &fieldError{field: "body", msg: fmt.Sprintf("%s (%s)", m[3], at(m[1], m[2]))}
	}
	return &fieldError{field: "body", msg: msg}
}

// snake turns a protojson field name (the JSON name, eventId) into the
// proto name the REST API uses (event_id).
func snake(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}
