package filter

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
)

// Limits of a filter.
const (
	// MaxLen bounds an expression's source, in bytes.
	MaxLen = 2048
	// CostLimit bounds one evaluation, in CEL's cost units (about one
	// unit per operation; a comparison of two fields costs 2 to 3), and
	// CEL's estimate of an expression at Compile.
	CostLimit = 10_000
	// SizeHint is the size of the event's lists, maps and strings that
	// Compile estimates the cost with.
	SizeHint = 100
	// maxDepth bounds the parser's recursion (nesting of the expression).
	maxDepth = 32
)

// ErrInvalid is the class of every Compile error: errors.Is(err,
// ErrInvalid) holds for an [*Error].
var ErrInvalid = errors.New("filter: invalid expression")

// Error is a filter that cannot be used, with the position of the mistake
// (1-based; 0 when the whole expression is at fault).
type Error struct {
	Line, Column int
	Msg          string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// Is makes every *Error match [ErrInvalid].
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Filter is a compiled expression. It is safe for concurrent use; the zero
// value is not usable: make one with [Compile].
type Filter struct {
	src     string
	ast     *cel.Ast
	prg     cel.Program
	tracked tracked // for Explain
}

// env is the one CEL environment: the variables of package doc.
var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("type", cel.StringType),
		cel.Variable("id", cel.StringType),
		cel.Variable("data", cel.DynType),
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("schema_version", cel.StringType),
		cel.Variable("object_id", cel.StringType),
		cel.Variable("content_type", cel.StringType),
		cel.Variable("occurred_at", cel.TimestampType),
		cel.ParserExpressionSizeLimit(MaxLen),
		cel.ParserRecursionLimit(maxDepth),
		cel.CrossTypeNumericComparisons(true),
	)
	if err != nil {
		panic(fmt.Sprintf("filter: CEL environment: %v", err)) // programmer error, at start
	}
	return e
}()

// Compile checks src and returns its Filter. Errors are [*Error]s naming
// the position of the first mistake: a syntax error, an unknown variable
// or function, a type mismatch, a result that cannot be true or false,
// or an estimated cost over [CostLimit].
func Compile(src string) (*Filter, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Msg: "is empty"}
	}
	if len(src) > MaxLen {
		return nil, &Error{Msg: fmt.Sprintf("is %d bytes; write it in at most %d", len(src), MaxLen)}
	}
	if !utf8.ValidString(src) {
		return nil, &Error{Msg: "is not valid UTF-8"}
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		if len(errs) == 0 {
			return nil, &Error{Msg: iss.Err().Error()}
		}
		e := errs[0]
		return nil, &Error{Line: e.Location.Line(), Column: e.Location.Column() + 1, Msg: clean(e.Message)}
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("gives a %s; a filter must be a condition, true or false (e.g. data.amount > 100)", t)}
	}
	est, err := env.EstimateCost(ast, sizeHint{})
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("cannot estimate its cost: %v", err)}
	}
	if est.Max > CostLimit {
		return nil, &Error{Msg: fmt.Sprintf("may cost up to %d units on an event with %d-entry lists, over the limit of %d: avoid loops inside loops over the event's lists", est.Max, SizeHint, CostLimit)}
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, &Error{Msg: fmt.Sprintf("cannot be planned: %v", err)}
	}
	return &Filter{src: src, ast: ast, prg: prg}, nil
}

// clean drops CEL's note about containers from a message: Hookline has
// none.
func clean(msg string) string {
	return strings.TrimSuffix(msg, " (in container '')")
}

// String returns the expression's source.
func (f *Filter) String() string { return f.src }

// Match evaluates f on in: passed is true when the expression gives true.
// An error (a missing field, a type mismatch, the cost limit) gives
// passed false and says why; see the package doc.
func (f *Filter) Match(in *Input) (passed bool, err error) {
	v, _, err := f.prg.Eval(in)
	if err != nil {
		return false, errors.New(clean(err.Error()))
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("gave %s, not true or false", v.Type().TypeName())
	}
	return b, nil
}

// sizeHint answers CEL's cost estimator: every list, map or string of the
// event whose size is unknown holds up to SizeHint entries.
type sizeHint struct{}

func (sizeHint) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: SizeHint}
}

func (sizeHint) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
