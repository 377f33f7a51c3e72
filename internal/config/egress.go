package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/egress"
)

// Egress is a stdio server's network policy (the server's "egress" object,
// and filters.egress.default for every stdio server that has none).
//
// With no egress anywhere in the config, every server's mode is "off": its
// network is left alone, as before egress existed, so no existing config
// changes behaviour. A server that sets "egress" without "mode" gets the
// default's mode, else "enforce": writing an allow list means it should
// hold.
type Egress struct {
	// Mode is "off", "monitor" or "enforce" (see package egress).
	Mode string `json:"mode,omitempty"`
	// Allow lists the "host:port" entries the server may reach
	// ("*.suffix:port" for every name below suffix, IP literals for the
	// local network, "*" for any port).
	Allow []string `json:"allow"`
	// Fallback is what to do in enforce mode when the kernel refuses a
	// network namespace: "" (the server does not start) or "monitor".
	Fallback string `json:"fallback,omitempty"`

	// Rules is Allow parsed.
	Rules egress.Rules `json:"-"`
}

// EgressFilter is filters.egress.
type EgressFilter struct {
	Default *Egress `json:"default,omitempty"`
}

// EgressOn reports whether the server's network is policed.
func (s *Server) EgressOn() bool { return s.Egress != nil && s.Egress.Mode != egress.ModeOff }

func parseEgressFilter(raw json.RawMessage) (*Egress, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	var f EgressFilter
	if err := strictDecode(raw, &f); err != nil {
		return nil, fmt.Errorf("filters.egress: %v", err)
	}
	if f.Default == nil {
		return nil, nil
	}
	if f.Default.Mode == "" {
		return nil, errors.New(`filters.egress.default: "mode" is required ("off", "monitor" or "enforce")`)
	}
	if err := f.Default.validate(); err != nil {
		return nil, fmt.Errorf("filters.egress.default: %v", err)
	}
	return f.Default, nil
}

func (e *Egress) validate() error {
	switch e.Mode {
	case egress.ModeOff, egress.ModeMonitor, egress.ModeEnforce:
	default:
		return fmt.Errorf(`mode %q: want "off", "monitor" or "enforce"`, e.Mode)
	}
	switch e.Fallback {
	case "", egress.ModeMonitor:
	default:
		return fmt.Errorf(`fallback %q: want "monitor" or nothing (the server does not start when the kernel refuses a network namespace)`, e.Fallback)
	}
	rules, err := egress.ParseRules(e.Allow)
	if err != nil {
		return err
	}
	e.Rules = rules
	return nil
}

// applyEgress resolves a server's egress against the gateway default.
func (s *Server) applyEgress(def *Egress) error {
	if s.Command == "" {
		if s.Egress != nil {
			return errors.New(`"egress" only applies to command servers: the gateway itself connects to url servers (see load_control's deny_private_networks)`)
		}
		return nil
	}
	if s.Egress == nil {
		if def == nil {
			return nil
		}
		e := *def
		s.Egress = &e
		return nil
	}
	if s.Egress.Mode == "" {
		s.Egress.Mode = egress.ModeEnforce
		if def != nil {
			s.Egress.Mode = def.Mode
		}
	}
	if s.Egress.Fallback == "" && def != nil {
		s.Egress.Fallback = def.Fallback
	}
	if err := s.Egress.validate(); err != nil {
		return fmt.Errorf("egress: %v", err)
	}
	return nil
}
