// Command poisoning measures toolgate's poisoning detector on the shared
// development sets: tool descriptions (tool_defs_dev.jsonl) and tool outputs
// (outputs_dev.jsonl). It prints precision, recall and false-positive rate
// per category and overall, and scans per second.
//
//	go run ./bench/poisoning [-data ../shared/bench/poisoning] [-config FILE] [-v]
//
// The data is read from outside the repository and never copied into it.
// The detector is not fitted to these rows; they are for measuring.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/poison"
)

type row struct {
	ID       string `json:"id"`
	Text     string `json:"text"`
	Label    string `json:"label"`
	Category string `json:"category"`
	Position string `json:"insert_position"`
}

func main() {
	data := flag.String("data", "../shared/bench/poisoning", "directory holding tool_defs_dev.jsonl and outputs_dev.jsonl")
	cfgPath := flag.String("config", "", "poisoning config (the filters.poisoning object, or a whole toolgate config)")
	verbose := flag.Bool("v", false, "list misses and false positives")
	flag.Parse()
	// The definition detector is configured by filters.tool_poisoning, the
	// output detector by filters.output_poisoning, as in the gateway.
	detector := func(key string) *poison.Detector {
		var cfg poison.Config
		if *cfgPath != "" {
			raw, err := os.ReadFile(*cfgPath)
			if err != nil {
				log.Fatal(err)
			}
			if cfg, err = poison.ConfigFromFile(raw, key); err != nil {
				log.Fatalf("%s: %v", *cfgPath, err)
			}
		}
		d, err := poison.NewDetector(cfg)
		if err != nil {
			log.Fatal(err)
		}
		return d
	}
	det, outDet := detector("tool_poisoning"), detector("output_poisoning")
	defs, err := load(filepath.Join(*data, "tool_defs_dev.jsonl"))
	if err != nil {
		log.Fatal(err)
	}
	outs, err := load(filepath.Join(*data, "outputs_dev.jsonl"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("== tool definitions (%s, %d rows)\n", filepath.Join(*data, "tool_defs_dev.jsonl"), len(defs))
	report(defs, func(s string) poison.Verdict { return det.ScanDefinition("", s, nil) }, *verbose, "")
	catalog := filepath.Join(filepath.Dir(*data), "retrieval", "tools.jsonl")
	if tools, err := loadTools(catalog); err == nil {
		fmt.Printf("\n== full real tool definitions, all benign (%s, %d tools: description + every inputSchema string)\n", catalog, len(tools))
		flagged := 0
		start := time.Now()
		for _, t := range tools {
			v := det.ScanDefinition(t.Name, t.Description, t.InputSchema)
			if v.Malicious {
				flagged++
				if *verbose {
					fmt.Printf("  FALSE POSITIVE %s__%s", t.Server, t.Name)
					for _, f := range v.Findings {
						fmt.Printf(" {%s/%s %s: %q}", f.Rule, f.Severity, f.Path, f.Context)
					}
					fmt.Println()
				}
			}
		}
		el := time.Since(start)
		fmt.Printf("flagged %d of %d (FPR %.3f); %.0f definitions/s\n", flagged, len(tools), float64(flagged)/float64(len(tools)), float64(len(tools))/el.Seconds())
	}
	fmt.Printf("\n== tool outputs (%s, %d rows)\n", filepath.Join(*data, "outputs_dev.jsonl"), len(outs))
	report(outs, outDet.ScanOutput, *verbose, "context")
	heldout(det, outDet, outs, *verbose)
}

// heldout measures on attacks written for toolgate in styles the dev set
// lacks (internal/poison/testdata/heldout_*.jsonl): each injection is put
// into every clean dev output, at the start, middle and end in turn; the
// malicious descriptions are scanned as they are.
func heldout(det, outDet *poison.Detector, outs []row, verbose bool) {
	dir := filepath.Join("internal", "poison", "testdata")
	inj, err1 := load(filepath.Join(dir, "heldout_injections.jsonl"))
	defs, err2 := load(filepath.Join(dir, "heldout_definitions.jsonl"))
	if err1 != nil || err2 != nil {
		fmt.Printf("\n(held-out sets not found under %s; run from the repository root)\n", dir)
		return
	}
	fmt.Printf("\n== held-out attacks written for toolgate (%s)\n", dir)
	hit := 0
	for _, d := range defs {
		if det.ScanDefinition("", d.Text, nil).Malicious {
			hit++
		} else if verbose {
			fmt.Printf("  MISS definition %q\n", d.Text)
		}
	}
	fmt.Printf("definitions: recall %.3f (%d of %d)\n", float64(hit)/float64(len(defs)), hit, len(defs))
	var clean []string
	for _, r := range outs {
		if r.Label == "benign" {
			clean = append(clean, r.Text)
		}
	}
	byPos := map[string][2]int{}
	perInj := make([]int, len(inj))
	n := 0
	for i, c := range clean {
		for j, a := range inj {
			pos := []string{"start", "middle", "end"}[(i+j)%3]
			var text string
			switch pos {
			case "start":
				text = a.Text + "\n" + c
			case "end":
				text = c + "\n" + a.Text
			default:
				lines := strings.Split(c, "\n")
				k := len(lines) / 2
				text = strings.Join(lines[:k], "\n") + "\n" + a.Text + "\n" + strings.Join(lines[k:], "\n")
			}
			x := byPos[pos]
			x[1]++
			if outDet.ScanOutput(text).Malicious {
				x[0]++
				perInj[j]++
			}
			byPos[pos] = x
			n++
		}
	}
	tot := 0
	for _, p := range []string{"start", "middle", "end"} {
		fmt.Printf("outputs, injected at %-6s recall %.3f (%d of %d)\n", p, float64(byPos[p][0])/float64(byPos[p][1]), byPos[p][0], byPos[p][1])
		tot += byPos[p][0]
	}
	fmt.Printf("outputs overall: recall %.3f (%d injections x %d clean contexts)\n", float64(tot)/float64(n), len(inj), len(clean))
	if verbose {
		for j, a := range inj {
			fmt.Printf("  %3d/%d %q\n", perInj[j], len(clean), firstLine(a.Text))
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func load(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

type tool struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

func loadTools(path string) ([]tool, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []tool
	for n, line := range strings.Split(string(raw), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var t tool
		if err := json.Unmarshal([]byte(line), &t); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n+1, err)
		}
		out = append(out, t)
	}
	return out, nil
}

type counts struct{ tp, fp, fn, tn int }

func (c *counts) add(malicious, flagged bool) {
	switch {
	case malicious && flagged:
		c.tp++
	case malicious:
		c.fn++
	case flagged:
		c.fp++
	default:
		c.tn++
	}
}

func ratio(a, b int) string {
	if b == 0 {
		return "    -"
	}
	return fmt.Sprintf("%5.3f", float64(a)/float64(b))
}

func report(rows []row, scan func(string) poison.Verdict, verbose bool, _ string) {
	verdicts := make([]poison.Verdict, len(rows))
	start := time.Now()
	for i, r := range rows {
		verdicts[i] = scan(r.Text)
	}
	elapsed := time.Since(start)
	// Throughput over several passes for a stable figure.
	passes := 0
	tStart := time.Now()
	for time.Since(tStart) < time.Second {
		for _, r := range rows {
			scan(r.Text)
		}
		passes++
	}
	perSec := float64(passes*len(rows)) / time.Since(tStart).Seconds()

	byCat := map[string]*counts{}
	byPos := map[string]*counts{}
	byRule := map[string][2]int{} // rule -> {on malicious, on benign}
	var all counts
	for i, r := range rows {
		mal := r.Label == "malicious"
		v := verdicts[i]
		all.add(mal, v.Malicious)
		c := byCat[r.Category]
		if c == nil {
			c = &counts{}
			byCat[r.Category] = c
		}
		c.add(mal, v.Malicious)
		if r.Position != "" {
			p := byPos[r.Position]
			if p == nil {
				p = &counts{}
				byPos[r.Position] = p
			}
			p.add(mal, v.Malicious)
		}
		if v.Malicious {
			seen := map[string]bool{}
			for _, f := range v.Findings {
				if seen[f.Rule] {
					continue
				}
				seen[f.Rule] = true
				x := byRule[f.Rule]
				if mal {
					x[0]++
				} else {
					x[1]++
				}
				byRule[f.Rule] = x
			}
		}
		if verbose && mal != v.Malicious {
			kind := "MISS"
			if !mal {
				kind = "FALSE POSITIVE"
			}
			fmt.Printf("  %s %s [%s]", kind, r.ID, r.Category)
			for _, f := range v.Findings {
				fmt.Printf(" {%s/%s %s: %q}", f.Rule, f.Severity, f.Path, f.Context)
			}
			fmt.Println()
		}
	}
	fmt.Printf("%-52s %5s %5s %5s %5s  %9s %6s %6s\n", "category", "n", "TP", "FP", "FN", "precision", "recall", "FPR")
	cats := make([]string, 0, len(byCat))
	for k := range byCat {
		cats = append(cats, k)
	}
	slices.SortFunc(cats, func(a, b string) int {
		ma, mb := byCat[a].tp+byCat[a].fn > 0, byCat[b].tp+byCat[b].fn > 0
		if ma != mb {
			if ma {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})
	line := func(name string, c *counts) {
		n := c.tp + c.fp + c.fn + c.tn
		fmt.Printf("%-52s %5d %5d %5d %5d  %9s %6s %6s\n", name, n, c.tp, c.fp, c.fn, ratio(c.tp, c.tp+c.fp), ratio(c.tp, c.tp+c.fn), ratio(c.fp, c.fp+c.tn))
	}
	for _, k := range cats {
		line(k, byCat[k])
	}
	if len(byPos) > 0 {
		for _, k := range []string{"start", "middle", "end"} {
			if c := byPos[k]; c != nil {
				line("  injected at "+k, c)
			}
		}
	}
	line("OVERALL", &all)
	fmt.Printf("throughput: %.0f scans/s (single goroutine; first pass %v for %d rows)\n", perSec, elapsed.Round(time.Millisecond), len(rows))
	if verbose {
		rules := make([]string, 0, len(byRule))
		for k := range byRule {
			rules = append(rules, k)
		}
		slices.Sort(rules)
		fmt.Println("rules in flagged rows (malicious/benign):")
		for _, k := range rules {
			fmt.Printf("  %-28s %4d %4d\n", k, byRule[k][0], byRule[k][1])
		}
	}
}
