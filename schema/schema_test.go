package schema_test

import (
	"strings"
	"testing"

	"github.com/hookline/hookline/schema"
)

const orderSchema = `{
  "type": "object",
  "required": ["order", "total"],
  "properties": {
    "order": {"type": "string", "pattern": "^ord_"},
    "total": {"type": "number", "minimum": 0},
    "items": {"type": "array", "items": {"$ref": "#/$defs/item"}}
  },
  "$defs": {"item": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}}}
}`

func TestValidate(t *testing.T) {
	s, err := schema.Compile([]byte(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	if v := s.Validate([]byte(`{"order":"ord_1","total":12.5,"items":[{"sku":"a","qty":2}]}`)); v != nil {
		t.Fatalf("a good payload: %v", v)
	}
	for _, tc := range []struct{ payload, pointer, keyword string }{
		{`{"order":"ord_1","total":-1}`, "/total", "minimum"},
		{`{"order":"x_1","total":1}`, "/order", "pattern"},
		{`{"order":"ord_1"}`, "", "required"},
		{`{"order":"ord_1","total":1,"items":[{"sku":"a"},{"sku":"b","qty":0}]}`, "/items/1/qty", "minimum"},
		{`{"order":"ord_1","total":"12"}`, "/total", "type"},
		{`[1,2]`, "", "type"},
		{`{"order":`, "", "json"},
	} {
		v := s.Validate([]byte(tc.payload))
		if v == nil || v.Pointer != tc.pointer || !strings.HasSuffix(v.Keyword, tc.keyword) {
			t.Errorf("%s: %+v, want pointer %q keyword %q", tc.payload, v, tc.pointer, tc.keyword)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"$ref": "https://example.com/s.json"}`, "another document"},
		{`{"$ref": "file:///etc/passwd"}`, "another document"},
		{`{"type": "nothing"}`, "does not compile"},
		{`{"type":`, "not JSON"},
		{`[1]`, "JSON object"},
		{`{"type":"string","maxLength":"` + strings.Repeat("x", schema.MaxSchemaBytes) + `"}`, "at most"},
	} {
		if _, err := schema.Compile([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: %v, want an error saying %q", tc.doc, err, tc.want)
		}
	}
}
