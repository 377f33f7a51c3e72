// Package rego is the rego_policy extension: a call filter that evaluates
// an OPA Rego policy for every call_tool. The policy is read and compiled
// once, when the gateway provisions the extension (a policy that does not
// compile stops startup with OPA's message), and evaluated per call with
// the input
//
//	{"tool_name": "server__tool", "server_name": "server", "tool": "tool",
//	 "arguments": {...}, "session": "...", "principal": "..."}
//
// (session and principal only where known). The query is
// data.<the policy's package>.allow: the policy must define allow, and may
// define deny_reason, a string shown to the LLM when allow is not true. An
// evaluation error, a built-in error, an undefined or non-boolean allow all
// deny the call (fail closed). See README.md.
package rego

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/toolgate/toolgate/extension"
)

// Key is the filters config key; ID the extension identifier; Rule names
// this extension's denials.
const (
	Key  = "rego_policy"
	ID   = "dev.toolgate/" + Key
	Rule = Key
)

// DefaultReason is shown when the policy denies without a deny_reason.
const DefaultReason = "the gateway's policy does not allow this call"

func init() { extension.RegisterFactory(Key, New) }

// Policy is the extension. After Provision it holds only prepared queries,
// which are safe for concurrent evaluation.
type Policy struct {
	path string // as configured

	file     string // resolved against the config folder
	pkg      string // e.g. "data.toolgate.deny_dangerous"
	allow    rego.PreparedEvalQuery
	reason   *rego.PreparedEvalQuery // nil when the policy has no deny_reason
	log      *slog.Logger
	prepared bool
}

// New is the factory for "rego_policy", whose value is the path of a .rego
// file, relative to the config's folder. It only records the path; the
// file is read and compiled by Provision.
func New(raw json.RawMessage) (extension.Extension, error) {
	var path string
	if err := json.Unmarshal(raw, &path); err != nil {
		return nil, fmt.Errorf(`want the path of a .rego file as a string, e.g. "policies/deny_dangerous.rego"`)
	}
	if strings.TrimSpace(path) == "" {
		return nil, errors.New("empty policy path")
	}
	return &Policy{path: path, log: slog.New(slog.DiscardHandler)}, nil
}

func (*Policy) ID() string             { return ID }
func (*Policy) Phase() extension.Phase { return extension.PhaseAuthorize }

// Package returns the queried package, e.g. "data.toolgate.deny_dangerous"
// (after Provision).
func (p *Policy) Package() string { return p.pkg }

// Provision reads, parses and compiles the policy and prepares its queries.
func (p *Policy) Provision(ctx context.Context, h extension.Host) error {
	if h.Logger != nil {
		p.log = h.Logger
	}
	p.file = p.path
	if !filepath.IsAbs(p.file) {
		p.file = filepath.Join(h.ConfigDir, p.file)
	}
	src, err := os.ReadFile(p.file)
	if err != nil {
		return fmt.Errorf("read policy %s: %w", p.path, errors.Unwrap(err))
	}
	mod, err := ast.ParseModuleWithOpts(p.path, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return fmt.Errorf("compile %s: %w", p.path, err)
	}
	if mod == nil {
		return fmt.Errorf("compile %s: the file holds no package", p.path)
	}
	rules := map[string]bool{}
	for _, r := range mod.Rules {
		rules[r.Head.Ref().String()] = true
	}
	if !rules["allow"] {
		return fmt.Errorf("policy %s (package %s) defines no allow rule; toolgate queries %s.allow", p.path, mod.Package.Path, mod.Package.Path)
	}
	p.pkg = mod.Package.Path.String()
	compiler := ast.NewCompiler()
	if compiler.Compile(map[string]*ast.Module{p.path: mod}); compiler.Failed() {
		return fmt.Errorf("compile %s: %w", p.path, compiler.Errors)
	}
	prepare := func(rule string) (rego.PreparedEvalQuery, error) {
		return rego.New(
			rego.Query(p.pkg+"."+rule),
			rego.Compiler(compiler),
			// A built-in that fails (a bad regex, a type mismatch) is an
			// error, not an undefined expression: otherwise a failing
			// "deny" helper would silently allow.
			rego.StrictBuiltinErrors(true),
		).PrepareForEval(ctx)
	}
	if p.allow, err = prepare("allow"); err != nil {
		return fmt.Errorf("compile %s: %w", p.path, err)
	}
	if rules["deny_reason"] {
		q, err := prepare("deny_reason")
		if err != nil {
			return fmt.Errorf("compile %s: %w", p.path, err)
		}
		p.reason = &q
	}
	p.prepared = true
	p.log.Info("policy compiled", "policy", p.file, "query", p.pkg+".allow")
	return nil
}

