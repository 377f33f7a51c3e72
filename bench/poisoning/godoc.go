package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// useGoDoc adds goDocDocs to the definition training rows (flag -godoc).
var useGoDoc = true

// goDocEvery keeps every n-th doc comment (flag -godoc-every).
var goDocEvery = 2

// goDocNote describes the Go doc-comment negatives for the weights' note.
func goDocNote() string {
	if !useGoDoc {
		return ""
	}
	return " + benign definitions from every other exported doc comment of GOROOT/src/{" + strings.Join(goDocPackages, ",") + "} (not counted in the threshold's FPR)"
}

// goDocPackages are the packages of the Go distribution whose doc comments
// are benign training definitions: API prose in the register of a tool
// description ("Open opens the named file for reading", "Callers must call
// Close when done", "InsecureSkipVerify controls whether a client verifies
// the server's certificate chain") that is not one of the 707 real tools the
// real-tool FPR is measured on.
var goDocPackages = []string{
	"archive/zip", "bufio", "compress/gzip", "crypto/tls", "crypto/x509", "database/sql",
	"encoding/csv", "encoding/json", "io/fs", "mime/multipart", "net", "net/http",
	"net/mail", "net/smtp", "net/url", "os", "os/exec", "os/user", "path/filepath",
	"regexp", "strings", "text/template", "time",
}

// goDocDocs returns one benign definition per doc comment of an exported
// function, method or type of goDocPackages, read in file-name order from
// GOROOT (the toolchain is pinned by go.mod, so the text is fixed). Only the
// first paragraph is kept, at least minWords words and at most 600 bytes,
// like a tool description. Source "godoc", grouped by package.
func goDocDocs() ([]doc, error) {
	raw, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("godoc negatives: go env GOROOT: %v", err)
	}
	root := strings.TrimSpace(string(raw))
	const minWords = 8
	var out []doc
	seen := map[string]bool{}
	for _, pkg := range goDocPackages {
		files, _ := filepath.Glob(filepath.Join(root, "src", pkg, "*.go"))
		slices.Sort(files)
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				continue
			}
			add := func(name string, cg *ast.CommentGroup) {
				if cg == nil || !ast.IsExported(name) {
					return
				}
				text, _, _ := strings.Cut(cg.Text(), "\n\n")
				text = strings.Join(strings.Fields(text), " ")
				if len(strings.Fields(text)) < minWords || len(text) > 600 || strings.HasPrefix(text, "Deprecated:") || seen[text] {
					return
				}
				seen[text] = true
				out = append(out, doc{id: "godoc:" + pkg + "." + name, text: text, source: "godoc", category: "benign_apidoc", group: "godoc:" + pkg})
			}
			for _, d := range af.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					add(d.Name.Name, d.Doc)
				case *ast.GenDecl:
					for _, s := range d.Specs {
						if ts, ok := s.(*ast.TypeSpec); ok {
							cg := ts.Doc
							if cg == nil && len(d.Specs) == 1 {
								cg = d.Doc
							}
							add(ts.Name.Name, cg)
						}
					}
				}
			}
		}
	}
	// Every other comment (goDocEvery): about 600 documents, enough of the
	// register without doubling the training time.
	var kept []doc
	for i := 0; i < len(out); i += max(goDocEvery, 1) {
		kept = append(kept, out[i])
	}
	out = kept
	if len(out) == 0 {
		return nil, fmt.Errorf("godoc negatives: no doc comments under %s/src", root)
	}
	return out, nil
}
