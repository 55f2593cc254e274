package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/agent"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// agentEnforcer runs the agent (agent.Run) on a node namespace inside the test process, watching
// the test's API server with the admin client.
type agentEnforcer struct{ s *kube.Server }

// newEnforcer returns the agent: one agent.Run per node namespace. Its warnings and errors go to
// stderr with the node's name, next to the failing case's tables.
func newEnforcer(s *kube.Server) Enforcer { return agentEnforcer{s} }

func (e agentEnforcer) Start(ctx context.Context, node string, netnsFD int) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", node)
	go func() {
		done <- agent.Run(ctx, agent.RunConfig{
			Client:           e.s.Client,
			NodeName:         node,
			NetNSFD:          netnsFD,
			Table:            "nftpolicy",
			ResyncInterval:   time.Minute,
			WorkloadPrefixes: []string{"nftp"}, // netns names the node-side veths nftp<n>
			AntiSpoofing:     true,             // the harness routes each pod through its own veth
			FailureThreshold: 3,
			CleanupOnExit:    true,
			Logger:           log,
		})
	}()
	select {
	case err := <-done: // it failed at once
		cancel()
		return nil, fmt.Errorf("agent on node %s: %w", node, err)
	case <-time.After(100 * time.Millisecond):
	}
	return func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			log.Error("agent stopped with an error", "err", err)
		}
	}, nil
}
