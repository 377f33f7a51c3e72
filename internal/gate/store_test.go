package gate

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/state/redistest"
)

// The Store contract, run against the in-memory Store and the Redis one.
func forEachStore(t *testing.T, f func(t *testing.T, s Store)) {
	t.Run("memory", func(t *testing.T) { f(t, NewMemory()) })
	t.Run("redis", func(t *testing.T) { f(t, NewRedis(redistest.Start(t).Backend(t, "r1"), time.Minute)) })
}

func TestStoreContract(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		if err := s.Record(ctx, "a", "s__x", "s__y"); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			session, tool string
			want          bool
		}{{"a", "s__x", true}, {"a", "s__y", true}, {"a", "s__z", false}, {"b", "s__x", false}, {"", "s__x", false}} {
			if got, err := s.Has(ctx, c.session, c.tool); err != nil || got != c.want {
				t.Errorf("Has(%q, %q) = %v, %v; want %v", c.session, c.tool, got, err, c.want)
			}
		}
		if err := s.Forget(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Has(ctx, "a", "s__x"); got {
			t.Fatal("Forget left a record")
		}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sess := fmt.Sprint("s", i%2)
				_ = s.Record(ctx, sess, fmt.Sprint("t__", i))
			}()
		}
		wg.Wait()
		for i := range 8 {
			if ok, _ := s.Has(ctx, fmt.Sprint("s", i%2), fmt.Sprint("t__", i)); !ok {
				t.Errorf("concurrent record %d lost", i)
			}
		}
	})
}

// A session's record lives in Redis as long as the session would: it
// expires ttl after its last use, and a call renews it.
func TestRedisRecordsExpireWithTheSession(t *testing.T) {
	b := redistest.Start(t).Backend(t, "r1")
	s := NewRedis(b, 10*time.Second)
	ctx := context.Background()
	_ = s.Record(ctx, "sess", "s__x")
	b.Client.PExpire(ctx, b.Key("gate", "sess"), time.Second)
	if ok, _ := s.Has(ctx, "sess", "s__x"); !ok {
		t.Fatal("record missing")
	}
	if ttl := b.Client.PTTL(ctx, b.Key("gate", "sess")).Val(); ttl <= 5*time.Second || ttl > 10*time.Second {
		t.Fatalf("TTL after a call = %v, want it renewed to 10 s", ttl)
	}
}

// Replicas on one Redis share one signing key: the first creates it, the
// others get the same; a token one replica issues, another accepts.
func TestSharedKey(t *testing.T) {
	a, b := redistest.Shared(t)
	ctx := context.Background()
	ka, err := SharedKey(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := SharedKey(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ka, kb) || len(ka) != 32 {
		t.Fatalf("replicas got different keys")
	}
	sa, _ := NewSigner(ka, 0)
	sb, _ := NewSigner(kb, 0)
	if err := sb.Verify(sa.Issue("", []string{"s__x"}), "", "s__x"); err != nil {
		t.Fatalf("token from replica a refused by b: %v", err)
	}
	a.Client.Set(ctx, a.Key("gate", "key"), "short", 0)
	if _, err := SharedKey(ctx, b); err == nil {
		t.Fatal("a corrupt shared key was accepted")
	}
}
