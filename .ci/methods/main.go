// Command methods fails when a type has more methods than the limit: a type
// that large holds several concepts, and each deserves a receiver of its
// own. It reads the module's hand-written Go (no _test.go file, no file
// marked generated, nothing under testdata or a directory whose name starts
// with a dot) with go/ast, and counts the methods declared on each named
// type, pointer and value receivers together.
//
//	go run ./.ci/methods [-max 50] [-allow control.Server,...] [-v]
//
// A type is named by its package's module-relative directory and its name
// (actors/endpoint.loop). -allow lists types that may exceed the limit for
// now; an allowed type back under the limit is an error too, so the
// exception is removed when it is no longer needed.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	limit := flag.Int("max", 50, "the most methods a type may have")
	allow := flag.String("allow", "", "comma-separated types that may exceed -max for now")
	verbose := flag.Bool("v", false, "print every type with its count, largest first")
	flag.Parse()
	counts, err := count(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "methods:", err)
		os.Exit(2)
	}
	if *verbose {
		for _, t := range largest(counts) {
			fmt.Printf("%4d %s\n", counts[t], t)
		}
	}
	var allowed []string
	if *allow != "" {
		allowed = strings.Split(*allow, ",")
	}
	if problems := check(counts, *limit, allowed); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, p)
		}
		os.Exit(1)
	}
}

// check returns a line for each type over the limit that is not allowed,
// and for each allowed type that is no longer over it.
func check(counts map[string]int, limit int, allowed []string) []string {
	var problems []string
	for _, t := range largest(counts) {
		if counts[t] > limit && !slices.Contains(allowed, t) {
			problems = append(problems, fmt.Sprintf("%s has %d methods, more than %d: give its concepts receivers of their own", t, counts[t], limit))
		}
	}
	for _, t := range allowed {
		if counts[t] <= limit {
			problems = append(problems, fmt.Sprintf("%s has %d methods, not more than %d: remove it from -allow", t, counts[t], limit))
		}
	}
	return problems
}

// count returns the number of methods of each named type in the Go files
// under root, keyed "dir.Type" with dir relative to root.
func count(root string) (map[string]int, error) {
	counts := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) == 1 {
				counts[filepath.ToSlash(dir)+"."+receiver(fn.Recv.List[0].Type)]++
			}
		}
		return nil
	})
	return counts, err
}

// receiver returns the type name of a receiver: T for T, *T, T[K] and *T[K].
func receiver(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}

// largest returns the types of counts, most methods first.
func largest(counts map[string]int) []string {
	types := make([]string, 0, len(counts))
	for t := range counts {
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	return types
}
