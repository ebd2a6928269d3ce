package control_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/hookline/hookline/control"
	hlproto "github.com/hookline/hookline/proto"
	_ "github.com/hookline/hookline/proto/gen/hookline/v1/controlv1" // registers the API's descriptors
)

// These tests walk the control API's services by reflection, so that a
// new method, message or field is covered without a new line here: every
// RPC has a REST route, every field of every REST body given a value of
// the wrong JSON type is refused naming the field by its whole path, every
// query parameter that does not parse likewise, and every paging field out
// of its range is refused naming it.

// apiFiles are the proto files of the public control API.
var apiFiles = []string{"hookline/v1/control.proto", "hookline/v1/console.proto", "hookline/v1/reconcile.proto"}

// route is one REST route of the OpenAPI document.
type route struct {
	verb, path string
	body       string // the field the body fills: "" none, "*" the whole request
	query      []string
	in         protoreflect.MessageDescriptor
}

// routes returns every RPC of the API with its REST route; the test fails
// for an RPC without one.
func routes(t *testing.T) map[string]route {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct{ Name, In string }
		}
	}
	if err := json.Unmarshal(hlproto.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	byOp := map[string]route{}
	for path, ops := range doc.Paths {
		for verb, op := range ops {
			r := route{verb: strings.ToUpper(verb), path: path}
			for _, p := range op.Parameters {
				switch p.In {
				case "body":
					r.body = p.Name
					if r.body == "body" {
						r.body = "*"
					}
				case "query":
					r.query = append(r.query, p.Name)
				}
			}
			byOp[op.OperationID] = r
		}
	}
	out := map[string]route{}
	for _, path := range apiFiles {
		fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				op := string(sd.Name()) + "_" + string(md.Name())
				r, ok := byOp[op]
				if !ok {
					t.Errorf("%s has no REST route: add it to proto/hookline/v1/gateway.yaml", md.FullName())
					continue
				}
				r.in = md.Input()
				out[op] = r
			}
		}
	}
	if len(out) < 40 {
		t.Fatalf("found %d RPCs; the walk of the API's files is broken", len(out))
	}
	return out
}

