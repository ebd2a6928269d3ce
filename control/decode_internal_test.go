package control

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// This is an internal test: the REST decoding steps (moving "data" into
// "payload", turning parse errors into field errors) and the publish
// validation are unexported, and the fuzzer needs them without a node.

// fieldMessage is the shape of every refusal's message: a field, ": ", why.
var fieldMessage = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\[\d+\])?(\.[A-Za-z_][A-Za-z0-9_]*(\[\d+\])?)*: \S`)

// FuzzRESTDecode feeds arbitrary bodies to the REST publish path as the
// gateway runs it: rawData's move of "data" into "payload", the gateway's
// JSON decoding into the request, the error rewrite, and the publish
// validation. It checks that nothing panics, that a moved "data" keeps its
// exact (compacted) bytes, that every parse error reads as a field error
// (never protojson's "proto: (line 1:36): …"), and that whatever
// validation accepts can be sent as the attempt's headers. The seed corpus
// in testdata/fuzz/FuzzRESTDecode holds the tricky cases.
func FuzzRESTDecode(f *testing.F) {
	s := &Server{cfg: Config{Now: func() time.Time { return time.Unix(1_800_000_000, 0) }}}
	s.cfg.defaults()
	gw := &runtime.JSONPb{UnmarshalOptions: protojson.UnmarshalOptions{}}
	f.Fuzz(func(t *testing.T, body []byte, batch bool) {
		moved, err := moveData(body, batch)
		if err != nil {
			moved = body
		} else {
			checkMoved(t, body, moved, batch)
		}
		var msg proto.Message = &controlv1.PublishRequest{}
		if batch {
			msg = &controlv1.PublishBatchRequest{}
		}
		// As the generated handler does, an empty body is an empty request.
		if err := gw.NewDecoder(bytes.NewReader(moved)).Decode(msg); err != nil && !errors.Is(err, io.EOF) {
			// What the generated gateway handler does with the error.
			st, _ := status.FromError(restError(status.Errorf(codes.InvalidArgument, "%v", err)))
			if !fieldMessage.MatchString(st.Message()) {
				t.Fatalf("parse error %q reads %q: not a field error", err, st.Message())
			}
			return
		}
		reqs := []*controlv1.PublishRequest{}
		if batch {
			reqs = msg.(*controlv1.PublishBatchRequest).GetEvents()
		} else {
			reqs = append(reqs, msg.(*controlv1.PublishRequest))
		}
		for _, req := range reqs {
			ev, err := s.eventOf("acme", Caller{TenantID: "acme", KeyID: "k"}, req)
			if err != nil {
				if !fieldMessage.MatchString(err.Error()) {
					t.Fatalf("validation error %q is not a field error", err)
				}
				continue
			}
			for name, v := range map[string]string{
				"webhook-event-id": ev.GetEventId(), "webhook-event-type": ev.GetEventType(),
				"webhook-schema-version": ev.GetSchemaVersion(), "Content-Type": ev.GetContentType(),
			} {
				if !httpguts.ValidHeaderFieldValue(v) {
					t.Fatalf("accepted %s %q, which cannot be sent as a header", name, v)
				}
			}
		}
	})
}

// checkMoved checks that moveData turned each "data" into a "payload"
// holding the compacted bytes of that very value.
func checkMoved(t *testing.T, in, out []byte, batch bool) {
	t.Helper()
	var before, after map[string]json.RawMessage
	if err := json.Unmarshal(in, &before); err != nil {
		t.Fatalf("moveData accepted a body that is not a JSON object: %q", in)
	}
	if err := json.Unmarshal(out, &after); err != nil {
		t.Fatalf("moveData wrote invalid JSON %q from %q", out, in)
	}
	pairs := [][2]map[string]json.RawMessage{{before, after}}
	if batch {
		var b, a []map[string]json.RawMessage
		_ = json.Unmarshal(before["events"], &b)
		_ = json.Unmarshal(after["events"], &a)
		if len(a) != len(b) {
			t.Fatalf("moveData changed the number of events: %q -> %q", in, out)
		}
		pairs = pairs[:0]
		for i := range b {
			pairs = append(pairs, [2]map[string]json.RawMessage{b[i], a[i]})
		}
	}
	for _, p := range pairs {
		data, hadData := p[0]["data"]
		_, hadPayload := p[0]["payload"]
		if !hadData || hadPayload {
			continue
		}
		var enc string
		if err := json.Unmarshal(p[1]["payload"], &enc); err != nil {
			t.Fatalf("moved payload %q is not a string", p[1]["payload"])
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			t.Fatalf("moved payload %q is not base64", enc)
		}
		var want bytes.Buffer
		if err := json.Compact(&want, data); err != nil {
			t.Fatalf("moveData moved data %q that does not compact", data)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("data %q became payload %q, want %q", data, got, want.Bytes())
		}
	}
}

// bodyMessages are the messages a REST body can fill: every request of the
// control API's services and every message field a route's body names
// (settings, quota), in a fixed order.
func bodyMessages(t testing.TB) []protoreflect.MessageDescriptor {
	var out []protoreflect.MessageDescriptor
	for _, path := range []string{"hookline/v1/control.proto", "hookline/v1/console.proto", "hookline/v1/reconcile.proto"} {
		fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				in := sd.Methods().Get(j).Input()
				out = append(out, in)
				if body := restBodies()[string(sd.Name())+"_"+string(sd.Methods().Get(j).Name())]; body != "" {
					out = append(out, in.Fields().ByName(protoreflect.Name(body)).Message())
				}
			}
		}
	}
	return out
}

// FuzzRESTShape feeds arbitrary bodies to every message a REST body can
// fill, decoded as the gateway decodes them, and checks the explanation
// of a refusal against protojson itself: a body protojson accepts has no
// problem for shapeProblem; one it refuses that is valid JSON has one,
// named by a field path that exists in the message (or "body"), as a field
// error without a line and column. The seed corpus in
// testdata/fuzz/FuzzRESTShape holds the kinds of mismatch.
func FuzzRESTShape(f *testing.F) {
	msgs := bodyMessages(f)
	gw := &runtime.JSONPb{UnmarshalOptions: protojson.UnmarshalOptions{}}
	f.Fuzz(func(t *testing.T, body []byte, pick uint16) {
		md := msgs[int(pick)%len(msgs)]
		err := gw.NewDecoder(bytes.NewReader(body)).Decode(newMessage(md))
		fe := shapeProblem(md, "", body)
		var raw json.RawMessage
		validJSON := json.NewDecoder(bytes.NewReader(body)).Decode(&raw) == nil
		switch {
		case err == nil && fe != nil:
			t.Fatalf("%s accepts %q, yet shapeProblem finds %v", md.FullName(), body, fe)
		case err != nil && !errors.Is(err, io.EOF) && validJSON && fe == nil:
			t.Fatalf("%s refuses %q (%v), and shapeProblem finds no field", md.FullName(), body, err)
		case fe == nil:
			return
		}
		if !fieldMessage.MatchString(fe.Error()) || strings.Contains(fe.Error(), "(at line ") {
			t.Fatalf("%s: %q reads %q: not a field error without a position", md.FullName(), body, fe.Error())
		}
		if !fieldExists(md, fe.field) {
			t.Fatalf("%s: %q names %s, which is no field of it", md.FullName(), body, fe.field)
		}
	})
}

// indexes are the list indexes of a field path: events[2].type.
var indexes = regexp.MustCompile(`\[\d+\]`)

// fieldExists reports whether path (a.b[2].c) names a field of md, or is
// "body"; an unknown field's own name counts, as the refusal names it.
func fieldExists(md protoreflect.MessageDescriptor, path string) bool {
	if path == "body" {
		return true
	}
	parts := strings.Split(indexes.ReplaceAllString(path, ""), ".")
	for i, p := range parts {
		if md == nil {
			return false
		}
		fd := md.Fields().ByName(protoreflect.Name(p))
		if fd == nil {
			return i == len(parts)-1 // an unknown field, named as given
		}
		md = fd.Message()
		if fd.IsMap() {
			md = fd.MapValue().Message()
		}
	}
	return true
}
