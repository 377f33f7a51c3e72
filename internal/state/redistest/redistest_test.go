package redistest

import "testing"

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if err := ping(s.Addr); err != nil {
		t.Fatalf("started server does not answer: %v", err)
	}
	s.Stop()
	if err := ping(s.Addr); err == nil {
		t.Fatal("stopped server still answers")
	}
	s.Restart()
	if err := ping(s.Addr); err != nil {
		t.Fatalf("restarted server does not answer: %v", err)
	}
}
