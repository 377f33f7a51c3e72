package cli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// enumValue is a string flag that accepts one of a fixed set of values
// and names them all when given anything else.
type enumValue struct {
	p       *string
	allowed []string
}

func newEnum(p *string, def string, allowed ...string) *enumValue {
	*p = def
	return &enumValue{p: p, allowed: allowed}
}

// enumFlag adds an enum flag to cmd, with its values offered by shell
// completion.
func enumFlag(cmd *cobra.Command, p *string, name, def, usage string, allowed ...string) {
	cmd.Flags().Var(newEnum(p, def, allowed...), name, usage)
	_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
}

func (e *enumValue) String() string { return *e.p }
func (e *enumValue) Type() string   { return "string" }

func (e *enumValue) Set(s string) error {
	for _, a := range e.allowed {
		if s == a {
			*e.p = s
			return nil
		}
	}
	return fmt.Errorf("want %s", orList(e.allowed))
}

// orList renders "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// durationValue is a duration flag that also takes days ("7d", "1d12h"),
// which time.ParseDuration does not.
type durationValue struct{ p *time.Duration }

func newDuration(p *time.Duration, def time.Duration) *durationValue {
	*p = def
	return &durationValue{p: p}
}

func (d *durationValue) Type() string { return "duration" }

func (d *durationValue) String() string {
	if *d.p == 0 {
		return "0"
	}
	return d.p.String()
}

var daysRE = regexp.MustCompile(`^(\d+)d(.*)$`)

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d.p = v
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("want a duration such as 90s, 30m, 12h or 7d (units s, m, h, d; combined as in 1d12h)")
	var days time.Duration
	rest := s
	if m := daysRE.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > 100000 {
			return 0, bad
		}
		days, rest = time.Duration(n)*24*time.Hour, m[2]
		if rest == "" {
			return days, nil
		}
	}
	v, err := time.ParseDuration(rest)
	if err != nil || v < 0 {
		return 0, bad
	}
	return days + v, nil
}
