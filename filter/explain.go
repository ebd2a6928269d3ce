package filter

import (
	"reflect"
	"slices"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/parser"
	"google.golang.org/protobuf/types/known/structpb"
)

// Explanation is a filter's verdict on one event and what it saw.
type Explanation struct {
	// Passed is Match's answer; Err, when set, why it did not pass.
	Passed bool
	Err    string
	// Values are the event's values that the expression read, in the
	// order they appear in it: each maximal path from a variable
	// (data.amount, headers["x-region"], type) with the value it had.
	// A path the evaluation did not reach (after && found false) is
	// absent.
	Values []Value
}

// Value is one path of the expression and its value on the event.
type Value struct {
	Expr string
	// Value is the value as JSON; Err is set instead when reading it
	// failed (a field the event lacks).
	Value *structpb.Value
	Err   string
}

// tracked is f's program that records every value it computes, made
// once, on f's first explanation (it is slower than f.prg).
type tracked struct {
	once sync.Once
	prg  cel.Program
	err  error
}

// Explain evaluates f on in as Match does, and says what it saw.
func (f *Filter) Explain(in *Input) Explanation {
	passed, err := f.Match(in)
	out := Explanation{Passed: passed}
	if err != nil {
		out.Err = err.Error()
	}
	tp := &f.tracked
	tp.once.Do(func() {
		tp.prg, tp.err = env.Program(f.ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptTrackState))
	})
	if tp.err != nil {
		return out
	}
	_, det, _ := tp.prg.Eval(in)
	if det == nil || det.State() == nil {
		return out
	}
	state := det.State()
	native := f.ast.NativeRep()
	seen := map[string]bool{}
	for _, e := range paths(native) {
		text, err := parser.Unparse(e, native.SourceInfo())
		if err != nil || seen[text] {
			continue
		}
		val, ok := state.Value(e.ID())
		if !ok {
			continue
		}
		seen[text] = true
		out.Values = append(out.Values, valueOf(text, val))
	}
	return out
}

// valueOf converts a CEL value for people.
func valueOf(text string, v ref.Val) Value {
	if types.IsError(v) {
		return Value{Expr: text, Err: clean(v.(*types.Err).Error())}
	}
	if types.IsUnknown(v) {
		return Value{Expr: text, Err: "unknown"}
	}
	n, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		if s, ok := v.Value().(interface{ String() string }); ok {
			return Value{Expr: text, Value: structpb.NewStringValue(s.String())}
		}
		return Value{Expr: text, Err: "cannot be shown: " + err.Error()}
	}
	return Value{Expr: text, Value: n.(*structpb.Value)}
}

// variables are the names of package doc; a path starts at one of them.
var variables = []string{"type", "id", "data", "headers", "schema_version", "object_id", "content_type", "occurred_at"}

// paths returns the maximal paths of a, in the order they appear: an
// identifier of a variable, then fields (a.b) and indexes (a["k"], a[0])
// of it, as long as the parent continues the path.
func paths(a *celast.AST) []celast.Expr {
	var out []celast.Expr
	var walk func(e celast.Expr, parentContinues bool)
	walk = func(e celast.Expr, parentContinues bool) {
		isPath := pathRooted(e)
		if isPath && !parentContinues {
			out = append(out, e)
		}
		switch e.Kind() {
		case celast.SelectKind:
			walk(e.AsSelect().Operand(), isPath)
		case celast.CallKind:
			c := e.AsCall()
			if c.IsMemberFunction() {
				walk(c.Target(), false)
			}
			for i, arg := range c.Args() {
				walk(arg, isPath && i == 0)
			}
		case celast.ComprehensionKind:
			c := e.AsComprehension()
			walk(c.IterRange(), false)
			walk(c.AccuInit(), false)
			walk(c.LoopCondition(), false)
			walk(c.LoopStep(), false)
			walk(c.Result(), false)
		case celast.ListKind:
			for _, el := range e.AsList().Elements() {
				walk(el, false)
			}
		case celast.MapKind:
			for _, en := range e.AsMap().Entries() {
				me := en.AsMapEntry()
				walk(me.Key(), false)
				walk(me.Value(), false)
			}
		}
	}
	walk(a.Expr(), false)
	return out
}

// pathRooted reports whether e is a variable, or a field or constant
// index of a path.
func pathRooted(e celast.Expr) bool {
	switch e.Kind() {
	case celast.IdentKind:
		return slices.Contains(variables, e.AsIdent())
	case celast.SelectKind:
		return pathRooted(e.AsSelect().Operand())
	case celast.CallKind:
		c := e.AsCall()
		if c.FunctionName() != operators.Index || len(c.Args()) != 2 || c.Args()[1].Kind() != celast.LiteralKind {
			return false
		}
		return pathRooted(c.Args()[0])
	}
	return false
}
