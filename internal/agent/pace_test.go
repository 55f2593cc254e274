package agent

import (
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestCommitPacing: on a fake clock, with the loop's steps called in turn, a lone change (at
// least the quiet gap after the previous one) commits at once, even right after a commit;
// changes that come closer together wait and are committed together by the pacer's one commit,
// an interval after the last. A burst of source versions alone changes nothing and makes no churn.
func TestCommitPacing(t *testing.T) {
	d := &fakeProgrammer{applied: make(chan struct{}, 16), resynced: make(chan struct{}, 16)}
	l := newLoop(Config{CommitInterval: 15 * time.Millisecond, CommitQuiet: 5 * time.Millisecond}, &fakeCalc{}, d)
	defer l.stop()
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	none := make(chan []model.Update)
	send := func(what string, wantApplies int, wantWaiting bool) {
		t.Helper()
		l.handleBatch([]model.Update{model.EndpointSet{}}, none)
		if d.applies != wantApplies || l.waiting != wantWaiting {
			t.Fatalf("%s: %d applies, waiting %v; want %d, %v", what, d.applies, l.waiting, wantApplies, wantWaiting)
		}
	}

	l.handleBatch([]model.Update{model.SyncStatusUpdate{Status: model.InSync}}, none)
	if d.applies != 1 || !l.committed {
		t.Fatalf("the first full commit: %d applies, committed %v", d.applies, l.committed)
	}
	now = now.Add(time.Second)
	send("a lone change after a quiet second", 2, false)
	now = now.Add(2 * time.Millisecond)
	l.handleBatch([]model.Update{model.SourceVersion{Resource: "pods", ResourceVersion: "7"}}, none) // no change
	now = now.Add(4 * time.Millisecond)
	send("a lone change 6 ms later (one after the other, as P2 makes them), a version between", 3, false)
	now = now.Add(2 * time.Millisecond)
	send("a change 2 ms later: churn", 3, true)
	if got := l.pace.last.Add(l.pace.interval).Sub(now); got != 13*time.Millisecond {
		t.Errorf("the waiting change's commit is %v away, want 13ms", got)
	}
	now = now.Add(2 * time.Millisecond)
	send("another 2 ms later", 3, true)
	now = now.Add(11 * time.Millisecond)
	messages := d.messages
	l.commitWaiting() // the pace timer fires
	if d.applies != 4 || l.waiting || d.messages != messages+1 {
		t.Fatalf("the paced commit: %d applies (%d messages), waiting %v; want 4 applies, the two waiting bursts in one flush, none waiting",
			d.applies, d.messages-messages, l.waiting)
	}
	now = now.Add(3 * time.Millisecond)
	send("a change 3 ms after the paced commit, 14 ms after the last arrival", 5, false)
	now = now.Add(1 * time.Millisecond)
	send("a change 1 ms later", 5, true)
	now = now.Add(14 * time.Millisecond)
	l.commitWaiting()
	if d.applies != 6 {
		t.Fatalf("the second paced commit: %d applies, want 6", d.applies)
	}

	l.pace.interval = 0 // CommitInterval 0: never paced
	now = now.Add(1 * time.Millisecond)
	send("unpaced", 7, false)
}
