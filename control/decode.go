package control

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	hlproto "github.com/hookline/hookline/proto"
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

// restBody is a REST request's body as guard read it (after rawData's
// move, for a publish): the gateway reads it through the Reader, and
// explainREST reads it again to name the field a parse error is about.
type restBody struct {
	*bytes.Reader
	b []byte
}

func newRESTBody(b []byte) *restBody { return &restBody{Reader: bytes.NewReader(b), b: b} }

// Close implements io.Closer.
func (*restBody) Close() error { return nil }

var (
	// The gateway's refusals of path and query parameters.
	gwPath     = regexp.MustCompile(`^type mismatch, parameter: (\w+), error: (.*)$`)
	gwMissing  = regexp.MustCompile(`^missing parameter (\w+)$`)
	gwQuery    = regexp.MustCompile(`^(?:parsing (?:field|list) "(\w+)": |too many values for field "(\w+)": |duplicate field "([\w.]+)")`)
	strconvArg = regexp.MustCompile(`parsing "((?:[^"\\]|\\.)*)"`)
)

// explainREST turns the gateway's refusal of a REST request, before its
// call ran, into an error that names the field by its whole path and says
// what JSON it takes: a body's field of the wrong JSON type
// (settings.event_types given a string), a query parameter that does not
// parse (page_size=abc, since=5), a path parameter of the wrong type. An
// error of the call itself, or one it cannot place, goes to restError.
func explainREST(ctx context.Context, r *http.Request, err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return err
	}
	in, bodyField, ok := routeOf(ctx)
	if !ok {
		return restError(err)
	}
	msg := st.Message()
	var fe *fieldError
	switch {
	case gwPath.MatchString(msg):
		m := gwPath.FindStringSubmatch(msg)
		fe = paramProblem(in.Fields().ByName(protoreflect.Name(m[1])), m[1], m[2])
	case gwMissing.MatchString(msg):
		fe = &fieldError{field: gwMissing.FindStringSubmatch(msg)[1], msg: "is required"}
	case gwQuery.MatchString(msg):
		fe = queryProblem(in, r.URL.Query(), msg)
	case isBodyParseError(msg):
		if b, ok := r.Body.(*restBody); ok && bodyField != "-" {
			md, prefix := in, ""
			if bodyField != "" {
				if fd := in.Fields().ByName(protoreflect.Name(bodyField)); fd != nil && fd.Message() != nil {
					md, prefix = fd.Message(), bodyField+"."
				}
			}
			fe = shapeProblem(md, prefix, b.b)
		}
	}
	if fe == nil {
		return restError(err)
	}
	return status.Error(codes.InvalidArgument, fe.Error())
}

// isBodyParseError reports whether msg is a body's refusal by the
// gateway's decoder: protojson's, or encoding/json's syntax error.
func isBodyParseError(msg string) bool {
	return strings.HasPrefix(msg, "proto: ") || strings.HasPrefix(msg, "proto:\u00a0") || msg == "unexpected EOF" ||
		strings.HasPrefix(msg, "invalid character ") || strings.HasPrefix(msg, "json: ")
}

// paramProblem explains a path or query value that did not parse as its
// field's type; the gateway's message (strconv's, or time's) holds the
// value.
func paramProblem(fd protoreflect.FieldDescriptor, name, detail string) *fieldError {
	if fd == nil {
		return &fieldError{field: name, msg: "is not valid: " + detail}
	}
	got := "not that"
	if m := strconvArg.FindStringSubmatch(detail); m != nil {
		if v, err := strconv.Unquote(`"` + m[1] + `"`); err == nil {
			got = quoted(v)
		}
	}
	return &fieldError{field: name, msg: fmt.Sprintf("is not %s (it is %s)", want(fd), got)}
}

// queryProblem explains the gateway's refusal msg of the query: the key
// that does not parse as its field's type (found by parsing each key that
// names the field msg names), given twice, or too many times.
func queryProblem(in protoreflect.MessageDescriptor, q url.Values, msg string) *fieldError {
	m := gwQuery.FindStringSubmatch(msg)
	named := m[1] + m[2] + m[3]
	var keys []string
	for key := range q {
		if fd := queryField(in, key); fd != nil && (string(fd.Name()) == named || key == named) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return nil
	}
	fd := queryField(in, keys[0])
	field := queryPath(in, keys[0])
	switch {
	case m[3] != "":
		return &fieldError{field: field, msg: fmt.Sprintf("is given twice (as %s); give it once", strings.Join(keys, " and "))}
	case m[2] != "":
		return &fieldError{field: field, msg: fmt.Sprintf("is given %d times; give it once", len(q[keys[0]]))}
	}
	for _, key := range keys {
		for _, v := range q[key] {
			err := runtime.PopulateQueryParameters(newMessage(in), url.Values{key: {v}}, utilities.NewDoubleArray(nil))
			if err != nil {
				return &fieldError{field: field, msg: fmt.Sprintf("is not %s (it is %s)", want(fd), quoted(v))}
			}
		}
	}
	return nil
}

// queryField resolves a query key (page_size, pageSize, a.b) to its field
// of in, as the gateway does; nil when it names none.
func queryField(in protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	var fd protoreflect.FieldDescriptor
	md := in
	for _, part := range strings.Split(key, ".") {
		if md == nil {
			return nil
		}
		if fd = md.Fields().ByName(protoreflect.Name(part)); fd == nil {
			fd = md.Fields().ByJSONName(part)
		}
		if fd == nil {
			return nil
		}
		md = fd.Message()
	}
	return fd
}

// queryPath is a query key's field path in proto names.
func queryPath(in protoreflect.MessageDescriptor, key string) string {
	var names []string
	md := in
	for _, part := range strings.Split(key, ".") {
		fd := md.Fields().ByName(protoreflect.Name(part))
		if fd == nil {
			fd = md.Fields().ByJSONName(part)
		}
		names = append(names, string(fd.Name()))
		md = fd.Message()
	}
	return strings.Join(names, ".")
}

// routeOf returns the request message of the REST call in ctx and the
// field its route's body fills: "" for the whole message (body "*"), "-"
// for none; ok is false outside a gateway call.
func routeOf(ctx context.Context) (in protoreflect.MessageDescriptor, bodyField string, ok bool) {
	method, ok := runtime.RPCMethod(ctx) // "/hookline.v1.EndpointService/CreateEndpoint"
	if !ok {
		return nil, "", false
	}
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, "", false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	sd, isSvc := d.(protoreflect.ServiceDescriptor)
	if err != nil || !isSvc {
		return nil, "", false
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, "", false
	}
	body, ok := restBodies()[string(sd.Name())+"_"+name]
	if !ok {
		body = "-"
	}
	return md.Input(), body, true
}

// restBodies maps each REST route's operation (EndpointService_CreateEndpoint)
// to the field its body fills ("" for the whole request), from the OpenAPI
// document that gateway.yaml generated.
var restBodies = sync.OnceValue(func() map[string]string {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	out := map[string]string{}
	if err := json.Unmarshal(hlproto.OpenAPI, &doc); err != nil {
		return out
	}
	for _, ops := range doc.Paths {
		for _, op := range ops {
			for _, p := range op.Parameters {
				if p.In == "body" {
					out[op.OperationID] = strings.TrimPrefix(p.Name, "body")
				}
			}
		}
	}
	return out
})

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
