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
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/embed"
	"github.com/toolgate/toolgate/internal/poison"
)

type row struct {
	ID         string `json:"id"`
	Text       string `json:"text"`
	Label      string `json:"label"`
	Category   string `json:"category"`
	Position   string `json:"insert_position"`
	Source     string `json:"source"`
	ContextID  string `json:"context_id"`
	AttackText string `json:"attack_text"`
	Role       string `json:"role"`
	// Pair names the minimal pair a row belongs to (authored12): the two
	// rows of a pair share a fold, or each would leak the other's words.
	Pair string `json:"pair"`
}

func main() {
	data := flag.String("data", "../shared/bench/poisoning", "directory holding tool_defs_dev.jsonl and outputs_dev.jsonl")
	cfgPath := flag.String("config", "", "poisoning config (the filters.poisoning object, or a whole toolgate config)")
	verbose := flag.Bool("v", false, "list misses and false positives")
	doTrain := flag.Bool("train", false, "train the classifier on the development and authored sets and write internal/poison/classifier.json")
	rulesOnly := flag.Bool("rules", false, "measure the rules alone (every built-in rule, no classifier), as before issue 15")
	structural := flag.Bool("structural", false, "run only the structural rules next to the classifier (config \"rules\": \"structural\"); the default keeps every rule, as poison.Build does")
	onlyLOSO := flag.Bool("loso-only", false, "print only the leave-one-source-out estimates")
	noLOSO := flag.Bool("no-loso", false, "skip the leave-one-source-out estimates")
	fresh := flag.Bool("fresh", false, "train on all rows in memory and measure those weights instead of the committed ones (classifier.json is not written)")
	losoOnly := flag.String("sources", "", "comma-separated sources to leave out in turn (default: every source)")
	flag.Float64Var(&defBudget.real, "target-fpr", defBudget.real, "share of the clean development and real-tool definitions the definition threshold may flag, out of fold")
	flag.Float64Var(&defBudget.hard, "hard-fpr", defBudget.hard, "share of the authored benign definitions the definition threshold may flag, out of fold")
	flag.Float64Var(&outBudget.real, "target-fpr-outputs", outBudget.real, "share of the clean development outputs the output threshold may flag, out of fold")
	flag.Float64Var(&outBudget.hard, "hard-fpr-outputs", outBudget.hard, "share of the authored clean outputs the output threshold may flag, out of fold")
	flag.Float64Var(&outputDefinitionShare, "output-definition-share", outputDefinitionShare, "the definition model's share of an output part's logit (0: the output model alone)")
	flag.Float64Var(&l2Hashed, "l2-hashed", l2Hashed, "L2 penalty on the hashed n-gram weights")
	flag.Float64Var(&l2Dense, "l2", l2Dense, "L2 penalty on the embedding and structural weights (standardised)")
	flag.IntVar(&epochs, "epochs", epochs, "epochs of full-batch Adam")
	flag.Float64Var(&posWeight, "pos-weight", posWeight, "share of the training loss carried by the positive instances")
	oofPath := flag.String("oof-scores", "", "with -train: write every training document's out-of-fold score to this file (tab-separated: threshold, id, source, malicious, score)")
	flag.IntVar(&hardNeg, "hard-neg", hardNeg, "extra copies of each clean text's worst part among the negatives of the second training round")
	flag.BoolVar(&milWhole, "mil-whole", milWhole, "keep a malicious definition's whole text as a positive in the second round")
	flag.Float64Var(&l2Gate, "l2-gate", l2Gate, "L2 penalty on the output gate's n-gram weights")
	flag.Float64Var(&gatePosWeight, "gate-pos-weight", gatePosWeight, "share of the output gate's loss on positive sentences")
	flag.Float64Var(&gateRecall, "gate-recall", gateRecall, "share of the attacked training outputs (out of fold) the output gate must mark")
	flag.BoolVar(&gateOnly, "gate-only", false, "with -loso-only: train only the output gate (the output model is the committed one)")
	flag.BoolVar(&noScreen, "no-screen", false, "scan every output fully (rules and every part embedded), without the lexical screen")
	flag.BoolVar(&readmeTrain, "readme-train", readmeTrain, "train on the README chunks of the Go modules as benign outputs (the npm ones stay out, for -readmes)")
	readmes := flag.Bool("readmes", false, "measure the committed weights with every rule, and the rules alone, on README files of the Go modules and npm packages this repository uses (benign tool outputs nobody chose; needs make deps)")
	blind := flag.String("blind", "", "a held-out batch file (definitions, or outputs with role attack/carrier rows) to measure before it is trained on: recall and FPR of the committed weights with every rule, and of the rules alone, per category")
	flag.BoolVar(&unquotedTraining, "unquoted", unquotedTraining, "train on the text the detector's classifier scores, with quoted examples (\"a typical injection reads: '...'\") replaced; false trains on the raw text, as before")
	flag.StringVar(&scoresPath, "scores", "", "with -blind: append one tab-separated line per document to this file (id, label, words, parts, the committed classifier's score, 1 when the default rules alone flag it), for analyses the report does not print")
	precision := flag.Bool("rule-precision", false, "count, per rule, the attacks and honest rows of every authored batch its findings flag on their own")
	audit := flag.Bool("rule-audit", false, "list the alternation branches of the built-in rules that match no text, or only one or two development rows")
	flag.BoolVar(&useGoDoc, "godoc", useGoDoc, "train the definition model with the doc comments of Go standard-library packages as extra benign definitions (source godoc)")
	flag.IntVar(&goDocEvery, "godoc-every", goDocEvery, "keep every n-th Go doc comment as a benign definition")
	flag.Func("drop-features", "comma-separated structural features to hold at zero in training (an ablation)", func(v string) error {
		dropFeatures = strings.Split(v, ",")
		return nil
	})
	flag.Func("model", "definition and output model: logistic, mlp (one hidden ReLU layer, see -mlp-*) or ensemble (the mean of both logits)", func(v string) error {
		if v != "logistic" && v != "mlp" && v != "ensemble" {
			return fmt.Errorf("want logistic, mlp or ensemble, not %q", v)
		}
		modelKind = v
		return nil
	})
	flag.IntVar(&mlpUnits, "mlp-units", mlpUnits, "hidden ReLU units of the MLP")
	flag.IntVar(&mlpEpochs, "mlp-epochs", mlpEpochs, "epochs of mini-batch Adam for the MLP")
	flag.IntVar(&mlpBatch, "mlp-batch", mlpBatch, "mini-batch size of the MLP")
	flag.Float64Var(&mlpLR, "mlp-lr", mlpLR, "Adam learning rate of the MLP")
	flag.Float64Var(&mlpL2, "mlp-l2", mlpL2, "L2 penalty on the MLP's hidden and output weights (standardised inputs)")
	flag.Func("pooling", "how MiniLM's token vectors are pooled for the classifier: mean (as in semantic search), mean+max, mean+mid or mean+max+mid (default: the committed weights' pooling)", func(v string) (err error) {
		pooling, err = embed.ParsePooling(v)
		return err
	})
	flag.IntVar(&attnHeads, "attn", attnHeads, "learned attention poolings over the token vectors of the -attn-layers, in the definition model (0: none; default: the committed weights')")
	flag.Func("attn-layers", "the layers (1-based, comma-separated) whose token vectors -attn pools (default: the committed weights', else 3)", func(v string) error {
		attnLayers = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 || n > 6 {
				return fmt.Errorf("layer %q: want 1 to 6", f)
			}
			attnLayers = append(attnLayers, n)
		}
		return nil
	})
	flag.Float64Var(&attnL2, "attn-l2", attnL2, "L2 penalty of the attention queries and readouts")
	flag.IntVar(&attnEpochs, "attn-epochs", attnEpochs, "epochs of the attention's first stage")
	flag.BoolVar(&attnScalar, "attn-scalar", false, "pass each attention head's first-stage readout, not its pooled vector, to the classifier")
	flag.Float64Var(&attnL2Factor, "attn-l2-factor", attnL2Factor, "how many times the classifier's L2 penalty weighs the attention features")
	flag.BoolVar(&attnOutputs, "attn-outputs", false, "give the output model the attention heads too (experiment)")
	flag.IntVar(&convFilters, "conv", convFilters, "with -attn-loso: learned n-gram filters over the token vectors of the -attn-layers in the definition model, instead of -attn (an experiment: it lost to -attn; 0: none)")
	flag.IntVar(&tuneRank, "tune", tuneRank, "with -attn-loso: rank of low-rank adapters on MiniLM's top -tune-layers layers, trained on the definition task through the sentence vector, which then joins the features instead of -attn (an experiment: it did not move the ranking, bench/poisoning/DATA.md; 0: none)")
	flag.BoolVar(&tuneShared, "tune-shared", false, "fit the -tune adapters once per fold and reuse them in the fits that choose the threshold (faster; for the threshold-free figures only: the threshold comes out low)")
	flag.IntVar(&tuneLayers, "tune-layers", tuneLayers, "how many of MiniLM's top layers -tune adapts (1 to 5)")
	flag.StringVar(&tuneTargets, "tune-targets", tuneTargets, "the maps -tune adapts in each adapted layer, comma-separated: "+strings.Join(tuneTargetNames, ","))
	flag.IntVar(&tuneEpochs, "tune-epochs", tuneEpochs, "epochs of -tune's mini-batch Adam")
	flag.IntVar(&tuneBatch, "tune-batch", tuneBatch, "parts per -tune mini-batch")
	flag.Float64Var(&tuneLR, "tune-lr", tuneLR, "Adam learning rate of -tune")
	flag.Float64Var(&tuneL2, "tune-l2", tuneL2, "L2 penalty of the -tune adapters and readout")
	flag.IntVar(&convWidth, "conv-width", convWidth, "tokens per -conv window")
	flag.Float64Var(&convL2, "conv-l2", convL2, "L2 penalty of the -conv filters and readouts")
	flag.IntVar(&convEpochs, "conv-epochs", convEpochs, "epochs of the -conv first stage")
	flag.Func("batches", "the authored batches in training, comma-separated (default: "+strings.Join(trainingBatches, ",")+")", func(v string) error {
		trainingBatches = strings.Split(v, ",")
		return nil
	})
	flag.Func("aux", "comma-separated training sources whose rows do not count in the thresholds' FPR, next to godoc", func(v string) error {
		for _, src := range strings.Split(v, ",") {
			auxNegative[src] = true
		}
		return nil
	})
	anchors := flag.String("anchors", "", "experiment: a file of anchor sentences (A attack, B benign); prints per batch the AUC and recall at 2% FPR of the classifier, of the anchor similarities, and of both")
	attnLOSO := flag.Bool("attn-loso", false, "leave-one-source-out of the classifier alone, scored in the bench (to compare -attn settings)")
	kindsFlag := flag.String("kinds", "definitions,outputs", "which kinds the leave-one-source-out folds cover")
	memLimit := flag.Int("mem-limit", 14, "soft limit of the Go heap in GiB, as GOMEMLIMIT (which, when set, wins); 0: none")
	flag.Parse()
	// Training holds about 10 GiB live at its peak, and the collector's
	// default pacing lets the heap grow to twice the live size before it
	// collects: 22 GiB, which nearly exhausted a 24 GiB machine. A soft
	// limit makes it collect earlier; it changes no result.
	if *memLimit < 0 {
		log.Fatalf("-mem-limit %d: want a size in GiB, or 0 for none", *memLimit)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && *memLimit > 0 {
		debug.SetMemoryLimit(int64(*memLimit) << 30)
	}
	if convFilters > 0 && !*attnLOSO {
		// The runtime has no convolution: weights trained with it would
		// not load, and only -attn-loso scores it in the bench.
		log.Fatal("-conv is an experiment for -attn-loso only")
	}
	if tuneRank > 0 {
		if !*attnLOSO || convFilters > 0 {
			// The runtime has no adapters; -attn-loso alone scores them.
			log.Fatal("-tune is an experiment for -attn-loso only, without -conv")
		}
		if tuneLayers < 1 || tuneLayers > 5 {
			log.Fatalf("-tune-layers %d: want 1 to 5 (the adapters read the token vectors of the layer below the first)", tuneLayers)
		}
		for _, t := range strings.Split(tuneTargets, ",") {
			if !slices.Contains(tuneTargetNames, t) {
				log.Fatalf("-tune-targets: unknown map %q (want some of %s)", t, strings.Join(tuneTargetNames, ","))
			}
		}
		attnLayers, attnHeads = []int{tuneFrom() - 1}, 0
	}
	if mlpUnits < 1 || mlpBatch < 1 || mlpEpochs < 1 {
		log.Fatalf("-mlp-units, -mlp-batch and -mlp-epochs must be positive (have %d, %d, %d)", mlpUnits, mlpBatch, mlpEpochs)
	}
	losoKinds = strings.Split(*kindsFlag, ",")
	if *losoOnly != "" {
		losoSources = strings.Split(*losoOnly, ",")
	}
	var cfg = map[string]poison.Config{}
	for _, key := range []string{"tool_poisoning", "output_poisoning"} {
		if *cfgPath != "" {
			raw, err := os.ReadFile(*cfgPath)
			if err != nil {
				log.Fatal(err)
			}
			c, err := poison.ConfigFromFile(raw, key)
			if err != nil {
				log.Fatalf("%s: %v", *cfgPath, err)
			}
			cfg[key] = c
		}
	}
	devDefs, err := load(filepath.Join(*data, "tool_defs_dev.jsonl"))
	if err != nil {
		log.Fatal(err)
	}
	devOuts, err := load(filepath.Join(*data, "outputs_dev.jsonl"))
	if err != nil {
		log.Fatal(err)
	}
	here := filepath.Join("bench", "poisoning")
	var authDefs []row
	var authOuts []doc // composed
	for _, b := range trainingBatches {
		// A batch may hold definitions only (authored12) or outputs only
		// (authored4).
		if defs := filepath.Join(here, b+"_defs.jsonl"); fileExists(defs) {
			authDefs = append(authDefs, mustLoad(defs)...)
		}
		if outs := filepath.Join(here, b+"_outputs.jsonl"); fileExists(outs) {
			authOuts = append(authOuts, compose(mustLoad(outs), b)...)
		}
	}
	catalog := filepath.Join(filepath.Dir(*data), "retrieval", "tools.jsonl")
	tools, err := loadTools(catalog)
	if err != nil {
		log.Fatal(err)
	}

	if *precision {
		paths, err := filepath.Glob(filepath.Join("bench", "poisoning", "authored*.jsonl"))
		if err != nil || len(paths) == 0 {
			log.Fatalf("no authored batches in bench/poisoning (run from the repository root): %v", err)
		}
		rulePrecision(cfg, paths, *verbose)
		return
	}
	if *audit {
		var texts []auditText
		for _, set := range [][]row{devDefs, devOuts} {
			for _, r := range set {
				texts = append(texts, auditText{low: lower(r.Text), dev: true})
			}
		}
		for _, r := range authDefs {
			texts = append(texts, auditText{low: lower(r.Text)})
		}
		for _, d := range authOuts {
			if d.attack != "" || !d.malicious {
				texts = append(texts, auditText{low: lower(cmp.Or(d.attack, d.text))})
			}
		}
		for _, t := range tools {
			texts = append(texts, auditText{low: lower(strings.Join(poison.ClassifiedStrings(t.Description, t.InputSchema), "\n"))})
		}
		ruleAudit(texts)
		return
	}
	if *readmes {
		readmeFPR(cfg, *verbose)
		return
	}
	if *anchors != "" {
		anchorExperiment(*anchors)
		return
	}
	if *blind != "" {
		blindBatch(cfg, *blind, *verbose)
		return
	}
	if *rulesOnly {
		det, outDet := build(cfg, poison.Options{}), buildOut(cfg, poison.Options{})
		fmt.Println("== rules only (every built-in rule, no classifier)")
		runReport(det, outDet, devDefs, devOuts, tools, catalog, *data, *verbose)
		heldout(det, outDet, devOuts, *verbose)
		authoredHeldout(det, outDet, devOuts, *verbose)
		// The authored training rows are unseen by the rules too.
		var dc, oc counts
		for _, d := range defDocs(nil, authDefs) {
			dc.add(d.malicious, det.ScanDefinition("", d.text, nil).Malicious)
		}
		for _, d := range authOuts {
			oc.add(d.malicious, outDet.ScanOutput(d.text).Malicious)
		}
		fmt.Println(fmtCounts("authored definitions (training rows)", dc, -1))
		fmt.Println(fmtCounts("authored outputs (training rows)", oc, -1))
		return
	}

	emb, err := newCachedEmbedder()
	if err != nil {
		log.Fatalf("the classifier needs the MiniLM model: %v", err)
	}
	defer emb.save()
	defs, outs := defDocs(devDefs, authDefs), append(outDocs(devOuts), authOuts...)
	// The real-tool catalogue is benign training data too (source
	// "catalogue", one document per tool: its description and schema
	// strings); its honest FPR is the leave-one-source-out figure.
	for _, t := range tools {
		if ss := poison.ClassifiedStrings(t.Description, t.InputSchema); len(ss) > 0 {
			defs = append(defs, doc{id: t.Server + "__" + t.Name, text: strings.Join(ss, "\n"), source: "catalogue", category: "real-tool", group: "server:" + t.Server})
		}
	}
	if useGoDoc {
		gd, err := goDocDocs()
		if err != nil {
			log.Fatal(err)
		}
		defs = append(defs, gd...)
	}
	if readmeTrain {
		// The Go modules' README chunks are benign outputs in training; the
		// npm packages' stay out, to measure (-readmes).
		for _, d := range mustReadmeDocs(false) {
			if d.source == "readme-go" {
				outs = append(outs, d)
			}
		}
	}
	start := time.Now()
	l, err := prepare(emb, defs, outs)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("embedded %d definition and %d output documents in %v\n", len(defs), len(outs), time.Since(start).Round(time.Millisecond))

	if *doTrain {
		note := fmt.Sprintf("go run ./bench/poisoning -train -pooling %s -attn %d -attn-layers %s -attn-l2-factor %g -target-fpr %g -hard-fpr %g -target-fpr-outputs %g -hard-fpr-outputs %g -output-definition-share %g -l2 %g -l2-hashed %g -pos-weight %g -hard-neg %d -epochs %d: logistic regression (standardised inputs, full-batch Adam lr 0.02, two multiple-instance rounds) over %s part embeddings%s + %d structural features%s + 2^%d hashed word uni/bigrams; output gate (-l2-gate %g): the hashed n-grams alone, threshold marking %g of attacked training outputs out of fold, extra negatives from the sentences of the real tools and of GOROOT/src/{net/http,encoding/json,os,strings,text/template}/*.go; data: ../shared/bench/poisoning/{tool_defs_dev,outputs_dev}.jsonl (all rows) + bench/poisoning/{%s}_{defs,outputs}.jsonl + ../shared/bench/retrieval/tools.jsonl (707 benign tools)%s%s; thresholds: the lowest at which 5-fold out-of-fold scores flag at most %g of the clean development and real-tool definitions and %g of the authored benign ones, and %g of the clean development outputs and %g of the authored clean ones",
			pooling, attnHeads, layersFlag(), attnL2Factor, defBudget.real, defBudget.hard, outBudget.real, outBudget.hard, outputDefinitionShare, l2Dense, l2Hashed, posWeight, hardNeg, epochs, emb.ModelID(), droppedViewsNote(), len(poison.FeatureNames), attentionNote(), hashBits, l2Gate, gateRecall, strings.Join(trainingBatches, ","), goDocNote(), readmeNote(), defBudget.real, defBudget.hard, outBudget.real, outBudget.hard)
		if modelKind != "logistic" {
			// The logistic note stays as it was, so that its weights reproduce.
			what := "one-hidden-layer ReLU MLP (standardised inputs, seeded init, fixed-order mini-batch Adam, two multiple-instance rounds; hashed n-grams linear in the output)"
			if modelKind == "ensemble" {
				what = "the mean of the logits of a logistic regression (standardised inputs, full-batch Adam lr 0.02) and a one-hidden-layer ReLU MLP (seeded init, fixed-order mini-batch Adam), two multiple-instance rounds"
			}
			note = strings.Replace(note, "-epochs "+fmt.Sprint(epochs)+": logistic regression (standardised inputs, full-batch Adam lr 0.02, two multiple-instance rounds)",
				fmt.Sprintf("-epochs %d -model %s -mlp-units %d -mlp-epochs %d -mlp-batch %d -mlp-lr %g -mlp-l2 %g: %s", epochs, modelKind, mlpUnits, mlpEpochs, mlpBatch, mlpLR, mlpL2, what), 1)
		}
		printOOF = true
		if *oofPath != "" {
			f, err := os.Create(*oofPath)
			if err != nil {
				log.Fatal(err)
			}
			defer f.Close()
			oofScores = f
		}
		m := l.models(func(doc) bool { return true }, note)
		path := filepath.Join("internal", "poison", "classifier.json")
		if err := writeModels(path, m); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("wrote %s (definition threshold %.3f, output threshold %.3f)\n", path, m.Definition.Threshold, m.Output.Threshold)
		return
	}

	if *attnLOSO {
		losoClassifier(l, *verbose)
		return
	}
	if *onlyLOSO {
		loso(l, cfg, tools, *verbose)
		return
	}
	shipped, err := poison.BuiltinModels()
	if err != nil {
		log.Fatal(err)
	}
	what := "the committed weights"
	if *fresh {
		shipped, what = l.models(func(doc) bool { return true }, "fresh"), "weights trained now"
	}
	opt := poison.Options{Embedder: emb, Models: shipped, AllRules: !*structural}
	det, outDet := build(cfg, opt), buildOut(cfg, opt)
	fmt.Printf("== shipped detector (%s): classifier + %s (IN-SAMPLE on the development rows: the weights were trained on them)\n", what, map[bool]string{false: "every rule", true: "structural rules"}[*structural])
	runReport(det, outDet, devDefs, devOuts, tools, catalog, *data, *verbose)
	heldout(det, outDet, devOuts, *verbose)
	authoredHeldout(det, outDet, devOuts, *verbose)
	if !*noLOSO {
		loso(l, cfg, tools, *verbose)
	}
}

