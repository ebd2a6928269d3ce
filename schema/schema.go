// Package schema compiles the JSON Schemas (draft 2020-12) of a tenant's
// event catalog and validates event payloads against them: compiled once
// per schema version, then a bounded walk of the payload per publish. A
// schema reaches nothing outside itself: $ref to another document, a file
// or a URL is refused when it is compiled.
package schema

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// printer writes the validator's messages in English.
var printer = message.NewPrinter(language.English)

// Limits on a schema and an example.
const (
	MaxSchemaBytes  = 64 << 10
	MaxExampleBytes = 64 << 10
)

// Schema is a compiled schema. It is safe for concurrent use.
type Schema struct {
	s *jsonschema.Schema
}

// documentURL names the schema being compiled; nothing else resolves.
const documentURL = "hookline:schema.json"

// noLoader refuses every document but the schema's own.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a schema may not refer to another document (%s): put the definition under $defs and refer to it as #/$defs/…", url)
}

// Compile compiles a JSON Schema; a schema without $schema is read as
// draft 2020-12. The error says what is wrong with it.
func Compile(doc []byte) (*Schema, error) {
	if len(doc) > MaxSchemaBytes {
		return nil, fmt.Errorf("the schema is %d bytes; use at most %d", len(doc), MaxSchemaBytes)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		if _, isBool := v.(bool); !isBool {
			return nil, errors.New("a schema is a JSON object (or true or false)")
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(documentURL, v); err != nil {
		return nil, fmt.Errorf("the schema: %v", err)
	}
	s, err := c.Compile(documentURL)
	if err != nil {
		return nil, fmt.Errorf("the schema does not compile: %s", strings.ReplaceAll(err.Error(), documentURL, "schema"))
	}
	return &Schema{s: s}, nil
}

// Violation is why a payload does not match its schema: the JSON pointer
// of the failing value (RFC 6901; "" is the whole payload), the keyword of
// the rule it breaks, and the validator's message.
type Violation struct {
	Pointer string
	Keyword string
	Message string
}

// Error describes the violation as an API answer does.
func (v *Violation) Error() string {
	at := v.Pointer
	if at == "" {
		at = "(the whole payload)"
	}
	return fmt.Sprintf("at %s: %s (%s)", at, v.Message, v.Keyword)
}

// Validate checks payload, a JSON document, against the schema. It returns
// nil when it matches, and otherwise the first violation in document
// order (the deepest cause of it).
func (s *Schema) Validate(payload []byte) *Violation {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return &Violation{Keyword: "json", Message: "the payload is not JSON: " + err.Error()}
	}
	err = s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Violation{Keyword: "schema", Message: err.Error()}
	}
	leaf := firstLeaf(ve)
	return &Violation{
		Pointer: pointer(leaf.InstanceLocation),
		Keyword: strings.Join(leaf.ErrorKind.KeywordPath(), "/"),
		Message: leaf.ErrorKind.LocalizedString(printer),
	}
}

// firstLeaf follows the first cause down to a leaf: the most specific
// rule broken.
func firstLeaf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		causes := slices.Clone(e.Causes)
		slices.SortStableFunc(causes, func(a, b *jsonschema.ValidationError) int {
			return strings.Compare(pointer(a.InstanceLocation), pointer(b.InstanceLocation))
		})
		e = causes[0]
	}
	return e
}

// pointer is a JSON pointer of the tokens of a location.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}
