package pin

import (
	"fmt"
	"time"
)

// Trust accepts a tool's definition: the one last seen, or exactly hash
// (hex SHA-256, already normalised; "" for the one last seen). It returns
// a sentence saying what changed. `toolgate pins trust` and the web
// console's Trust button both run it.
func (s *Store) Trust(server, tool, hash string) (string, error) {
	var msg string
	err := s.Update(func(f *File) (bool, error) {
		now := time.Now().UTC()
		p := f.Tool(server, tool)
		switch {
		case hash == "" && p == nil:
			return false, MissingError(f, server, tool)
		case hash == "" && p.Observed == nil:
			if p.Hash == "" {
				return false, fmt.Errorf("nothing seen to trust for %s/%s", server, tool)
			}
			msg = fmt.Sprintf("%s/%s: already pinned at sha256:%s; nothing new to trust", server, tool, p.Hash)
			return false, nil
		case hash == "" || (p != nil && p.Observed != nil && p.Observed.Hash == hash):
			p.Hash, p.Definition, p.PinnedAt, p.Observed = p.Observed.Hash, p.Observed.Definition, &now, nil
			msg = fmt.Sprintf("%s/%s: pinned sha256:%s", server, tool, p.Hash)
			return true, nil
		case p != nil && p.Hash == hash:
			msg = fmt.Sprintf("%s/%s: already pinned at sha256:%s", server, tool, hash)
			return false, nil
		default:
			// A hash the gateway has not seen (e.g. from a reviewed policy):
			// pin it without a definition.
			if p == nil {
				p = &ToolPin{}
				f.SetTool(server, tool, p)
			}
			p.Hash, p.Definition, p.PinnedAt = hash, nil, &now
			msg = fmt.Sprintf("%s/%s: pinned sha256:%s (not the definition last seen; calls stay blocked until the server serves it)", server, tool, hash)
			if p.Observed == nil {
				msg = fmt.Sprintf("%s/%s: pinned sha256:%s", server, tool, hash)
			}
			return true, nil
		}
	})
	return msg, err
}

// MissingError says that f has no pin for server's tool, and whether it
// has any for server at all (a wrong state directory, most likely).
func MissingError(f *File, server, tool string) error {
	if len(f.Tools[server]) == 0 {
		return fmt.Errorf("no pins for server %q (is this the gateway's --state-dir?)", server)
	}
	return fmt.Errorf("no pin for tool %q of server %q", tool, server)
}

// TrustBinary accepts the executable last seen for a stdio server (with
// pin_binary): exactly the one with hash, or whichever was seen when hash
// is "". It returns a sentence saying what changed; `toolgate pins trust
// --binary` and the console both run it.
func (s *Store) TrustBinary(server, hash string) (string, error) {
	var msg string
	err := s.Update(func(f *File) (bool, error) {
		b := f.Binaries[server]
		switch {
		case b == nil:
			return false, fmt.Errorf("no executable pinned or seen for server %q", server)
		case b.Observed == nil:
			msg = fmt.Sprintf("%s: executable already pinned (%s, sha256:%s); nothing new to trust", server, b.Path, b.Hash)
			return false, nil
		case hash != "" && b.Observed.Hash != hash:
			return false, fmt.Errorf("%s: the executable seen is sha256:%s, not sha256:%s", server, b.Observed.Hash, hash)
		}
		now := time.Now().UTC()
		b.Command, b.Path, b.Hash, b.PinnedAt, b.Observed = b.Observed.Command, b.Observed.Path, b.Observed.Hash, &now, nil
		msg = fmt.Sprintf("%s: pinned executable %s (sha256:%s)", server, b.Path, b.Hash)
		return true, nil
	})
	return msg, err
}