// trainingBatches are the authored batches in training: files
// bench/poisoning/<batch>_defs.jsonl and <batch>_outputs.jsonl. Every
// writer's batch is in, and the minimal pairs of authored12 and
// authored98 to authored101: each writer's batch was
// first measured blind with the weights before it, and the weights trained
// with more writers ranked the unseen writers' rows better
// (bench/poisoning/DATA.md). Held out: authored4 (outputs), authored134 to
// authored141 (measured at the thirteenth stop), authored142 to authored157
// (measured at the fourteenth, where weights trained through authored141
// ranked authored142 to authored149 worse and were not kept), authored166 to
// authored173 (measured there too, to judge its last rules), authored158 to
// authored165 (not yet measured) and the authored_*_heldout files.
var trainingBatches = []string{"authored", "authored2", "authored3", "authored5", "authored6", "authored7", "authored8", "authored9", "authored10", "authored11", "authored12", "authored13", "authored14", "authored15", "authored16", "authored17", "authored18", "authored19", "authored20", "authored21", "authored22", "authored23", "authored24", "authored25", "authored26", "authored27", "authored28", "authored29", "authored30", "authored31", "authored32", "authored33", "authored34", "authored35", "authored36", "authored37", "authored38", "authored39", "authored40", "authored41", "authored42", "authored43", "authored44", "authored45", "authored46", "authored47", "authored48", "authored49", "authored50", "authored51", "authored52", "authored53", "authored54", "authored55", "authored56", "authored57", "authored58", "authored59", "authored60", "authored61", "authored62", "authored63", "authored64", "authored65", "authored66", "authored67", "authored68", "authored69", "authored70", "authored71", "authored72", "authored73", "authored74", "authored75", "authored76", "authored77", "authored78", "authored79", "authored80", "authored81", "authored82", "authored83", "authored84", "authored85", "authored86", "authored87", "authored88", "authored89", "authored90", "authored91", "authored92", "authored93", "authored94", "authored95", "authored96", "authored97", "authored98", "authored99", "authored100", "authored101", "authored102", "authored103", "authored104", "authored105", "authored106", "authored107", "authored108", "authored109", "authored110", "authored111", "authored112", "authored113", "authored114", "authored115", "authored116", "authored117", "authored118", "authored119", "authored120", "authored121", "authored122", "authored123", "authored124", "authored125", "authored126", "authored127", "authored128", "authored129", "authored130", "authored131", "authored132", "authored133"}

