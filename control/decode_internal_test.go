package control

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

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