// restServer serves the REST gateway of a control API on loopback, as the
// node does, with the admin token and a tenant acme.
func restServer(t *testing.T) *httptest.Server {
	t.Helper()
	n := start(t, control.Config{})
	n.tenant(t, "acme")
	h, err := n.srv.Handler(context.Background(), n.cc)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// call sends one REST request as the admin and returns the status and the
// answer's message.
func call(t *testing.T, ts *httptest.Server, verb, path string, body []byte) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(t.Context(), verb, ts.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out struct{ Message string }
	_ = json.Unmarshal(raw, &out)
	if out.Message == "" {
		out.Message = string(raw)
	}
	return res.StatusCode, out.Message
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// fill puts a value of the right type in each path parameter of r (or
// the value params gives it), and tenant_id=acme in its query when it has
// one.
func (r route) fill(query url.Values) string { return r.fillPath(nil, query) }

func (r route) fillPath(params map[string]string, query url.Values) string {
	p := pathParam.ReplaceAllStringFunc(r.path, func(m string) string {
		name := m[1 : len(m)-1]
		if v, ok := params[name]; ok {
			return v
		}
		fd := r.in.Fields().ByName(protoreflect.Name(name))
		if fd != nil && fd.Kind() != protoreflect.StringKind {
			return "1"
		}
		return "x"
	})
	if query == nil {
		query = url.Values{}
	}
	for _, q := range r.query {
		if q == "tenant_id" && !query.Has("tenant_id") {
			query.Set("tenant_id", "acme")
		}
	}
	if len(query) > 0 {
		p += "?" + query.Encode()
	}
	return p
}

// bodyMessage is the message r's body fills, and the prefix its fields'
// names take in messages (settings. for a body that fills settings).
func (r route) bodyMessage() (protoreflect.MessageDescriptor, string) {
	if r.body == "*" {
		return r.in, ""
	}
	return r.in.Fields().ByName(protoreflect.Name(r.body)).Message(), r.body + "."
}

// wrongValue is a JSON value of the wrong type for one value of fd, and
// what the refusal names after the field's path ("" or "[0]").
type wrongValue struct {
	json, suffix string
}

// wrongValues are values of the wrong JSON type for fd: a string where a
// list or an object is expected, a number where a time or a string is, a
// string where a number or a flag is; for a list, also an item of the
// wrong type.
func wrongValues(fd protoreflect.FieldDescriptor) []wrongValue {
	item := wrongItem(fd)
	switch {
	case fd.IsMap():
		return []wrongValue{{`"x"`, ""}, {`["x"]`, ""}}
	case fd.IsList():
		if item == "" {
			return []wrongValue{{`"x"`, ""}}
		}
		return []wrongValue{{`"x"`, ""}, {"[" + item + "]", "[0]"}}
	case item == "":
		return nil
	}
	return []wrongValue{{item, ""}}
}

// wrongItem is a JSON value one value of fd's type refuses ("" when every
// JSON value is one: a google.protobuf.Value).
func wrongItem(fd protoreflect.FieldDescriptor) string {
	if md := fd.Message(); md != nil {
		switch md.FullName() {
		case "google.protobuf.Value":
			return ""
		case "google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask":
			return "5"
		}
		return `"x"`
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "5"
	case protoreflect.EnumKind:
		return "true"
	}
	return `"x"`
}

// nest wraps value in objects along path: {"a":{"b":value}}.
func nest(path []string, value string) []byte {
	out := value
	for i := len(path) - 1; i >= 0; i-- {
		out = fmt.Sprintf("{%q:%s}", path[i], out)
	}
	return []byte(out)
}

// eachField calls f with the path of every field under md, into nested
// messages (not into well-known types, which JSON writes as one value),
// at most depth deep.
func eachField(md protoreflect.MessageDescriptor, path []string, depth int, f func(path []string, fd protoreflect.FieldDescriptor)) {
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		p := append(append([]string(nil), path...), string(fd.Name()))
		f(p, fd)
		if sub := fd.Message(); sub != nil && !fd.IsMap() && !fd.IsList() && depth > 1 && sub.FullName().Parent() != "google.protobuf" {
			eachField(sub, p, depth-1, f)
		}
	}
}

// TestRESTTypeMismatchesNameTheField sends, to every REST route with a
// body, every field of its body (nested ones included) with a value of the
// wrong JSON type, one at a time; and to every route with a query, every
// query or path parameter that is not a string with a value that does not
// parse.
// Each is refused with 400 and a message that starts with the field's
// whole path, and names no line or column.
func TestRESTTypeMismatchesNameTheField(t *testing.T) {
	ts := restServer(t)
	checked := 0
	for op, r := range routes(t) {
		if r.body != "" {
			md, prefix := r.bodyMessage()
			eachField(md, nil, 4, func(path []string, fd protoreflect.FieldDescriptor) {
				for _, w := range wrongValues(fd) {
					body := nest(path, w.json)
					field := prefix + strings.Join(path, ".") + w.suffix
					code, msg := call(t, ts, r.verb, r.fill(nil), body)
					checked++
					if code != http.StatusBadRequest || !strings.HasPrefix(msg, field+": ") || strings.Contains(msg, "line ") {
						t.Errorf("%s %s with %s: %d %q; want 400 naming %s, without a line and column", op, r.verb, body, code, msg, field)
					}
				}
			})
		}
		for _, m := range pathParam.FindAllStringSubmatch(r.path, -1) {
			fd := r.in.Fields().ByName(protoreflect.Name(m[1]))
			if fd == nil || fd.Kind() == protoreflect.StringKind {
				continue
			}
			path := r.fillPath(map[string]string{m[1]: "x1"}, nil)
			code, msg := call(t, ts, r.verb, path, nil)
			checked++
			if code != http.StatusBadRequest || !strings.HasPrefix(msg, m[1]+": ") {
				t.Errorf("%s %s %s: %d %q; want 400 naming %s", op, r.verb, path, code, msg, m[1])
			}
		}
		for _, q := range r.query {
			fd := r.in.Fields().ByName(protoreflect.Name(q))
			if fd == nil || fd.Kind() == protoreflect.StringKind {
				continue
			}
			bad := map[protoreflect.Kind]string{protoreflect.BoolKind: "maybe", protoreflect.MessageKind: "5", protoreflect.EnumKind: "NOPE"}[fd.Kind()]
			if bad == "" {
				bad = "x1"
			}
			path := r.fill(url.Values{q: {bad}})
			code, msg := call(t, ts, r.verb, path, nil)
			checked++
			if code != http.StatusBadRequest || !strings.HasPrefix(msg, q+": ") {
				t.Errorf("%s %s %s: %d %q; want 400 naming %s", op, r.verb, path, code, msg, q)
			}
		}
	}
	t.Logf("checked %d values", checked)
	if checked < 100 {
		t.Errorf("checked %d values; the walk of the API's fields is broken", checked)
	}
}

// pagingFields are the fields that bound how much a call answers.
var pagingFields = map[protoreflect.Name]bool{"page_size": true, "max": true, "max_listed": true}

// TestPagingOutOfRangeNamesTheField gives every paging field of every
// request (page_size, max, max_listed) a negative value, the largest
// 32-bit integer and a number beyond 32 bits, over REST: each is refused
// with 400 naming the field. Zero, the default, is not refused for it.
func TestPagingOutOfRangeNamesTheField(t *testing.T) {
	ts := restServer(t)
	found := 0
	for op, r := range routes(t) {
		for i := range r.in.Fields().Len() {
			fd := r.in.Fields().Get(i)
			if !pagingFields[fd.Name()] {
				continue
			}
			found++
			field := string(fd.Name())
			for _, v := range []string{"-1", fmt.Sprint(math.MaxInt32), "99999999999", "0"} {
				var path string
				var body []byte
				if r.body == "*" {
					path, body = r.fill(nil), fmt.Appendf(nil, `{%q:%s}`, field, v)
				} else {
					path = r.fill(url.Values{field: {v}})
				}
				code, msg := call(t, ts, r.verb, path, body)
				named := strings.HasPrefix(msg, field+": ")
				switch {
				case v == "0" && named:
					t.Errorf("%s %s=0 (the default): refused %q", op, field, msg)
				case v != "0" && (code != http.StatusBadRequest || !named):
					t.Errorf("%s %s=%s: %d %q; want 400 naming %s", op, field, v, code, msg, field)
				}
			}
		}
	}
	t.Logf("found %d paging fields", found)
	if found < 8 {
		t.Errorf("found %d paging fields; want the 8 of the API at least", found)
	}
}
