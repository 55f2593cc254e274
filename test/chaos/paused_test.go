package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// pausedChanges is how many pods the paused-agent step creates while the agent is stopped
	// (and then relabels and deletes some of).
	pausedChanges = 30
	// pausedAPIDowntime is how long the API server stays away while the agent is stopped.
	pausedAPIDowntime = 2 * time.Second
)

// pausedAgent: node b's agent is stopped (SIGSTOP) while pods are created, relabelled and deleted
// (in namespace big, of a node that does not exist: no probed cell changes) and the API server
// restarts, so that its watches cannot all resume from where they were (which ones relist is the
// API server's choice). Then the agent is continued (SIGCONT): it must commit every write
// (barrier) and say in its log that it relisted ("watch could not resume; relisted", with how
// stale its view was and what the list changed), each relist counted in
// nftpolicy_watch_relists_total. Its table stays in force all along and no cell changes: every
// probe is judged. Figure: the convergence, from SIGCONT to the barrier, and the relist lines.
func (su *suite) pausedAgent(t *testing.T, ctx context.Context) (time.Time, string) {
	p := su.agents["b"]
	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	continued := false
	resume := func() {
		if !continued {
			continued = true
			_ = syscall.Kill(p.Pid(), syscall.SIGCONT)
		}
	}
	defer resume()
	c := su.s.Client
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range pausedChanges {
		ip := netip.AddrFrom4([4]byte{10, 254, 0, byte(i + 1)})
		_, err := su.s.CreatePod(ctx, "big", fmt.Sprintf("idle-%d", i), "ghost", map[string]string{"app": "idle"}, nil, []netip.Addr{ip})
		must(err)
	}
	for i := range pausedChanges / 3 {
		_, err := c.CoreV1().Pods("big").Patch(ctx, fmt.Sprintf("idle-%d", i), types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"app":"idler"}}}`), metav1.PatchOptions{})
		must(err)
		must(c.CoreV1().Pods("big").Delete(ctx, fmt.Sprintf("idle-%d", pausedChanges-1-i), metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}))
	}
	writes := pausedChanges + 2*(pausedChanges/3)
	must(su.s.RestartAPIServer(ctx, pausedAPIDowntime))
	cont := time.Now()
	resume()
	committed, err := su.waitCommitted(ctx, commitTimeout)
	if err != nil {
		t.Errorf("the continued agent does not commit the writes made while it was stopped: %v", err)
		su.restartAgent(t, "b")
		return time.Now(), fmt.Sprintf("agent of node b stopped during %d writes and an API server restart: NOT converged (agent restarted)", writes)
	}
	relists := relistLines(t, p.LogPath, cont)
	if len(relists) == 0 {
		t.Errorf("the continued agent's log says nothing of a relist")
	}
	var counted float64
	for _, res := range []string{"pods", "namespaces", "networkpolicies"} {
		counted += metric(t, p, `nftpolicy_watch_relists_total{resource="`+res+`"}`)
	}
	if counted < float64(len(relists)) {
		t.Errorf("nftpolicy_watch_relists_total counts %v relists, the log %d since SIGCONT", counted, len(relists))
	}
	return time.Now(), fmt.Sprintf("agent of node b stopped during %d writes and an API server restart (%v down); converged (barrier) %.2f s after SIGCONT; relists:\n    %s",
		writes, pausedAPIDowntime, committed.Sub(cont).Seconds(), strings.Join(relists, "\n    "))
}

// relistLines are the agent's log lines since that say it relisted.
func relistLines(t *testing.T, logPath string, since time.Time) []string {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for l := range strings.Lines(string(b)) {
		var entry struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &entry) == nil && entry.Msg == "watch could not resume; relisted" && !entry.Time.Before(since) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}
