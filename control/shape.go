package control

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The shape of a REST body: when protojson refuses one, which field holds
// a value of the wrong JSON type, named by its whole path
// (settings.auth.oauth2.scopes, events[2].occurred_at), and what it takes
// instead. protojson's own message names a line and a column and, for a
// nested field, its last name only.

// shapeProblem walks the first JSON value of body against md, the message
// the body decodes into, and returns the first field whose value protojson
// refuses, named prefix plus its path; nil when it finds none (the body
// is not JSON, or protojson refused it for a reason of no one field: the
// caller then says what protojson said).
func shapeProblem(md protoreflect.MessageDescriptor, prefix string, body []byte) *fieldError {
	var raw json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&raw); err != nil {
		return nil
	}
	if kindOf(raw) != '{' {
		return &fieldError{field: "body", msg: fmt.Sprintf("is not a JSON object (it is %s)", describe(raw))}
	}
	return message(md, prefix, raw)
}

// message checks raw, a JSON object, field by field against md.
func message(md protoreflect.MessageDescriptor, prefix string, raw json.RawMessage) *fieldError {
	members, err := objectMembers(raw)
	if err != nil {
		return nil
	}
	seen := map[protoreflect.FieldNumber]string{}
	oneofs := map[protoreflect.FullName]string{}
	for _, m := range members {
		fd := md.Fields().ByJSONName(m.name)
		if fd == nil {
			fd = md.Fields().ByTextName(m.name)
		}
		if fd == nil {
			if !identifier.MatchString(m.name) {
				// Not a name any field could have: say it in the message.
				return &fieldError{field: nameOr(prefix, "body"), msg: fmt.Sprintf("has the unknown field %q; see /openapi.json for the fields", short(m.name))}
			}
			return &fieldError{field: prefix + m.name, msg: "is not a field of this request; see /openapi.json for the fields"}
		}
		path := prefix + string(fd.Name())
		if first, dup := seen[fd.Number()]; dup {
			if first == m.name {
				return &fieldError{field: path, msg: "is given twice; give it once"}
			}
			return &fieldError{field: path, msg: fmt.Sprintf("is given twice (as %q and %q); give it once", first, m.name)}
		}
		seen[fd.Number()] = m.name
		null := kindOf(m.value) == 'n'
		if null && !isValue(fd) {
			continue // protojson leaves a field given null unset
		}
		if od := fd.ContainingOneof(); od != nil && !fd.IsList() && !fd.IsMap() {
			if other, set := oneofs[od.FullName()]; set {
				return &fieldError{field: path, msg: fmt.Sprintf("and %s are alternatives; give one of them", other)}
			}
			oneofs[od.FullName()] = path
		}
		var fe *fieldError
		switch {
		case fd.IsList():
			fe = list(fd, path, m.value)
		case fd.IsMap():
			fe = mapOf(fd, path, m.value)
		default:
			fe = single(fd, path, m.value, func(v []byte) []byte { return v })
		}
		if fe != nil {
			return fe
		}
	}
	return nil
}

// nameOr is the field that prefix (a path and a dot) names, or or when
// prefix is empty.
func nameOr(prefix, or string) string {
	if prefix == "" {
		return or
	}
	return strings.TrimSuffix(prefix, ".")
}

// list checks a repeated field's value: an array, each item of the
// field's type (never null).
func list(fd protoreflect.FieldDescriptor, path string, raw json.RawMessage) *fieldError {
	if kindOf(raw) != '[' {
		return &fieldError{field: path, msg: fmt.Sprintf("is not a JSON array (it is %s); give a list, each item %s", describe(raw), want(fd))}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil
	}
	for i, item := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		if kindOf(item) == 'n' && !isValue(fd) {
			return &fieldError{field: p, msg: fmt.Sprintf("is null; give %s", want(fd))}
		}
		if fe := single(fd, p, item, func(v []byte) []byte { return append(append([]byte{'['}, v...), ']') }); fe != nil {
			return fe
		}
	}
	return nil
}

// mapOf checks a map field's value: an object whose keys and values are
// of the map's types.
func mapOf(fd protoreflect.FieldDescriptor, path string, raw json.RawMessage) *fieldError {
	if kindOf(raw) != '{' {
		return &fieldError{field: path, msg: fmt.Sprintf("is not a JSON object (it is %s); give an object whose values are each %s", describe(raw), want(fd.MapValue()))}
	}
	members, err := objectMembers(raw)
	if err != nil {
		return nil
	}
	for _, m := range members {
		key, _ := json.Marshal(m.name)
		entry := func(v []byte) []byte { return fmt.Appendf(nil, "{%s:%s}", key, v) }
		if probe(fd, entry(m.value)) == nil {
			continue
		}
		if fd.MapKey().Kind() != protoreflect.StringKind && probe(fd, entry(zeroOf(fd.MapValue()))) != nil {
			return &fieldError{field: path, msg: fmt.Sprintf("has the key %s, which is not %s", short(string(key)), want(fd.MapKey()))}
		}
		if md := fd.MapValue().Message(); md != nil && !isLeaf(md) && kindOf(m.value) == '{' {
			if fe := message(md, path+".", m.value); fe != nil {
				return fe
			}
		}
		return &fieldError{field: path, msg: fmt.Sprintf("has at key %s a value that is not %s (it is %s)", short(string(key)), want(fd.MapValue()), describe(m.value))}
	}
	return nil
}