// blindBatch measures a batch of authored rows that no model or rule was run
// on before: definitions as they are, outputs composed as the training
// batches are. It reports the committed weights with every rule (what
// detector.classifier on runs) and the rules alone (the default). Run it
// once, before the batch is trained on, if ever.
func blindBatch(cfg map[string]poison.Config, path string, verbose bool) {
	rows := mustLoad(path)
	source, outputs := "", false
	for _, r := range rows {
		source = r.Source
		outputs = outputs || r.Role != ""
	}
	var docs []doc
	if outputs {
		docs = compose(rows, source)
	} else {
		docs = defDocs(nil, rows)
	}
	dets, save := committedAndRules()
	defer save()
	fmt.Printf("== blind: %s (%d documents), never trained on\n", path, len(docs))
	fmt.Printf("%-40s %5s %5s %5s %5s  %9s %6s %6s\n", "detector", "n", "TP", "FP", "FN", "precision", "recall", "FPR")
	var clsScore map[int]float64 // the committed classifier's, every document
	rulesFlag := map[int]bool{}  // the rules alone
	for _, d := range dets {
		det, kind := buildOut(cfg, d.opt), poison.KindOutput
		scan := det.ScanOutput
		if !outputs {
			det, kind = build(cfg, d.opt), poison.KindDefinition
			scan = func(s string) poison.Verdict { return det.ScanDefinition("", s, nil) }
		}
		var c counts
		byCat := map[string]*counts{}
		score := map[int]float64{}
		for i, doc := range docs {
			if s, ok, err := det.ClassifierScore(kind, doc.text); err != nil {
				log.Fatalf("%s: %s: %v", path, doc.id, err)
			} else if ok {
				score[i] = s
			}
			v := scan(doc.text)
			if d.opt.Embedder == nil {
				rulesFlag[i] = v.Malicious
			}
			if byCat[doc.category] == nil {
				byCat[doc.category] = &counts{}
			}
			byCat[doc.category].add(doc.malicious, v.Malicious)
			c.add(doc.malicious, v.Malicious)
			if verbose && doc.malicious != v.Malicious {
				fmt.Printf("  %s %s %q %s\n", map[bool]string{true: "MISS", false: "FALSE POSITIVE"}[doc.malicious], doc.id, firstLine(doc.text), topFinding(v))
			}
		}
		fmt.Println(fmtCounts(d.name, c, -1))
		if len(score) == len(docs) {
			clsScore = score
			// How far the classifier's ranking is from its threshold: the
			// recall a threshold fitted to this batch would reach.
			th := d.opt.Models.Definition.Threshold
			if outputs {
				th = d.opt.Models.Output.Threshold
			}
			var at counts
			for i, doc := range docs {
				at.add(doc.malicious, score[i] >= th)
			}
			auc, rec, _ := separation(docs, slices.Collect(maps.Keys(score)), score, 0.02)
			fmt.Printf("  classifier alone%s: recall %s, FPR %s at its threshold %.3f; threshold-free: AUC %.3f, recall %.3f at this batch's own 2%% FPR\n",
				map[bool]string{true: " (no output screen)"}[outputs], ratio(at.tp, at.tp+at.fn), ratio(at.fp, at.fp+at.tn), th, auc, rec)
		}
		for _, cat := range slices.Sorted(maps.Keys(byCat)) {
			fmt.Println(fmtCounts("  "+cat, *byCat[cat], -1))
		}
	}
	if clsScore != nil && len(rulesFlag) == len(docs) {
		appendScores(docs, clsScore, rulesFlag)
		// What other classifier thresholds would give with every rule: a
		// menu for choosing the threshold, not a measurement of the
		// shipped one (outputs: without the screen).
		fmt.Printf("threshold menu, every rule OR the classifier at T%s:\n", map[bool]string{true: " (no output screen)"}[outputs])
		for _, th := range menuThresholds {
			var c counts
			for i, doc := range docs {
				c.add(doc.malicious, rulesFlag[i] || clsScore[i] >= th)
			}
			fmt.Printf("  T %.3f: %d of %d attacks, %d of %d clean\n", th, c.tp, c.tp+c.fn, c.fp, c.fp+c.tn)
		}
	}
}

