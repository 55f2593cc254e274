package testenv

import (
	"context"
	"testing"
	"time"
)

// Go runs run in a goroutine until the test ends; then it cancels run's context and fails the
// test unless run returns nil within 10 s (a goroutine that outlives its context, or ends in an
// error, is a bug of what it runs).
func Go(tb testing.TB, name string, run func(ctx context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("%s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			tb.Errorf("%s still running 10 s after its context ended", name)
		}
	})
}