// single checks one value of a field (the field's, or an item of it):
// a message is walked, anything else is handed to protojson alone, in the
// field's own message (wrap makes it an item, for a list).
func single(fd protoreflect.FieldDescriptor, path string, raw json.RawMessage, wrap func([]byte) []byte) *fieldError {
	if md := fd.Message(); md != nil && !isLeaf(md) {
		if kindOf(raw) != '{' {
			return &fieldError{field: path, msg: fmt.Sprintf("is not a JSON object (it is %s)", describe(raw))}
		}
		return message(md, path+".", raw)
	}
	if probe(fd, wrap(raw)) == nil {
		return nil
	}
	return &fieldError{field: path, msg: fmt.Sprintf("is not %s (it is %s)", want(fd), describe(raw))}
}

// probe decodes {"field": value} into a new message of fd's own type, as
// the gateway decodes the whole body: with protojson, so that what it
// accepts is exactly what the body's decoding accepts.
func probe(fd protoreflect.FieldDescriptor, value []byte) error {
	name, _ := json.Marshal(fd.JSONName())
	doc := fmt.Appendf(nil, "{%s:%s}", name, value)
	return protojson.Unmarshal(doc, newMessage(fd.ContainingMessage()))
}

// newMessage makes an empty message of md: the generated type when one is
// registered, else a dynamic one.
func newMessage(md protoreflect.MessageDescriptor) proto.Message {
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName()); err == nil {
		return mt.New().Interface()
	}
	return dynamicpb.NewMessage(md)
}

// isLeaf reports whether md is a well-known type that JSON writes as one
// value (a time, a duration, a mask) or as any JSON (a Struct, a Value):
// protojson decides those whole, not field by field.
func isLeaf(md protoreflect.MessageDescriptor) bool {
	return md.FullName().Parent() == "google.protobuf"
}

// isValue reports whether fd holds a google.protobuf.Value, which takes
// null as a value.
func isValue(fd protoreflect.FieldDescriptor) bool {
	return fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value"
}

// zeroOf is a JSON value that a field of fd's type takes, to tell a bad
// map key from a bad map value.
func zeroOf(fd protoreflect.FieldDescriptor) []byte {
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind:
		return []byte(`""`)
	case protoreflect.BoolKind:
		return []byte(`false`)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return []byte(`{}`)
	case protoreflect.EnumKind:
		return []byte(`0`)
	}
	return []byte(`0`)
}

// want says what JSON a value of fd's type takes.
func want(fd protoreflect.FieldDescriptor) string {
	if md := fd.Message(); md != nil {
		switch md.FullName() {
		case "google.protobuf.Timestamp":
			return "an RFC 3339 time such as 2026-12-01T10:00:00Z"
		case "google.protobuf.Duration":
			return `a duration in seconds such as "1.5s"`
		case "google.protobuf.FieldMask":
			return "a comma-separated list of field names"
		case "google.protobuf.Struct", "google.protobuf.Empty":
			return "a JSON object"
		case "google.protobuf.ListValue":
			return "a JSON array"
		case "google.protobuf.Value":
			return "a JSON value"
		}
		if isLeaf(md) { // a wrapper
			if v := md.Fields().ByName("value"); v != nil {
				return want(v)
			}
		}
		return "a JSON object"
	}
	switch fd.Kind() {
	case protoreflect.EnumKind:
		var names []string
		for i := range fd.Enum().Values().Len() {
			names = append(names, string(fd.Enum().Values().Get(i).Name()))
		}
		return "one of " + strings.Join(names, ", ")
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return "an integer from -2147483648 to 2147483647"
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return "an integer from 0 to 4294967295"
	}
	if w, ok := kinds[fd.Kind().String()]; ok {
		return w
	}
	return "a " + fd.Kind().String()
}

// kindOf returns the first byte of a JSON value, which says its kind:
// '{', '[', '"', 't', 'f', 'n', or a number's first byte.
func kindOf(raw []byte) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// describe names a JSON value for a message: its kind, and a short
// scalar's value.
func describe(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	switch kindOf(raw) {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 'n':
		return "null"
	case 't', 'f':
		return "the value " + string(raw)
	case '"':
		return "the string " + short(string(raw))
	case 0:
		return "nothing"
	}
	return "the number " + short(string(raw))
}

// member is one name and value of a JSON object, in the order given.
type member struct {
	name  string
	value json.RawMessage
}

// objectMembers reads raw, a JSON object, keeping its members in order and
// its repeated names (which a map would lose).
func objectMembers(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, err
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key %v", tok)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{name: name, value: v})
	}
	return out, nil
}

// short shortens what a message quotes of a value to 40 bytes.
func short(s string) string {
	if len(s) <= 40 {
		return s
	}
	return truncate(s, 40) + "…"
}

// quoted quotes a query or path value for a message, shortened.
func quoted(v string) string { return short(strconv.Quote(v)) }
