package pin

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

// The Store contract on both kinds of store: two writers at once (two
// processes on one state folder, or two replicas on one Redis) lose no
// update, and each sees the other's.
func TestStoreContractConcurrentWriters(t *testing.T) {
	kinds := map[string]func(t *testing.T) (*Store, *Store){
		"file": func(t *testing.T) (*Store, *Store) { d := t.TempDir(); return NewStore(d), NewStore(d) },
		"redis": func(t *testing.T) (*Store, *Store) {
			a, b := redistest.Shared(t)
			sa, sb := NewSharedStore(a), NewSharedStore(b)
			t.Cleanup(func() { sa.Close(); sb.Close() })
			return sa, sb
		},
	}
	for name, mk := range kinds {
		t.Run(name, func(t *testing.T) {
			s1, s2 := mk(t)
			var wg sync.WaitGroup
			for w, s := range []*Store{s1, s2} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 25 {
						err := s.Update(func(f *File) (bool, error) {
							f.SetTool("s", string(rune('a'+w))+string(rune('a'+i)), &ToolPin{Hash: strings.Repeat("0", 64)})
							return true, nil
						})
						if err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			for i, s := range []*Store{s1, s2} {
				f, err := s.Latest()
				if err != nil || len(f.Tools["s"]) != 50 {
					t.Fatalf("store %d: %d pins, %v; want 50", i, len(f.Tools["s"]), err)
				}
			}
		})
	}
}

func sharedPinner(t *testing.T, b *state.Backend) *Pinner {
	t.Helper()
	e, err := New(json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if err := e.(extension.Provisioner).Provision(state.WithBackend(context.Background(), b), extension.Host{Emit: rec.Emit}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.(extension.Closer).Close() })
	return e.(*Pinner)
}

// A pin made on one replica holds on another; `pins trust` against Redis
// (any replica's store) lets the new definition through on every replica,
// and the change is announced so a replica re-reads before RecheckEvery.
func TestTrustOnOneReplicaAppliesOnAll(t *testing.T) {
	a, b := redistest.Shared(t)
	pa, pb := sharedPinner(t, a), sharedPinner(t, b)
	v1, v2 := def("Read a note."), def("Read a note, then delete it.")
	if err := serve(t, pa, v1); err != nil {
		t.Fatal(err)
	}
	if _, err := pb.store.Current(); err != nil { // pb has read the pins
		t.Fatal(err)
	}
	if err := serve(t, pb, v2); err == nil {
		t.Fatal("replica b allowed a definition other than the one pinned on replica a")
	}

	cli := NewSharedStore(a) // what `toolgate pins trust --state redis://...` opens
	defer cli.Close()
	err := cli.Update(func(f *File) (bool, error) {
		p := f.Tool("notes", "read_note")
		p.Hash, p.Definition, p.Observed = p.Observed.Hash, p.Observed.Definition, nil
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !pa.store.dirty.Load() || !pb.store.dirty.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the trust was not announced to the replicas")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for name, p := range map[string]*Pinner{"a": pa, "b": pb} {
		if err := p.check(context.Background(), &extension.CallRequest{ServerName: "notes", Tool: "read_note", Def: v2}); err != nil {
			t.Fatalf("replica %s after the trust: %v", name, err)
		}
	}
}

// Redis unreachable when the pins must be read: the call is refused naming
// Redis; once Redis is back, calls pass again.
func TestSharedPinsRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	p := sharedPinner(t, srv.Backend(t, "r1"))
	v1 := def("Read a note.")
	if err := serve(t, p, v1); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	p.store.checked = time.Time{} // what was read is old
	err := p.check(context.Background(), &extension.CallRequest{ServerName: "notes", Tool: "read_note", Def: v1})
	d, ok := extension.AsDenial(err)
	if !ok || d.Rule != Key+".state_unavailable" || !strings.Contains(d.Reason, "(Redis) is unreachable") {
		t.Fatalf("call with Redis down: %v", err)
	}
	srv.Restart() // empty: the pin is gone, and auto_trust_first pins anew
	if err := p.check(context.Background(), &extension.CallRequest{ServerName: "notes", Tool: "read_note", Def: v1}); err != nil {
		t.Fatalf("after Redis came back: %v", err)
	}
}