// scoresPath is -scores: where -blind appends the classifier's score of
// each document.
var scoresPath string

func appendScores(docs []doc, score map[int]float64, rules map[int]bool) {
	if scoresPath == "" {
		return
	}
	f, err := os.OpenFile(scoresPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i, d := range docs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%.6f\t%d\n", d.id, map[bool]string{true: "malicious", false: "benign"}[d.malicious], len(strings.Fields(d.text)), len(poison.Parts(d.text)), score[i], map[bool]int{true: 1}[rules[i]])
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

// menuThresholds are the classifier thresholds -blind and -attn-loso list
// their figures at, for choosing one.
var menuThresholds = []float64{0.80, 0.85, 0.90, 0.923, 0.944, 0.96}

// namedOptions is one detector set-up a measurement reports.
type namedOptions struct {
	name string
	opt  poison.Options
}

// committedAndRules returns the two detectors the held-out measurements
// compare: the committed weights with every rule (what detector.classifier
// on runs) and the rules alone (the gateway's default), and the function
// that saves the embedding cache.
func committedAndRules() ([]namedOptions, func()) {
	emb, err := newCachedEmbedder()
	if err != nil {
		log.Fatalf("the classifier needs the MiniLM model: %v", err)
	}
	shipped, err := poison.BuiltinModels()
	if err != nil {
		log.Fatal(err)
	}
	return []namedOptions{
		{"committed weights + every rule", poison.Options{Embedder: emb, Models: shipped, AllRules: true}},
		{"rules alone (the default)", poison.Options{}},
	}, emb.save
}

// mustReadmeDocs is readmeDocs of the working directory (the repository
// root), or exits saying why not.
func mustReadmeDocs(npm bool) []doc {
	wd, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	docs, err := readmeDocs(wd, npm)
	if err != nil {
		log.Fatal(err)
	}
	return docs
}

// readmeFPR measures the output detectors on the README corpus
// (readmeDocs): every chunk is benign, so what is flagged is the FPR on
// real documentation nobody fitted anything to.
func readmeFPR(cfg map[string]poison.Config, verbose bool) {
	docs := mustReadmeDocs(true)
	dets, save := committedAndRules()
	defer save()
	fmt.Printf("== README chunks of at most %d bytes, all benign (%d documents)\n", readmeChunkBytes, len(docs))
	for _, d := range dets {
		det := buildOut(cfg, d.opt)
		bySrc := map[string]*counts{}
		var all counts
		for _, doc := range docs {
			v := det.ScanOutput(doc.text)
			if bySrc[doc.source] == nil {
				bySrc[doc.source] = &counts{}
			}
			bySrc[doc.source].add(false, v.Malicious)
			all.add(false, v.Malicious)
			if verbose && v.Malicious {
				fmt.Printf("  FALSE POSITIVE %s %s\n", doc.id, topFinding(v))
			}
		}
		fmt.Println(fmtCounts(d.name, all, -1))
		for _, src := range slices.Sorted(maps.Keys(bySrc)) {
			fmt.Println(fmtCounts("  "+src, *bySrc[src], -1))
		}
	}
}

func mustLoad(path string) []row {
	rows, err := load(path)
	if err != nil {
		log.Fatalf("%v (run from the repository root)", err)
	}
	return rows
}

func build(cfg map[string]poison.Config, opt poison.Options) *poison.Detector {
	opt.NoScreen = noScreen
	d, err := poison.NewDetectorWith(cfg["tool_poisoning"], opt)
	if err != nil {
		log.Fatal(err)
	}
	return d
}

func buildOut(cfg map[string]poison.Config, opt poison.Options) *poison.Detector {
	opt.NoScreen = noScreen
	d, err := poison.NewDetectorWith(cfg["output_poisoning"], opt)
	if err != nil {
		log.Fatal(err)
	}
	return d
}

func runReport(det, outDet *poison.Detector, defs, outs []row, tools []tool, catalog, data string, verbose bool) {
	fmt.Printf("\n== tool definitions (%s, %d rows)\n", filepath.Join(data, "tool_defs_dev.jsonl"), len(defs))
	report(defs, func(s string) poison.Verdict { return det.ScanDefinition("", s, nil) }, verbose, "")
	flagged := catalogFPR(det, tools, verbose)
	fmt.Printf("\n== full real tool definitions, all benign (%s: description + every inputSchema string)\nflagged %d of %d (FPR %.3f)\n", catalog, flagged, len(tools), float64(flagged)/float64(len(tools)))
	fmt.Printf("\n== tool outputs (%s, %d rows)\n", filepath.Join(data, "outputs_dev.jsonl"), len(outs))
	report(outs, outDet.ScanOutput, verbose, "context")
}

func catalogFPR(det *poison.Detector, tools []tool, verbose bool) int {
	flagged := 0
	for _, t := range tools {
		v := det.ScanDefinition(t.Name, t.Description, t.InputSchema)
		if v.Malicious {
			flagged++
			if verbose {
				fmt.Printf("  FALSE POSITIVE %s__%s", t.Server, t.Name)
				for _, f := range v.Findings {
					fmt.Printf(" {%s/%s %s %.2f: %q}", f.Rule, f.Severity, f.Path, f.Score, f.Context+f.Sentence)
				}
				fmt.Println()
			}
		}
	}
	return flagged
}

// authoredHeldout measures on the authored held-out rows, which no model or
// threshold was fitted to.
func authoredHeldout(det, outDet *poison.Detector, devOuts []row, verbose bool) {
	here := filepath.Join("bench", "poisoning")
	hd := mustLoad(filepath.Join(here, "authored_defs_heldout.jsonl"))
	ho := mustLoad(filepath.Join(here, "authored_outputs_heldout.jsonl"))
	fmt.Printf("\n== authored held-out rows (never trained on; bench/poisoning/authored_*_heldout.jsonl)\n")
	byCat := map[string]*counts{}
	var all counts
	for _, r := range hd {
		v := det.ScanDefinition("", r.Text, nil)
		mal := r.Label == "malicious"
		all.add(mal, v.Malicious)
		c := byCat[r.Category]
		if c == nil {
			c = &counts{}
			byCat[r.Category] = c
		}
		c.add(mal, v.Malicious)
		if verbose && mal != v.Malicious {
			fmt.Printf("  %s %s %q %s\n", map[bool]string{true: "MISS", false: "FALSE POSITIVE"}[mal], r.ID, r.Text, topFinding(v))
		}
	}
	cats := make([]string, 0, len(byCat))
	for k := range byCat {
		cats = append(cats, k)
	}
	slices.Sort(cats)
	fmt.Printf("%-40s %5s %5s %5s %5s  %9s %6s %6s\n", "definitions, category", "n", "TP", "FP", "FN", "precision", "recall", "FPR")
	for _, k := range cats {
		fmt.Println(fmtCounts("  "+k, *byCat[k], -1))
	}
	fmt.Println(fmtCounts("definitions OVERALL", all, -1))
	var oc counts
	for _, d := range compose(ho, "authored-heldout") {
		v := outDet.ScanOutput(d.text)
		oc.add(d.malicious, v.Malicious)
		if verbose && d.malicious != v.Malicious {
			fmt.Printf("  %s %s %q %s\n", map[bool]string{true: "MISS", false: "FALSE POSITIVE"}[d.malicious], d.id, firstLine(d.text), topFinding(v))
		}
	}
	fmt.Println(fmtCounts("outputs (held-out attacks in held-out carriers)", oc, -1))
	// The held-out attacks in every clean development output.
	var hit, n int
	var clean []string
	for _, r := range devOuts {
		if r.Label == "benign" {
			clean = append(clean, r.Text)
		}
	}
	j := 0
	for _, a := range ho {
		if a.Role != "attack" {
			continue
		}
		for i, c := range clean {
			n++
			if outDet.ScanOutput(insert(c, a.Text, (i+j)%3)).Malicious {
				hit++
			}
		}
		j++
	}
	fmt.Printf("outputs (held-out attacks x %d clean dev outputs): recall %.3f (%d of %d)\n", len(clean), float64(hit)/float64(max(n, 1)), hit, n)
}

func topFinding(v poison.Verdict) string {
	if len(v.Findings) == 0 {
		return ""
	}
	f := v.Findings[0]
	return fmt.Sprintf("{%s/%s %.2f %q}", f.Rule, f.Severity, f.Score, f.Context)
}

// loso trains without each source in turn and measures on it with the real
// detector (classifier + structural rules). Thresholds come from the
// training folds only.
func loso(l *learned, cfg map[string]poison.Config, tools []tool, verbose bool) {
	fmt.Printf("\n== leave-one-source-out (train without the source, threshold from the other sources' out-of-fold scores, test on it)\n")
	fmt.Printf("%-40s %5s %5s %5s %5s  %9s %6s %6s\n", "held-out source", "n", "TP", "FP", "FN", "precision", "recall", "FPR")
	for _, kind := range losoKinds {
		docs := l.defs
		if kind == "outputs" {
			docs = l.outs
		}
		for _, src := range sources(docs) {
			if losoSources != nil && !slices.Contains(losoSources, src) {
				continue
			}
			keep := func(d doc) bool { return d.source != src }
			if src == "catalogue" {
				// The livemcpbench and azure dev rows are catalogue
				// descriptions: leave them out too.
				keep = func(d doc) bool { return !catalogueDerived[d.source] }
			}
			m := l.models(keep, "loso", kind)
			opt := poison.Options{Embedder: l.emb, Models: m}
			det, outDet := build(cfg, opt), buildOut(cfg, opt)
			optAll := poison.Options{Embedder: l.emb, Models: m, AllRules: true}
			detAll, outDetAll := build(cfg, optAll), buildOut(cfg, optAll)
			var c, cAll counts
			th := m.Definition.Threshold
			if kind == "outputs" {
				th = m.Output.Threshold
			}
			for _, d := range docs {
				if d.source != src {
					continue
				}
				var v, vAll poison.Verdict
				if kind == "outputs" {
					v, vAll = outDet.ScanOutput(d.text), outDetAll.ScanOutput(d.text)
				} else {
					v, vAll = det.ScanDefinition("", d.text, nil), detAll.ScanDefinition("", d.text, nil)
				}
				c.add(d.malicious, v.Malicious)
				cAll.add(d.malicious, vAll.Malicious)
				if verbose && d.malicious != v.Malicious {
					fmt.Printf("  %s %s %q %s\n", map[bool]string{true: "MISS", false: "FALSE POSITIVE"}[d.malicious], d.id, clip(d.text, 100), topFinding(v))
				}
			}
			fmt.Println(fmtCounts(kind+": "+src, c, th))
			fmt.Println(fmtCounts("  + all rules", cAll, -1))
			if kind == "definitions" && src == "catalogue" {
				// The same model, scanning each tool as the gateway does.
				fl := catalogFPR(det, tools, verbose)
				fmt.Printf("  full definitions through the detector: %d of %d (FPR %.3f)\n", fl, len(tools), float64(fl)/float64(len(tools)))
				fl = catalogFPR(detAll, tools, false)
				fmt.Printf("  + all rules: %d of %d (FPR %.3f)\n", fl, len(tools), float64(fl)/float64(len(tools)))
				// What lower definition thresholds would cost on real
				// tools the model never saw.
				for _, t := range []float64{0.80, 0.85, 0.90} {
					mt, def := *m, *m.Definition
					def.Threshold, mt.Definition = t, &def
					fl := catalogFPR(build(cfg, poison.Options{Embedder: l.emb, Models: &mt, AllRules: true}), tools, false)
					fmt.Printf("  + all rules, definition threshold %.2f: %d of %d (FPR %.3f)\n", t, fl, len(tools), float64(fl)/float64(len(tools)))
				}
			}
		}
	}
}

// losoSources limits the leave-one-source-out folds (flag -sources).
var losoSources []string

// noScreen turns the output screen off in every detector built here.
var noScreen bool

// losoKinds are the kinds the folds cover (flag -kinds).
var losoKinds []string

var catalogueDerived = map[string]bool{"catalogue": true, "livemcpbench": true, "azure-mcp-tool-description-evaluator": true, "npm-reference-servers": true}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
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

func (c *counts) merge(o counts) { c.tp, c.fp, c.fn, c.tn = c.tp+o.tp, c.fp+o.fp, c.fn+o.fn, c.tn+o.tn }

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
