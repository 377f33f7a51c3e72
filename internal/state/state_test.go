package state_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

func open(t *testing.T, url, ca string) (*state.Backend, error) {
	t.Helper()
	b, err := state.Open(context.Background(), config.State{Backend: config.StateRedis, URL: url, Prefix: "t:", CAFile: ca, Replica: "r"}, nil)
	if b != nil {
		t.Cleanup(func() { b.Close() })
	}
	return b, err
}

// rediss:// with a password: the server's certificate must verify (against
// ca_file here), the password must be right, and no error repeats it.
func TestOpenTLSAndPassword(t *testing.T) {
	const pw = "s3cret-pw"
	srv, ca := redistest.StartTLS(t, pw)
	good := "rediss://:" + pw + "@" + srv.Addr + "/0"

	b, err := open(t, good, ca)
	if err != nil {
		t.Fatalf("TLS with the CA and the password: %v", err)
	}
	ctx := context.Background()
	if err := b.Client.Set(ctx, b.Key("x"), "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	for name, c := range map[string]struct{ url, ca, want string }{
		"untrusted certificate": {good, "", "certificate"},
		"wrong password":        {"rediss://:wrong-pw@" + srv.Addr + "/0", ca, "WRONGPASS"},
		"no password":           {"rediss://" + srv.Addr + "/0", ca, "NOAUTH"},
		"plain text to TLS":     {"redis://:" + pw + "@" + srv.Addr + "/0", "", "redis at " + srv.Addr},
	} {
		_, err := open(t, c.url, c.ca)
		if err == nil {
			t.Errorf("%s: connected", name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "state: redis at") {
			t.Errorf("%s: error %q, want it to name redis and contain %q", name, err, c.want)
		}
		if strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "wrong-pw") {
			t.Errorf("%s: error %q repeats the password", name, err)
		}
	}
}

// A replica does not start on a Redis it cannot reach.
func TestOpenUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	_, err := open(t, srv.URL(), "")
	if err == nil || !strings.Contains(err.Error(), "state: redis at "+srv.Addr) {
		t.Fatalf("open of a stopped Redis: %v", err)
	}
}