// Validate checks Provision ran.
func (p *Policy) Validate() error {
	if !p.prepared {
		return errors.New("policy not compiled")
	}
	return nil
}

// Input is the policy input for a call.
func Input(req *extension.CallRequest) (ast.Value, error) {
	args := ast.NewObject()
	raw, err := req.Arguments()
	if err != nil {
		return nil, err
	}
	if raw != nil {
		v, err := ast.InterfaceToValue(raw)
		if err != nil {
			return nil, fmt.Errorf("arguments: %w", err)
		}
		o, ok := v.(ast.Object)
		if !ok {
			return nil, errors.New("arguments are not an object")
		}
		args = o
	}
	in := ast.NewObject(
		ast.Item(ast.InternedTerm("tool_name"), ast.StringTerm(req.ToolName)),
		ast.Item(ast.InternedTerm("server_name"), ast.StringTerm(req.ServerName)),
		ast.Item(ast.InternedTerm("tool"), ast.StringTerm(req.Tool)),
		ast.Item(ast.InternedTerm("arguments"), ast.NewTerm(args)),
	)
	if req.Session != "" {
		in.Insert(ast.InternedTerm("session"), ast.StringTerm(req.Session))
	}
	if req.Principal != "" {
		in.Insert(ast.InternedTerm("principal"), ast.StringTerm(req.Principal))
	}
	return in, nil
}

// addCaller adds what the HTTP frontend's auth established about the
// caller: "groups", "scopes" and, for a token, its verified "claims".
func addCaller(input ast.Value, p *extension.Principal) error {
	obj, ok := input.(ast.Object)
	if !ok || p == nil {
		return nil
	}
	strs := func(ss []string) *ast.Term {
		terms := make([]*ast.Term, len(ss))
		for i, s := range ss {
			terms[i] = ast.StringTerm(s)
		}
		return ast.ArrayTerm(terms...)
	}
	obj.Insert(ast.InternedTerm("groups"), strs(p.Groups))
	obj.Insert(ast.InternedTerm("scopes"), strs(p.Scopes))
	if p.Claims != nil {
		v, err := ast.InterfaceToValue(p.Claims)
		if err != nil {
			return fmt.Errorf("claims: %w", err)
		}
		obj.Insert(ast.InternedTerm("claims"), ast.NewTerm(v))
	}
	return nil
}

// Decide evaluates the policy for one call: nil to allow, a Denial when
// the policy says no or leaves allow undefined, any other error when the
// policy could not be evaluated (the pipeline then refuses the call).
func (p *Policy) Decide(ctx context.Context, req *extension.CallRequest) error {
	input, err := Input(req)
	if err != nil {
		return err
	}
	if err := addCaller(input, extension.PrincipalFrom(ctx)); err != nil {
		return err
	}
	rs, err := p.allow.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return fmt.Errorf("evaluate %s.allow: %w", p.pkg, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return &extension.Denial{Rule: Rule, Reason: DefaultReason, Detail: p.pkg + ".allow is undefined for this call", Code: extension.CodePermissionDenied}
	}
	allow, ok := rs[0].Expressions[0].Value.(bool)
	if !ok {
		return fmt.Errorf("%s.allow is %T, not a boolean", p.pkg, rs[0].Expressions[0].Value)
	}
	if allow {
		return nil
	}
	return &extension.Denial{Rule: Rule, Reason: p.denyReason(ctx, input), Detail: p.pkg + ".allow is false", Code: extension.CodePermissionDenied}
}

// denyReason evaluates deny_reason; a policy's own reason is meant for the
// LLM. Anything but a non-empty string falls back to DefaultReason.
func (p *Policy) denyReason(ctx context.Context, input ast.Value) string {
	if p.reason == nil {
		return DefaultReason
	}
	rs, err := p.reason.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		p.log.WarnContext(ctx, "deny_reason failed to evaluate; using the default reason", "error", err)
		return DefaultReason
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return DefaultReason
	}
	s, ok := rs[0].Expressions[0].Value.(string)
	if !ok || strings.TrimSpace(s) == "" {
		p.log.WarnContext(ctx, "deny_reason is not a non-empty string; using the default reason", "type", fmt.Sprintf("%T", rs[0].Expressions[0].Value))
		return DefaultReason
	}
	return s
}

// CallFilter runs Decide for every call.
func (p *Policy) WrapCall(next extension.CallHandler) extension.CallHandler {
	return extension.Before(p.Decide)(next)
}
