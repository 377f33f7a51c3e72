package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// The README corpus: benign tool outputs nobody on the team wrote or chose.
// A README is what a fetch of a repository page or a read of a project file
// returns, and READMEs are full of what the output rules and the classifier
// must not take for an injection: instructions to "you", commands to run,
// tokens and keys to set, warnings never to commit a secret. The texts are
// the README files of the Go modules this repository builds and tests with
// (pinned by go.sum) and of the npm packages `make deps` installs (pinned by
// package-lock.json), cut at paragraph boundaries into results of at most
// readmeChunkBytes.

// readmeTrain puts the Go modules' README chunks among the benign training
// outputs, counted in the output threshold's FPR (flag -readme-train), an
// experiment: the 72 chunks of the modules the build uses cost out-of-fold
// recall on every output source for one false positive fewer on the npm
// READMEs (bench/poisoning/DATA.md). The npm packages' READMEs are never
// trained on; they measure.
var readmeTrain = false

// readmeChunkBytes is the size of one README result, about a tool result
// of 4 KB.
const readmeChunkBytes = 4096

// readmeDocs returns the README chunks of the Go modules the build and tests
// use
// and, with npm, of node_modules under root, in path order; source
// "readme-go" and "readme-npm", grouped by file. A missing node_modules is
// an error that says to run make deps.
func readmeDocs(root string, npm bool) ([]doc, error) {
	// The modules whose packages the build and tests import: always in the
	// module cache once the repository builds, so the corpus is the same
	// on every machine (go.sum pins the versions).
	out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{with .Module}}{{if not .Main}}{{.Dir}}{{end}}{{end}}", "./...").Output()
	if err != nil {
		return nil, fmt.Errorf("readmes: go list -deps -test ./...: %v", err)
	}
	var goFiles []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		dir := strings.TrimSpace(sc.Text())
		if dir == "" || dir == root || seen[dir] {
			continue
		}
		seen[dir] = true
		for _, name := range []string{"README.md", "README", "README.markdown"} {
			if p := filepath.Join(dir, name); fileExists(p) {
				goFiles = append(goFiles, p)
				break
			}
		}
	}
	nm := filepath.Join(root, "node_modules")
	var npmFiles []string
	if npm {
		if !fileExists(nm) {
			return nil, fmt.Errorf("readmes: %s is missing: run make deps", nm)
		}
		err = filepath.WalkDir(nm, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.EqualFold(d.Name(), "readme.md") {
				npmFiles = append(npmFiles, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("readmes: %v", err)
		}
	}
	slices.Sort(goFiles)
	slices.Sort(npmFiles)
	var docs []doc
	for _, set := range []struct {
		source string
		files  []string
		base   string
	}{{"readme-go", goFiles, ""}, {"readme-npm", npmFiles, nm}} {
		for _, p := range set.files {
			raw, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("readmes: %v", err)
			}
			name := p
			if set.base != "" {
				name, _ = filepath.Rel(set.base, p)
			} else {
				name = filepath.Base(filepath.Dir(p))
			}
			for i, c := range chunkParagraphs(string(raw), readmeChunkBytes) {
				docs = append(docs, doc{id: fmt.Sprintf("%s#%d", name, i), text: c, source: set.source, category: "readme", group: p})
			}
		}
	}
	return docs, nil
}

// chunkParagraphs cuts text at blank lines into pieces of at most max bytes
// (a longer paragraph is a piece of its own, cut at max), dropping pieces
// of fewer than 20 words.
func chunkParagraphs(text string, max int) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); len(strings.Fields(s)) >= 20 {
			out = append(out, s)
		}
		cur.Reset()
	}
	for _, para := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		if cur.Len()+len(para)+2 > max {
			flush()
		}
		for len(para) > max {
			n := cutAt(para, max)
			cur.WriteString(para[:n])
			para = strings.TrimLeft(para[n:], " \t\n")
			flush()
		}
		cur.WriteString(para)
		cur.WriteString("\n\n")
	}
	flush()
	return out
}

// cutAt returns where to cut s so that s[:n] is at most max bytes: after
// the last blank at or before max, else at a rune boundary.
func cutAt(s string, max int) int {
	if i := strings.LastIndexAny(s[:max+1], " \t\n"); i > 0 {
		return i
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// readmeNote describes the README negatives for the weights' note.
func readmeNote() string {
	if !readmeTrain {
		return ""
	}
	return fmt.Sprintf(" + benign outputs: the README files of the Go modules the build and tests use (go list -deps -test ./...), cut into chunks of at most %d bytes (-readme-train)", readmeChunkBytes)
}
