package kube

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestStartRetriesOnPortClash hands Start a kube-apiserver port that is taken: the API server
// exits, and Start must retry once with fresh ports and succeed.
func TestStartRetriesOnPortClash(t *testing.T) {
	if err := CheckBinaries(Config{}); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	calls := 0
	pick := func(n int) ([]int, error) {
		calls++
		ports, err := freePorts(n)
		if calls == 1 && err == nil {
			ports[2] = takenPort // the API server's port
		}
		return ports, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := start(ctx, Config{}, pick)
	if err != nil {
		t.Fatalf("start with a taken port: %v", err)
	}
	defer s.Stop()
	if calls != 2 {
		t.Errorf("ports picked %d times, want 2 (one retry)", calls)
	}
	if s.apiPort == takenPort {
		t.Errorf("API server on the taken port %d", takenPort)
	}
	if _, err := s.Client.Discovery().ServerVersion(); err != nil {
		t.Errorf("after retry: %v", err)
	}
}
